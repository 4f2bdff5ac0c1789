// tpusim data inspect FILE... | tpusim data convert-idx --images I --labels L --out F
#include <iostream>

#include <nlohmann/json.hpp>

#include "runtime/data/inspect.h"
#include "runtime/data/mnist_records.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"

namespace tpusim::cli {
namespace {

namespace po = boost::program_options;
namespace data = runtime::data;

const char kGroupUsage[] =
    "usage: tpusim data inspect FILE... [--compression C] [--skip-corrupt] [--json]\n"
    "       tpusim data convert-idx --images IDX --labels IDX --out FILE [--compression C] [--limit N]\n\n"
    "inspect      check every record's checksums and summarise a TFRecord file: records, sizes,\n"
    "             compression, and the features of the first tf.Example\n"
    "convert-idx  write an MNIST-family IDX pair (raw or .gz) as TFRecords of tf.Example with\n"
    "             TensorFlow's feature names: height, width, depth, label, image_raw\n\n"
    "C is auto (inspect's default: found from the file), none, gzip or zlib.\n";

nlohmann::ordered_json to_json(const data::TFRecordSummary& s) {
  nlohmann::ordered_json features = nlohmann::ordered_json::array();
  for (const auto& f : s.first_example) {
    features.push_back({{"name", f.name}, {"kind", f.kind}, {"values", f.values}, {"preview", f.preview}});
  }
  return {{"path", s.path},
          {"compression", data::compression_name(s.compression)},
          {"records", s.records},
          {"skipped_corrupt", s.skipped},
          {"record_bytes", s.record_bytes},
          {"min_record_bytes", s.min_record_bytes},
          {"max_record_bytes", s.max_record_bytes},
          {"tf_example", s.examples},
          {"first_example", features}};
}

void print_text(const data::TFRecordSummary& s) {
  std::cout << s.path << ": " << s.records << " records, " << s.record_bytes << " data bytes (" << s.min_record_bytes
            << ".." << s.max_record_bytes << " per record), compression " << data::compression_name(s.compression);
  if (s.skipped > 0) std::cout << ", " << s.skipped << " corrupt skipped";
  std::cout << "\n";
  if (!s.examples) {
    std::cout << "  records are not all tf.Example\n";
    return;
  }
  std::cout << "  first tf.Example:\n";
  for (const auto& f : s.first_example) {
    std::cout << "    " << f.name << "\t" << f.kind << "\t" << f.values << " value(s)\t" << f.preview << "\n";
  }
}

int inspect(const std::vector<std::string>& args) {
  po::options_description options("options");
  options.add_options()("file", po::value<std::vector<std::string>>()->required(), "TFRecord files")(
      "compression", po::value<std::string>()->default_value("auto"), "auto, none, gzip or zlib")(
      "skip-corrupt", po::bool_switch(), "skip records that fail their checksum instead of stopping")(
      "json", po::bool_switch(), "print JSON instead of text");
  po::positional_options_description positional;
  positional.add("file", -1);
  po::variables_map vm;
  const std::string usage = "usage: tpusim data inspect FILE... [--compression C] [--skip-corrupt] [--json]\n";
  if (int rc = parse_args(args, options, positional, usage, &vm); rc >= 0) return rc;
  auto compression = data::parse_compression(vm["compression"].as<std::string>());
  if (!compression.ok()) return usage_error(std::string(compression.status().message()), usage);
  data::ReaderOptions reader;
  reader.compression = *compression;
  reader.skip_corrupt = vm["skip-corrupt"].as<bool>();

  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const auto& path : vm["file"].as<std::vector<std::string>>()) {
    auto summary = data::summarize_tfrecord(path, reader);
    if (!summary.ok()) return failure(std::string(summary.status().message()));
    vm["json"].as<bool>() ? files.push_back(to_json(*summary)) : print_text(*summary);
  }
  if (vm["json"].as<bool>()) std::cout << nlohmann::ordered_json{{"files", files}}.dump(2) << "\n";
  return kOk;
}

int convert_idx(const std::vector<std::string>& args) {
  po::options_description options("options");
  options.add_options()("images", po::value<std::string>()->required(), "IDX image file (raw or .gz)")(
      "labels", po::value<std::string>()->required(), "IDX label file (raw or .gz)")(
      "out", po::value<std::string>()->required(), "TFRecord file to write")(
      "compression", po::value<std::string>()->default_value("none"), "none, gzip or zlib")(
      "limit", po::value<uint64_t>()->default_value(0), "convert only the first N examples (0: all)");
  po::variables_map vm;
  const std::string usage =
      "usage: tpusim data convert-idx --images IDX --labels IDX --out FILE [--compression C] [--limit N]\n";
  if (int rc = parse_args(args, options, {}, usage, &vm); rc >= 0) return rc;
  data::IdxConversion job;
  job.images = vm["images"].as<std::string>();
  job.labels = vm["labels"].as<std::string>();
  job.output = vm["out"].as<std::string>();
  job.limit = vm["limit"].as<uint64_t>();
  auto compression = data::parse_compression(vm["compression"].as<std::string>());
  if (!compression.ok() || *compression == data::Compression::kAuto) {
    return usage_error("--compression must be none, gzip or zlib", usage);
  }
  job.compression = *compression;
  auto done = data::convert_idx_to_tfrecord(job);
  if (!done.ok()) return failure(std::string(done.status().message()));
  std::cout << "wrote " << done->examples << " examples (" << done->height << "x" << done->width << "x" << done->depth
            << ") to " << job.output << " (" << data::compression_name(job.compression) << ")\n";
  return kOk;
}

}  // namespace

int run_data(const std::vector<std::string>& args) {
  if (args.empty()) return usage_error("data: missing action (inspect or convert-idx)", kGroupUsage);
  const std::string& action = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (action == "inspect") return inspect(rest);
  if (action == "convert-idx") return convert_idx(rest);
  if (action == "--help" || action == "-h") {
    std::cout << kGroupUsage;
    return kOk;
  }
  return usage_error("data: unknown action '" + action + "'", kGroupUsage);
}

}  // namespace tpusim::cli
