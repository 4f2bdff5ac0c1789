// tpusim evaluate | predict: a zoo model's newest checkpoint in --model-dir, on the Fashion-MNIST
// test set: metrics (evaluate) or per-example classes and probabilities (predict).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "common/strings.h"
#include "configs/loader.h"
#include "estimator/checkpoint.h"
#include "estimator/estimator.h"
#include "estimator/jobs/fashion_job.h"
#include "estimator/jobs/imported_job.h"
#include "estimator/saved_model.h"
#include "runtime/backend/registry.h"
#include "runtime/data/dataset.h"
#include "tools/tpusim/backend_options.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "tools/tpusim/data_options.h"
#include "tools/tpusim/options.h"
#include "tools/tpusim/shared_flags.h"

namespace tpusim::cli {

using jobs::ensure_fashion_mnist;
using jobs::fashion_eval_input;
using jobs::FashionData;
using jobs::use_data_options;
using jobs::zoo_model_fn;
namespace {

namespace po = boost::program_options;

struct Job {
  std::string model;
  FashionData data;
  std::unique_ptr<estimator::TPUEstimator> estimator;
  int64_t batch = 0;                            // global
  std::optional<jobs::ImportedModel> imported;  // --onnx or --saved-model
  std::optional<jobs::ImportedData> named;      // its inputs fed by name; else `data`'s images
  // A folder of the job's own (an imported file's weights), removed with the job.
  std::shared_ptr<const std::string> scratch;
};

// `dir`, removed when the last copy of the pointer goes.
std::shared_ptr<const std::string> scratch_folder(std::string dir) {
  return std::shared_ptr<const std::string>(new std::string(std::move(dir)),
                                            [](const std::string* d) {
                                              std::error_code ec;
                                              std::filesystem::remove_all(*d, ec);
                                              delete d;
                                            });
}

void add_common(po::options_description& options) {
  add_model_flag(options);
  options.add_options()("model-dir", po::value<std::string>(),
                        "where train wrote its checkpoints (with --onnx or --saved-model: none or "
                        "one without a checkpoint runs the file's weights)");
  add_config_flag(options);
  add_batch_size_flag(options);
  add_json_flag(options);
  add_backend_flag(options);
  add_precision_flag(options);
  add_dtype_policy_option(options);
  add_data_options(options);
  add_imported_model_options(options);
}

// An imported model's model_fn, and the model_dir to run: --model-dir when it holds a checkpoint
// (a `train --onnx` or `train --saved-model` run's), else a fresh folder holding the file's
// weights at its global step.
absl::StatusOr<estimator::ModelFn> imported_model(const po::variables_map& vm,
                                                  runtime::models::DTypePolicy policy,
                                                  const jobs::ImportedModel& model,
                                                  FashionData* data,
                                                  const std::optional<jobs::ImportedData>& named,
                                                  estimator::RunConfig* config) {
  if (!named.has_value()) {
    if (auto s = jobs::use_imported_inputs(model, !vm["image-size"].defaulted(), data); !s.ok())
      return s;
  }
  const bool trained = vm.count("model-dir") > 0 &&
                       !estimator::list_checkpoints(vm["model-dir"].as<std::string>()).empty();
  if (trained) {
    config->model_dir = vm["model-dir"].as<std::string>();
  } else {
    config->model_dir =
        (std::filesystem::temp_directory_path() / str_cat("tpusim-imported-weights-", ::getpid()))
            .string();
    std::error_code ec;
    std::filesystem::remove_all(config->model_dir, ec);
    if (auto s = jobs::save_imported_weights(model, config->model_dir); !s.ok()) return s;
  }
  return jobs::imported_model_fn(model, {}, policy);
}

absl::StatusOr<Job> make_job(const po::variables_map& vm) {
  std::optional<jobs::ImportedModel> imported;
  if (Refused r = imported_model_from(vm, &imported)) return absl::InvalidArgumentError(r->message);
  if (vm.count("model-dir") == 0 && !imported.has_value())
    return absl::InvalidArgumentError("--model-dir is required");
  Job job;
  job.model = vm["model"].as<std::string>();
  auto data = fashion_data_from(vm);
  if (!data.ok()) return data.status();
  job.data = *data;
  auto policy = dtype_policy_from(vm);
  if (!policy.ok()) return policy.status();
  estimator::RunConfig config;
  estimator::SimulatorOptions sim;
  estimator::ModelFn model_fn;
  if (!imported.has_value()) {
    if (auto s = check_zoo_inputs(vm, job.data); !s.ok()) return s;
  }
  if (imported.has_value()) {
    if (auto s = jobs::check_imported_policy(*imported, *policy); !s.ok()) return s;
    auto named = named_data_from(vm, job.data, *imported);
    if (!named.ok()) return named.status();
    job.named = *named;
    job.imported = imported;
    auto made = imported_model(vm, *policy, *imported, &job.data, job.named, &config);
    if (!made.ok()) return made.status();
    model_fn = *std::move(made);
    if (vm.count("model-dir") == 0 || config.model_dir != vm["model-dir"].as<std::string>())
      job.scratch = scratch_folder(config.model_dir);
  } else {
    config.model_dir = vm["model-dir"].as<std::string>();
    model_fn = zoo_model_fn(job.model, {}, *policy);
  }
  auto backend = backend_from(vm);
  if (!backend.ok()) return backend.status();
  sim.backend = (*backend)->name;
  sim.slice = vm["config"].as<std::string>();
  auto precision = precision_from(vm, **backend);
  if (!precision.ok()) return precision.status();
  sim.compile.precision = *precision;
  if ((*backend)->supports.runs_a_slice) {
    auto replicas = run_replicas(**backend, sim.slice);
    if (!replicas.ok()) return replicas.status();
    config.tpu_config.num_shards = *replicas;
  }
  sim.log = [](const std::string&) {};
  if (vm.count("profile") > 0 && vm["profile"].as<bool>()) {
    if (job.scratch != nullptr) {
      return absl::InvalidArgumentError(
          "--profile writes under --model-dir: give one (the file's weights run from a scratch "
          "folder, removed at the end)");
    }
    sim.profile = true;
    runtime::RunFeatures features;
    features.profile = true;
    if (auto s = runtime::check_registered_options(sim.backend, sim.compile, features,
                                                   runtime::OptionNames::kFlags);
        !s.ok()) {
      return s;
    }
  }
  use_data_options(job.data, &sim);
  int64_t batch = vm["batch-size"].as<int64_t>();
  if (imported.has_value()) {  // a saved model's graph fixes the batch a replica
    auto fits = jobs::imported_global_batch(*imported, batch, !vm["batch-size"].defaulted(),
                                            config.tpu_config.num_shards);
    if (!fits.ok()) return fits.status();
    batch = *fits;
  }
  job.batch = batch;
  auto est = estimator::TPUEstimator::create(model_fn, config, {}, true, batch, batch, batch, sim);
  if (!est.ok()) return est.status();
  job.estimator = *std::move(est);
  if (job.named.has_value()) return job;
  if (auto s = ensure_fashion_mnist(job.data, log_to_stderr); !s.ok()) return s;
  return job;
}

// The job's evaluation input: the Fashion-MNIST test set, or an imported model's records.
estimator::InputFn eval_input(const Job& job) {
  return job.named.has_value() ? jobs::imported_eval_input(*job.imported, *job.named)
                               : fashion_eval_input(job.data);
}

// How many examples that input holds.
absl::StatusOr<int64_t> eval_examples(const Job& job) {
  return job.named.has_value() ? jobs::imported_eval_examples(*job.named)
                               : absl::StatusOr<int64_t>(10000);
}

// The first `count` test images, one example each, with their labels.
absl::StatusOr<std::vector<runtime::data::Element>> test_images(const FashionData& data,
                                                                int64_t count) {
  if (auto s = ensure_fashion_mnist(data, log_to_stderr); !s.ok()) return s;
  estimator::Params one;
  one.batch_size = 1;
  auto ds = fashion_eval_input(data)(one);
  if (!ds.ok()) return ds.status();
  auto batches = runtime::data::collect(*(*ds)->take(count));
  if (!batches.ok()) return batches.status();
  for (auto& e : *batches) {
    for (auto& [name, v] : e) v.shape.erase(v.shape.begin());  // drop the batch of 1
  }
  return batches;
}

// Example `k`'s values of a prediction output holding `batch` examples.
nlohmann::ordered_json example_values(const runtime::HostTensor& t, size_t k, int64_t batch) {
  const size_t n = static_cast<size_t>(t.elements() / batch);
  nlohmann::ordered_json values = nlohmann::ordered_json::array();
  for (size_t j = 0; j < n; ++j) {
    if (t.dtype == runtime::DType::kS32) {
      values.push_back(t.i[k * n + j]);
    } else {
      values.push_back(t.f[k * n + j]);
    }
  }
  return n == 1 ? values[0] : values;
}

// The probability of example `i`'s predicted class `cls` among the `classes` at `row`, or an error
// naming the example when the class is none of them (reading it would read past the row) or the
// probabilities are not numbers: a model whose training diverged predicts NaN, and its class is
// the argmax of NaN (the first, as XLA's), which means nothing.
absl::StatusOr<float> class_probability(const float* row, size_t classes, int32_t cls, int64_t i) {
  const bool nan = std::any_of(row, row + classes, [](float p) { return std::isnan(p); });
  const bool inside = cls >= 0 && static_cast<size_t>(cls) < classes;
  if (inside && !nan) return row[cls];
  const char* why = "the model's outputs are not numbers, as after a training run that diverged";
  if (inside) {
    return absl::InvalidArgumentError(
        fmt::format("example {}: the model's {} probabilities are NaN ({}); its class, {}, is the "
                    "argmax of NaN",
                    i, classes, why, cls));
  }
  return absl::InvalidArgumentError(
      fmt::format("example {}: the model predicts class {}, outside its {} probabilities{}", i, cls,
                  classes, nan ? fmt::format(" (they are NaN: {})", why) : ""));
}

void print_predictions(const nlohmann::ordered_json& out, bool json) {
  if (json) {
    std::cout << json_text(out) << "\n";
    return;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].contains("probability")) {  // a user's model's predictions, as they are
      std::cout << fmt::format("{:5}  {}\n", i, json_text(out[i], -1));
      continue;
    }
    std::cout << fmt::format("{:5}  class {}  p={:.3f}", i, out[i]["class"].get<int>(),
                             out[i]["probability"].get<double>());
    if (out[i].contains("label"))
      std::cout << fmt::format("  (label {})", out[i]["label"].get<int>());
    std::cout << "\n";
  }
}

// A saved model needs no model code: its graph, signature and weights are in the folder.
int predict_saved_model(const po::variables_map& vm, int64_t count) {
  auto model = estimator::load_saved_model(vm["saved-model"].as<std::string>());
  if (!model.ok()) return failure(std::string(model.status().message()));
  const auto& names = model->predictions;
  const bool classifier = std::count(names.begin(), names.end(), "class") == 1 &&
                          std::count(names.begin(), names.end(), "probabilities") == 1;
  if (classifier) {
    if (auto s = estimator::check_classifier(*model, vm["saved-model"].as<std::string>()); !s.ok())
      return failure(std::string(s.message()));
  }
  if (model->inputs.size() != 1 || model->inputs[0].name != "image" ||
      model->inputs[0].dtype != runtime::DType::kF32) {
    return failure(
        "the saved model's input must be one f32 \"image\" (a Fashion-MNIST model's pixels)");
  }
  auto data = fashion_data_from(vm);
  if (!data.ok()) return failure(std::string(data.status().message()));
  auto images = test_images(*data, count);
  if (!images.ok()) return failure(std::string(images.status().message()));
  // A count past the test set predicts the set, as the zoo's and ONNX models' paths do.
  count = std::min<int64_t>(count, static_cast<int64_t>(images->size()));
  runtime::BackendArgs backend_args;
  backend_args.slice = vm["config"].as<std::string>();
  auto made = runtime::make_backend(vm["backend"].as<std::string>(), backend_args);
  if (!made.ok()) return failure(std::string(made.status().message()));
  std::unique_ptr<runtime::Backend> backend = *std::move(made);
  auto precision = precision_from(vm, backend->declaration());
  if (!precision.ok()) return failure(std::string(precision.status().message()));
  runtime::CompileOptions compile;
  compile.precision = *precision;
  auto exe = backend->compile(model->graph, compile);
  if (!exe.ok()) return failure(std::string(exe.status().message()));
  const int64_t batch = model->batch_size;
  const runtime::Shape& shape = model->inputs[0].shape;
  const int64_t per_image = shape.elements() / batch;
  std::vector<runtime::Feeds> steps;
  for (int64_t first = 0; first < count; first += batch) {
    runtime::HostTensor t = runtime::HostTensor::zeros(runtime::DType::kF32, shape);
    for (int64_t k = 0; k < batch && first + k < count; ++k) {
      const auto& pixels = (*images)[static_cast<size_t>(first + k)].at("image").floats;
      if (static_cast<int64_t>(pixels.size()) != per_image) {
        return failure(fmt::format(
            "the saved model's image input is {} per example but the test images have {} values "
            "(pass the --input and --image-size it was trained with)",
            shape.str(), pixels.size()));
      }
      std::copy(pixels.begin(), pixels.end(), t.f.begin() + k * per_image);
    }
    steps.push_back({{"image", std::move(t)}});
  }
  auto outputs = backend->run(**exe, model->variables, steps, 0);
  if (!outputs.ok()) return failure(std::string(outputs.status().message()));
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (int64_t i = 0; i < count; ++i) {
    const auto& o = (*outputs)[static_cast<size_t>(i / batch)];
    const auto k = static_cast<size_t>(i % batch);
    const int32_t label = (*images)[static_cast<size_t>(i)].at("label").ints[0];
    if (!classifier) {  // a user's model: each prediction's values for this example
      nlohmann::ordered_json example;
      for (const std::string& name : names)
        example[name] = example_values(o.at("prediction/" + name), k, batch);
      example["label"] = label;
      out.push_back(example);
      continue;
    }
    const runtime::HostTensor& probabilities = o.at("prediction/probabilities");
    const size_t classes = probabilities.f.size() / static_cast<size_t>(batch);
    const int32_t cls = o.at("prediction/class").i[k];
    auto probability = class_probability(probabilities.f.data() + k * classes, classes, cls, i);
    if (!probability.ok()) return failure(std::string(probability.status().message()));
    out.push_back({{"class", cls}, {"probability", *probability}, {"label", label}});
  }
  print_predictions(out, vm["json"].as<bool>());
  return kOk;
}

}  // namespace

int run_evaluate(const std::vector<std::string>& args) {
  po::options_description options("options");
  add_common(options);
  add_eval_steps_flag(options);
  options.add_options()("profile", po::bool_switch(),
                        "write an XProf profile of the eval loop to "
                        "MODEL_DIR/plugins/profile/RUN/HOST.xplane.pb (xprof --logdir MODEL_DIR)");
  const std::string usage =
      "usage: tpusim evaluate (--model-dir DIR [--model NAME] | --onnx FILE [--model-dir DIR] |\n"
      "                        --saved-model DIR [--model-dir DIR])\n"
      "                       [--data DIR] [--config SLICE |\n"
      "                       --backend cpu|gpu [--precision mxu|fp32]] [--batch-size N]\n"
      "                       [--eval-steps N] [--profile] [--json]\n\n"
      "Evaluates the newest checkpoint in DIR on the Fashion-MNIST test set: accuracy, loss.\n"
      "An imported model (--onnx, --saved-model) without a trained DIR is evaluated with its\n"
      "file's weights.\n";
  po::variables_map vm;
  if (int rc = parse_args(args, options, {}, usage, &vm); rc >= 0) return rc;
  auto job = make_job(vm);
  if (!job.ok()) return failure(std::string(job.status().message()));
  int64_t steps = vm["eval-steps"].as<int64_t>();
  if (steps <= 0) {
    auto examples = eval_examples(*job);
    if (!examples.ok()) return failure(std::string(examples.status().message()));
    steps = *examples / job->batch;
    if (steps == 0) {
      return failure(str_cat("the evaluation records hold ", *examples,
                             " examples, not a whole global batch of ", job->batch));
    }
  }
  auto result = job->estimator->evaluate_with_analysis(eval_input(*job), steps);
  if (!result.ok()) return failure(std::string(result.status().message()));
  if (vm["json"].as<bool>()) {
    // The metrics at the top level, and where the eval loop's simulated time went.
    nlohmann::ordered_json out(result->metrics);
    if (result->analysis.has_value()) out["analysis"] = result->analysis->to_json();
    if (!result->profile_path.empty()) out["profile"] = result->profile_path;
    std::cout << json_text(out) << "\n";
  } else {
    size_t width = 12;  // the names in a column, the values after them
    for (const auto& [name, value] : result->metrics) width = std::max(width, name.size() + 1);
    for (const auto& [name, value] : result->metrics)
      std::cout << fmt::format("{:{}} {}\n", name, width, value);
    if (result->analysis.has_value()) std::cout << "\n" << result->analysis->to_text();
    if (!result->profile_path.empty()) {
      std::cout << fmt::format("profile: {} (xprof --logdir {})\n", result->profile_path,
                               vm["model-dir"].as<std::string>());
    }
  }
  return kOk;
}

int run_predict(const std::vector<std::string>& args) {
  po::options_description options("options");
  add_common(options);
  options.add_options()("count", po::value<int64_t>()->default_value(10),
                        "predict the first N test images");
  const std::string usage =
      "usage: tpusim predict (--model-dir DIR [--model NAME] | --onnx FILE [--model-dir DIR] |\n"
      "                       --saved-model DIR) [--count N]\n"
      "                      [--data DIR] [--config SLICE | --backend cpu|gpu [--precision "
      "mxu|fp32]]\n"
      "                      [--batch-size N] [--json]\n\n"
      "Predicts the first N Fashion-MNIST test images with the newest checkpoint in DIR: each\n"
      "one's class, probability and true label.\n";
  po::variables_map vm;
  if (int rc = parse_args(args, options, {}, usage, &vm); rc >= 0) return rc;
  const int64_t count = vm["count"].as<int64_t>();
  if (count < 1) return usage_error("--count must be >= 1", usage);
  const bool from_records = input_kind_from(vm).value_or(InputKind::kRaw) == InputKind::kExamples;
  if (vm.count("saved-model") > 0 && !from_records) return predict_saved_model(vm, count);
  auto job = make_job(vm);
  if (!job.ok()) return failure(std::string(job.status().message()));
  estimator::InputFn input =
      [eval = eval_input(*job),
       count](const estimator::Params& p) -> absl::StatusOr<runtime::data::DatasetPtr> {
    estimator::Params one = p;
    one.batch_size = 1;  // unbatch: the eval input at batch 1, then re-batched with padding
    auto examples = eval(one);
    if (!examples.ok()) return examples.status();
    return (*examples)
        ->take(count)
        ->map([](runtime::data::Element e) -> absl::StatusOr<runtime::data::Element> {
          for (auto& [name, v] : e) v.shape.erase(v.shape.begin());  // drop the batch of 1
          return e;
        })
        ->batch(p.batch_size, false, /*pad_to_full=*/true);
  };
  auto predictions = job->estimator->predict(input);
  if (!predictions.ok()) return failure(std::string(predictions.status().message()));
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& p : *predictions) {
    if (p.count("class") == 0 || p.count("probabilities") == 0) {  // a model's outputs, as they are
      nlohmann::ordered_json example;
      for (const auto& [name, t] : p) example[name] = example_values(t, 0, 1);
      out.push_back(example);
      continue;
    }
    const auto& probs = p.at("probabilities").f;
    auto probability = class_probability(probs.data(), probs.size(), p.at("class").i[0],
                                         static_cast<int64_t>(out.size()));
    if (!probability.ok()) return failure(std::string(probability.status().message()));
    out.push_back({{"class", p.at("class").i[0]}, {"probability", *probability}});
  }
  print_predictions(out, vm["json"].as<bool>());
  return kOk;
}

}  // namespace tpusim::cli
