#!/usr/bin/env bash
# The checks issue 9 asks of a lent GPU machine, in one go, each result a file in RESULTS:
#
#   bash tools/device/gpu_checks.sh BUNDLE RESULTS [STEP ...]
#
# BUNDLE is tools/device/bundle.sh's folder carried to the machine (out/device); RESULTS is where
# the files go ($OUT on the device machine). STEPs, in this order by default:
#   backends  tpusim backends --json                        -> backends.json
#   tests     tpusim_runtime_tests --gtest_filter='Gpu*'      -> gpu_tests.json, tests.log
#   opcheck   tpusim opcheck --backends $OPCHECK_BACKENDS     -> opcheck.json
#   compare   tpusim compare --model mnist_cnn --steps $STEPS --batch-size $BATCH -> compare.json
#   compare_mixed  the same under --dtype-policy mixed_bfloat16 -> compare_mixed.json
#   bench     tpusim_gpu_bench (the backend's GEMMs and bare cuBLAS) -> gemm_bench.json
# Each step's stderr goes to RESULTS/STEP.log and its exit status to RESULTS/STEP.rc; a failing
# step does not stop the others. tools/device/gpu_report.py RESULTS turns the files into the
# tables docs/runtime.md records. The backends can be changed to try the script without a GPU:
#   OPCHECK_BACKENDS=cpu:mxu,tpusim COMPARE_BACKENDS=cpu,tpusim STEPS=5 bash tools/device/gpu_checks.sh ...
set -uo pipefail
bundle=${1:?usage: gpu_checks.sh BUNDLE RESULTS [STEP ...]}
results=${2:?usage: gpu_checks.sh BUNDLE RESULTS [STEP ...]}
shift 2
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(backends tests opcheck compare compare_mixed bench)
opcheck_backends=${OPCHECK_BACKENDS:-gpu,gpu:mxu,tpusim}
compare_backends=${COMPARE_BACKENDS:-gpu,cpu,tpusim}
compare_steps=${STEPS:-200}
compare_batch=${BATCH:-256}
[ -x "$bundle/run" ] || { echo "gpu_checks.sh: no $bundle/run (tools/device/bundle.sh makes it)" >&2; exit 2; }
mkdir -p "$results"
run=$(cd "$bundle" && pwd)/run
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT

for step in "${steps[@]}"; do
  start=$(date +%s)
  case "$step" in
    backends) "$run" tpusim backends --json >"$results/backends.json" 2>"$results/backends.log" ;;
    tests) "$run" tpusim_runtime_tests --gtest_filter='Gpu*' \
             --gtest_output="json:$results/gpu_tests.json" >"$results/tests.log" 2>&1 ;;
    opcheck) "$run" tpusim opcheck --backends "$opcheck_backends" --json \
               >"$results/opcheck.json" 2>"$results/opcheck.log" ;;
    compare) "$run" tpusim compare --model mnist_cnn --steps "$compare_steps" \
               --batch-size "$compare_batch" --backends "$compare_backends" \
               --data "$data/fashion-mnist" --json \
               >"$results/compare.json" 2>"$results/compare.log" ;;
    compare_mixed) "$run" tpusim compare --model mnist_cnn --steps "$compare_steps" \
               --batch-size "$compare_batch" --backends "$compare_backends" \
               --dtype-policy mixed_bfloat16 --data "$data/fashion-mnist" --json \
               >"$results/compare_mixed.json" 2>"$results/compare_mixed.log" ;;
    bench) "$run" tpusim_gpu_bench --benchmark_format=json \
             >"$results/gemm_bench.json" 2>"$results/bench.log" ;;
    *) echo "gpu_checks.sh: unknown step '$step' (backends tests opcheck compare compare_mixed" \
            "bench)" >&2
       exit 2 ;;
  esac
  rc=$?
  echo "$rc" >"$results/$step.rc"
  echo "gpu_checks.sh: $step exit $rc in $(($(date +%s) - start)) s"
done
