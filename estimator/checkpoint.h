#pragma once
// Checkpoints of a model's variables (docs/estimator.md, "Checkpoints"). A checkpoint is
// model_dir/model.ckpt-<global step>.tpuckpt: a TFRecord file (every record under TensorFlow's
// masked CRC32C) holding a CheckpointHeader record and one VariableRecord per variable, in name
// order (estimator/checkpoint.proto). Saving writes a temporary file, syncs it and renames it
// into place, so a crash never leaves a torn checkpoint; model_dir/checkpoint lists them, newest
// first, like TensorFlow's. Loading checks every CRC, the header (a global step not below 0, and
// the step the file's name carries, model.ckpt-<step>), each
// variable's dtype and size (counted against its bytes, so no claimed shape allocates), no name
// twice and nothing after the last variable, and names the file, record and byte offset of
// anything wrong.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/backend/backend.h"

namespace tpusim::estimator {

struct Checkpoint {
  std::string path;
  int64_t global_step = 0;
  runtime::Variables variables;
};

// Saves `variables` at `global_step`; keeps the newest `keep_max` checkpoints (0: all). Returns
// the checkpoint's path.
absl::StatusOr<std::string> save_checkpoint(const std::string& model_dir, int64_t global_step,
                                            const runtime::Variables& variables, int keep_max);

// Writes one checkpoint file at `path` the same way (temporary file, sync, rename).
absl::Status write_checkpoint(const std::string& path, int64_t global_step,
                              const runtime::Variables& variables);

absl::StatusOr<Checkpoint> load_checkpoint(const std::string& path);
// The newest checkpoint in `model_dir`; nullopt when it has none (or does not exist).
absl::StatusOr<std::optional<Checkpoint>> load_latest_checkpoint(const std::string& model_dir);
// Paths of the checkpoints in `model_dir`, oldest first.
std::vector<std::string> list_checkpoints(const std::string& model_dir);
// The `checkpoint` index in `model_dir`, when there is one: a regular file of at most 1 MiB whose
// every line is `model_checkpoint_path: "NAME"` or `all_model_checkpoint_paths: "NAME"`, the
// former naming one of `checkpoints` (the folder's, as list_checkpoints gives them). DataLoss
// names the file and the line. The newest checkpoint, not the index, decides what loads: a kill
// between a checkpoint's rename and the index's leaves the index a step behind.
absl::Status check_checkpoint_index(const std::string& model_dir,
                                    const std::vector<std::string>& checkpoints);

// Creates `model_dir` when missing and checks that a file can be created in it: an unwritable
// folder is refused before a run trains for nothing (FailedPrecondition names it and the error).
absl::Status check_writable_dir(const std::string& model_dir);

// A 64-bit FNV-1a hash of every variable's name, dtype, shape and bytes in name order, as 16 hex
// digits: equal fingerprints mean bitwise-equal weights.
std::string weights_fingerprint(const runtime::Variables& variables);

}  // namespace tpusim::estimator
