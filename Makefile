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
  dataset-fashion-mnist python3-venv gnuplot-nox clang libclang-rt-dev

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
GENERATOR := $(shell command -v ninja >/dev/null && echo Ninja || echo "Unix Makefiles")

.PHONY: all deps apt-deps venv configure build test test-fast demo bench fuzz format tidy clean help
all: build

help:
	@echo "make deps    install Debian packages and the interop virtualenv ($(VENV))"
	@echo "make build   Release build in $(BUILD_DIR)/, executables in $(BUILD_DIR)/bin"
	@echo "make test    deps + build + every test (ctest)"
	@echo "make demo    deps + build + the main job (tpusim train)"
	@echo "make bench   deps + build + benchmarks"
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
	@rm -rf $(VENV)
	@$(PYTHON) -m venv $(VENV)
	@$(VENV)/bin/pip install -q --disable-pip-version-check -r tests/interop/requirements.txt
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

# libFuzzer harnesses (docs/reliability.md, "Fuzzing"): a clang build of the readers with ASan,
# UBSan and coverage in $(FUZZ_DIR); each harness runs FUZZ_SECONDS from its checked-in seeds
# (tests/fuzz/corpus/NAME; what it finds goes to $(FUZZ_DIR)/corpus/NAME), and a crash, leak,
# UB or 10 s hang fails the target with the input saved in $(FUZZ_DIR)/crashes.
FUZZ_DIR ?= build-fuzz
FUZZ_SECONDS ?= 30
FUZZ_TARGETS := tfrecord example checkpoint topology idx trace config onnx saved_model
fuzz: apt-deps
	@cmake -S . -B $(FUZZ_DIR) -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_COMPILER=clang++ -DTPUSIM_FUZZ=ON -DTPUSIM_WITH_CUDA=OFF \
	  -DTPUSIM_BUILD_TESTS=OFF -DTPUSIM_BUILD_BENCH=OFF \
	  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined" \
	  >/dev/null
	@cmake --build $(FUZZ_DIR) -j $(JOBS) --target fuzz_harnesses
	@mkdir -p $(FUZZ_DIR)/crashes
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_DIR)/corpus/$$t; \
	  echo "make fuzz: $$t for $(FUZZ_SECONDS) s"; \
	  $(FUZZ_DIR)/bin/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	    -max_len=65536 -print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/crashes/$$t- \
	    $(FUZZ_DIR)/corpus/$$t tests/fuzz/corpus/$$t 2>$(FUZZ_DIR)/$$t.log \
	    || { tail -40 $(FUZZ_DIR)/$$t.log; exit 1; }; \
	  grep -E "stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb" $(FUZZ_DIR)/$$t.log \
	    | sed "s/^/  /"; \
	done

format:
	@git ls-files '*.h' '*.cc' '*.cu' '*.cuh' | xargs clang-format -i

tidy: configure
	@git ls-files '*.cc' | grep -v '^tests/\|^bench/' | xargs clang-tidy -p $(BUILD_DIR) --quiet

clean:
	@rm -rf $(BUILD_DIR)
