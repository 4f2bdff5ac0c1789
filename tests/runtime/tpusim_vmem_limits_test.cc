// The tpusim backend where a tensor outgrows a VMEM tile slot: images whose im2col patches do
// not fit go in bands of rows, a variable whose one-row update does not fit and reductions of
// rows that do not fit go in column chunks; the values are the cpu's. An infeed row wider than
// VMEM is refused by name. One System per process (one test per process).
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/strings.h"
#include "configs/loader.h"
#include "configs/overrides.h"
#include "runtime/backend/registry.h"
#include "runtime/backend/tpusim/tpusim_backend.h"
#include "runtime/graph/builder.h"
#include "runtime/graph/initializers.h"
#include "runtime/opcheck/harness.h"

namespace tpusim::runtime {
namespace tpusim_vmem_limits_test {

// Compiles `graph` on the named backend and runs one step on `variables` (updated in place).
absl::StatusOr<Outputs> run_step(const std::string& backend_name, const Graph& graph,
                                 Variables& variables, const Feeds& feeds) {
  auto backend = make_backend(backend_name);
  if (!backend.ok()) return backend.status();
  auto exe = (*backend)->compile(graph, CompileOptions{});
  if (!exe.ok()) return exe.status();
  auto out = (*backend)->run(**exe, variables, {feeds}, 0);
  if (!out.ok()) return out.status();
  return out->at(0);
}

// With 256 KiB of VMEM (96 KiB tile slots) no whole image's patches fit a tile, so
// extract_patches runs one fragment per band of window rows (each reading the image rows its
// windows need) and patches_to_image one per band of image rows (each adding the windows that
// reach them). Small integers make every sum exact in any order, so the values must be the
// cpu's bit for bit. 20x20x8 images: a 5x5 SAME window at stride 1 (banded: 320 KiB of patches
// an image: 4 bands of window rows, 9 of image rows), 3x3 VALID at stride 2 (whole images).
// 64x64x8 images (128 KiB each, banded whatever the window): 1x1 at stride 2, whose windows skip
// every other image row (rows no window reaches stay zero; 2 bands each way), and 2x2 at stride 2
// (3 bands each way). 16x16x32 images with 5x5 SAME windows: one image row and the 5 window rows
// of 50 KiB that reach it do not fit, so patches_to_image adds one window row at a time (16
// bands), each carrying the 4 image rows it shares with the band before. 16x80x32 images with
// 3x3 VALID windows at stride 2: an image row reached by two window rows of 44 KiB does not fit
// with them, so one window row at a time again, carrying one image row; the last image row lies
// outside every window, and the last band writes it as zeros.
TEST(TpusimBackend, SmallVmemBandsTheImagesAndComputesWhatTheCpuDoes) {
  GraphBuilder b;
  Feeds feeds;
  auto small_ints = [](const Shape& shape, int seed) {
    std::vector<float> v(static_cast<size_t>(shape.elements()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7 + seed * 13) % 9) - 4;
    return HostTensor::from(shape, v);
  };
  const Shape small_images{3, 20, 20, 8}, large_images{2, 64, 64, 8}, deep_images{2, 16, 16, 32},
      wide_images{2, 16, 80, 32};
  const Value x = b.infeed("x", DType::kF32, small_images);
  const Value y = b.infeed("y", DType::kF32, large_images);
  const Value z = b.infeed("z", DType::kF32, deep_images);
  const Value u = b.infeed("u", DType::kF32, wide_images);
  feeds["x"] = small_ints(small_images, 0);
  feeds["y"] = small_ints(large_images, 1);
  feeds["z"] = small_ints(deep_images, 2);
  feeds["u"] = small_ints(wide_images, 3);
  const struct {
    Value images;
    int64_t kernel, stride;
    bool same;
  } cases[] = {{x, 5, 1, true},  {x, 3, 2, false}, {y, 1, 2, false},
               {y, 2, 2, false}, {z, 5, 1, true},  {u, 3, 2, false}};
  int k = 0;
  for (const auto& c : cases) {
    Window w;
    w.kh = w.kw = c.kernel;
    w.sh = w.sw = c.stride;
    w.same = c.same;
    const Value patches = b.extract_patches(c.images, w);
    const std::string name = str_cat("w", ++k);
    b.output(name + "_patches", patches);
    const Shape shape = b.graph().node(patches.id).shape;  // copies: infeed() adds a node
    const Window derived = b.graph().node(patches.id).attrs.window;
    const Value grads = b.infeed(name + "_grads", DType::kF32, shape);
    feeds[name + "_grads"] = small_ints(shape, k + 1);
    b.output(name + "_image", b.patches_to_image(grads, derived));
  }
  ASSERT_TRUE(b.status().ok()) << b.status();

  auto small = config::with_overrides(**config::load_slice("v3-8"),
                                      {{"chip.core.vmem_mib", "0.25"}}, "v3-8 with 256 KiB");
  ASSERT_TRUE(small.ok()) << small.status();
  const std::string path = ::testing::TempDir() + "/v3-8-small-vmem.pbtxt";
  std::ofstream(path) << config::to_config_text(**small);
  std::unique_ptr<Backend> tpusim = make_tpusim_backend(path);
  auto cpu = make_backend("cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  std::map<std::string, Outputs> outputs;
  for (Backend* backend : {tpusim.get(), cpu->get()}) {
    auto exe = backend->compile(b.graph(), CompileOptions{Precision::kMxu});
    ASSERT_TRUE(exe.ok()) << exe.status();
    Variables v;
    auto out = backend->run(**exe, v, {feeds}, 0);
    ASSERT_TRUE(out.ok()) << out.status();
    outputs[backend == tpusim.get() ? "tpusim" : "cpu"] = out->at(0);
  }
  ASSERT_EQ(outputs["tpusim"].size(), 12u);
  int nonzero = 0;
  for (const auto& [name, value] : outputs["cpu"]) {
    const std::vector<float>& f = outputs["tpusim"].at(name).f;
    ASSERT_EQ(f.size(), value.f.size()) << name;
    for (size_t i = 0; i < f.size(); ++i) {
      ASSERT_EQ(f[i], value.f[i]) << name << "[" << i << "]";
      nonzero += f[i] != 0;
    }
  }
  EXPECT_GT(nonzero, 100000);
}

// A variable of 8 MiB (2048 x 1024 f32) is wider, as the one row its update copies, than a v3's
// 6 MiB VMEM tile slot: the copy goes in column chunks. (It used to be refused inside the
// emitter without failing the compile, so the variable silently kept its value: mlp trained
// wrongly on a 2 MiB VMEM, whose slot its 784 x 256 kernel outgrows.) And a variable updated
// from itself and a batch gets exactly the cpu's values.
TEST(TpusimBackend, AVariableWiderThanAVmemTileIsUpdated) {
  GraphBuilder b;
  const Shape shape{2048, 1024};
  const Value w = b.variable("w", DType::kF32, shape, {InitKind::kTruncatedNormal, 0, 0.1f, 7});
  const Value g = b.infeed("g", DType::kF32, shape);
  b.update(w, w - g * 0.5f);
  b.output("corner", b.slice(g, {0, 0}, {1, 1}));
  ASSERT_TRUE(b.status().ok()) << b.status();
  opcheck::OpCase c;
  c.inputs = {{"g", DType::kF32, shape}};
  const Feeds feeds = opcheck::make_feeds(c, 5);
  std::map<std::string, Variables> after;
  for (const std::string name : {"tpusim", "cpu"}) {
    after[name] = initial_variables(b.graph());
    auto out = run_step(name, b.graph(), after[name], feeds);
    ASSERT_TRUE(out.ok()) << name << ": " << out.status();
  }
  const Variables before = initial_variables(b.graph());
  const std::vector<float>&tpusim = after["tpusim"].at("w").f, &cpu = after["cpu"].at("w").f;
  ASSERT_EQ(tpusim.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_EQ(tpusim[i], cpu[i]) << "w[" << i << "]";
    ASSERT_NE(tpusim[i], before.at("w").f[i]) << "w[" << i << "] kept its value";
  }
}

// Reductions whose rows are wider than a v3's 6 MiB tile slot (a weight decay's sum over a
// whole 8 MiB variable; rows of 2M values) reduce column chunks into partial results first. Small
// integers keep every sum exact in any order, so the values are the cpu's bit for bit: the sum of
// squares of a [2048, 1024] tensor of -1, 0 and 1, per-row sums and the overall max of 3 rows of
// 2M values (the largest in the last row's last, partial, chunk). An infeed row wider than all
// of VMEM is refused at compile time, naming the infeed.
TEST(TpusimBackend, ReductionsOfRowsWiderThanATileGoInChunks) {
  GraphBuilder b;
  const Shape square{2048, 1024}, wide{3, 2000000};
  const Value w = b.infeed("w", DType::kF32, square);
  const Value x = b.infeed("x", DType::kF32, wide);
  b.output("sum_of_squares", b.reduce(Op::kReduceSum, w * w, {0, 1}));
  b.output("row_sums", b.reduce(Op::kReduceSum, x, {1}));
  b.output("max", b.reduce(Op::kReduceMax, x, {0, 1}));
  Feeds feeds;
  std::vector<float> ones(static_cast<size_t>(square.elements())),
      ints(static_cast<size_t>(wide.elements()));
  for (size_t i = 0; i < ones.size(); ++i) ones[i] = static_cast<float>(i * 7 % 3) - 1;
  for (size_t i = 0; i < ints.size(); ++i) ints[i] = static_cast<float>((i * 5 + i / 7) % 9) - 4;
  ints.back() = 5;  // the largest value, in the last row's last (partial) chunk
  feeds["w"] = HostTensor::from(square, ones);
  feeds["x"] = HostTensor::from(wide, ints);
  std::map<std::string, Outputs> outputs;
  for (const std::string name : {"tpusim", "cpu"}) {
    Variables none;
    auto out = run_step(name, b.graph(), none, feeds);
    ASSERT_TRUE(out.ok()) << name << ": " << out.status();
    outputs[name] = *std::move(out);
  }
  for (const auto& [name, value] : outputs["cpu"]) {
    ASSERT_EQ(outputs["tpusim"].at(name).f, value.f) << name;
  }
  EXPECT_EQ(outputs["tpusim"].at("max").f[0], 5.0f);

  GraphBuilder too_wide;
  too_wide.output("y", too_wide.infeed("huge", DType::kF32, {2, 5000000}));
  auto backend = make_backend("tpusim");
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto exe = (*backend)->compile(too_wide.graph(), CompileOptions{});
  ASSERT_FALSE(exe.ok());
  EXPECT_THAT(std::string(exe.status().message()),
              ::testing::HasSubstr("infeed 'huge' (f32[2, 5000000]): one row of 20000000 bytes"));
}

}  // namespace tpusim_vmem_limits_test
}  // namespace tpusim::runtime
