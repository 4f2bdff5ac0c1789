// Writes what the interop tier's JAX check needs, as JSON files in the folder given: for each op
// case, the inputs, variables, cotangent and the cpu backend's fp32 output and gradients; and
// one forward and backward pass of mnist_cnn (batch 8, inference mode: no dropout).
//
// Usage: tpusim_interop_dump DIR
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "runtime/backend/registry.h"
#include "runtime/graph/autodiff.h"
#include "runtime/graph/initializers.h"
#include "runtime/graph/layers.h"
#include "runtime/models/zoo.h"
#include "runtime/opcheck/harness.h"

using namespace tpusim::runtime;
using json = nlohmann::json;

namespace {

json tensor_json(const HostTensor& t) {
  json j{{"shape", t.shape.dims()}, {"dtype", dtype_name(t.dtype)}};
  if (t.dtype == DType::kS32)
    j["values"] = t.i;
  else
    j["values"] = t.f;
  return j;
}

json map_json(const std::map<std::string, HostTensor>& m) {
  json j = json::object();
  for (const auto& [name, t] : m) j[name] = tensor_json(t);
  return j;
}

bool run_cpu(const Graph& g, Variables vars, const Feeds& feeds, Outputs* out) {
  auto backend = make_backend("cpu");
  auto exe = (*backend)->compile(g, {});
  auto r = (*backend)->run(**exe, vars, {feeds}, 0);
  if (!r.ok()) {
    std::cerr << r.status() << "\n";
    return false;
  }
  *out = (*r)[0];
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: tpusim_interop_dump DIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  int index = 0;
  for (const auto& c : opcheck::all_cases()) {
    auto graph = opcheck::build_case_graph(c, 1);
    if (!graph.ok()) {
      std::cerr << c.op << ": " << graph.status() << "\n";
      return 1;
    }
    const Feeds feeds = opcheck::make_feeds(c, 1);
    const Variables vars = initial_variables(*graph);
    Outputs out;
    if (!run_cpu(*graph, vars, feeds, &out)) return 1;
    json j{{"op", c.op},
           {"shape", c.shape},
           {"inputs", map_json(feeds)},
           {"variables", map_json(vars)},
           {"outputs", map_json(out)}};
    if (c.differentiable)
      j["cotangent"] = tensor_json(opcheck::make_cotangent(out.at("output").shape, 1));
    std::ofstream(dir + "/case_" + std::to_string(index++) + ".json") << j.dump();
  }
  // mnist_cnn: forward (logits, mean loss) and the gradients of the loss.
  GraphBuilder b;
  const Value images = b.infeed("image", DType::kF32, {8, 28, 28, 1});
  const Value labels = b.infeed("label", DType::kS32, {8});
  auto logits = models::build_model(b, "mnist_cnn", images, /*training=*/false, 1);
  if (!logits.ok()) return 1;
  const Value loss =
      layers::reduce_mean(layers::sparse_softmax_cross_entropy(labels, *logits), {0});
  std::vector<Value> vars;
  for (int id : b.graph().variables()) vars.push_back(Value{id, &b});
  auto grads = gradients(b, loss, vars);
  if (!grads.ok()) return 1;
  b.output("logits", *logits);
  b.output("loss", loss);
  for (size_t i = 0; i < vars.size(); ++i)
    b.output("grad(" + b.graph().node(vars[i].id).attrs.name + ")", (*grads)[i]);
  opcheck::OpCase c;
  c.inputs = {{"image", DType::kF32, {8, 28, 28, 1}, 0, 1}, {"label", DType::kS32, {8}, 0, 10}};
  const Feeds feeds = opcheck::make_feeds(c, 5);
  const Variables values = initial_variables(b.graph());
  Outputs out;
  if (!run_cpu(b.graph(), values, feeds, &out)) return 1;
  std::ofstream(dir + "/mnist_cnn.json") << json{
      {"inputs", map_json(feeds)},
      {"variables", map_json(values)},
      {"outputs", map_json(out)}}.dump();
  std::cout << index << " op cases and mnist_cnn written to " << dir << "\n";
  return 0;
}
