// tpusim data inspect FILE... | tpusim data convert-idx --images I --labels L --out DIR |
// tpusim data make-bert --out DIR
#include <iostream>

#include <nlohmann/json.hpp>

#include "runtime/data/bert_records.h"
#include "runtime/data/inspect.h"
#include "runtime/data/mnist_records.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "tools/tpusim/options.h"
#include "tools/tpusim/shared_flags.h"

namespace tpusim::cli {
namespace {

namespace po = boost::program_options;
namespace data = runtime::data;

const char kDataUsage[] =
    "usage: tpusim data inspect FILE... [--compression C] [--skip-corrupt] [--json]\n"
    "       tpusim data convert-idx --images IDX --labels IDX --out DIR [--shards N] [--jpeg] "
    "...\n"
    "       tpusim data make-bert --out DIR [--seq-length N] [--examples N] [--shards N] ...\n\n"
    "inspect      check every record's checksums and summarise a TFRecord file: records, sizes,\n"
    "             compression, and the features of the first tf.Example\n"
    "convert-idx  write an MNIST-family IDX pair (raw or .gz) as TFRecord shards of tf.Example\n"
    "             {image_raw: bytes, label: int64}, raw pixels or JPEG\n"
    "make-bert    write synthetic BERT pretraining examples as TFRecord shards with\n"
    "             create_pretraining_data.py's features (input_ids, input_mask, segment_ids,\n"
    "             masked_lm_positions, masked_lm_ids, masked_lm_weights, next_sentence_labels)\n\n"
    "C is auto (inspect's default: found from the file), none, gzip or zlib.\n";

nlohmann::ordered_json to_json(const data::TFRecordSummary& s) {
  nlohmann::ordered_json features = nlohmann::ordered_json::array();
  for (const auto& f : s.first_example) {
    features.push_back(
        {{"name", f.name}, {"kind", f.kind}, {"values", f.values}, {"preview", f.preview}});
  }
  nlohmann::ordered_json kinds = nlohmann::ordered_json::object();
  for (const auto& f : s.first_example) kinds[f.name] = f.kind;
  return {{"path", s.path},
          {"compression", data::compression_name(s.compression)},
          {"records", s.records},
          {"skipped_corrupt", s.skipped},
          {"record_bytes", s.record_bytes},
          {"min_record_bytes", s.min_record_bytes},
          {"max_record_bytes", s.max_record_bytes},
          {"tf_example", s.examples},
          {"features", kinds},
          {"first_example", features}};
}

void print_text(const data::TFRecordSummary& s) {
  std::cout << s.path << ": " << s.records << " records, " << s.record_bytes << " data bytes ("
            << s.min_record_bytes << ".." << s.max_record_bytes << " per record), compression "
            << data::compression_name(s.compression);
  if (s.skipped > 0) std::cout << ", " << s.skipped << " corrupt skipped";
  std::cout << "\n";
  if (!s.examples) {
    std::cout << "  records are not all tf.Example\n";
    return;
  }
  std::cout << "  first tf.Example:\n";
  for (const auto& f : s.first_example) {
    std::cout << "    " << f.name << "\t" << f.kind << "\t" << f.values << " value(s)\t"
              << f.preview << "\n";
  }
}

int inspect(const std::vector<std::string>& args) {
  po::options_description options("options");
  options.add_options()("file", po::value<std::vector<std::string>>()->required(),
                        "TFRecord files")(
      "compression", po::value<std::string>()->default_value("auto"), "auto, none, gzip or zlib")(
      "skip-corrupt", po::bool_switch(),
      "skip records that fail their checksum instead of stopping")(
      "max-skip-bytes", po::value<std::string>()->default_value("64MiB"),
      "with --skip-corrupt: the most bytes one scan for the next valid record passes over");
  add_json_flag(options);
  po::positional_options_description positional;
  positional.add("file", -1);
  po::variables_map vm;
  const std::string usage =
      "usage: tpusim data inspect FILE... [--compression C] [--skip-corrupt [--max-skip-bytes N]]\n"
      "                           [--json]\n";
  if (int rc = parse_args(args, options, positional, usage, &vm); rc >= 0) return rc;
  auto compression = data::parse_compression(vm["compression"].as<std::string>());
  if (!compression.ok()) return usage_error(std::string(compression.status().message()), usage);
  data::ReaderOptions reader;
  reader.compression = *compression;
  reader.skip_corrupt = vm["skip-corrupt"].as<bool>();
  auto max_skip = parse_bytes("--max-skip-bytes", vm["max-skip-bytes"].as<std::string>(), 12);
  if (!max_skip.ok()) return usage_error(std::string(max_skip.status().message()), usage);
  reader.max_resync_bytes = *max_skip;

  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const auto& path : vm["file"].as<std::vector<std::string>>()) {
    auto summary = data::summarize_tfrecord(path, reader);
    if (!summary.ok()) return failure(std::string(summary.status().message()));
    vm["json"].as<bool>() ? files.push_back(to_json(*summary)) : print_text(*summary);
  }
  if (vm["json"].as<bool>())
    std::cout << json_text(nlohmann::ordered_json{{"files", files}}) << "\n";
  return kOk;
}

int convert_idx(const std::vector<std::string>& args) {
  po::options_description options("options");
  options.add_options()("images", po::value<std::string>()->required(),
                        "IDX image file (raw or .gz)")(
      "labels", po::value<std::string>()->required(), "IDX label file (raw or .gz)")(
      "out", po::value<std::string>()->required(), "folder for the shards (created when missing)")(
      "shards", po::value<int>()->default_value(1), "number of TFRecord files")(
      "prefix", po::value<std::string>()->default_value(""),
      "shard name prefix (default: the images file name up to its first '-', e.g. train)")(
      "compression", po::value<std::string>()->default_value("none"), "none, gzip or zlib")(
      "jpeg", po::bool_switch(), "store JPEG-encoded images instead of raw pixels")(
      "image-size", po::value<int>()->default_value(0),
      "with --jpeg: upscale (bilinear) to SxS first")(
      "quality", po::value<int>()->default_value(90), "with --jpeg: JPEG quality 1..100")(
      "limit", po::value<uint64_t>()->default_value(0),
      "convert only the first N examples (0: all)");
  po::variables_map vm;
  const std::string usage =
      "usage: tpusim data convert-idx --images IDX --labels IDX --out DIR [--shards N] [--prefix "
      "P]\n"
      "                               [--compression C] [--jpeg [--image-size S] [--quality Q]] "
      "[--limit N]\n\n"
      "Writes tf.Example {image_raw: bytes, label: int64} into DIR/P-00000-of-0000N.tfrecord ...;\n"
      "image_raw is the raw HxW(xC) uint8 pixels, or a JPEG with --jpeg.\n";
  if (int rc = parse_args(args, options, {}, usage, &vm); rc >= 0) return rc;
  data::IdxConversion job;
  job.images = vm["images"].as<std::string>();
  job.labels = vm["labels"].as<std::string>();
  job.output_dir = vm["out"].as<std::string>();
  job.prefix = vm["prefix"].as<std::string>();
  job.shards = vm["shards"].as<int>();
  job.limit = vm["limit"].as<uint64_t>();
  job.jpeg = vm["jpeg"].as<bool>();
  job.jpeg_size = vm["image-size"].as<int>();
  job.jpeg_quality = vm["quality"].as<int>();
  auto compression = data::parse_compression(vm["compression"].as<std::string>());
  if (!compression.ok() || *compression == data::Compression::kAuto) {
    return usage_error("--compression must be none, gzip or zlib", usage);
  }
  if (job.shards < 1) return usage_error("--shards must be at least 1", usage);
  if (!job.jpeg && (!vm["image-size"].defaulted() || !vm["quality"].defaulted())) {
    return usage_error("--image-size and --quality need --jpeg", usage);
  }
  if (job.jpeg_quality < 1 || job.jpeg_quality > 100)
    return usage_error("--quality must be 1..100", usage);
  job.compression = *compression;
  auto done = data::convert_idx_to_tfrecord(job);
  if (!done.ok()) return failure(std::string(done.status().message()));
  std::cout << "wrote " << done->examples << " examples (" << done->height << "x" << done->width
            << "x" << done->depth << (job.jpeg ? ", JPEG" : ", raw") << ", " << done->image_bytes
            << " image bytes) in " << done->shard_paths.size() << " shard(s):\n";
  for (size_t i = 0; i < done->shard_paths.size(); ++i) {
    std::cout << "  " << done->shard_paths[i] << "\t" << done->shard_examples[i] << " examples\n";
  }
  return kOk;
}

int make_bert(const std::vector<std::string>& args) {
  po::options_description options("options");
  options.add_options()("out", po::value<std::string>()->required(),
                        "folder for the shards (created when missing)")(
      "seq-length", po::value<int>()->default_value(128), "tokens per example (max_seq_length)")(
      "max-predictions", po::value<int>(),
      "masked positions per example (max_predictions_per_seq); default 76 at 512, else "
      "ceil(0.15 * seq-length): 20 at 128")("examples", po::value<int64_t>()->default_value(1024),
                                            "examples to write")(
      "shards", po::value<int>()->default_value(1), "number of TFRecord files (1..examples)")(
      "vocab", po::value<int>()->default_value(30522), "token ids in [0, vocab) (BERT's uncased)")(
      "prefix", po::value<std::string>()->default_value("train"), "shard name prefix")(
      "compression", po::value<std::string>()->default_value("none"), "none, gzip or zlib")(
      "seed", po::value<uint64_t>()->default_value(1), "example i is drawn from seed + i");
  add_json_flag(options);
  po::variables_map vm;
  const std::string usage =
      "usage: tpusim data make-bert --out DIR [--seq-length 128] [--max-predictions N] "
      "[--examples 1024]\n"
      "                             [--shards 1] [--vocab 30522] [--prefix train] "
      "[--compression C] [--seed 1] [--json]\n\n"
      "Writes synthetic BERT pretraining tf.Examples ([CLS] A [SEP] B [SEP], 15% of the tokens\n"
      "masked, as google-research/bert's create_pretraining_data.py lays them out) into\n"
      "DIR/P-00000-of-0000N.tfrecord ...; run_pretraining.py's input_fn reads them.\n";
  if (int rc = parse_args(args, options, {}, usage, &vm); rc >= 0) return rc;
  data::BertRecordJob job;
  job.output_dir = vm["out"].as<std::string>();
  job.shape.seq_length = vm["seq-length"].as<int>();
  job.shape.max_predictions = vm.count("max-predictions")
                                  ? vm["max-predictions"].as<int>()
                                  : data::bert_default_max_predictions(job.shape.seq_length);
  job.shape.vocab = vm["vocab"].as<int>();
  job.examples = vm["examples"].as<int64_t>();
  job.shards = vm["shards"].as<int>();
  job.prefix = vm["prefix"].as<std::string>();
  job.seed = vm["seed"].as<uint64_t>();
  auto compression = data::parse_compression(vm["compression"].as<std::string>());
  if (!compression.ok() || *compression == data::Compression::kAuto) {
    return usage_error("--compression must be none, gzip or zlib", usage);
  }
  job.compression = *compression;
  if (auto s = data::check_bert_job(job); !s.ok())
    return usage_error(std::string(s.message()), usage);
  auto done = data::write_bert_records(job);
  if (!done.ok()) return failure(std::string(done.status().message()));
  if (vm["json"].as<bool>()) {
    nlohmann::ordered_json shards = nlohmann::ordered_json::array();
    for (size_t i = 0; i < done->shard_paths.size(); ++i) {
      shards.push_back({{"path", done->shard_paths[i]}, {"examples", done->shard_examples[i]}});
    }
    const nlohmann::ordered_json j = {{"examples", done->examples},
                                      {"seq_length", job.shape.seq_length},
                                      {"max_predictions", job.shape.max_predictions},
                                      {"vocab", job.shape.vocab},
                                      {"seed", job.seed},
                                      {"compression", data::compression_name(job.compression)},
                                      {"bytes", done->bytes},
                                      {"shards", shards}};
    std::cout << json_text(j) << "\n";
    return kOk;
  }
  std::cout << "wrote " << done->examples << " BERT pretraining examples (seq_length "
            << job.shape.seq_length << ", max_predictions " << job.shape.max_predictions
            << ", vocab " << job.shape.vocab << ", seed " << job.seed << ", " << done->bytes
            << " bytes) in " << done->shard_paths.size() << " shard(s):\n";
  for (size_t i = 0; i < done->shard_paths.size(); ++i) {
    std::cout << "  " << done->shard_paths[i] << "\t" << done->shard_examples[i] << " examples\n";
  }
  return kOk;
}

}  // namespace

int run_data(const std::vector<std::string>& args) {
  if (args.empty())
    return usage_error("data: missing action (inspect, convert-idx or make-bert)", kDataUsage);
  const std::string& action = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (action == "inspect") return inspect(rest);
  if (action == "convert-idx") return convert_idx(rest);
  if (action == "make-bert") return make_bert(rest);
  if (action == "--help" || action == "-h") {
    std::cout << kDataUsage;
    return kOk;
  }
  return usage_error("data: unknown action '" + action + "'", kDataUsage);
}

}  // namespace tpusim::cli
