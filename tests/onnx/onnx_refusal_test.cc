// Every way a file can be refused: each error names the file and the reason (the node, its op
// type and the opset for an unsupported op), and nothing throws or crashes.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "runtime/onnx/onnx_model.h"
#include "tests/onnx/onnx_test_util.h"

namespace tpusim::runtime::onnx_import {
namespace onnx_refusal_test {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using testing::import_and_run;
using testing::model_bytes;

const char kRelu[] = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[N, 4] X) => (float[N, 4] Y)
{
  Y = Relu (X)
}
)";

std::string message(const absl::Status& s) { return std::string(s.message()); }

TEST(OnnxRefusal, BytesThatAreNotAModel) {
  for (const std::string& bytes : {std::string("not a model at all"), std::string()}) {
    auto m = parse_onnx(bytes, "junk.onnx", 8);
    ASSERT_FALSE(m.ok());
    EXPECT_THAT(message(m.status()), HasSubstr("junk.onnx: not an ONNX model"));
  }
  // A real model cut short.
  const std::string whole = model_bytes(kRelu);
  auto cut = parse_onnx(whole.substr(0, whole.size() / 2), "cut.onnx", 8);
  ASSERT_FALSE(cut.ok());
  EXPECT_THAT(message(cut.status()), HasSubstr("cut.onnx: not an ONNX model"));
}

TEST(OnnxRefusal, AMissingFileAndALoadedOne) {
  auto missing = load_onnx("/nonexistent/model.onnx", 8);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(message(missing.status()), HasSubstr("/nonexistent/model.onnx: no such file"));
  const std::string path = ::testing::TempDir() + "relu.onnx";
  std::ofstream(path, std::ios::binary) << model_bytes(kRelu);
  auto loaded = load_onnx(path, 8);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->opset, 13);
  ASSERT_EQ(loaded->inputs.size(), 1u);
  EXPECT_EQ(loaded->inputs[0].shape, Shape({8, 4}));
  EXPECT_TRUE(loaded->inputs[0].batched);
  EXPECT_EQ(loaded->outputs[0].shape, Shape({8, 4}));  // inferred with the batch bound
  std::filesystem::remove(path);
}

TEST(OnnxRefusal, OpsetsOutside11To17) {
  for (const int opset : {9, 18}) {
    std::string text = kRelu;
    text.replace(text.find("13"), 2, std::to_string(opset));
    auto m = parse_onnx(model_bytes(text), "old.onnx", 8);
    ASSERT_FALSE(m.ok()) << opset;
    EXPECT_THAT(message(m.status()),
                HasSubstr("old.onnx: opset " + std::to_string(opset) +
                          " of the default domain; tpusim imports opsets 11 to 17"));
  }
}

// The virtualenv's onnx writes ir_version 14 by default, past Debian's libonnx (8): its checker
// said only "ir_version is higher than the checker's". Both versions and the fix are named.
TEST(OnnxRefusal, AnIrVersionPastTheLibrarysIsNamedWithTheFix) {
  std::string text = kRelu;
  text.replace(text.find("ir_version: 8"), 13, "ir_version: 14");
  auto m = parse_onnx(model_bytes(text), "new.onnx", 8);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(message(m.status()),
              HasSubstr("new.onnx: its ir_version is 14; this build's ONNX library checks models "
                        "up to ir_version 8 (re-export with ir_version 8: model.ir_version = 8 "
                        "in Python)"));
}

TEST(OnnxRefusal, AnUnsupportedOpNamesTheNodeOpsetAndTheSupportedSet) {
  const std::string text = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[N, 4] X) => (float[N, 4] Y)
{
  H = Relu (X)
  Y = Celu (H)
}
)";
  auto run = import_and_run(text, 2, {{"X", HostTensor::zeros(DType::kF32, {2, 4})}});
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(message(run.status()),
              HasSubstr("test.onnx: node 'Y' is Celu (opset 13), which tpusim does not import; "
                        "it imports Add, AveragePool, BatchNormalization, Cast,"));
}

// A BatchNormalization whose epsilon is negative imported and trained to NaN at once (the fifth
// probe): the square root of the variance plus epsilon is of a negative number.
TEST(OnnxRefusal, ANegativeNormalisationEpsilonIsRefused) {
  const std::string text = R"(
<ir_version: 8, opset_import: ["" : 13]>
bn (float[N, 2] X) => (float[N, 2] Y)
<float[2] s = {2, 1}, float[2] b = {1, 0}, float[2] m = {0.5, -1}, float[2] v = {4, 1}>
{
  Y = BatchNormalization <epsilon = -1.0> (X, s, b, m, v)
}
)";
  auto run = import_and_run(text, 2, {{"X", HostTensor::zeros(DType::kF32, {2, 2})}});
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(message(run.status()),
              HasSubstr("node 'Y' (BatchNormalization): epsilon -1 must be a finite number >= 0"));
}

TEST(OnnxRefusal, UnboundDimensionsOtherThanTheBatch) {
  const std::string text = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[N, seq] X) => (float[N, seq] Y)
{
  Y = Relu (X)
}
)";
  auto m = parse_onnx(model_bytes(text), "dyn.onnx", 8);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(message(m.status()),
              HasSubstr("dyn.onnx: input 'X' dimension 1 ('seq') is not bound: tpusim binds only "
                        "the first (the batch)"));
}

// An input of 2^93 elements at batch 1 (three dimensions of 2^31) is refused naming it, before
// anything multiplies its shape out; one of 2^40 and less is taken.
TEST(OnnxRefusal, AnInputOfMoreThan2To40ElementsIsRefused) {
  const std::string huge = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[N, 2147483648, 2147483648, 2147483648] X) => (float[N, 2147483648, 2147483648, 2147483648] Y)
{
  Y = Relu (X)
}
)";
  auto m = parse_onnx(model_bytes(huge), "huge.onnx", 1);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(message(m.status()),
              HasSubstr("huge.onnx: input 'X' of shape [1, 2147483648, 2147483648, 2147483648] "
                        "at batch 1 has more than 2^40 elements"));
  const std::string large = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[N, 1048576, 1048576] X) => (float[N, 1048576, 1048576] Y)
{
  Y = Relu (X)
}
)";
  EXPECT_TRUE(parse_onnx(model_bytes(large), "large.onnx", 1).ok());
  EXPECT_FALSE(parse_onnx(model_bytes(large), "large.onnx", 2).ok());
}

TEST(OnnxRefusal, TheCheckersAndShapeInferencesComplaints) {
  // MatMul of [N, 4] by [3, 2]: the checker passes it, shape inference does not.
  const std::string bad_shapes = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[N, 4] X) => (float[N, 2] Y)
<float[3, 2] W = {1, 2, 3, 4, 5, 6}>
{
  Y = MatMul (X, W)
}
)";
  auto shapes = parse_onnx(model_bytes(bad_shapes), "matmul.onnx", 8);
  ASSERT_FALSE(shapes.ok());
  EXPECT_THAT(message(shapes.status()), HasSubstr("matmul.onnx: shape inference fails at batch 8"));
  // A node reading a value nothing produces: the checker's.
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(model_bytes(kRelu)));
  m.mutable_graph()->mutable_node(0)->set_input(0, "nowhere");
  auto checked = parse_onnx(m.SerializeAsString(), "dangling.onnx", 8);
  ASSERT_FALSE(checked.ok());
  EXPECT_THAT(message(checked.status()), HasSubstr("dangling.onnx: the ONNX checker rejects it"));
}

TEST(OnnxRefusal, WeightsInExternalFiles) {
  const std::string text = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[N, 2] X) => (float[N, 2] Y)
<float[2] B = {1, 2}>
{
  Y = Add (X, B)
}
)";
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(model_bytes(text)));
  onnx::TensorProto* b = m.mutable_graph()->mutable_initializer(0);
  b->clear_float_data();
  b->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* entry = b->add_external_data();
  entry->set_key("location");
  entry->set_value("weights.bin");
  auto r = parse_onnx(m.SerializeAsString(), "ext.onnx", 8);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(message(r.status()), HasSubstr("ext.onnx: initializer 'B' keeps its data in an "
                                             "external file"));
}

// Errors inside a node name the node and its op type.
TEST(OnnxRefusal, NodeErrorsNameTheNode) {
  const std::string text = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[N, 4] X) => (float[N, 4] Y)
<float e = {1.7}>
{
  Y = Pow (X, e)
}
)";
  auto run = import_and_run(text, 2, {{"X", HostTensor::zeros(DType::kF32, {2, 4})}});
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(message(run.status()),
              HasSubstr("test.onnx: node 'Y' (Pow): exponent 1.7: tpusim takes -1, -0.5, 0.5, 1, "
                        "2 and 3"));
}

// Tensors a file asks to be made at import time are bounded: a ConstantOfShape or Expand of a
// huge shape is refused, naming the node, rather than exhausting the host.
TEST(OnnxRefusal, HugeFoldedTensorsAreRefused) {
  for (const std::string& node :
       {std::string("C = ConstantOfShape (shape)"), std::string("C = Expand (one, shape)")}) {
    const std::string text = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[N, 4] X) => (float[N, 4] Y)
<int64[3] shape = {1048576, 1048576, 1048576}, float one = {1}>
{
  )" + node + R"(
  Y = Relu (X)
}
)";
    auto run = import_and_run(text, 2, {{"X", HostTensor::zeros(DType::kF32, {2, 4})}});
    ASSERT_FALSE(run.ok()) << node;
    EXPECT_THAT(message(run.status()), HasSubstr("test.onnx: node 'C'")) << node;
    EXPECT_THAT(message(run.status()), HasSubstr("is too large")) << node;
  }
}

// fuzz_onnx found a Conv whose input was no [N, C, H, W] image reading an invalid value's shape
// (undefined behaviour; its input was not kept). Such a Conv or pool is refused naming the node:
// here shape inference refuses it first, and the importer checks the image itself after.
TEST(OnnxRefusal, AConvolutionOfSomethingThatIsNoImageIsRefused) {
  const std::string text = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[N, 4] X) => (float[N, 4] Y)
<float[1, 1, 3, 3] W = {1, 1, 1, 1, 1, 1, 1, 1, 1}, float[1, 1, 5] C = {1, 2, 3, 4, 5}>
{
  K = Conv <kernel_shape = [3, 3], dilations = [2, 2]> (C, W)
  Y = Identity (X)
}
)";
  auto run = import_and_run(text, 2, {{"X", HostTensor::zeros(DType::kF32, {2, 4})}});
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(message(run.status()), HasSubstr("Conv"));
}

// Found by fuzz_onnx: a pool with ceil_mode and a stride of 0 divided by zero working out its
// output size, and libonnx's own shape inference ends the process on SIGFPE for such a node;
// window attributes are bounded before either runs.
TEST(OnnxRefusal, AWindowWithAZeroStrideOrNegativePadsIsRefused) {
  for (const std::string attrs :
       {"strides = [0, 1], ceil_mode = 1", "strides = [1, 0]",
        "auto_pad = \"SAME_LOWER\", strides = [0, 0]", "pads = [0, -1, 0, 0]"}) {
    const std::string text = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[N, 1, 4, 4] X) => (float[N, 1, H, W] Y)
{
  Y = MaxPool <kernel_shape = [2, 2], )" +
                             attrs + R"(> (X)
}
)";
    auto run = import_and_run(text, 2, {{"X", HostTensor::zeros(DType::kF32, {2, 1, 4, 4})}});
    ASSERT_FALSE(run.ok()) << attrs;
    EXPECT_THAT(message(run.status()), HasSubstr("MaxPool")) << attrs;
    EXPECT_THAT(message(run.status()), AnyOf(HasSubstr("strides holds 0, outside [1, 1048576]"),
                                             HasSubstr("pads holds -1, outside [0, 1048576]")))
        << attrs;
  }
}

// A Conv over X [N, 3, 8, 8] with no kernel_shape, its W an initializer of `dims` (zeros), or,
// with `dims` empty, a graph input.
std::string conv_taking_its_kernel_from(const std::vector<int64_t>& dims) {
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(model_bytes(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[N, 3, 8, 8] X, float[8, 3, 3, 3] W) => (float[N, 8, 6, 6] Y)
{
  Y = Conv <dilations = [1, 1]> (X, W)
}
)")));
  if (dims.empty()) return m.SerializeAsString();
  m.mutable_graph()->mutable_input()->RemoveLast();
  onnx::TensorProto* w = m.mutable_graph()->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  int64_t elements = 1;
  for (int64_t d : dims) {
    w->add_dims(d);
    elements *= d;
  }
  w->set_raw_data(std::string(static_cast<size_t>(elements) * 4, '\0'));
  return m.SerializeAsString();
}

// libonnx's shape inference takes such a Conv's kernel from W's dimensions 2.. and read past the
// input's dimensions when W had the higher rank: fuzz_onnx's SEGV (its input is a seed now).
TEST(OnnxRefusal, AConvolutionKernelThatDisagreesWithItsInputIsRefusedNotACrash) {
  auto higher = parse_onnx(conv_taking_its_kernel_from({8, 3, 3, 3, 1}), "m.onnx", 2);
  ASSERT_FALSE(higher.ok());
  EXPECT_THAT(message(higher.status()), HasSubstr("kernel_shape has incorrect size"));
  auto flat = parse_onnx(conv_taking_its_kernel_from({8, 3}), "m.onnx", 2);
  ASSERT_FALSE(flat.ok());
  EXPECT_THAT(message(flat.status()),
              HasSubstr("m.onnx: node '' (Conv): its weights 'W' have rank 2"));
  auto computed = parse_onnx(conv_taking_its_kernel_from({}), "m.onnx", 2);
  ASSERT_FALSE(computed.ok());
  EXPECT_THAT(message(computed.status()),
              HasSubstr("(Conv): its weights (input 1) are no initializer"));
  auto empty = parse_onnx(conv_taking_its_kernel_from({8, 3, 3, 0}), "m.onnx", 2);
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(message(empty.status()), HasSubstr("kernel_shape holds 0"));
  // The same W of rank 4 is a model like any other: its kernel_shape, written from W, is [3, 3].
  auto fine = parse_onnx(conv_taking_its_kernel_from({8, 3, 3, 3}), "m.onnx", 2);
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ(fine->outputs.at(0).shape, Shape({2, 8, 6, 6}));
}

// One of fuzz_onnx's seeds (tests/fuzz/corpus/onnx), parsed at `batch` and imported with an
// infeed for each input, as the harness does.
absl::Status import_seed(const std::string& name, int64_t batch) {
  std::ifstream in(std::string(TPUSIM_SOURCE_DIR) + "/tests/fuzz/corpus/onnx/" + name,
                   std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.empty()) return absl::NotFoundError(name + " is empty or missing");
  auto model = parse_onnx(bytes, "m.onnx", batch);
  if (!model.ok()) return model.status();
  GraphBuilder b;
  std::map<std::string, Value> inputs;
  for (const TensorInfo& t : model->inputs) inputs[t.name] = b.infeed(t.name, t.dtype, t.shape);
  return import_graph(b, *model, inputs, ImportOptions{}).status();
}

// fuzz_onnx's input (now a seed): MatMul of a scalar and a vector, which the builder refuses,
// was then asked for its product's shape.
TEST(OnnxRefusal, AMatMulTheBuilderRefusesIsNamedNotACrash) {
  const absl::Status imported = import_seed("matmul-of-a-scalar.onnx", 1);
  ASSERT_FALSE(imported.ok());
  EXPECT_THAT(message(imported), HasSubstr("(MatMul)"));
}

// fuzz_onnx's input (now a seed): MatMul of a scalar and a batch of matrices, whose batch
// dimensions were taken as the scalar's dimensions but the last two (UBSan: an offset before
// an empty vector's start). numpy's matmul, ONNX's, takes no scalar.
TEST(OnnxRefusal, AMatMulOfAScalarAndABatchIsRefused) {
  const absl::Status imported = import_seed("matmul-of-a-scalar-and-a-batch.onnx", 1);
  ASSERT_FALSE(imported.ok());
  EXPECT_THAT(message(imported), HasSubstr("(MatMul): MatMul of [] and [8, 1, 1]: no scalars"));
}

// fuzz_onnx's input (now a seed): a MaxPool of an initializer of rank 2, which the importer
// transposed from NCHW to NHWC as if it had rank 4 (ASan: a read past its dimensions). A
// permutation that does not fit leaves the tensor as it is, and the pool refuses it.
TEST(OnnxRefusal, APoolOfAFoldedMatrixIsRefused) {
  const absl::Status imported = import_seed("pool-of-a-folded-matrix.onnx", 1);
  ASSERT_FALSE(imported.ok());
  EXPECT_THAT(message(imported), HasSubstr("(MaxPool): a 2-D pool takes an [N, C, H, W] input"));
}

// fuzz_onnx's input (now a seed): an initializer of 28 dimensions, several of them in the
// thousands and some 0, whose element count overflowed int64 before a 0 was reached (UBSan).
// Counted without overflowing, its dimensions but the zeros are too many to multiply out safely.
TEST(OnnxRefusal, AnInitializerWhoseDimensionsOverflowIsRefused) {
  const absl::Status imported = import_seed("initializer-of-overflowing-dims.onnx", 1);
  ASSERT_FALSE(imported.ok());
  EXPECT_THAT(message(imported), HasSubstr("tensor 'W' of dimensions [8, 20, 9983, 60,"));
  EXPECT_THAT(message(imported), HasSubstr("is too large (more than 134217728 elements"));
}

// fuzz_onnx's input (now a seed): a depthwise Conv whose padding the builder refused (pads of 4
// around a 3x3 window) then had its patches asked for their shape. A converter reading any
// refused value's shape now gets the builder's error, naming the node
// (GraphBuilder.AnInvalidValuesShapeThrowsAndTheStatusSaysWhy).
TEST(OnnxRefusal, ADepthwiseConvolutionTheBuilderRefusesIsNamedNotACrash) {
  const absl::Status imported = import_seed("depthwise-conv-padding-refused.onnx", 2);
  ASSERT_FALSE(imported.ok());
  EXPECT_THAT(message(imported), HasSubstr("m.onnx: node 'd' (Conv): extract_patches 'd/"
                                           "extract_patches': explicit padding (4, 4, 4, 4)"));
}

}  // namespace onnx_refusal_test
}  // namespace tpusim::runtime::onnx_import
