// What issue 57's hostile-input probe found, each now a clean refusal naming its input: a saved
// model whose prediction points at the wrong node (a crash), index fields past 2^31, sizes flags
// and headers imply checked against the host's memory and disk before anything is allocated or
// written, a checkpoint whose header's step is not its name's, bytes after what a trace reader
// parses, shard plans with empty shards or a prefix that leaves the folder, negative counts,
// a sweep metric no report has, and filesystem errors named as what they are.
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <google/protobuf/unknown_field_set.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "estimator/checkpoint.h"
#include "estimator/checkpoint.pb.h"
#include "estimator/saved_model.h"
#include "estimator/saved_model.pb.h"
#include "runtime/data/tfrecord.h"
#include "runtime/graph/builder.h"
#include "tests/tools/cli_runner.h"
#include "tests/tools/hostile_inputs.h"

namespace tpusim::cli {
namespace cli_hostile_inputs_ii_test {

using ::testing::HasSubstr;
using testing::run_tpusim;

using testing::kGiB;
using testing::read_file;
using testing::refusal;
using testing::write_file;

std::filesystem::path scratch(const std::string& name) {
  return testing::hostile_scratch("ii-" + name);
}

// A classifier of four 28x28 images: probabilities f32[4, 28] (its rows' sums), class s32[4].
void write_classifier(const std::string& dir) {
  runtime::GraphBuilder b;
  const runtime::Value image = b.infeed("image", runtime::DType::kF32, {4, 28, 28, 1});
  const runtime::Value rows = b.reduce(runtime::Op::kReduceSum, image, {2, 3});
  b.output("prediction/probabilities", rows);
  b.output("prediction/class", b.argmax(rows, 1));
  ASSERT_TRUE(b.status().ok()) << b.status();
  ASSERT_TRUE(estimator::write_saved_model(dir, b.graph(), {},
                                           {{"image", runtime::DType::kF32, {4, 28, 28, 1}}},
                                           {"class", "probabilities"}, 4, 0)
                  .ok());
}

estimator::SavedModel read_saved(const std::string& dir) {
  estimator::SavedModel m;
  EXPECT_TRUE(m.ParseFromString(read_file(dir + "/saved_model.pb")));
  return m;
}

// `predict --saved-model` with the output "prediction/<name>" pointed at node `node`: with node 0
// (the image) as its class it read an s32 value that was f32 and crashed, as did nodes 1 and 23
// of the probe's model (here 1 and 2 are the rows and the class) and 2^32 + 24 (an int32 field kept
// its low bits); 2^63 read as node 0.
TEST(HostileInputs2, ASavedModelsPredictionAtTheWrongNodeIsRefused) {
  const auto dir = scratch("saved");
  const std::string saved = (dir / "saved").string(), data = (dir / "data").string();
  write_classifier(saved);
  const estimator::SavedModel good = read_saved(saved);
  const auto predict = [&](const std::string& output, int64_t node) {
    estimator::SavedModel m = good;
    for (auto& o : *m.mutable_graph()->mutable_output())
      if (o.name() == output) o.set_node(node);
    write_file(saved + "/saved_model.pb", m.SerializeAsString());
    return refusal(
        {"predict", "--saved-model", saved, "--data", data, "--count", "2", "--backend", "cpu"});
  };
  EXPECT_THAT(predict("prediction/class", 0),
              HasSubstr("saved_model.pb: prediction 'class' is f32[4, 28, 28, 1], where a "
                        "classifier's is s32[batch]"));
  EXPECT_THAT(predict("prediction/class", 1),
              HasSubstr("prediction 'class' is f32[4, 28], where a classifier's is s32[batch]"));
  EXPECT_THAT(predict("prediction/probabilities", 2),
              HasSubstr("prediction 'probabilities' is s32[4], where a classifier's is "
                        "f32[batch, classes]"));
  EXPECT_THAT(predict("prediction/class", (int64_t{1} << 32) + 2),
              HasSubstr("output 'prediction/class' names no node"));
  EXPECT_THAT(predict("prediction/probabilities", INT64_MIN),  // 2^63 on the wire
              HasSubstr("output 'prediction/probabilities' names no node"));

  // A node without the batch first, and a prediction listed twice, refused by every command.
  runtime::GraphBuilder b;
  const runtime::Value image = b.infeed("image", runtime::DType::kF32, {4, 28, 28, 1});
  b.output("prediction/total", b.reduce(runtime::Op::kReduceSum, image, {0, 1, 2, 3}));
  ASSERT_TRUE(estimator::write_saved_model(saved, b.graph(), {},
                                           {{"image", runtime::DType::kF32, {4, 28, 28, 1}}},
                                           {"total"}, 4, 0)
                  .ok());
  for (const char* command : {"predict", "evaluate", "train"}) {
    EXPECT_THAT(refusal({command, "--saved-model", saved, "--backend", "cpu", "--model-dir",
                         (dir / command).string()}),
                HasSubstr("prediction 'total' is graph node 1, f32[], which does not have the "
                          "batch (4) first"));
  }
  write_classifier(saved);
  estimator::SavedModel twice = read_saved(saved);
  twice.add_predictions("class");
  write_file(saved + "/saved_model.pb", twice.SerializeAsString());
  EXPECT_THAT(refusal({"predict", "--saved-model", saved, "--backend", "cpu"}),
              HasSubstr("prediction 'class' is listed twice"));

  // Bytes protobuf parses as a field the schema does not have (field 99, varint 1), at the top
  // and inside the graph's third node: kept and read around before, now refused by name.
  write_classifier(saved);
  const std::string unknown = "\x98\x06\x01";
  write_file(saved + "/saved_model.pb", read_file(saved + "/saved_model.pb") + unknown);
  EXPECT_THAT(refusal({"predict", "--saved-model", saved, "--backend", "cpu"}),
              HasSubstr("saved_model.pb: field #99 is not in tpusim's saved model schema"));
  write_classifier(saved);
  estimator::SavedModel odd = read_saved(saved);
  runtime::NodeDef* node = odd.mutable_graph()->mutable_node(2);
  node->GetReflection()->MutableUnknownFields(node)->AddVarint(99, 1);
  write_file(saved + "/saved_model.pb", odd.SerializeAsString());
  EXPECT_THAT(refusal({"predict", "--saved-model", saved, "--backend", "cpu"}),
              HasSubstr("field graph.node[2].#99 is not in tpusim's saved model schema"));
  std::filesystem::remove_all(dir);
}

// The third probe (2026-12-02): a saved model whose signature lists no predictions printed the
// labels alone, and one whose image input the signature calls s32 was fed f32 pixels.
TEST(HostileInputs2, ASavedModelOfNoPredictionsOrAMistypedInputIsRefused) {
  const auto dir = scratch("signature");
  const std::string saved = (dir / "saved").string();
  write_classifier(saved);
  estimator::SavedModel none = read_saved(saved);
  none.clear_predictions();
  write_file(saved + "/saved_model.pb", none.SerializeAsString());
  EXPECT_THAT(refusal({"predict", "--saved-model", saved, "--backend", "cpu"}),
              HasSubstr("saved_model.pb: declares no predictions; there is nothing to predict"));
  write_classifier(saved);
  estimator::SavedModel mistyped = read_saved(saved);
  mistyped.mutable_inputs(0)->set_dtype("s32");
  write_file(saved + "/saved_model.pb", mistyped.SerializeAsString());
  EXPECT_THAT(refusal({"predict", "--saved-model", saved, "--backend", "cpu"}),
              HasSubstr("saved_model.pb: input 'image' is s32 in the signature, f32 in the graph"));
  std::filesystem::remove_all(dir);
}

// A checkpoint's header step (CRC valid) believed over its name: model.ckpt-4 saying 10 made
// train say "nothing to train", and with the field removed (0) train re-ran steps 1-4.
TEST(HostileInputs2, ACheckpointWhoseHeaderStepIsNotItsNamesIsRefused) {
  const auto dir = scratch("ckpt-step");
  runtime::Variables v;
  v["w"] = runtime::HostTensor::from({2}, {1, 2});
  const std::string path = (dir / "model.ckpt-4.tpuckpt").string();
  for (const int64_t step : {int64_t{10}, int64_t{0}, (int64_t{1} << 32) + 4}) {
    ASSERT_TRUE(estimator::write_checkpoint(path, step, v).ok());
    const auto loaded = estimator::load_checkpoint(path);
    ASSERT_FALSE(loaded.ok());
    EXPECT_THAT(std::string(loaded.status().message()),
                HasSubstr("model.ckpt-4.tpuckpt: the header's global_step is " +
                          std::to_string(step) + " where the file's name says 4"));
  }
  ASSERT_TRUE(estimator::write_checkpoint(path, 4, v).ok());
  EXPECT_TRUE(estimator::load_checkpoint(path).ok());
  // A header (its CRCs valid) with a field a CheckpointHeader does not have.
  estimator::CheckpointHeader header;
  header.set_format_version(1);
  header.set_global_step(4);
  header.GetReflection()->MutableUnknownFields(&header)->AddVarint(99, 1);
  {
    auto writer = runtime::data::TFRecordWriter::open(path);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->write(header.SerializeAsString()).ok());
    ASSERT_TRUE((*writer)->close().ok());
  }
  const auto odd = estimator::load_checkpoint(path);
  ASSERT_FALSE(odd.ok());
  EXPECT_THAT(std::string(odd.status().message()),
              HasSubstr("the header's field #99 is not a CheckpointHeader's"));
  std::filesystem::remove_all(dir);
}

// --iterations-per-loop 10^8 (timing-only) ended in std::bad_alloc after the infeed driver had
// converted gigabytes of a loop's input; a batch of 2^20 images grew to 3.3 GB before it was
// refused. Both are now refused before the loop's input is pulled, and a loop of batches that
// fit one at a time but not together before its first batch is assembled.
TEST(HostileInputs2, ALoopOrBatchLargerThanTheHostsMemoryIsRefusedBeforeItsInput) {
  const auto dir = scratch("loop");
  EXPECT_THAT(
      refusal({"train", "--model", "mlp", "--timing-only", "--train-steps", "100000000",
               "--iterations-per-loop", "100000000", "--model-dir", (dir / "run").string()}),
      HasSubstr("batch: a loop of 100000000 steps (tpu_config.iterations_per_loop) of 8 "
                "replicas' feeds (800000000 batches of 128 elements of 3.15 kB) and 1 batch in "
                "flight, each held twice while stacked, needs 322.97 TB, over this host's "
                "memory budget of"));
  if (!testing::kUnderSanitizer) {
    EXPECT_THAT(refusal({"train", "--model", "mlp", "--backend", "cpu", "--train-steps", "1",
                         "--batch-size", "8388608", "--model-dir", (dir / "big").string()},
                        4 * kGiB),
                HasSubstr("(8 batches of 1048576 elements of 3.15 kB) and 1 batch in flight"));
    // The loop's eight per-shard batches are counted at the first element, before the first
    // batch of 131,072 is assembled (it took 5 s and 1.7 GB to be refused after it).
    EXPECT_THAT(refusal({"train", "--model", "mlp", "--train-steps", "2", "--iterations-per-loop",
                         "1", "--batch-size", "1048576", "--model-dir", (dir / "loop").string()},
                        4 * kGiB),
                HasSubstr("batch: a loop of 1 steps (tpu_config.iterations_per_loop) of 8 "
                          "replicas' feeds (8 batches of 131072 elements of 3.15 kB) and 1 batch "
                          "in flight, each held twice while stacked, needs 4.13 GB, over this "
                          "host's memory budget of"));
  }
  std::filesystem::remove_all(dir);
}

// `data make-bert --examples 2^63-1` wrote until the disk was full; convert-idx wrote 100,000
// files for 20 examples, an empty shard for --shards 21, and a --prefix of ../../escape outside
// --out.
TEST(HostileInputs2, ShardPlansAreCheckedBeforeAnythingIsWritten) {
  const auto dir = scratch("shards");
  EXPECT_THAT(refusal({"data", "make-bert", "--out", (dir / "bert").string(), "--examples",
                       "9223372036854775807"}),
              HasSubstr("9223372036854775807 examples of at least 384 bytes writes more than 18 "
                        "EB into"));
  EXPECT_FALSE(std::filesystem::exists(dir / "bert"));
  const std::string images = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";
  const std::string labels = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz";
  if (std::filesystem::exists(images)) {
    const std::vector<std::string> idx = {
        "data", "convert-idx", "--images", images,  "--labels",
        labels, "--limit",     "20",       "--out", (dir / "idx").string()};
    auto with = [&](std::vector<std::string> extra) {
      std::vector<std::string> args = idx;
      args.insert(args.end(), extra.begin(), extra.end());
      return refusal(args);
    };
    EXPECT_THAT(with({"--shards", "100000"}),
                HasSubstr("shards must be 1..20 (the examples: no empty shard), not 100000"));
    EXPECT_THAT(with({"--shards", "21"}), HasSubstr("shards must be 1..20"));
    EXPECT_THAT(with({"--prefix", "../../escape"}),
                HasSubstr("prefix must be a file name prefix (no '/', not . or ..), not "
                          "'../../escape'"));
    EXPECT_FALSE(std::filesystem::exists(dir / "idx"));
  }
  std::filesystem::remove_all(dir);
}

// Bytes after what a reader parses: a Chrome JSON trace followed by "\0garbage" was read up to the
// NUL; two Perfetto traces concatenated listed every host stage twice; a SCALE-Sim field
// "1\0" "28" read as 1.
TEST(HostileInputs2, BytesAfterWhatAReaderParsesAreRefused) {
  const auto dir = scratch("trailing");
  const std::string json = (dir / "t.json").string(), perfetto = (dir / "t.pftrace").string();
  for (const std::string& trace : {json, perfetto}) {
    const auto r =
        run_tpusim({"train", "--model", "mlp", "--timing-only", "--train-steps", "1",
                    "--iterations-per-loop", "1", "--model-dir",
                    (dir / ("run" + std::to_string(trace.size()))).string(), "--trace", trace});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  const std::string text = read_file(json);
  write_file(json, text + std::string("\0garbage", 8));
  EXPECT_THAT(refusal({"analyze", json}), HasSubstr("byte offset " + std::to_string(text.size()) +
                                                    ": a NUL byte, which JSON text cannot hold"));
  write_file(perfetto, read_file(perfetto) + read_file(perfetto));
  EXPECT_THAT(refusal({"analyze", perfetto}),
              HasSubstr("is declared again (two traces concatenated? each declares its tracks "
                        "once)"));
  const std::string csv = (dir / "topology.csv").string();
  write_file(csv,
             "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, "
             "Num Filter, Strides,\nconv1, 1" +
                 std::string(1, '\0') + "28, 28, 3, 3, 1, 8, 1,\n");
  EXPECT_THAT(refusal({"layers", "--topology", csv}), HasSubstr("topology.csv:2: field 2 (\""));
  std::filesystem::remove_all(dir);
}

// Negative counts: --eval-steps -1 was taken as 0 by train and evaluate.
TEST(HostileInputs2, NegativeCountsAreRefusedForSignedFlagsToo) {
  for (const char* command : {"train", "evaluate"}) {
    EXPECT_THAT(refusal({command, "--model", "mlp", "--eval-steps", "-1"}),
                HasSubstr("--eval-steps takes a number >= 0 (got -1)"));
  }
  EXPECT_THAT(refusal({"data", "make-bert", "--out", "x", "--examples", "-5"}),
              HasSubstr("--examples takes a number >= 0 (got -5)"));
}

// `sweep --metric bogus` printed a table of "-" and exited 0.
TEST(HostileInputs2, ASweepMetricNoReportHasIsAnError) {
  const auto dir = scratch("metric");
  EXPECT_THAT(refusal({"sweep", "--set", "chip.hbm.bandwidth_gb_per_s=900", "--out",
                       (dir / "sweep").string(), "--metric", "bogus", "--", "matmul", "--m", "128",
                       "--n", "128", "--k", "128"}),
              HasSubstr("--metric bogus: no point's report has a number there (its columns "
                        "include m, k, n"));
  std::filesystem::remove_all(dir);
}

// Filesystem errors were "internal error: filesystem error: ...": a newest checkpoint that is a
// symlink loop, and sweep --out onto a regular file.
TEST(HostileInputs2, FilesystemErrorsAreNamedAsWhatTheyAre) {
  const auto dir = scratch("fs");
  std::filesystem::create_directories(dir / "run");
  std::filesystem::create_symlink("model.ckpt-9.tpuckpt", dir / "run" / "model.ckpt-9.tpuckpt");
  EXPECT_THAT(refusal({"evaluate", "--model", "mlp", "--backend", "cpu", "--model-dir",
                       (dir / "run").string()}),
              HasSubstr("model.ckpt-9.tpuckpt: Too many levels of symbolic links"));
  write_file(dir / "file", "x");
  EXPECT_THAT(
      refusal({"sweep", "--set", "chip.hbm.bandwidth_gb_per_s=900", "--out",
               (dir / "file").string(), "--", "matmul", "--m", "128"}),
      HasSubstr("cannot create " + (dir / "file" / "configs").string() + ": Not a directory"));
  std::filesystem::remove_all(dir);
}

}  // namespace cli_hostile_inputs_ii_test
}  // namespace tpusim::cli
