#include "tools/tpusim/backend_options.h"

#include "common/strings.h"
#include "configs/loader.h"
#include "runtime/backend/registry.h"
#include "tools/tpusim/options.h"

namespace tpusim::cli {

namespace po = boost::program_options;

void add_backend_flag(po::options_description& options) {
  options.add_options()("backend", po::value<std::string>()->default_value("tpusim"),
                        runtime::backend_names(" | ").c_str());
}

void add_precision_flag(po::options_description& options) {
  options.add_options()(
      "precision",
      po::value<std::string>()->default_value(
          std::string(runtime::kPrecisions.name(kCliPrecision))),
      "what matmuls and convolutions compute: mxu (their inputs rounded to bf16, sums in f32, as "
      "the TPU's MXU at DEFAULT precision; the tpusim backend computes only so) | fp32 (inputs "
      "as they are: the cpu and gpu backends)");
}

absl::StatusOr<runtime::Precision> precision_from(const po::variables_map& vm,
                                                  const runtime::BackendDeclaration& backend) {
  const std::string word = vm["precision"].as<std::string>();
  const std::optional<runtime::Precision> precision = runtime::kPrecisions.parse(word);
  if (!precision)
    return absl::InvalidArgumentError(
        str_cat("--precision must be mxu or fp32 (got '", word, "')"));
  if (runtime::effective_precision(backend, *precision) != *precision)
    return runtime::precision_choice_error(backend, "--precision " + word);
  return *precision;
}

void add_compile_flags(po::options_description& options) {
  options.add_options()(
      "allreduce", po::value<std::string>()->default_value("ring"),
      "how tpusim all-reduces the gradients: ring | bidir_ring | torus2d | torus (the torus ones "
      "over every core of the slice)")(
      "overlap-allreduce", po::value<bool>()->default_value(true, "on"),
      "on: each gradient's all-reduce runs while the step computes the rest (as XLA's "
      "asynchronous all-reduce); off: it waits for all the step's earlier work and holds up all "
      "later work")(
      "allreduce-combine-threshold", po::value<std::string>()->default_value("0"),
      "combine the gradients' all-reduces, in the order they run, into all-reduces of up to this "
      "many bytes (and 256 tensors) each (4MiB, 32MiB, ...), each paying one latency, as XLA's "
      "AllReduceCombiner; 0: every gradient its own all-reduce")(
      "fuse-convolutions", po::value<bool>()->default_value(true, "on"),
      "on: each convolution and each of its gradients is one fragment whose im2col patches stay "
      "in VMEM, as XLA's convolutions; off: the patches go through HBM between separate "
      "im2col, matmul and col2im fragments")(
      "fuse-pools", po::value<bool>()->default_value(true, "on"),
      "on: each max pool whose windows tile the image, and its gradient, is one vector-unit "
      "fragment reading the images (XLA's reduce-window and select-and-scatter); off: the "
      "windows and the gradient's masks go through HBM between separate fragments")(
      "fuse-reductions", po::value<bool>()->default_value(true, "on"),
      "on: a reduce_sum or reduce_max over the last axis, all but the last, or all of them "
      "computes the elementwise ops producing its input in its own fragment, in VMEM (XLA's "
      "input fusion); off: their value goes through HBM")(
      "fuse-multi-output", po::value<bool>()->default_value(true, "on"),
      "on: two reductions down the rows that read the same value (a batch norm's two sums, its "
      "gradient's two) are one fragment reading it once (XLA's multi-output fusion); off: each "
      "reads it")(
      "fuse-producers", po::value<bool>()->default_value(true, "on"),
      "on: an elementwise group whose value reductions down the rows read (a ReLU's gradient, "
      "which a batch norm's gradient sums) is computed by the reductions' fragment, which writes "
      "the value too (XLA's producer-consumer multi-output fusion); off: the reductions read it "
      "back")(
      "fuse-conv-reductions", po::value<bool>()->default_value(true, "on"),
      "on: a convolution computes the reductions of its output down the rows (a batch norm's "
      "sum and sum of squares) from its output tiles in VMEM (XLA's multi-output fusion of a "
      "convolution with its result's reductions); off: they read the output back from HBM")(
      "fuse-pointwise-convolutions", po::value<bool>()->default_value(true, "on"),
      "on: a fused 1x1 stride-1 convolution without padding, whose patches are its images, feeds "
      "the MXUs from the images as they lie (XLA's dot over the channels); off: it builds the "
      "patches in VMEM as any other kernel's")(
      "fuse-conv-windows", po::value<bool>()->default_value(true, "on"),
      "on: a fused convolution (or input gradient) whose channels fill the MXU at every kernel "
      "offset reads its windows in place, one product per kernel offset (XLA's TPU convolution "
      "emitter); off: it builds the patches in VMEM (im2col) and sums their gradients back")(
      "fuse-conv-producers", po::value<bool>()->default_value(true, "on"),
      "on: an elementwise group that reads one value of its shape (a batch norm applied and its "
      "ReLU) is computed again by every fragment that reads it, a convolution on its image "
      "bands in VMEM (XLA fuses such producers into each consumer); off: it writes its value "
      "and they read it back")(
      "fuse-matmul-producers", po::value<bool>()->default_value(true, "on"),
      "on: a batched matmul (attention's products) may be such a reader too, making its operand "
      "from the group's operands in VMEM (XLA fuses an elementwise producer into its dot: a "
      "dropout's multiply); off: the group writes the operand and the matmul reads it back")(
      "fuse-matmul-consumers", po::value<bool>()->default_value(true, "on"),
      "on: a batched matmul computes the elementwise group that is its product's only reader "
      "from its products in VMEM (XLA's output fusion of a dot: a dropout's gradient, the "
      "scores' scale and mask add); off: the "
      "product is written and the group reads it back")(
      "fuse-conv-consumers", po::value<bool>()->default_value(true, "on"),
      "on: a convolution's input gradient computes the elementwise group that is its only reader, "
      "and the sibling reductions that take the group in, from its image gradients in VMEM (XLA's "
      "output and multi-output fusions of a convolution: a batch norm's gradient sums at a "
      "residual block's output); off: the gradient is written and they read it back")(
      "fuse-rng", po::value<bool>()->default_value(true, "on"),
      "on: an rng_uniform whose readers are all in one elementwise group of its shape (a "
      "dropout's uniforms) is drawn in that group's tiles, as XLA's fused loop generates an rng's "
      "elements where it reads them; off: the draws go through HBM in f32")(
      "recompute-shared-producers", po::value<bool>()->default_value(true, "on"),
      "on: an elementwise value that several elementwise fragments of its shape read is computed "
      "again in each of them (XLA's producer duplication); off: it goes through HBM");
}

absl::StatusOr<const runtime::BackendDeclaration*> backend_from(const po::variables_map& vm) {
  const std::string name = vm["backend"].as<std::string>();
  auto backend = runtime::find_backend(name);
  if (!backend.ok()) {
    std::vector<std::string> names;
    for (const auto& b : runtime::registered_backends()) names.push_back(b.name);
    const std::string last = names.back();
    names.pop_back();
    return absl::InvalidArgumentError(
        str_cat("--backend must be ", str_join(names, ", "), " or ", last, " (got '", name, "')"));
  }
  return backend;
}

absl::StatusOr<runtime::CompileOptions> compile_options_from(const po::variables_map& vm) {
  runtime::CompileOptions options;
  options.precision = kCliPrecision;
  const std::string algorithm = vm["allreduce"].as<std::string>();
  const auto allreduce = runtime::kAllReduceAlgorithms.parse(algorithm);
  if (!allreduce) {
    return absl::InvalidArgumentError(str_cat("--allreduce '", algorithm, "' is not one of ",
                                              runtime::kAllReduceAlgorithms.list()));
  }
  options.allreduce = *allreduce;
  options.overlap_allreduce = vm["overlap-allreduce"].as<bool>();
  if (const std::string t = vm["allreduce-combine-threshold"].as<std::string>(); t != "0") {
    auto bytes = parse_bytes("--allreduce-combine-threshold", t, 4);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(str_cat(bytes.status().message(), " (or 0: no combining)"));
    }
    options.allreduce_combine_bytes = *bytes;
  }
  options.fuse_convolutions = vm["fuse-convolutions"].as<bool>();
  options.fuse_pools = vm["fuse-pools"].as<bool>();
  options.fuse_reductions = vm["fuse-reductions"].as<bool>();
  options.recompute_shared_producers = vm["recompute-shared-producers"].as<bool>();
  options.fuse_multi_output = vm["fuse-multi-output"].as<bool>();
  options.fuse_producers = vm["fuse-producers"].as<bool>();
  options.fuse_conv_reductions = vm["fuse-conv-reductions"].as<bool>();
  options.fuse_pointwise_convolutions = vm["fuse-pointwise-convolutions"].as<bool>();
  options.fuse_conv_producers = vm["fuse-conv-producers"].as<bool>();
  options.fuse_matmul_producers = vm["fuse-matmul-producers"].as<bool>();
  options.fuse_matmul_consumers = vm["fuse-matmul-consumers"].as<bool>();
  options.fuse_conv_consumers = vm["fuse-conv-consumers"].as<bool>();
  options.fuse_conv_windows = vm["fuse-conv-windows"].as<bool>();
  options.fuse_rng = vm["fuse-rng"].as<bool>();
  return options;
}

std::string run_target(const runtime::BackendDeclaration& backend, const std::string& slice) {
  return backend.supports.runs_a_slice ? slice : str_cat("the ", backend.name, " backend");
}

absl::StatusOr<uint32_t> run_replicas(const runtime::BackendDeclaration& backend,
                                      const std::string& slice) {
  if (!backend.supports.runs_a_slice) return kHostReplicas;
  auto spec = config::load_slice(slice);
  if (!spec.ok()) return spec.status();
  return (*spec)->cores;
}

}  // namespace tpusim::cli
