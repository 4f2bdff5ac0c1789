#include "tools/tpusim/commands.h"

#include "tools/tpusim/command.h"

namespace tpusim::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> kCommands = {
      {"train", "train a model on a simulated slice (the main job)", run_train},
      {"tune", "run the job at several iterations_per_loop values and recommend one", run_tune},
      {"validate", "published TPU step times against tpusim's predictions (docs/validation.md)",
       run_validate},
      {"sweep", "run the job at every point of a config/option grid: CSV, JSON and gnuplot plots",
       run_sweep},
      {"evaluate", "evaluate a trained model's newest checkpoint on the test set", run_evaluate},
      {"predict", "predict test images with a trained model's newest checkpoint", run_predict},
      {"analyze",
       "the step-time breakdown and diagnosis of a trace or XProf profile, and a profile's ops",
       run_analyze},
      {"compare-profile",
       "a measured XProf profile against a simulated one, op by op and by category",
       run_compare_profile},
      {"matmul", "one GEMM on one simulated core: cycles, TFLOPS, MXU utilisation, error",
       run_matmul},
      {"allreduce", "one all-reduce over every core of a slice: time, bandwidth, ratio to bound",
       run_allreduce},
      {"layers", "SCALE-Sim topologies on one MXU, timing-only, per-layer cycles", run_layers},
      {"compile", "a zoo model's training step compiled for a core: instructions, HBM, VMEM",
       run_compile},
      {"import",
       "an ONNX model as tpusim imports it: inputs, ops, parameters, FLOPs, what it lacks",
       run_import},
      {"compare", "train on several backends from the same start and compare losses and weights",
       run_compare},
      {"opcheck", "every op forward and backward on each backend against the cpu fp32 reference",
       run_opcheck},
      {"data", "TFRecord files: inspect them, convert MNIST-family IDX, make BERT pretraining",
       run_data},
      {"config", "show, validate and list hardware/slice configs", run_config},
      {"backends", "list backends and whether they can run here", run_backends},
  };
  return kCommands;
}

}  // namespace tpusim::cli
