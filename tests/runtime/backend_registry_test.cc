// The backend registry (runtime/backend/registry.h) and the one check of every backend-dependent
// option against the backends' declarations (runtime/backend/declaration.h).
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/backend/registry.h"

namespace tpusim::runtime {
namespace backend_registry_test {

using ::testing::HasSubstr;

std::string message(const absl::Status& s) { return std::string(s.message()); }

TEST(BackendRegistry, ListsEachBackendOnceWithOneNumericsReference) {
  std::set<std::string> names;
  int references = 0;
  for (const BackendDeclaration& b : registered_backends()) {
    EXPECT_TRUE(names.insert(b.name).second) << b.name << " registered twice";
    EXPECT_FALSE(b.description.empty()) << b.name;
    EXPECT_FALSE(b.supports.precisions.empty()) << b.name;
    EXPECT_TRUE(b.make && b.availability) << b.name;
    references += b.numerics_reference ? 1 : 0;
  }
  EXPECT_EQ(references, 1);
  EXPECT_EQ(reference_backend().name, "cpu");
  EXPECT_EQ(backend_names(" | "), "tpusim | cpu | gpu");
}

TEST(BackendRegistry, UnknownNamesAreRefusedListingTheKnownOnes) {
  const auto found = find_backend("abacus");
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(message(found.status()),
              HasSubstr("no backend named 'abacus' (known: tpusim, cpu, gpu)"));
  EXPECT_EQ(make_backend("abacus").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(check_registered_options("abacus", {}).code(), absl::StatusCode::kNotFound);
}

TEST(BackendRegistry, MadeBackendsAnswerToTheirDeclaration) {
  for (const char* name : {"tpusim", "cpu"}) {
    auto backend = make_backend(name);
    ASSERT_TRUE(backend.ok()) << backend.status();
    EXPECT_EQ((*backend)->name(), name);
    const BackendDeclaration& registered = **find_backend(name);
    EXPECT_EQ((*backend)->declaration().description, registered.description);
    EXPECT_EQ((*backend)->declaration().supports.precisions, registered.supports.precisions);
  }
}

// Every option only the tpusim backend honours, as the CLI's flag and as the field: the cpu
// backend refuses each, naming the backend that supports it; tpusim takes them all.
TEST(BackendRegistry, EachTpusimOnlyOptionNamesTheBackendThatSupportsIt) {
  struct Case {
    const char* flag;
    const char* field;
    CompileOptions options;
    RunFeatures run;
  };
  std::vector<Case> cases(11);
  cases[0] = {"--allreduce", "allreduce 'torus2d'", {}, {}};
  cases[0].options.allreduce = AllReduceAlgorithm::kTorus2d;
  cases[1] = {"--overlap-allreduce", "overlap_allreduce off", {}, {}};
  cases[1].options.overlap_allreduce = false;
  cases[2] = {"--allreduce-combine-threshold", "allreduce_combine_bytes 4096", {}, {}};
  cases[2].options.allreduce_combine_bytes = 4096;
  cases[3] = {"--fuse-convolutions", "fuse_convolutions off", {}, {}};
  cases[3].options.fuse_convolutions = false;
  cases[4] = {"--fuse-pools", "fuse_pools off", {}, {}};
  cases[4].options.fuse_pools = false;
  cases[5] = {"--recompute-shared-producers", "recompute_shared_producers off", {}, {}};
  cases[5].options.recompute_shared_producers = false;
  cases[6] = {"--fuse-reductions", "fuse_reductions off", {}, {}};
  cases[6].options.fuse_reductions = false;
  cases[7] = {"--timing-only", "timing_only", {}, {}};
  cases[7].run.timing_only = true;
  cases[8] = {"--trace", "a trace (trace_path)", {}, {}};
  cases[8].run.trace = true;
  cases[9] = {"--fuse-multi-output", "fuse_multi_output off", {}, {}};
  cases[9].options.fuse_multi_output = false;
  cases[10] = {"--fuse-conv-reductions", "fuse_conv_reductions off", {}, {}};
  cases[10].options.fuse_conv_reductions = false;
  for (const Case& c : cases) {
    const absl::Status flag =
        check_registered_options("cpu", c.options, c.run, OptionNames::kFlags);
    EXPECT_EQ(flag.code(), absl::StatusCode::kInvalidArgument) << c.flag;
    EXPECT_THAT(message(flag), HasSubstr(std::string(c.flag) + " needs the tpusim backend (cpu and "
                                                               "gpu: "));
    EXPECT_THAT(message(check_registered_options("gpu", c.options, c.run)),
                HasSubstr(std::string("gpu backend: ") + c.field + " needs the tpusim backend"));
    // Without the registry (a backend's own compile), the error names only the backend itself.
    EXPECT_THAT(message(check_backend_options(**find_backend("cpu"), c.options, c.run)),
                HasSubstr(std::string("cpu backend: ") + c.field + " is not supported (cpu: "));
    EXPECT_TRUE(check_registered_options("tpusim", c.options, c.run).ok()) << c.flag;
  }
}

TEST(BackendRegistry, OptionsNoBackendTakesAreRefusedEverywhere) {
  // A precision or an algorithm no backend has is not a word the parsers know (the CLI names
  // them: "--precision must be mxu or fp32", "--allreduce 'star' is not one of ...").
  EXPECT_EQ(kPrecisions.parse("fp16"), std::nullopt);
  EXPECT_EQ(kPrecisions.list(), "fp32 or mxu");
  EXPECT_EQ(kAllReduceAlgorithms.parse("star"), std::nullopt);
  CompileOptions no_replicas;
  no_replicas.replicas = 0;
  CompileOptions too_many;
  too_many.replicas = 2;
  too_many.simulated_replicas = 3;
  for (const BackendDeclaration& b : registered_backends()) {
    EXPECT_THAT(message(check_backend_options(b, no_replicas)),
                HasSubstr(b.name + " backend: replicas must be at least 1"));
    EXPECT_THAT(message(check_backend_options(b, too_many)),
                HasSubstr("3 simulated replicas of 2"));
    EXPECT_TRUE(check_backend_options(b, CompileOptions{}).ok()) << b.name;
  }
}

TEST(BackendRegistry, ABackendWithOnePrecisionComputesAtItWhateverIsAsked) {
  const BackendDeclaration& tpusim = **find_backend("tpusim");
  const BackendDeclaration& cpu = **find_backend("cpu");
  EXPECT_EQ(effective_precision(tpusim, Precision::kFp32), Precision::kMxu);
  EXPECT_EQ(effective_precision(cpu, Precision::kFp32), Precision::kFp32);
  EXPECT_EQ(effective_precision(cpu, Precision::kMxu), Precision::kMxu);
  EXPECT_TRUE(precision_choice_error(cpu, "cpu:fp32").ok());
  EXPECT_TRUE(check_dtype_policy(tpusim, DTypePolicy::kMixedBFloat16).ok());
  BackendDeclaration float32_only = cpu;
  float32_only.supports.dtype_policies = {DTypePolicy::kFloat32};
  EXPECT_THAT(message(check_dtype_policy(float32_only, DTypePolicy::kMixedBFloat16)),
              HasSubstr("cpu backend: dtype policy 'mixed_bfloat16' is not one it trains "
                        "(float32)"));
  EXPECT_THAT(message(precision_choice_error(tpusim, "tpusim:fp32")),
              HasSubstr("'tpusim:fp32': tpusim's precision is its MXU's (bf16 products), not an "
                        "option"));
}

TEST(BackendRegistry, TimingOnlyIsRefusedByBackendsThatAlwaysCompute) {
  auto cpu = make_backend("cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_TRUE((*cpu)->set_timing_only(false).ok());
  EXPECT_THAT(message((*cpu)->set_timing_only(true)),
              HasSubstr("cpu backend: timing_only is not supported (cpu: values always computed)"));
  auto tpu = make_backend("tpusim");
  ASSERT_TRUE(tpu.ok()) << tpu.status();
  EXPECT_TRUE((*tpu)->set_timing_only(true).ok());
}

}  // namespace backend_registry_test
}  // namespace tpusim::runtime
