// Layout and shape ops, constants and gathers (importer.h). Shape arithmetic is folded at import
// time; a transpose between the file's NHWC and NCHW orders of an image moves no data (the image
// stays NHWC on the device).
#include <numeric>

#include "common/strings.h"
#include "runtime/onnx/importer_context.h"

namespace tpusim::runtime::onnx_import {
namespace {

int64_t product(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i) n *= d[i];
  return n;
}

// `x` reshaped to `dims` (folded stays folded).
Operand reshaped(Importer& im, const Operand& x, const std::vector<int64_t>& dims) {
  if (!x.on_device()) {
    Folded f = *x.folded;
    f.dims = dims;
    return Operand{{}, false, f};
  }
  return Operand{im.b.reshape(im.logical(x), Shape(dims)), false, {}};
}

// A reshape between an image's NHWC and NCHW orders that moves only dimensions of 1 (tf2onnx
// writes [N, H, W, 1] -> [N, 1, H, W] for a one-channel input): the same values in the other
// layout, so the device keeps them as they are.
std::optional<Operand> layout_reshape(const Operand& x, const std::vector<int64_t>& to) {
  if (!x.on_device() || to.size() != 4) return std::nullopt;
  const std::vector<int64_t> in = Importer::logical_dims(x);
  if (in.size() != 4) return std::nullopt;
  if (!x.channels_last && in[3] == 1 && to == std::vector<int64_t>{in[0], 1, in[1], in[2]})
    return Operand{x.value, true, {}};
  if (x.channels_last && in[1] == 1 && to == std::vector<int64_t>{in[0], in[2], in[3], 1})
    return Operand{x.value, false, {}};
  return std::nullopt;
}

absl::Status convert_reshape(Importer& im, const onnx::NodeProto& node) {
  auto x = im.input(node, 0);
  if (!x.ok()) return x.status();
  auto target = im.folded_input(node, 1, "the shape");
  if (!target.ok()) return target.status();
  auto dims = target->ints("the shape");
  if (!dims.ok()) return im.error(node, std::string(dims.status().message()));
  const std::vector<int64_t> in = Importer::logical_dims(*x);
  const bool allow_zero = im.attr_int(node, "allowzero", 0) != 0;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < dims->size(); ++i) {
    int64_t& d = (*dims)[i];
    if (d == 0 && !allow_zero) {
      if (i >= in.size())
        return im.error(node, str_cat("shape entry ", i, " copies a dimension the input lacks"));
      d = in[i];
    }
    if (d == -1) {
      if (infer >= 0) return im.error(node, "two -1 entries in the shape");
      infer = static_cast<int64_t>(i);
    } else if (d < 0) {
      return im.error(node, str_cat("shape entry ", d));
    } else {
      known *= d;
    }
  }
  const int64_t total = product(in, 0, in.size());
  if (infer >= 0) {
    if (known == 0 || total % known != 0)
      return im.error(node,
                      str_cat("cannot reshape ", Shape(in).str(), " to ", Shape(*dims).str()));
    (*dims)[static_cast<size_t>(infer)] = total / known;
  } else if (known != total) {
    return im.error(node, str_cat("cannot reshape ", Shape(in).str(), " to ", Shape(*dims).str()));
  }
  im.set_output(node, 0, layout_reshape(*x, *dims).value_or(reshaped(im, *x, *dims)));
  return absl::OkStatus();
}

absl::Status convert_flatten(Importer& im, const onnx::NodeProto& node) {
  auto x = im.input(node, 0);
  if (!x.ok()) return x.status();
  const std::vector<int64_t> in = Importer::logical_dims(*x);
  int64_t axis = im.attr_int(node, "axis", 1);
  if (axis < 0) axis += static_cast<int64_t>(in.size());
  if (axis < 0 || axis > static_cast<int64_t>(in.size()))
    return im.error(node, str_cat("axis ", axis, " of a rank-", in.size(), " input"));
  const auto a = static_cast<size_t>(axis);
  im.set_output(node, 0, reshaped(im, *x, {product(in, 0, a), product(in, a, in.size())}));
  return absl::OkStatus();
}

absl::Status convert_transpose(Importer& im, const onnx::NodeProto& node) {
  auto x = im.input(node, 0);
  if (!x.ok()) return x.status();
  const std::vector<int64_t> in = Importer::logical_dims(*x);
  std::vector<int64_t> perm(in.size());
  std::iota(perm.rbegin(), perm.rend(), 0);  // the default reverses the dimensions
  if (auto given = im.attr_ints(node, "perm")) perm = *given;
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(in.size());
  std::iota(identity.begin(), identity.end(), 0);
  if (sorted != identity) return im.error(node, "perm is not a permutation of the dimensions");
  if (!x->on_device()) {
    im.set_output(node, 0, Operand{{}, false, fold_transpose(*x->folded, perm)});
    return absl::OkStatus();
  }
  const std::vector<int64_t> to_nchw = {0, 3, 1, 2}, to_nhwc = {0, 2, 3, 1};
  if (!x->channels_last && perm == to_nchw) {
    // An NHWC image into the file's NCHW order: the device keeps it NHWC.
    im.set_output(node, 0, Operand{x->value, true, {}});
  } else if (x->channels_last && perm == to_nhwc) {
    im.set_output(node, 0, Operand{x->value, false, {}});
  } else {
    im.set_output(node, 0, Operand{im.b.transpose(im.logical(*x), perm), false, {}});
  }
  return absl::OkStatus();
}

// The axes of Squeeze and Unsqueeze: the attribute before opset 13, the input from it.
absl::StatusOr<std::optional<std::vector<int64_t>>> axes_of(Importer& im,
                                                            const onnx::NodeProto& node) {
  if (auto a = im.attr_ints(node, "axes")) return a;
  if (!im.has_input(node, 1)) return std::optional<std::vector<int64_t>>();
  auto f = im.folded_input(node, 1, "the axes");
  if (!f.ok()) return f.status();
  auto ints = f->ints("the axes");
  if (!ints.ok()) return im.error(node, std::string(ints.status().message()));
  return std::optional<std::vector<int64_t>>(*ints);
}

Converter squeeze(bool add_axes) {
  return [add_axes](Importer& im, const onnx::NodeProto& node) -> absl::Status {
    auto x = im.input(node, 0);
    if (!x.ok()) return x.status();
    auto axes = axes_of(im, node);
    if (!axes.ok()) return axes.status();
    const std::vector<int64_t> in = Importer::logical_dims(*x);
    std::vector<int64_t> out;
    if (add_axes) {
      if (!axes->has_value()) return im.error(node, "no axes");
      const auto rank = static_cast<int64_t>(in.size() + (*axes)->size());
      std::vector<bool> inserted(static_cast<size_t>(rank), false);
      for (int64_t a : **axes) {
        auto n = normalize_axis(a, rank);
        if (!n.ok()) return im.error(node, std::string(n.status().message()));
        inserted[static_cast<size_t>(*n)] = true;
      }
      size_t next = 0;
      for (int64_t i = 0; i < rank; ++i)
        out.push_back(inserted[static_cast<size_t>(i)] ? 1 : in[next++]);
    } else {
      std::vector<bool> removed(in.size(), false);
      if (axes->has_value()) {
        for (int64_t a : **axes) {
          auto n = normalize_axis(a, static_cast<int64_t>(in.size()));
          if (!n.ok()) return im.error(node, std::string(n.status().message()));
          if (in[static_cast<size_t>(*n)] != 1)
            return im.error(node, str_cat("dimension ", *n, " is not 1"));
          removed[static_cast<size_t>(*n)] = true;
        }
      } else {
        for (size_t i = 0; i < in.size(); ++i) removed[i] = in[i] == 1;
      }
      for (size_t i = 0; i < in.size(); ++i) {
        if (!removed[i]) out.push_back(in[i]);
      }
    }
    im.set_output(node, 0, reshaped(im, *x, out));
    return absl::OkStatus();
  };
}

absl::Status convert_concat(Importer& im, const onnx::NodeProto& node) {
  std::vector<Operand> parts;
  bool all_folded = true, all_channels_last = true;
  for (int i = 0; i < node.input_size(); ++i) {
    auto p = im.input(node, i);
    if (!p.ok()) return p.status();
    all_folded = all_folded && !p->on_device();
    all_channels_last = all_channels_last && p->channels_last;
    parts.push_back(*std::move(p));
  }
  if (parts.empty()) return im.error(node, "no inputs");
  const auto rank = static_cast<int64_t>(Importer::logical_dims(parts[0]).size());
  auto axis = normalize_axis(im.attr_int(node, "axis", 0), rank);
  if (!axis.ok()) return im.error(node, std::string(axis.status().message()));
  if (all_folded) {
    std::vector<const Folded*> f;
    for (const Operand& p : parts) f.push_back(&*p.folded);
    im.set_output(node, 0, Operand{{}, false, fold_concat(f, *axis)});
    return absl::OkStatus();
  }
  std::vector<Value> values;
  const bool channels = all_channels_last && *axis == 1;  // channels of NHWC images
  bool bf16 = false;
  for (const Operand& p : parts) {
    values.push_back(channels ? p.value : im.logical(p));
    bf16 = bf16 || values.back().dtype() == DType::kBF16;
  }
  for (Value& v : values) v = im.as_type(v, bf16 ? DType::kBF16 : v.dtype());
  im.set_output(node, 0, Operand{im.b.concat(values, channels ? 3 : *axis), channels, {}});
  return absl::OkStatus();
}

// [begin, end) of `x` along `axis` (device values in the file's layout).
Value slice_axis(Importer& im, Value x, int64_t axis, int64_t begin, int64_t end) {
  std::vector<int64_t> b(static_cast<size_t>(x.shape().rank()), 0);
  std::vector<int64_t> e = x.shape().dims();
  b[static_cast<size_t>(axis)] = begin;
  e[static_cast<size_t>(axis)] = end;
  return im.b.slice(x, b, e);
}

absl::Status convert_split(Importer& im, const onnx::NodeProto& node) {
  auto x = im.input(node, 0);
  if (!x.ok()) return x.status();
  if (!x->on_device()) return im.error(node, "splitting a tensor known at import time");
  const std::vector<int64_t> in = Importer::logical_dims(*x);
  auto axis = normalize_axis(im.attr_int(node, "axis", 0), static_cast<int64_t>(in.size()));
  if (!axis.ok()) return im.error(node, std::string(axis.status().message()));
  const int64_t extent = in[static_cast<size_t>(*axis)];
  std::vector<int64_t> sizes;
  if (auto attr = im.attr_ints(node, "split")) {
    sizes = *attr;
  } else if (im.has_input(node, 1)) {
    auto f = im.folded_input(node, 1, "the split sizes");
    if (!f.ok()) return f.status();
    auto ints = f->ints("the split sizes");
    if (!ints.ok()) return im.error(node, std::string(ints.status().message()));
    sizes = *ints;
  } else {
    const int64_t n = node.output_size();
    if (extent % n != 0)
      return im.error(node, str_cat(extent, " does not split in ", n, " equal parts"));
    sizes.assign(static_cast<size_t>(n), extent / n);
  }
  if (std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) != extent ||
      static_cast<int>(sizes.size()) != node.output_size()) {
    return im.error(node, str_cat("split sizes ", Shape(sizes).str(), " for ", node.output_size(),
                                  " outputs of an extent of ", extent));
  }
  const bool channels = x->channels_last && *axis == 1;
  const Value v = channels ? x->value : im.logical(*x);
  int64_t begin = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const Value part = slice_axis(im, v, channels ? 3 : *axis, begin, begin + sizes[i]);
    im.set_output(node, static_cast<int>(i), Operand{part, channels, {}});
    begin += sizes[i];
  }
  return absl::OkStatus();
}

absl::Status convert_slice(Importer& im, const onnx::NodeProto& node) {
  auto x = im.input(node, 0);
  if (!x.ok()) return x.status();
  const std::vector<int64_t> in = Importer::logical_dims(*x);
  std::vector<std::vector<int64_t>> args;  // starts, ends, axes, steps
  for (int i = 1; i <= 4; ++i) {
    if (!im.has_input(node, i)) {
      args.emplace_back();
      continue;
    }
    auto f = im.folded_input(node, i, "a slice bound");
    if (!f.ok()) return f.status();
    auto ints = f->ints("a slice bound");
    if (!ints.ok()) return im.error(node, std::string(ints.status().message()));
    args.push_back(*ints);
  }
  std::vector<int64_t> begin(in.size(), 0), end = in;
  for (size_t k = 0; k < args[0].size(); ++k) {
    auto axis = normalize_axis(args[2].empty() ? static_cast<int64_t>(k) : args[2][k],
                               static_cast<int64_t>(in.size()));
    if (!axis.ok()) return im.error(node, std::string(axis.status().message()));
    if (!args[3].empty() && args[3][k] != 1) return im.error(node, "steps other than 1");
    const auto a = static_cast<size_t>(*axis);
    auto clamp = [&](int64_t v) {
      if (v < 0) v += in[a];
      return std::clamp<int64_t>(v, 0, in[a]);
    };
    begin[a] = clamp(args[0][k]);
    end[a] = std::max(begin[a], clamp(args[1].at(k)));
  }
  if (!x->on_device()) {
    im.set_output(node, 0, Operand{{}, false, fold_slice(*x->folded, begin, end)});
  } else {
    im.set_output(node, 0, Operand{im.b.slice(im.logical(*x), begin, end), false, {}});
  }
  return absl::OkStatus();
}

absl::Status convert_shape(Importer& im, const onnx::NodeProto& node) {
  auto x = im.input(node, 0);
  if (!x.ok()) return x.status();
  std::vector<int64_t> dims = Importer::logical_dims(*x);
  const auto rank = static_cast<int64_t>(dims.size());
  auto clamp = [rank](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  const int64_t start = clamp(im.attr_int(node, "start", 0));
  const int64_t end = clamp(im.attr_int(node, "end", rank));
  dims = std::vector<int64_t>(dims.begin() + start, dims.begin() + std::max(start, end));
  im.set_output(node, 0, Operand{{}, false, fold_vector(dims)});
  return absl::OkStatus();
}

// Gather: folded when both operands are known; an embedding lookup (the IR's gather) for a
// [V, D] table along axis 0; slices for indices known at import time along any other axis.
absl::Status convert_gather(Importer& im, const onnx::NodeProto& node) {
  auto ids = im.input(node, 1);
  if (!ids.ok()) return ids.status();
  const bool table_weight = im.is_initializer(node.input(0)) && ids->on_device();
  auto data = table_weight ? absl::StatusOr<Operand>(Operand{}) : im.input(node, 0);
  if (!data.ok()) return data.status();
  if (table_weight) {
    auto table = im.weight(node.input(0));
    if (!table.ok()) return table.status();
    *data = Operand{*table, false, {}};
  }
  const std::vector<int64_t> dims = Importer::logical_dims(*data);
  auto axis = normalize_axis(im.attr_int(node, "axis", 0), static_cast<int64_t>(dims.size()));
  if (!axis.ok()) return im.error(node, std::string(axis.status().message()));
  if (!data->on_device() && !ids->on_device()) {
    auto f = fold_gather(*data->folded, *ids->folded, *axis);
    if (!f.ok()) return im.error(node, std::string(f.status().message()));
    im.set_output(node, 0, Operand{{}, false, *std::move(f)});
    return absl::OkStatus();
  }
  GraphBuilder& b = im.b;
  const Value table = im.logical(*data);
  if (*axis == 0 && dims.size() == 2) {
    Value indices = im.logical(*ids);
    if (indices.dtype() != DType::kS32) return im.error(node, "the indices are not integers");
    im.set_output(node, 0, Operand{b.gather(table, indices), false, {}});
    return absl::OkStatus();
  }
  if (ids->on_device()) {
    return im.error(node,
                    str_cat("indices computed on the device along axis ", *axis, " of a rank-",
                            dims.size(), " tensor (tpusim gathers rows of a [V, D] table)"));
  }
  auto list = ids->folded->ints("the indices");
  if (!list.ok()) return im.error(node, std::string(list.status().message()));
  const int64_t extent = dims[static_cast<size_t>(*axis)];
  std::vector<Value> rows;
  for (int64_t id : *list) {
    const int64_t i = id < 0 ? id + extent : id;
    if (i < 0 || i >= extent)
      return im.error(node, str_cat("index ", id, " outside [", -extent, ", ", extent, ")"));
    rows.push_back(slice_axis(im, table, *axis, i, i + 1));
  }
  std::vector<int64_t> out(dims.begin(), dims.begin() + *axis);
  out.insert(out.end(), ids->folded->dims.begin(), ids->folded->dims.end());
  out.insert(out.end(), dims.begin() + *axis + 1, dims.end());
  const Value joined = rows.size() == 1 ? rows[0] : b.concat(rows, *axis);
  im.set_output(node, 0, Operand{b.reshape(joined, Shape(out)), false, {}});
  return absl::OkStatus();
}

absl::Status convert_constant(Importer& im, const onnx::NodeProto& node) {
  if (const onnx::AttributeProto* tensor = im.attr(node, "value")) {
    auto f = fold_tensor(tensor->t());
    if (!f.ok()) return im.error(node, std::string(f.status().message()));
    im.set_output(node, 0, Operand{{}, false, *std::move(f)});
    return absl::OkStatus();
  }
  Folded f;
  if (const onnx::AttributeProto* a = im.attr(node, "value_float")) {
    f = fold_scalar(a->f(), false);
  } else if (const onnx::AttributeProto* i = im.attr(node, "value_int")) {
    f = fold_scalar(static_cast<double>(i->i()), true);
  } else if (const onnx::AttributeProto* fs = im.attr(node, "value_floats")) {
    f.dims = {fs->floats_size()};
    f.data.assign(fs->floats().begin(), fs->floats().end());
  } else if (const onnx::AttributeProto* is = im.attr(node, "value_ints")) {
    f = fold_vector(std::vector<int64_t>(is->ints().begin(), is->ints().end()));
  } else {
    return im.error(node, "a constant without a value, value_float(s) or value_int(s)");
  }
  im.set_output(node, 0, Operand{{}, false, f});
  return absl::OkStatus();
}

absl::Status convert_constant_of_shape(Importer& im, const onnx::NodeProto& node) {
  auto shape = im.folded_input(node, 0, "the shape");
  if (!shape.ok()) return shape.status();
  auto dims = shape->ints("the shape");
  if (!dims.ok()) return im.error(node, std::string(dims.status().message()));
  Folded value = fold_scalar(0, false);
  if (const onnx::AttributeProto* a = im.attr(node, "value")) {
    auto f = fold_tensor(a->t());
    if (!f.ok()) return im.error(node, std::string(f.status().message()));
    value = *std::move(f);
  }
  Folded out;
  out.dims = *dims;
  out.integer = value.integer;
  const int64_t n = foldable_elements(out.dims);
  if (n < 0)
    return im.error(node, str_cat("a constant of ", Shape(out.dims).str(), " is too large"));
  out.data.assign(static_cast<size_t>(n), value.data.empty() ? 0.0 : value.data[0]);
  im.set_output(node, 0, Operand{{}, false, out});
  return absl::OkStatus();
}

absl::Status convert_expand(Importer& im, const onnx::NodeProto& node) {
  auto x = im.input(node, 0);
  if (!x.ok()) return x.status();
  auto shape = im.folded_input(node, 1, "the shape");
  if (!shape.ok()) return shape.status();
  auto target = shape->ints("the shape");
  if (!target.ok()) return im.error(node, std::string(target.status().message()));
  auto dims = broadcast_dims(Importer::logical_dims(*x), *target);
  if (!dims.ok()) return im.error(node, std::string(dims.status().message()));
  if (foldable_elements(*dims) < 0)
    return im.error(node, str_cat("expanding to ", Shape(*dims).str(), " is too large"));
  if (!x->on_device()) {
    Folded zeros;
    zeros.dims = *dims;
    zeros.integer = x->folded->integer;
    zeros.data.assign(static_cast<size_t>(zeros.elements()), 0.0);
    auto f = fold_binary(
        *x->folded, zeros, [](double a, double) { return a; }, x->folded->integer);
    if (!f.ok()) return im.error(node, std::string(f.status().message()));
    im.set_output(node, 0, Operand{{}, false, *std::move(f)});
    return absl::OkStatus();
  }
  im.set_output(node, 0, Operand{im.b.broadcast_to(im.logical(*x), Shape(*dims)), false, {}});
  return absl::OkStatus();
}

// Pad, constant mode with zeros: on NHWC images when the file pads an NCHW one.
absl::Status convert_pad(Importer& im, const onnx::NodeProto& node) {
  auto x = im.input(node, 0);
  if (!x.ok()) return x.status();
  if (!x->on_device()) return im.error(node, "padding a tensor known at import time");
  if (im.attr_string(node, "mode", "constant") != "constant")
    return im.error(node, "modes other than constant");
  std::vector<int64_t> pads;
  if (auto attr = im.attr_ints(node, "pads")) {
    pads = *attr;
  } else {
    auto f = im.folded_input(node, 1, "the pads");
    if (!f.ok()) return f.status();
    auto ints = f->ints("the pads");
    if (!ints.ok()) return im.error(node, std::string(ints.status().message()));
    pads = *ints;
  }
  if (im.has_input(node, 2)) {
    auto value = im.folded_input(node, 2, "the padding value");
    if (!value.ok()) return value.status();
    if (value->data.at(0) != 0) return im.error(node, "padding values other than 0");
  }
  const size_t rank = Importer::logical_dims(*x).size();
  if (pads.size() != 2 * rank) return im.error(node, str_cat(pads.size(), " pads for rank ", rank));
  for (int64_t p : pads) {
    if (p < 0) return im.error(node, "negative pads");
  }
  std::vector<int64_t> before(pads.begin(), pads.begin() + static_cast<int64_t>(rank));
  std::vector<int64_t> after(pads.begin() + static_cast<int64_t>(rank), pads.end());
  if (x->channels_last) {
    auto nhwc = [](const std::vector<int64_t>& p) {
      return std::vector<int64_t>{p[0], p[2], p[3], p[1]};
    };
    im.set_output(node, 0, Operand{im.b.pad(x->value, nhwc(before), nhwc(after)), true, {}});
  } else {
    im.set_output(node, 0, Operand{im.b.pad(x->value, before, after), false, {}});
  }
  return absl::OkStatus();
}

}  // namespace

void add_shape_converters(std::map<std::string, Converter>* table) {
  auto& t = *table;
  t["Reshape"] = convert_reshape;
  t["Flatten"] = convert_flatten;
  t["Transpose"] = convert_transpose;
  t["Squeeze"] = squeeze(false);
  t["Unsqueeze"] = squeeze(true);
  t["Concat"] = convert_concat;
  t["Split"] = convert_split;
  t["Slice"] = convert_slice;
  t["Shape"] = convert_shape;
  t["Gather"] = convert_gather;
  t["Constant"] = convert_constant;
  t["ConstantOfShape"] = convert_constant_of_shape;
  t["Expand"] = convert_expand;
  t["Pad"] = convert_pad;
}

}  // namespace tpusim::runtime::onnx_import
