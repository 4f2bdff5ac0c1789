#pragma once
// Sharded TFRecord output, shared by the writers (mnist_records.h, bert_records.h): shard s of N
// holds examples [s*n/N, (s+1)*n/N) and is named <prefix>-<s:05>-of-<N:05>.tfrecord (".gz"/".zz"
// added for GZIP/ZLIB); shards are written by parallel threads, each shard by one thread, so the
// bytes do not depend on how many.

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include <absl/status/status.h>

#include "runtime/data/tfrecord.h"

namespace tpusim::runtime::data {

// "train-00003-of-00010.tfrecord" and its compressed forms.
std::string shard_name(const std::string& prefix, int shard, int shards, Compression compression);

// The examples [first, end) of shard `shard` of `shards` when `count` are split in order.
std::pair<uint64_t, uint64_t> shard_range(uint64_t count, int shard, int shards);

// The writers' shared checks of a plan, before anything is written: `prefix` a file name prefix
// (not empty, no '/', not "." or ".."), so every shard lands in the output folder; `shards` in
// [1, examples], so none is empty; and `examples` x `min_example_bytes` (a lower bound of what the
// shards will hold) within the free disk of `dir` (or of its nearest existing parent).
// InvalidArgument names `prefix_field` or "shards"; ResourceExhausted both sizes.
absl::Status check_shard_plan(const std::string& prefix, const char* prefix_field, int64_t shards,
                              uint64_t examples, uint64_t min_example_bytes,
                              const std::string& dir);

// Creates `dir` (and its parents) when missing; the error names the folder.
absl::Status make_output_dir(const std::string& dir);

// Runs write(s) for every shard s in [0, shards): `threads` at once (0: one per core), never more
// than shards; each worker takes every T-th shard. Returns the first failure in shard order, after
// every shard has run. `write` must only touch what belongs to its shard.
absl::Status write_shards_in_parallel(int shards, int threads,
                                      const std::function<absl::Status(int shard)>& write);

}  // namespace tpusim::runtime::data
