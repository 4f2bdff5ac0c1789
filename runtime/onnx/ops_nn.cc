// Convolutions, pools, normalisations, matrix products and dropout (importer.h), built with the
// zoo's layers so an imported network compiles as the zoo's does.
#include <cmath>
#include <functional>

#include "common/strings.h"
#include "runtime/graph/layers.h"
#include "runtime/onnx/importer_context.h"

namespace tpusim::runtime::onnx_import {
namespace {

// The attribute `name` of `node`, when given, must hold only ones (dilations).
absl::Status check_ones(Importer& im, const onnx::NodeProto& node, const std::string& name) {
  if (auto v = im.attr_ints(node, name)) {
    for (int64_t d : *v) {
      if (d != 1) return im.error(node, str_cat(name, " other than 1 are not supported"));
    }
  }
  return absl::OkStatus();
}

// The 2-D window of a Conv or pool over an NHWC image of `image` (kernel kh x kw: a dilated
// kernel's extent): strides, and the padding as ONNX gives it (explicit pads, or auto_pad).
absl::StatusOr<Window> window_of(Importer& im, const onnx::NodeProto& node, int64_t kh, int64_t kw,
                                 const Shape& image) {
  Window w;
  w.kh = kh;
  w.kw = kw;
  const std::vector<int64_t> strides =
      im.attr_ints(node, "strides").value_or(std::vector<int64_t>{1, 1});
  if (strides.size() != 2) return im.error(node, "tpusim imports 2-D convolutions and pools only");
  // Bounded like dilations: a stride of 0 divides by zero in every output-size rule, and no image
  // is 4096 windows of 4096 wide.
  if (strides[0] < 1 || strides[1] < 1 || strides[0] > 4096 || strides[1] > 4096)
    return im.error(node, "strides must be two values in [1, 4096]");
  if (kh < 1 || kw < 1) return im.error(node, "a kernel must be at least 1 x 1");
  w.sh = strides[0];
  w.sw = strides[1];
  const std::string auto_pad = im.attr_string(node, "auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER") {
    w.same = true;  // TensorFlow's SAME: the odd zero after
    return w;
  }
  std::vector<int64_t> pads = im.attr_ints(node, "pads").value_or(std::vector<int64_t>{0, 0, 0, 0});
  if (auto_pad == "SAME_LOWER") {
    pads = {0, 0, 0, 0};
    for (int d = 0; d < 2; ++d) {
      const int64_t in = image.dim(d + 1), k = d == 0 ? kh : kw, s = d == 0 ? w.sh : w.sw;
      const int64_t total = std::max<int64_t>(0, ((in + s - 1) / s - 1) * s + k - in);
      pads[static_cast<size_t>(d)] = total - total / 2;
      pads[static_cast<size_t>(d + 2)] = total / 2;
    }
  } else if (auto_pad == "VALID") {
    pads = {0, 0, 0, 0};
  } else if (auto_pad != "NOTSET") {
    return im.error(node, str_cat("auto_pad '", auto_pad, "'"));
  }
  if (pads.size() != 4) return im.error(node, "tpusim imports 2-D convolutions and pools only");
  for (int64_t p : pads) {
    if (p < 0 || p > 4096) return im.error(node, "pads must be four values in [0, 4096]");
  }
  if (pads[0] || pads[1] || pads[2] || pads[3]) {
    w.explicit_padding = true;
    w.pad_top = pads[0];
    w.pad_left = pads[1];
    w.pad_bottom = pads[2];
    w.pad_right = pads[3];
  }
  return w;
}

// A weight input: a variable when the file holds it, else the computed value; either permuted
// by `permutation` (none when empty) into the IR's layout.
absl::StatusOr<Value> weight_input(Importer& im, const onnx::NodeProto& node, int i,
                                   const std::vector<int64_t>& permutation = {}, bool f32 = false) {
  if (im.is_initializer(node.input(i))) {
    if (permutation.empty()) return im.weight(node.input(i), nullptr, "", f32);
    return im.weight(
        node.input(i), [permutation](const Folded& f) { return fold_transpose(f, permutation); },
        "", f32);
  }
  auto x = im.input(node, i);
  if (!x.ok()) return x.status();
  const Value v = im.logical(*x);
  return permutation.empty() ? v : im.b.transpose(v, permutation);
}

// The convolution of `image` (NHWC) by the Conv's weights [F, C / group, kh, kw] (`wd`) over
// `window`: groups of 1 (layers::convolve), depthwise (one filter a channel), or any other
// grouping as a convolution per group.
absl::StatusOr<Value> convolve_groups(Importer& im, const onnx::NodeProto& node, const Value& image,
                                      const std::vector<int64_t>& wd, const Window& window) {
  const int64_t groups = im.attr_int(node, "group", 1);
  const int64_t channels = image.shape().dim(3), filters = wd[0];
  GraphBuilder& b = im.b;
  if (groups == 1) {
    auto kernel = weight_input(im, node, 1, {2, 3, 1, 0});  // [F, C, kh, kw] -> [kh, kw, C, F]
    if (!kernel.ok()) return kernel.status();
    return layers::convolve(b, image, *kernel, window);
  }
  if (groups == channels && filters == channels && wd[1] == 1) {
    // Depthwise: each channel's window times its own filter, summed over the window.
    auto kernel = weight_input(im, node, 1, {2, 3, 0, 1});  // [C, 1, kh, kw] -> [kh, kw, C, 1]
    if (!kernel.ok()) return kernel.status();
    const Value patches = b.extract_patches(image, window);
    const Shape p = patches.shape();
    const int64_t taps = wd[2] * wd[3];
    const Value view = b.reshape(patches, {p.dim(0), p.dim(1), p.dim(2), taps, channels});
    return b.reduce(Op::kReduceSum, view * b.reshape(*kernel, {taps, channels}), {3});
  }
  if (groups > 1 && channels % groups == 0 && filters % groups == 0) {
    auto kernel = weight_input(im, node, 1, {2, 3, 1, 0});
    if (!kernel.ok()) return kernel.status();
    const int64_t cg = channels / groups, fg = filters / groups;
    std::vector<Value> parts;
    const Shape s = image.shape();
    for (int64_t g = 0; g < groups; ++g) {
      const Value xg =
          b.slice(image, {0, 0, 0, g * cg}, {s.dim(0), s.dim(1), s.dim(2), (g + 1) * cg});
      const Value kg = b.slice(*kernel, {0, 0, 0, g * fg}, {wd[2], wd[3], cg, (g + 1) * fg});
      parts.push_back(layers::convolve(b, xg, kg, window));
    }
    return b.concat(parts, 3);
  }
  return im.error(
      node, str_cat("group ", groups, " over ", channels, " channels and ", filters, " filters"));
}

// A dilated Conv (dilations dh, dw; stride 1) as TensorFlow's atrous convolution computes it
// (tf.nn.atrous_conv2d: space_to_batch, an undilated convolution, batch_to_space): the padded
// image split into dh x dw phases (rows r, r + dh, ...) stacked on the batch, each convolved with
// the kernel as it is, VALID, and the outputs interleaved back. The MXU does the dilated
// convolution's multiply-adds and no more; the phases cost two transposes of the image.
absl::StatusOr<Value> atrous_convolve(Importer& im, const onnx::NodeProto& node, const Value& image,
                                      const std::vector<int64_t>& wd, int64_t dh, int64_t dw) {
  const int64_t kh = wd[2], kw = wd[3];
  auto window = window_of(im, node, (kh - 1) * dh + 1, (kw - 1) * dw + 1, image.shape());
  if (!window.ok()) return window.status();
  if (window->sh != 1 || window->sw != 1)
    return im.error(node, "dilations with strides other than 1 (an atrous convolution steps by 1)");
  int64_t top = window->pad_top, left = window->pad_left, bottom = window->pad_bottom,
          right = window->pad_right;
  if (window->same) {  // TensorFlow's SAME at stride 1: the dilated extent less one, odd one after
    top = (window->kh - 1) / 2;
    bottom = window->kh - 1 - top;
    left = (window->kw - 1) / 2;
    right = window->kw - 1 - left;
  }
  const Shape s = image.shape();
  const int64_t n = s.dim(0), c = s.dim(3), f = wd[0];
  const int64_t oh = s.dim(1) + top + bottom - (window->kh - 1);
  const int64_t ow = s.dim(2) + left + right - (window->kw - 1);
  if (oh < 1 || ow < 1) return im.error(node, "the dilated kernel is larger than the padded image");
  // Each phase holds qh + kh - 1 rows (qh outputs); zeros past the padding only reach outputs
  // beyond oh, which are sliced off.
  const int64_t qh = (oh + dh - 1) / dh, qw = (ow + dw - 1) / dw;
  const int64_t ph = qh + kh - 1, pw = qw + kw - 1;
  GraphBuilder& b = im.b;
  const Value padded =
      b.pad(image, {0, top, left, 0}, {0, dh * ph - s.dim(1) - top, dw * pw - s.dim(2) - left, 0});
  const Value phases =
      b.reshape(b.transpose(b.reshape(padded, {n, ph, dh, pw, dw, c}), {2, 4, 0, 1, 3, 5}),
                {dh * dw * n, ph, pw, c});
  Window valid;
  valid.kh = kh;
  valid.kw = kw;
  auto y = convolve_groups(im, node, phases, wd, valid);
  if (!y.ok()) return y.status();
  const Value joined =
      b.reshape(b.transpose(b.reshape(*y, {dh, dw, n, qh, qw, f}), {2, 3, 0, 4, 1, 5}),
                {n, qh * dh, qw * dw, f});
  return b.slice(joined, {0, 0, 0, 0}, {n, oh, ow, f});
}

// Conv over the NHWC image, dilated or not, with its bias.
absl::Status convert_conv(Importer& im, const onnx::NodeProto& node) {
  auto x = im.input(node, 0);
  auto w_in = im.input(node, 1);
  if (!x.ok()) return x.status();
  if (!w_in.ok()) return w_in.status();
  const std::vector<int64_t> wd = Importer::logical_dims(*w_in);
  if (wd.size() != 4) return im.error(node, "tpusim imports 2-D convolutions only");
  const Value image = im.nhwc(*x);
  if (!image.valid() || image.shape().rank() != 4)
    return im.error(node, "a 2-D convolution takes an [N, C, H, W] input");
  const std::vector<int64_t> dilations =
      im.attr_ints(node, "dilations").value_or(std::vector<int64_t>{1, 1});
  if (dilations.size() != 2 || dilations[0] < 1 || dilations[1] < 1 || dilations[0] > 4096 ||
      dilations[1] > 4096)
    return im.error(node, "dilations must be two values in [1, 4096]");
  absl::StatusOr<Value> y;
  if (dilations[0] != 1 || dilations[1] != 1) {
    y = atrous_convolve(im, node, image, wd, dilations[0], dilations[1]);
  } else {
    auto window = window_of(im, node, wd[2], wd[3], image.shape());
    if (!window.ok()) return window.status();
    y = convolve_groups(im, node, image, wd, *window);
  }
  if (!y.ok()) return y.status();
  Value out = *y;
  if (im.has_input(node, 2)) {
    auto bias = weight_input(im, node, 2);
    if (!bias.ok()) return bias.status();
    Value add = *bias;
    im.match_types(&out, &add);
    out = out + add;
  }
  im.set_output(node, 0, Operand{out, true, {}});
  return absl::OkStatus();
}

// ceil_mode 1: the end padding a pool's window needs for ONNX's output size, ceil((in + pads -
// k) / s) + 1 less a last window that would start in the end padding (PyTorch's rule).
int64_t ceil_extra(int64_t in, int64_t pad_begin, int64_t pad_end, int64_t k, int64_t s) {
  const int64_t span = in + pad_begin + pad_end;
  int64_t out = (span - k + s - 1) / s + 1;
  if ((out - 1) * s >= in + pad_begin) --out;
  return std::max<int64_t>(0, (out - 1) * s + k - span);
}

// ceil_mode 1 on a pool's window: its padding made explicit and extended at the end so the last,
// partial windows are taken. A max pool never picks padding and an average pool without
// count_include_pad divides by the elements inside the image, so the extension changes nothing
// else; an average counting its padding would count the extension too, which ONNX does not.
absl::Status use_ceil_mode(Importer& im, const onnx::NodeProto& node, const Shape& image,
                           bool count_padding, Window* w) {
  if (w->same) return im.error(node, "ceil_mode 1 with auto_pad SAME");
  const int64_t extra_h = ceil_extra(image.dim(1), w->pad_top, w->pad_bottom, w->kh, w->sh);
  const int64_t extra_w = ceil_extra(image.dim(2), w->pad_left, w->pad_right, w->kw, w->sw);
  if (extra_h + extra_w == 0) return absl::OkStatus();
  if (count_padding)
    return im.error(node, "ceil_mode 1 with count_include_pad 1 where a window passes the padding");
  w->explicit_padding = true;
  w->pad_bottom += extra_h;
  w->pad_right += extra_w;
  return absl::OkStatus();
}

// MaxPool and AveragePool over NHWC images.
Converter pool(bool max) {
  return [max](Importer& im, const onnx::NodeProto& node) -> absl::Status {
    auto x = im.input(node, 0);
    if (!x.ok()) return x.status();
    if (node.output_size() > 1 && !node.output(1).empty())
      return im.error(node, "MaxPool's Indices output is not supported");
    const std::vector<int64_t> kernel =
        im.attr_ints(node, "kernel_shape").value_or(std::vector<int64_t>{});
    if (kernel.size() != 2) return im.error(node, "tpusim imports 2-D pools only");
    if (auto s = check_ones(im, node, "dilations"); !s.ok()) return s;
    const Value image = im.nhwc(*x);
    if (!image.valid() || image.shape().rank() != 4)
      return im.error(node, "a 2-D pool takes an [N, C, H, W] input");
    auto window = window_of(im, node, kernel[0], kernel[1], image.shape());
    if (!window.ok()) return window.status();
    const bool count_padding = im.attr_int(node, "count_include_pad", 0) != 0;
    if (im.attr_int(node, "ceil_mode", 0) != 0) {
      if (auto s = use_ceil_mode(im, node, image.shape(), count_padding, &*window); !s.ok())
        return s;
    }
    const Value y = max ? layers::max_pool(im.b, image, *window)
                        : layers::average_pool(im.b, image, *window, count_padding);
    im.set_output(node, 0, Operand{y, true, {}});
    return absl::OkStatus();
  };
}

// GlobalAveragePool and GlobalMaxPool: over H and W of the NHWC image, kept as [N, 1, 1, C].
Converter global_pool(bool max) {
  return [max](Importer& im, const onnx::NodeProto& node) -> absl::Status {
    auto x = im.input(node, 0);
    if (!x.ok()) return x.status();
    const std::vector<int64_t> dims = Importer::logical_dims(*x);
    if (dims.size() != 4 || !x->channels_last) {
      // [N, C, D1, ...] in the file's order (tf2onnx writes a layer norm's mean so): over D1...
      if (dims.size() < 3) return im.error(node, "an input of rank under 3");
      std::vector<int64_t> axes, kept = {dims[0], dims[1]};
      for (size_t i = 2; i < dims.size(); ++i) {
        axes.push_back(static_cast<int64_t>(i));
        kept.push_back(1);
      }
      const Value v = im.logical(*x);
      const Value r = max ? im.b.reduce(Op::kReduceMax, v, axes) : layers::reduce_mean(v, axes);
      im.set_output(node, 0, Operand{im.b.reshape(r, Shape(kept)), false, {}});
      return absl::OkStatus();
    }
    const Value image = im.nhwc(*x);
    const Value r =
        max ? im.b.reduce(Op::kReduceMax, image, {1, 2}) : layers::reduce_mean(image, {1, 2});
    const Shape s = r.shape();
    im.set_output(node, 0, Operand{im.b.reshape(r, {s.dim(0), 1, 1, s.dim(1)}), true, {}});
    return absl::OkStatus();
  };
}

// BatchNormalization: layers::batch_normalize with the file's scale, bias and statistics as
// variables; in training from the batch's statistics (TensorFlow's fused batch norm, as the
// zoo's), the moving ones updated with the node's momentum.
absl::Status convert_batch_norm(Importer& im, const onnx::NodeProto& node) {
  auto x = im.input(node, 0);
  if (!x.ok()) return x.status();
  for (int i = 1; i < node.output_size(); ++i) {
    if (!node.output(i).empty()) return im.error(node, "training-mode outputs are not supported");
  }
  layers::BatchNormVariables v;
  const std::pair<Value*, std::string> slots[] = {{&v.gamma, ""},
                                                  {&v.beta, ""},
                                                  {&v.moving_mean, "/moving_mean"},
                                                  {&v.moving_variance, "/moving_variance"}};
  for (int i = 1; i <= 4; ++i) {
    if (!im.has_input(node, i) || !im.is_initializer(node.input(i)))
      return im.error(node, str_cat("input ", i, " must be an initializer (a variable)"));
    auto w = im.weight(node.input(i), nullptr, slots[i - 1].second, /*f32=*/true);
    if (!w.ok()) return w.status();
    *slots[i - 1].first = *w;
  }
  const float epsilon = im.attr_float(node, "epsilon", 1e-5f);
  // Added to the variance under a square root: a negative one takes the root of a negative
  // number wherever a channel's variance is below it, and training turns to NaN at once.
  if (!(epsilon >= 0) || !std::isfinite(epsilon))
    return im.error(node, str_cat("epsilon ", epsilon, " must be a finite number >= 0"));
  const float momentum = im.attr_float(node, "momentum", 0.9f);
  const size_t rank = Importer::logical_dims(*x).size();
  GraphBuilder& b = im.b;
  auto normalize = [&](Value t) {
    return layers::batch_normalize(b, t, v, im.options.training, momentum, epsilon);
  };
  if (rank == 4) {
    im.set_output(node, 0, Operand{normalize(im.nhwc(*x)), true, {}});
  } else if (rank == 2) {
    im.set_output(node, 0, Operand{normalize(im.logical(*x)), false, {}});
  } else if (rank == 3) {  // [N, C, L]: channels last for the normalisation
    const Value t = b.transpose(im.logical(*x), {0, 2, 1});
    im.set_output(node, 0, Operand{b.transpose(normalize(t), {0, 2, 1}), false, {}});
  } else {
    return im.error(node, str_cat("a rank-", rank, " input"));
  }
  return absl::OkStatus();
}

// Gemm: alpha A' B' + beta C, B a [K, N] variable when the file holds it.
absl::Status convert_gemm(Importer& im, const onnx::NodeProto& node) {
  auto a_in = im.input(node, 0);
  if (!a_in.ok()) return a_in.status();
  GraphBuilder& b = im.b;
  Value a = im.logical(*a_in);
  if (im.attr_int(node, "transA", 0) != 0) a = b.transpose(a, {1, 0});
  const bool trans_b = im.attr_int(node, "transB", 0) != 0;
  auto kernel =
      weight_input(im, node, 1, trans_b ? std::vector<int64_t>{1, 0} : std::vector<int64_t>{});
  if (!kernel.ok()) return kernel.status();
  Value k = *kernel;
  im.match_types(&a, &k);
  Value y = b.matmul(a, k);
  const float alpha = im.attr_float(node, "alpha", 1.0f);
  if (alpha != 1.0f) y = y * alpha;
  if (im.has_input(node, 2)) {
    auto c = weight_input(im, node, 2);
    if (!c.ok()) return c.status();
    const float beta = im.attr_float(node, "beta", 1.0f);
    Value bias = beta != 1.0f ? *c * beta : *c;
    im.match_types(&y, &bias);
    y = y + bias;
  }
  im.set_output(node, 0, Operand{y, false, {}});
  return absl::OkStatus();
}

// MatMul with numpy's rules: vectors promoted, batch dimensions broadcast.
absl::Status convert_matmul(Importer& im, const onnx::NodeProto& node) {
  GraphBuilder& b = im.b;
  Value v[2];
  for (int i = 0; i < 2; ++i) {
    auto w = weight_input(im, node, i);
    if (!w.ok()) return w.status();
    v[i] = *w;
  }
  im.match_types(&v[0], &v[1]);
  Shape sa = v[0].shape(), sb = v[1].shape();
  // numpy's matmul, which ONNX's follows, takes no scalar.
  if (sa.rank() == 0 || sb.rank() == 0)
    return im.error(node, str_cat("MatMul of ", sa.str(), " and ", sb.str(), ": no scalars"));
  const bool a_vector = sa.rank() == 1, b_vector = sb.rank() == 1;
  if (a_vector) v[0] = b.reshape(v[0], {1, sa.dim(0)});
  if (b_vector) v[1] = b.reshape(v[1], {sb.dim(0), 1});
  sa = v[0].shape();
  sb = v[1].shape();
  if (sb.rank() > 2 || sa.rank() > 2) {
    std::vector<int64_t> ba(sa.dims().begin(), sa.dims().end() - 2);
    std::vector<int64_t> bb(sb.dims().begin(), sb.dims().end() - 2);
    auto batch = broadcast_dims(ba, bb);
    if (!batch.ok()) return im.error(node, std::string(batch.status().message()));
    if (sb.rank() > 2 || ba != *batch) {
      auto full = [&](Value t, const Shape& s) {
        std::vector<int64_t> d = *batch;
        d.push_back(s.dim(s.rank() - 2));
        d.push_back(s.dim(s.rank() - 1));
        return Shape(d) == s ? t : b.broadcast_to(t, Shape(d));
      };
      v[0] = full(v[0], sa);
      v[1] = full(v[1], sb);
    }
  }
  // Operands that do not multiply leave an invalid product: its shape() throws, and the
  // importer returns the builder's error naming the node (Importer::convert).
  Value y = b.matmul(v[0], v[1]);
  std::vector<int64_t> out = y.shape().dims();
  if (a_vector) out.erase(out.end() - 2);
  if (b_vector) out.pop_back();
  if (a_vector || b_vector) y = b.reshape(y, Shape(out));
  im.set_output(node, 0, Operand{y, false, {}});
  return absl::OkStatus();
}

// Dropout: inverted dropout in training (the ratio from the input from opset 12, else the
// attribute), the identity otherwise.
absl::Status convert_dropout(Importer& im, const onnx::NodeProto& node) {
  auto x = im.input(node, 0);
  if (!x.ok()) return x.status();
  if (node.output_size() > 1 && !node.output(1).empty())
    return im.error(node, "Dropout's mask output is not supported");
  float ratio = im.attr_float(node, "ratio", 0.5f);
  if (im.has_input(node, 1)) {
    auto r = im.folded_input(node, 1, "the ratio");
    if (!r.ok()) return r.status();
    ratio = static_cast<float>(r->data.at(0));
  }
  if (!im.options.training || !x->on_device()) {
    im.set_output(node, 0, *x);
    return absl::OkStatus();
  }
  const uint64_t seed = im.options.seed ^ std::hash<std::string>{}(node_label(node));
  im.set_output(node, 0,
                Operand{layers::dropout(im.b, x->value, ratio, true, seed), x->channels_last, {}});
  return absl::OkStatus();
}

// LayerNormalization (opset 17) over the last axis.
absl::Status convert_layer_norm(Importer& im, const onnx::NodeProto& node) {
  auto x = im.input(node, 0);
  if (!x.ok()) return x.status();
  const Value v = im.logical(*x);
  auto axis = normalize_axis(im.attr_int(node, "axis", -1), v.shape().rank());
  if (!axis.ok() || *axis != v.shape().rank() - 1)
    return im.error(node, "tpusim normalises over the last axis only");
  for (int i = 1; i < node.output_size(); ++i) {
    if (!node.output(i).empty())
      return im.error(node, "the mean and inverse deviation outputs are not supported");
  }
  auto gamma = weight_input(im, node, 1, {}, /*f32=*/true);
  if (!gamma.ok()) return gamma.status();
  Value beta;
  if (im.has_input(node, 2)) {
    auto given = weight_input(im, node, 2, {}, /*f32=*/true);
    if (!given.ok()) return given.status();
    beta = *given;
  }
  const float epsilon = im.attr_float(node, "epsilon", 1e-5f);
  if (!(epsilon >= 0) || !std::isfinite(epsilon))
    return im.error(node, str_cat("epsilon ", epsilon, " must be a finite number >= 0"));
  im.set_output(node, 0,
                Operand{layers::layer_normalize(im.b, v, *gamma, beta, epsilon), false, {}});
  return absl::OkStatus();
}

}  // namespace

void add_nn_converters(std::map<std::string, Converter>* table) {
  auto& t = *table;
  t["Conv"] = convert_conv;
  t["MaxPool"] = pool(true);
  t["AveragePool"] = pool(false);
  t["GlobalAveragePool"] = global_pool(false);
  t["GlobalMaxPool"] = global_pool(true);
  t["BatchNormalization"] = convert_batch_norm;
  t["Gemm"] = convert_gemm;
  t["MatMul"] = convert_matmul;
  t["Dropout"] = convert_dropout;
  t["LayerNormalization"] = convert_layer_norm;
}

}  // namespace tpusim::runtime::onnx_import
