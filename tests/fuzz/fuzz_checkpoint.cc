// Checkpoint files on any bytes, as `evaluate` meets them: the input is the newest (and only)
// checkpoint of a model_dir, model.ckpt-1.tpuckpt, and a TPUEstimator on the cpu backend evaluates
// one step of a small linear model from it: the folder listed, the file loaded (every record,
// size and the header's step against the name checked), its variables restored into the model's
// (names, dtypes and shapes checked), and a batch run on what was restored. Errors are answers; an
// exception or a crash is a finding. The seeds include a checkpoint of this model at step 1, so
// mutations reach the restore and the run.
#include <cstdlib>
#include <filesystem>

#include "estimator/checkpoint.h"
#include "tests/estimator/estimator_test_util.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace tpusim;

// The model_dir each input is written into, and the estimator that evaluates from it (created
// once: building it compiles nothing, each evaluate builds and compiles the eval graph).
struct Evaluator {
  std::string model_dir;
  std::unique_ptr<estimator::TPUEstimator> estimator;
};

Evaluator& evaluator() {
  static Evaluator e = [] {
    Evaluator made;
    made.model_dir =
        std::filesystem::path(fuzz::write_input(nullptr, 0, "ckpt")).string() + "-model_dir";
    std::filesystem::remove_all(made.model_dir);
    std::filesystem::create_directories(made.model_dir);
    using namespace estimator::testing;
    auto est = create_quiet(linear_model(runtime::OptimizerSpec::Kind::kSgd),
                            quiet_run(made.model_dir, "cpu", 1), 8, 8, 8);
    if (!est.ok()) std::abort();
    made.estimator = *std::move(est);
    return made;
  }();
  return e;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Evaluator& e = evaluator();
  const std::string input = fuzz::write_input(data, size, "model.ckpt-1.tpuckpt");
  std::error_code ec;
  std::filesystem::copy_file(input, e.model_dir + "/model.ckpt-1.tpuckpt",
                             std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) return 0;
  (void)e.estimator->evaluate(estimator::testing::eval_input(), 1);
  // evaluate writes its summaries under eval/; one input's must not pile up under the next's.
  std::filesystem::remove_all(e.model_dir + "/eval", ec);
  return 0;
}
