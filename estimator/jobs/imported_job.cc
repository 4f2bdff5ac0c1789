#include "estimator/jobs/imported_job.h"

#include "common/strings.h"
#include "estimator/checkpoint.h"

namespace tpusim::jobs {

absl::StatusOr<ImageLayout> image_geometry(const std::string& path, const std::string& name,
                                           runtime::DType dtype, const std::vector<int64_t>& d,
                                           ImportedModel* model) {
  if (dtype != runtime::DType::kF32) {
    return absl::InvalidArgumentError(str_cat(path, ": input '", name, "' is ",
                                              runtime::dtype_name(dtype), runtime::Shape(d).str(),
                                              "; tpusim feeds images: float with the batch first"));
  }
  if (d.size() == 4 && d[1] == d[2] && d[3] <= 4) {
    model->image_side = d[1];
    model->image_channels = d[3];
    return ImageLayout::kNHWC;
  }
  if (d.size() == 4 && d[2] == d[3] && d[1] <= 4) {
    model->image_side = d[2];
    model->image_channels = d[1];
    return ImageLayout::kNCHW;
  }
  if (d.size() == 2 && d[1] == 784) {
    model->image_side = 28;
    model->image_channels = 1;
    return ImageLayout::kFlat;
  }
  return absl::InvalidArgumentError(
      str_cat(path, ": input '", name, "' is ", runtime::Shape(d).str(),
              " a batch; tpusim feeds square images, [N, H, W, C] or [N, C, H, W] with at most "
              "4 channels, or flat 28x28 ones [N, 784]"));
}

absl::Status use_imported_inputs(const ImportedModel& model, bool side_given, FashionData* data) {
  const std::string size =
      str_cat(model.image_side, "x", model.image_side, "x", model.image_channels);
  if (data->synthetic) {
    if (side_given && data->image_size != model.image_side)
      return absl::InvalidArgumentError(str_cat(model.path, " takes ", size, " images"));
    data->image_size = static_cast<int>(model.image_side);
    data->channels = static_cast<int>(model.image_channels);
    data->classes = static_cast<int>(model.classes);
    return absl::OkStatus();
  }
  if (data->image_size != model.image_side || data->channels != model.image_channels) {
    return absl::InvalidArgumentError(
        str_cat(model.path, " takes ", size, " images; the data's are ", data->image_size, "x",
                data->image_size, "x", data->channels, " (--input synthetic makes the model's)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> imported_global_batch(const ImportedModel& model, int64_t global,
                                              bool global_given, int64_t replicas) {
  if (model.fixed_batch == 0) return global;
  const int64_t fits = model.fixed_batch * replicas;
  if (!global_given || global == fits) return fits;
  return absl::InvalidArgumentError(str_cat(model.path, "'s graph takes ", model.fixed_batch,
                                            " examples a replica (its shapes are fixed "
                                            "when it is exported); on ",
                                            replicas, replicas == 1 ? " replica" : " replicas",
                                            " that is a batch of ", fits, ", not ", global));
}

absl::Status check_imported_policy(const ImportedModel& model,
                                   runtime::models::DTypePolicy policy) {
  if (!model.own_dtypes || policy == runtime::models::DTypePolicy::kFloat32)
    return absl::OkStatus();
  return absl::InvalidArgumentError(str_cat(
      model.path,
      ": a saved model's graph keeps the dtypes it was exported with; run it under "
      "--dtype-policy float32 (an export made under mixed_bfloat16 computes in bf16 inside)"));
}

estimator::ModelFn imported_model_fn(const ImportedModel& model, runtime::OptimizerSpec optimizer,
                                     runtime::models::DTypePolicy policy) {
  const bool mixed = policy == runtime::models::DTypePolicy::kMixedBFloat16;
  return [model, optimizer, mixed](
             runtime::GraphBuilder& b, const estimator::Features& f,
             std::optional<runtime::Value> labels, estimator::Mode mode,
             const estimator::Params& params) -> absl::StatusOr<estimator::TPUEstimatorSpec> {
    runtime::Value images = f.at("image");
    if (mixed) images = b.cast(images, runtime::DType::kBF16);
    auto forward =
        model.forward(b, images, {params.batch_size, mode == estimator::Mode::kTrain, mixed});
    if (!forward.ok()) return forward.status();
    estimator::TPUEstimatorSpec spec = classifier_spec(b, forward->logits, labels, mode, optimizer);
    // The file's weights, in place of the variables' initializers.
    spec.init_fn = [values = std::move(forward->initial_values)](runtime::Variables* variables) {
      for (const auto& [name, value] : values) {
        auto it = variables->find(name);
        if (it == variables->end())
          return absl::InternalError(str_cat("no variable '", name, "' to start from the file"));
        it->second.f = value.f;
        it->second.i = value.i;
      }
      return absl::OkStatus();
    };
    return spec;
  };
}

absl::Status save_imported_weights(const ImportedModel& model, const std::string& model_dir) {
  runtime::GraphBuilder b;
  const int64_t batch = model.fixed_batch > 0 ? model.fixed_batch : 1;
  const runtime::Value images =
      b.infeed("image", runtime::DType::kF32,
               {batch, model.image_side, model.image_side, model.image_channels});
  auto forward = model.forward(b, images, {batch, false, false});
  if (!forward.ok()) return forward.status();
  auto saved = estimator::save_checkpoint(model_dir, model.global_step, forward->initial_values, 1);
  return saved.ok() ? absl::OkStatus() : saved.status();
}

absl::StatusOr<std::string> choose_name(const std::vector<std::string>& names,
                                        const std::string& name, const std::string& what,
                                        const std::string& path, const std::string& flag) {
  for (const std::string& n : names) {
    if ((name.empty() && names.size() == 1) || n == name) return n;
  }
  return absl::InvalidArgumentError(
      name.empty()
          ? str_cat(path, " has ", names.size(), " ", what, "s (", str_join(names, ", "),
                    "): choose one with ", flag)
          : str_cat(path, " has no ", what, " '", name, "' (it has ", str_join(names, ", "), ")"));
}

}  // namespace tpusim::jobs
