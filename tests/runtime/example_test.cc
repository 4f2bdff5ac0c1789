#include "runtime/data/example.h"

#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tpusim::runtime::data {
namespace example_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string sample() {
  return ExampleBuilder()
      .ints("label", {7})
      .floats("pixels", {0.0F, 0.5F, 1.0F, 1.5F, 2.0F, 2.5F})
      .bytes("name", {"sneaker"})
      .ints("tags", {3, 1, 4})
      .serialize();
}

TEST(Example, ParsesFixedLengthFeaturesIntoTheirShapes) {
  FeatureSpec spec;
  spec["label"] = fixed_len(FeatureType::kInt64, {});
  spec["pixels"] = fixed_len(FeatureType::kFloat, {2, 3});
  spec["name"] = fixed_len(FeatureType::kBytes, {1});
  auto parsed = parse_example(sample(), spec);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->size(), 3u);  // only what the spec asks for
  EXPECT_THAT(parsed->at("label").ints, ElementsAre(7));
  EXPECT_TRUE(parsed->at("label").shape.empty());
  EXPECT_THAT(parsed->at("pixels").shape, ElementsAre(2, 3));
  EXPECT_FLOAT_EQ(parsed->at("pixels").floats[5], 2.5F);
  EXPECT_THAT(parsed->at("name").bytes, ElementsAre("sneaker"));
}

TEST(Example, DefaultsFillAbsentFeaturesAndVarLenTakesAnyCount) {
  FeatureValue zero;
  zero.floats = {0.0F, 0.0F};
  FeatureSpec spec;
  spec["weight"] = fixed_len(FeatureType::kFloat, {2}, zero);
  spec["tags"] = var_len(FeatureType::kInt64);
  spec["missing_tags"] = var_len(FeatureType::kBytes);
  auto parsed = parse_example(sample(), spec);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(parsed->at("weight").floats, ElementsAre(0.0F, 0.0F));
  EXPECT_THAT(parsed->at("weight").shape, ElementsAre(2));
  EXPECT_THAT(parsed->at("tags").ints, ElementsAre(3, 1, 4));
  EXPECT_THAT(parsed->at("tags").shape, ElementsAre(3));
  EXPECT_THAT(parsed->at("missing_tags").shape, ElementsAre(0));
}

TEST(Example, ErrorsNameTheFeatureAndWhatIsWrong) {
  FeatureSpec spec;
  spec["absent"] = fixed_len(FeatureType::kInt64, {});
  EXPECT_THAT(parse_example(sample(), spec, "shard-0 record 3").status().message(),
              HasSubstr("shard-0 record 3: feature 'absent' is required (no default)"));
  spec.clear();
  spec["label"] = fixed_len(FeatureType::kFloat, {});
  EXPECT_THAT(parse_example(sample(), spec).status().message(),
              HasSubstr("feature 'label' holds int64 values; the spec says float"));
  spec.clear();
  spec["pixels"] = fixed_len(FeatureType::kFloat, {28, 28});
  EXPECT_THAT(parse_example(sample(), spec).status().message(),
              HasSubstr("feature 'pixels' has 6 values; shape [28, 28] needs 784"));
  EXPECT_THAT(parse_example("\xff\xff\xff", spec).status().message(),
              HasSubstr("not a tf.Example (3 bytes)"));
}

// An int64 feature a model indexes with is held to its range, the first value outside named with
// its place and what it indexes; the values inside parse as before.
TEST(Example, IntValuesOutsideTheirRangeAreRefused) {
  FeatureSpec spec;
  spec["ids"] = in_range(fixed_len(FeatureType::kInt64, {3}), 0, 10, "10 classes");
  const auto parsed = [&](const std::vector<int64_t>& ids) {
    return parse_example(ExampleBuilder().ints("ids", ids).serialize(), spec, "shard-0 record 3");
  };
  auto ok = parsed({0, 9, 4});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->at("ids").ints, (std::vector<int64_t>{0, 9, 4}));
  EXPECT_EQ(parsed({0, 10, 4}).status().message(),
            "shard-0 record 3: feature 'ids' value 1 is 10, outside [0, 10) (10 classes)");
  EXPECT_THAT(parsed({-1, 0, 0}).status().message(), HasSubstr("value 0 is -1, outside [0, 10)"));
  EXPECT_THAT(parsed({0, 0, INT64_MIN}).status().message(),
              HasSubstr("value 2 is -9223372036854775808"));
}

// A NaN or infinity in a float feature (BERT's masked_lm_weights, an imported model's inputs)
// trained to a NaN loss and saved a NaN checkpoint, exit 0 (the fifth probe).
TEST(Example, FloatValuesThatAreNotFiniteAreRefused) {
  FeatureSpec spec;
  spec["weights"] = fixed_len(FeatureType::kFloat, {3});
  const auto parsed = [&](const std::vector<float>& w) {
    return parse_example(ExampleBuilder().floats("weights", w).serialize(), spec,
                         "shard-0 record 3");
  };
  EXPECT_TRUE(parsed({1, 0, -1e30F}).ok());
  EXPECT_EQ(parsed({1, std::nanf(""), 0}).status().message(),
            "shard-0 record 3: feature 'weights' value 1 is nan, not a finite number");
  EXPECT_THAT(parsed({1, 0, -INFINITY}).status().message(), HasSubstr("value 2 is -inf"));
}

TEST(Example, SerializationIsDeterministic) {
  // Map order inside the proto never changes the bytes.
  const std::string a = ExampleBuilder().ints("a", {1}).ints("b", {2}).ints("c", {3}).serialize();
  const std::string b = ExampleBuilder().ints("c", {3}).ints("a", {1}).ints("b", {2}).serialize();
  EXPECT_EQ(a, b);
  tensorflow::Example back;
  ASSERT_TRUE(back.ParseFromString(a));
  EXPECT_EQ(back.features().feature().at("b").int64_list().value(0), 2);
}

}  // namespace example_test
}  // namespace tpusim::runtime::data
