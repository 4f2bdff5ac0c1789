#include "tests/onnx/resnet50_onnx.h"

#include <string>
#include <vector>

#include "sim/numerics/random.h"

namespace tpusim::runtime::onnx_import::testing {
namespace {

class Builder {
 public:
  explicit Builder(uint64_t seed) : rng_(seed) {}
  onnx::ModelProto model;

  onnx::GraphProto& graph() { return *model.mutable_graph(); }

  // An f32 initializer of `dims`, values from the seed (scaled by `scale`), or all `fill`.
  std::string weight(const std::string& name, const std::vector<int64_t>& dims, float scale,
                     float fill = 0) {
    onnx::TensorProto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      n *= d;
    }
    std::string raw(static_cast<size_t>(n) * 4, '\0');
    auto* f = reinterpret_cast<float*>(raw.data());
    for (int64_t i = 0; i < n; ++i)
      f[i] = scale != 0 ? static_cast<float>((2 * rng_.uniform() - 1) * scale) : fill;
    t->set_raw_data(std::move(raw));
    return name;
  }

  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::string& output) {
    onnx::NodeProto* n = graph().add_node();
    n->set_op_type(op);
    n->set_name(output);
    for (const auto& i : inputs) n->add_input(i);
    n->add_output(output);
    return n;
  }

  static void ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void set(onnx::NodeProto* n, const std::string& name, float v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void set(onnx::NodeProto* n, const std::string& name, const std::string& v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }

  // Conv (no bias) then BatchNormalization, then Relu when `relu`; the zoo's padding: SAME for
  // stride 1, fixed ((k - 1) / 2 before, the rest after) when strided.
  std::string conv_bn(const std::string& x, int64_t in, int64_t out, int64_t k, int64_t stride,
                      bool relu, const std::string& name) {
    const std::string w =
        weight(name + ".weight", {out, in, k, k}, 1.0f / static_cast<float>(k * k * in));
    onnx::NodeProto* c = node("Conv", {x, w}, name + ".conv");
    ints(c, "kernel_shape", {k, k});
    ints(c, "strides", {stride, stride});
    if (stride > 1) {
      const int64_t before = (k - 1) / 2, after = k - 1 - before;
      ints(c, "pads", {before, before, after, after});
    } else {
      set(c, "auto_pad", std::string("SAME_UPPER"));
    }
    const std::vector<std::string> bn_in = {name + ".conv", weight(name + ".bn.scale", {out}, 0, 1),
                                            weight(name + ".bn.bias", {out}, 0, 0),
                                            weight(name + ".bn.mean", {out}, 0, 0),
                                            weight(name + ".bn.var", {out}, 0, 1)};
    onnx::NodeProto* bn = node("BatchNormalization", bn_in, name + ".bn");
    set(bn, "momentum", 0.9f);
    set(bn, "epsilon", 1e-5f);
    if (!relu) return name + ".bn";
    node("Relu", {name + ".bn"}, name + ".relu");
    return name + ".relu";
  }

  std::string bottleneck(const std::string& x, int64_t in, int64_t filters, int64_t stride,
                         bool project, const std::string& name) {
    std::string shortcut = x;
    if (project) shortcut = conv_bn(x, in, 4 * filters, 1, stride, false, name + ".downsample");
    std::string h = conv_bn(x, in, filters, 1, 1, true, name + ".1");
    h = conv_bn(h, filters, filters, 3, stride, true, name + ".2");
    h = conv_bn(h, filters, 4 * filters, 1, 1, false, name + ".3");
    node("Add", {h, shortcut}, name + ".add");
    node("Relu", {name + ".add"}, name + ".out");
    return name + ".out";
  }

 private:
  sim::RandomStream rng_;
};

}  // namespace

onnx::ModelProto resnet50_v15(uint64_t seed) {
  Builder b(seed);
  b.model.set_ir_version(8);
  b.model.set_producer_name("tpusim tests (resnet50_onnx.cc)");
  b.model.add_opset_import()->set_version(13);
  onnx::GraphProto& g = b.graph();
  g.set_name("resnet50_v15");
  onnx::ValueInfoProto* in = g.add_input();
  in->set_name("images");
  auto* t = in->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_param("N");
  for (int64_t d : {3, 224, 224}) t->mutable_shape()->add_dim()->set_dim_value(d);
  std::string h = b.conv_bn("images", 3, 64, 7, 2, true, "stem");
  onnx::NodeProto* pool = b.node("MaxPool", {h}, "stem.pool");
  Builder::ints(pool, "kernel_shape", {3, 3});
  Builder::ints(pool, "strides", {2, 2});
  Builder::set(pool, "auto_pad", std::string("SAME_UPPER"));
  h = "stem.pool";
  const int64_t blocks[] = {3, 4, 6, 3};
  int64_t channels = 64;
  for (int64_t group = 0; group < 4; ++group) {
    const int64_t filters = int64_t{64} << group;
    for (int64_t i = 0; i < blocks[group]; ++i) {
      const std::string name = "layer" + std::to_string(group + 1) + "." + std::to_string(i);
      h = b.bottleneck(h, channels, filters, i == 0 && group > 0 ? 2 : 1, i == 0, name);
      channels = 4 * filters;
    }
  }
  b.node("GlobalAveragePool", {h}, "pool");
  b.node("Flatten", {"pool"}, "flat");
  const std::string w = b.weight("fc.weight", {1000, 2048}, 1.0f / 2048);
  const std::string bias = b.weight("fc.bias", {1000}, 0, 0.01f);
  onnx::NodeProto* fc = b.node("Gemm", {"flat", w, bias}, "logits");
  onnx::AttributeProto* trans = fc->add_attribute();
  trans->set_name("transB");
  trans->set_type(onnx::AttributeProto::INT);
  trans->set_i(1);
  onnx::ValueInfoProto* out = g.add_output();
  out->set_name("logits");
  auto* o = out->mutable_type()->mutable_tensor_type();
  o->set_elem_type(onnx::TensorProto::FLOAT);
  o->mutable_shape()->add_dim()->set_dim_param("N");
  o->mutable_shape()->add_dim()->set_dim_value(1000);
  return b.model;
}

}  // namespace tpusim::runtime::onnx_import::testing
