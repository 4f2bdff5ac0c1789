// tpusim train: the main job. Training arrives with the estimator; until then `tpusim train`
// runs the most complete end-to-end job the tool has and says so.
#include <iostream>

#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"

namespace tpusim::cli {

namespace po = boost::program_options;

int run_train(const std::vector<std::string>& args) {
  po::options_description options("options");
  options.add_options()("config", po::value<std::string>()->default_value("v3-8"),
                        "slice config file or built-in name");
  po::variables_map vm;
  const std::string usage =
      "usage: tpusim train [--config SLICE]\n\n"
      "Trains the default model on a simulated slice. Training is not built yet; until it is,\n"
      "this runs the most complete job tpusim has: it validates the slice config, shows its\n"
      "derived figures, and runs a 2048x2048x2048 GEMM with numerics on core 0 of the slice.\n";
  if (int rc = parse_args(args, options, {}, usage, &vm); rc >= 0) return rc;
  const std::string config = vm["config"].as<std::string>();
  std::cout << "tpusim train: training is not built yet (the estimator comes in a later issue).\n"
               "Running the most complete job available instead: validate the slice config '"
            << config << "', show its figures, and run a GEMM with numerics on its first core.\n\n";
  if (int rc = run_config({"show", config}); rc != kOk) return rc;
  std::cout << "\n$ tpusim matmul --config " << config << " --m 2048 --k 2048 --n 2048\n";
  return run_matmul({"--config", config, "--m", "2048", "--k", "2048", "--n", "2048"});
}

}  // namespace tpusim::cli
