# tpusim front door. `make demo` and `make test` work on a fresh Debian 12 machine.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
VENV ?= .venv
PYTHON ?= $(shell command -v /usr/bin/python3 || command -v python3)
CMAKE_ARGS ?=

# Debian packages the project needs (README, "Dependencies" says what each is for).
APT_PACKAGES := build-essential cmake ninja-build pkg-config ccache git \
  libsystemc-dev libeigen3-dev libboost-program-options-dev \
  protobuf-compiler libprotobuf-dev libabsl-dev libfmt-dev nlohmann-json3-dev zlib1g-dev \
  libturbojpeg0-dev libonnx-dev \
  libgtest-dev libgmock-dev libbenchmark-dev \
  dataset-fashion-mnist python3-venv gnuplot-nox clang libclang-rt-dev libomp-dev \
  openmpi-bin libopenmpi-dev chromium

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
GENERATOR := $(shell command -v ninja >/dev/null && echo Ninja || echo "Unix Makefiles")

.PHONY: all deps apt-deps venv configure build test test-fast test-asan test-asan-ci test-asan-gcc \
  test-tsan demo bench bench-cpu fuzz format tidy clean help
all: build

help:
	@echo "make deps    install Debian packages and the interop virtualenv ($(VENV))"
	@echo "make build   Release build in $(BUILD_DIR)/, executables in $(BUILD_DIR)/bin"
	@echo "make test    deps + build + every test (ctest)"
	@echo "make demo    deps + build + the main job (tpusim train)"
	@echo "make bench   deps + build + benchmarks"
	@echo "make bench-cpu  the cpu backend's training steps beside JAX's (XLA CPU, $(VENV))"
	@echo "make test-asan  every test but the interop tier under ASan + UBSan, in $(FUZZ_DIR)/ (clang)"
	@echo "make test-asan-ci  the same less its two longest duplicate runs (CI)"
	@echo "make test-asan-gcc  the same with g++, the main build's compiler, in $(ASAN_DIR)/"
	@echo "make test-tsan  the threaded parts' tests under TSan, in $(TSAN_DIR)/ (clang)"
	@echo "make fuzz    the libFuzzer harnesses, FUZZ_SECONDS (30) each, in $(FUZZ_DIR)/ (clang)"

deps: apt-deps venv

# Quiet and quick when everything is present: one dpkg-query, no apt-get. dpkg-query fails
# when it knows a package not at all; the comparison below still finds what is missing.
apt-deps:
	@missing=$$({ dpkg-query -W -f='$${db:Status-Abbrev} $${Package}\n' $(APT_PACKAGES) 2>/dev/null || true; } \
	    | awk '$$1 == "ii" {print $$2}' | sort | comm -13 - <(tr ' ' '\n' <<< "$(APT_PACKAGES)" | sed '/^$$/d' | sort)); \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing $$missing"; \
	  $(SUDO) apt-get update -qq; \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

# The virtualenv is rebuilt only when tests/interop/requirements.txt changes.
venv: $(VENV)/.requirements-stamp
$(VENV)/.requirements-stamp: tests/interop/requirements.txt | apt-deps
	@echo "make deps: creating $(VENV) (tensorflow-cpu, tensorboard, jax, onnx, onnxruntime, tf2onnx; pinned)"
	@tools/make_venv.sh $(PYTHON) $(VENV) tests/interop/requirements.txt
	@cp tests/interop/requirements.txt $@

configure:
	@cmake -S . -B $(BUILD_DIR) -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DTPUSIM_WERROR=ON -DTPUSIM_VENV=$(abspath $(VENV)) $(CMAKE_ARGS) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

test: deps build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 900

# The tests without the interop tier (no virtualenv needed).
test-fast: apt-deps build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) -LE interop

demo: deps build
	@$(BUILD_DIR)/bin/tpusim train

bench: deps build
	@$(BUILD_DIR)/bin/tpusim_bench --benchmark_counters_tabular=true
	@$(BUILD_DIR)/bin/tpusim_runtime_bench --benchmark_counters_tabular=true
	@$(BUILD_DIR)/bin/tpusim_data_bench --benchmark_counters_tabular=true
	@$(BUILD_DIR)/bin/tpusim_collective_bench --benchmark_counters_tabular=true
	@$(BUILD_DIR)/bin/tpusim_onnx_bench --benchmark_counters_tabular=true
	@$(BUILD_DIR)/bin/tpusim_study_bench --benchmark_counters_tabular=true
	@$(MAKE) --no-print-directory bench-cpu

# The cpu backend's fp32 training steps and JAX's of the same networks, in the same run, on this
# machine's cores (bench/README.md, "The cpu backend against JAX").
bench-cpu: deps build
	@$(BUILD_DIR)/bin/tpusim_cpu_bench --benchmark_counters_tabular=true
	@$(VENV)/bin/python bench/jax_training_step.py --all --batch 128
	@$(VENV)/bin/python bench/jax_training_step.py --all --batch 1024

# Sanitizers and fuzzing (docs/reliability.md). test-asan builds every library, tool and test with
# ASan and UBSan (any report fails its test) in $(FUZZ_DIR) with clang, the libraries the fuzz
# harnesses use, and runs the suite but the interop tier (it needs the Release build's Python
# peers) and the infeed study (the study's four runs of 224-px JPEG pipelines take 5 minutes each
# under ASan; the Dataset, JPEG and infeed tests and fuzz_jpeg run the same code). CI runs it
# (.ci/run). test-asan-gcc runs the same suite in a g++ build in $(ASAN_DIR), the main build's
# compiler (clang's build computes the same cycles since every model makes its nodes in one order:
# GraphOrder.* in tests/runtime/graph_order_test.cc). Warnings are not errors there: GCC's
# -Wmaybe-uninitialized misfires under the sanitizers.
ASAN_DIR ?= build-asan
SANITIZER_ENV := ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The MPI sweeps' tests run without LeakSanitizer (ASan and UBSan still on): Open MPI 4.1 leaks in
# the plugins it dlopens and unloads at MPI_Finalize, so every rank reports leaks whose frames
# lie in an unloaded, unnamed module, which no suppression can name (its 4.1 has no parameter to
# keep them loaded; a full DWARF unwind on every malloc names some and triples the tests' time).
MPI_TESTS := ^MpiSweep[.]
SANITIZER_ENV_MPI := ASAN_OPTIONS=detect_leaks=0:strict_string_checks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The sanitizer builds carry line tables (-g1), with which ccache hashes the build folder too;
# without it a fresh clone's sanitizer build hits the cache a previous one filled.
CCACHE_ENV := CCACHE_NOHASHDIR=1
# Linked --as-needed: a test binary that uses no System would otherwise still need the sc_main of
# libsystemc.so's main() (the Release build's link drops the unused library by itself).
LINK_AS_NEEDED := -Wl,--as-needed
SANITIZER_BUILD := -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  -DTPUSIM_WITH_CUDA=OFF -DTPUSIM_BUILD_BENCH=OFF -DTPUSIM_DOCS_TIMEOUT=2700
# Every test but the interop tier and the infeed study, then the MPI sweeps without leak checks.
SANITIZER_CTEST = cd $(1) && $(SANITIZER_ENV) ctest --output-on-failure -j $(JOBS) -LE interop \
  -E '^InfeedStudy[.]|$(MPI_TESTS)' --timeout 2700 && \
  $(SANITIZER_ENV_MPI) ctest --output-on-failure -j $(JOBS) -R '$(MPI_TESTS)' --timeout 1800

test-asan-gcc: apt-deps
	@cmake -S . -B $(ASAN_DIR) -G "$(GENERATOR)" $(SANITIZER_BUILD) -DTPUSIM_BUILD_TESTS=ON \
	  -DCMAKE_EXE_LINKER_FLAGS="$(LINK_AS_NEEDED)" \
	  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined \
	  -fno-omit-frame-pointer" >/dev/null
	@$(CCACHE_ENV) cmake --build $(ASAN_DIR) -j $(JOBS)
	@$(call SANITIZER_CTEST,$(ASAN_DIR))

# libFuzzer (clang's: Debian's clang 14 and libclang-rt-dev) in $(FUZZ_DIR): the libraries with
# ASan, UBSan and coverage, one harness per reader of outside bytes (tests/fuzz). Each runs
# FUZZ_SECONDS from its checked-in seeds (tests/fuzz/corpus/NAME; what it finds goes to
# $(FUZZ_DIR)/corpus/NAME); a crash, leak, UB, 2 GB of memory or a 10 s input (a hang) fails it
# with the input saved in $(FUZZ_DIR)/crashes. The harnesses that run a System (FUZZ_ON_SYSTEM:
# the program harness, and the saved-model harness's predict) run every input on one, which
# recovers from a deadlock or a cap stop, without leak checks (LeakSanitizer's scan at exit
# misreads the process after SystemC's coroutines ran; test-asan checks System runs for leaks).
FUZZ_DIR ?= build-fuzz
FUZZ_SECONDS ?= 30
FUZZ_TARGETS := tfrecord example checkpoint topology idx trace config onnx saved_model jpeg \
  cli_values program
FUZZ_ON_SYSTEM := program saved_model
FUZZ_CONFIGURE := cmake -S . -B $(FUZZ_DIR) -G "$(GENERATOR)" $(SANITIZER_BUILD) \
  -DTPUSIM_BUILD_TESTS=ON -DCMAKE_CXX_COMPILER=clang++ -DTPUSIM_FUZZ=ON \
  -DCMAKE_EXE_LINKER_FLAGS="$(LINK_AS_NEEDED)" \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined,fuzzer-no-link \
  -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
fuzz: apt-deps
	@$(FUZZ_CONFIGURE) >/dev/null
	@$(CCACHE_ENV) cmake --build $(FUZZ_DIR) -j $(JOBS) --target fuzz_harnesses
	@mkdir -p $(FUZZ_DIR)/crashes
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_DIR)/corpus/$$t; \
	  echo "make fuzz: $$t for $(FUZZ_SECONDS) s"; \
	  leaks=1; case " $(FUZZ_ON_SYSTEM) " in *" $$t "*) leaks=0;; esac; \
	  ASAN_OPTIONS=detect_leaks=$$leaks $(FUZZ_DIR)/bin/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 \
	    -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_DIR)/crashes/$$t- \
	    $(FUZZ_DIR)/corpus/$$t tests/fuzz/corpus/$$t 2>$(FUZZ_DIR)/fuzz-$$t.log \
	    || { tail -40 $(FUZZ_DIR)/fuzz-$$t.log; exit 1; }; \
	  { grep -E "stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb" \
	    $(FUZZ_DIR)/fuzz-$$t.log || true; } | sed "s/^/  /"; \
	  { grep -E "^#[0-9]+.*cov: " $(FUZZ_DIR)/fuzz-$$t.log || true; } | tail -1 | sed "s/^/  /"; \
	done

# Every test under ASan and UBSan (but the interop tier and the infeed study, above), built in
# $(FUZZ_DIR) on the libraries the harnesses use (clang): the readers', the simulator's, the
# runtime's, the estimator's, the jobs', the CLI's end-to-end tier (the `tpusim` binary run as a
# user runs it: training, compare, checkpoints killed mid-write, MPI sweeps, hostile inputs), the
# examples and every doc's commands (Docs.CommandsStillHold/*, one test a doc, side by side). The
# graph tests pin every zoo model's node order (tests/runtime/graph_order_test.cc), which this
# clang build checks against g++'s: C++ leaves the order of an expression's operands open, and a
# model that made its nodes in an order the compiler chose would simulate in other cycles.
test-asan: apt-deps
	@$(FUZZ_CONFIGURE) >/dev/null
	@$(CCACHE_ENV) cmake --build $(FUZZ_DIR) -j $(JOBS)
	@$(call SANITIZER_CTEST,$(FUZZ_DIR))

# CI's sanitizer tier (.ci/run): test-asan without its longest runs whose code paths other tests
# already take under ASan (docs/reliability.md, "CI on a new machine"): docs/estimator.md's
# commands (a 300-step training run with its input pipeline, compare, evaluate, predict and the
# saved model's runs: the CLI tier's Cli.TrainWritesTheReportAndResumesFromModelDir, CliSavedModel.*,
# CliBert.* and Cli.Compare* run each of them), docs/profiling.md's (full-size image_cnn runs
# and sweeps of up to eight points: Cli.Sweep*, Cli.Train*Trace* and the jpeg pipeline's
# Dataset and infeed tests), docs/onnx.md's (a Keras export, its import, training, compare,
# evaluate and predict: CliOnnx.*), docs/README.md's (three 50-step mlp runs at 1, 10 and 50
# steps a loop: Cli.Train* and the estimator's loop tests) and the 20-step example (the
# installed-package test builds and runs the same program). Together about 2,000 s of the
# tier's test time, which a cold build on a new machine cannot spare inside CI's hour.
# Then the tier's three longest (2026-12-03, 507 s of its test time): the checkpoint-save kill
# of CrashConsistency (its sibling KilledAfterSummariesOrBetweenLoops resumes from killed runs,
# and Checkpoint.* and fuzz_checkpoint write and read checkpoints, under ASan), the full-size
# ResNet-50 ONNX step (CliOnnx.* and fuzz_onnx import, train and predict smaller files) and
# the installed-package build (its program is a user's model on the installed headers, which
# every other test compiles; make test runs it).
SANITIZER_CI_SKIP := Docs[.]CommandsStillHold/docs/(estimator|profiling|onnx|README)[.]md|Examples[.]CustomModelTrainsOnAV3_8|CrashConsistency[.]KilledWhileSavingCheckpointsTheRunResumesBitwise|CliOnnx[.]ResNet50FromOnnxStepsAsTheZoos|Install[.]CustomModelBuildsAgainstThePackage
test-asan-ci: apt-deps
	@$(FUZZ_CONFIGURE) >/dev/null
	@$(CCACHE_ENV) cmake --build $(FUZZ_DIR) -j $(JOBS)
	@cd $(FUZZ_DIR) && $(SANITIZER_ENV) ctest --output-on-failure -j $(JOBS) -LE interop \
	  -E '^InfeedStudy[.]|$(MPI_TESTS)|^($(SANITIZER_CI_SKIP))$$' --timeout 2700 && \
	  $(SANITIZER_ENV_MPI) ctest --output-on-failure -j $(JOBS) -R '$(MPI_TESTS)' --timeout 1800

# ThreadSanitizer over the parts that run host threads (docs/reliability.md, "Sanitizers"): the
# Dataset (parallel map and batch, prefetch, interleaved files), the infeed driver's enqueue
# threads and stall watch, the cpu backend's OpenMP GEMM tasks and the MXU numerics worker, in a
# clang build in $(TSAN_DIR). Their test binaries run whole, each in one process (none of them
# starts SystemC, whose QuickThreads coroutines TSan cannot follow). libomp is not instrumented:
# its Archer tool (OMP_TOOL_LIBRARIES) tells TSan of OpenMP's forks, joins and barriers.
TSAN_DIR ?= build-tsan
TSAN_TESTS := tpusim_data_tests tpusim_runtime_tests tpusim_sim_tests
ARCHER := $(firstword $(wildcard $(dir $(realpath $(shell command -v clang++)))../lib/libarcher.so))
test-tsan: apt-deps
	@test -n "$(ARCHER)" || { echo "make test-tsan: no libarcher.so beside clang++ (libomp-dev)"; exit 1; }
	@cmake -S . -B $(TSAN_DIR) -G "$(GENERATOR)" $(SANITIZER_BUILD) -DTPUSIM_BUILD_TESTS=ON \
	  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_EXE_LINKER_FLAGS="$(LINK_AS_NEEDED)" \
	  -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" >/dev/null
	@$(CCACHE_ENV) cmake --build $(TSAN_DIR) -j $(JOBS) --target $(TSAN_TESTS)
	@for t in $(TSAN_TESTS); do \
	  echo "make test-tsan: $$t"; \
	  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1 \
	  OMP_TOOL_LIBRARIES=$(ARCHER) $(TSAN_DIR)/bin/$$t --gtest_brief=1 || exit 1; \
	done

format:
	@git ls-files '*.h' '*.cc' '*.cu' '*.cuh' | xargs clang-format -i

tidy: configure
	@git ls-files '*.cc' | grep -v '^tests/\|^bench/' | xargs clang-tidy -p $(BUILD_DIR) --quiet

clean:
	@rm -rf $(BUILD_DIR)
