// The host input pipeline's building blocks: TFRecord reading against a plain read of the same
// file (target >= 0.85 of its MB/s), tf.Example parsing, and JPEG decoding.
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>

#include <benchmark/benchmark.h>

#include "common/process_allocator.h"
#include "runtime/data/crc32c.h"
#include "runtime/data/dataset.h"
#include "runtime/data/example.h"
#include "runtime/data/image.h"
#include "runtime/data/mnist_records.h"
#include "runtime/data/stage_profile.h"
#include "runtime/data/tfrecord.h"

namespace tpusim::runtime::data {
namespace {

constexpr int kRecords = 65536;
constexpr int kRecordBytes = 875;  // a Fashion-MNIST tf.Example

// A ~58 MB TFRecord file of Fashion-MNIST-sized records, written once per compression.
const std::string& bench_file(Compression c) {
  static std::string paths[4];
  std::string& path = paths[static_cast<int>(c)];
  if (!path.empty()) return path;
  path = (std::filesystem::temp_directory_path() /
          (std::string("tpusim_bench_") + compression_name(c) + ".tfrecord"))
             .string();
  auto w = TFRecordWriter::open(path, c);
  std::mt19937 rng(1);
  std::string rec(kRecordBytes, '\0');
  for (int i = 0; i < kRecords; ++i) {
    for (int b = 0; b < kRecordBytes; b += 4)
      rec[b] = static_cast<char>(rng() & 0x3f);  // compressible, like pixels
    (void)(*w)->write(rec);
  }
  (void)(*w)->close();
  return path;
}

void BM_PlainRead(benchmark::State& state) {
  const std::string& path = bench_file(Compression::kNone);
  std::string buf(256 << 10, '\0');
  int64_t bytes = 0;
  for (auto _ : state) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    size_t got;
    while ((got = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
      bytes += static_cast<int64_t>(got);
      benchmark::DoNotOptimize(buf.data());
    }
    std::fclose(f);
  }
  state.SetBytesProcessed(bytes);
}
BENCHMARK(BM_PlainRead)->Unit(benchmark::kMillisecond);

void BM_TFRecordRead(benchmark::State& state) {
  const auto c = static_cast<Compression>(state.range(0));
  const std::string& path = bench_file(c);
  const auto file_bytes =
      static_cast<int64_t>(std::filesystem::file_size(bench_file(Compression::kNone)));
  ReaderOptions options;
  options.map_file = state.range(1) != 0;
  int64_t records = 0;
  for (auto _ : state) {
    auto r = TFRecordReader::open(path, options);
    std::string rec;
    while (*(*r)->next(&rec)) ++records;
  }
  // MB/s of the framed stream, so plain and compressed compare with BM_PlainRead.
  state.SetBytesProcessed(file_bytes * static_cast<int64_t>(state.iterations()));
  state.counters["records_per_s"] =
      benchmark::Counter(static_cast<double>(records), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_TFRecordRead)
    ->ArgNames({"compression", "mapped"})
    ->Args({static_cast<int>(Compression::kNone), 1})
    ->Args({static_cast<int>(Compression::kNone), 0})
    ->Args({static_cast<int>(Compression::kGzip), 0})
    ->Unit(benchmark::kMillisecond);

void BM_ParseExample(benchmark::State& state) {
  const std::string serialized = ExampleBuilder()
                                     .bytes("image_raw", {std::string(784, '\x7f')})
                                     .ints("label", {3})
                                     .serialize();
  FeatureSpec spec;
  spec["image_raw"] = fixed_len(FeatureType::kBytes, {});
  spec["label"] = fixed_len(FeatureType::kInt64, {});
  for (auto _ : state) benchmark::DoNotOptimize(parse_example(serialized, spec));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ParseExample);

// Decoding a grayscale JPEG of the given side (convert-idx --jpeg --image-size S).
void BM_DecodeJpeg(benchmark::State& state) {
  const int side = static_cast<int>(state.range(0));
  FloatImage im;
  im.height = im.width = 28;
  im.channels = 1;
  std::mt19937 rng(3);
  for (int i = 0; i < 28 * 28; ++i) im.pixels.push_back(static_cast<float>(rng() % 256) / 255.0F);
  const auto jpeg = encode_jpeg(to_uint8(resize_bilinear(im, side, side)), 90);
  for (auto _ : state) benchmark::DoNotOptimize(decode_jpeg(*jpeg));
  state.SetItemsProcessed(state.iterations());
  state.counters["jpeg_bytes"] = static_cast<double>(jpeg->size());
}
BENCHMARK(BM_DecodeJpeg)->Arg(64)->Arg(224);

}  // namespace
}  // namespace tpusim::runtime::data

namespace tpusim::runtime::data {
namespace {

void BM_Crc32c(benchmark::State& state) {
  std::string buf(static_cast<size_t>(state.range(0)), '\x5a');
  for (auto _ : state) benchmark::DoNotOptimize(crc32c(buf.data(), buf.size()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Crc32c)->Arg(875)->Arg(1 << 20);

}  // namespace
}  // namespace tpusim::runtime::data

namespace tpusim::runtime::data {
namespace {

// Fashion-MNIST t10k (10,000 examples) as 4 shards, raw or JPEG at 64x64, written once.
std::string fashion_shards(bool jpeg) {
  const auto dir = std::filesystem::temp_directory_path() /
                   (jpeg ? "tpusim_bench_fashion_jpeg" : "tpusim_bench_fashion");
  if (!std::filesystem::exists(dir)) {
    IdxConversion job;
    job.images = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";
    job.labels = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz";
    job.output_dir = dir.string();
    job.shards = 4;
    job.jpeg = jpeg;
    job.jpeg_size = jpeg ? 64 : 0;
    if (!convert_idx_to_tfrecord(job).ok()) return "";
  }
  return (dir / "t10k-*").string();
}

// Stacking elements into batches: 1024 Fashion-MNIST examples (784 f32 pixels and an int64
// label each, 3.2 MB) a batch, as the demo's input_fn batches a parse map's output. batch_cpu_ms
// is what measured mode charges the batch stage per batch (its StageProfile CPU time, on
// whichever threads); batches_per_s the rate reaching the consumer.
void BM_Batch(benchmark::State& state) {
  const int64_t batch = state.range(0);
  MapFn example = [](Element e) -> absl::StatusOr<Element> {
    const int64_t i = e.at("value").ints[0];
    return Element{{"image", image_value(std::vector<float>(784, 0.5F), 28, 28, 1)},
                   {"label", scalar_int(i % 10)}};
  };
  auto profile = std::make_shared<StageProfile>();
  BatchOptions o;
  o.drop_remainder = true;
  o.num_parallel_calls = static_cast<int>(state.range(1));
  o.profile = profile;
  const auto ds = Dataset::range(batch * 4)->map(example)->batch(batch, o);
  int64_t batches = 0;
  for (auto _ : state) {
    auto it = ds->make_iterator();
    for (;;) {
      auto b = it->next();
      if (!b.ok() || !b->has_value()) break;
      ++batches;
    }
  }
  const StageSample stage = profile->snapshot().at(0);
  state.counters["batch_cpu_ms"] = 1e3 * stage.cpu_seconds / static_cast<double>(stage.elements);
  state.counters["batches_per_s"] =
      benchmark::Counter(static_cast<double>(batches), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Batch)
    ->ArgNames({"batch", "num_parallel_calls"})
    ->Args({1024, 1})
    ->Args({1024, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// list_files -> parallel interleave (4 files) -> map(parse, decode, to float; N threads) ->
// batch(128, drop_remainder) -> prefetch(2): examples per second reaching the consumer.
void BM_FashionPipeline(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const bool jpeg = state.range(1) != 0;
  const std::string pattern = fashion_shards(jpeg);
  InterleaveOptions interleave;
  interleave.cycle_length = 4;
  interleave.parallel = true;
  const auto ds = Dataset::list_files(pattern)
                      ->interleave_tfrecords(interleave)
                      ->map(mnist_parse_fn(jpeg ? 64 : 28, jpeg ? 64 : 28, 1, jpeg), threads)
                      ->batch(128, true)
                      ->prefetch(2);
  int64_t examples = 0;
  for (auto _ : state) {
    auto it = ds->make_iterator();
    for (;;) {
      auto b = it->next();
      if (!b.ok() || !b->has_value()) break;
      examples += (**b).at("label").shape[0];
    }
  }
  state.counters["examples_per_s"] =
      benchmark::Counter(static_cast<double>(examples), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_FashionPipeline)
    ->ArgNames({"num_parallel_calls", "jpeg"})
    ->Args({1, 0})
    ->Args({2, 0})
    ->Args({1, 1})
    ->Args({2, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace tpusim::runtime::data

// As the tpusim CLI runs its input pipelines: freed batches are kept for reuse.
int main(int argc, char** argv) {
  tpusim::keep_freed_memory_for_reuse();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
