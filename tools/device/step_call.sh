#!/usr/bin/env bash
# Issue 36's gpu checks in one device call: is the backend still right, how fast is its
# training step and where does the time go, and how near cuBLAS's rate is its mxu GEMM.
#
#   bash tools/device/step_call.sh BUNDLE OUT [DEADLINE_S]   (default 400)
#
# Writes at most 8 files to OUT (a lent machine's limit), each step killed at the deadline:
#   machine.txt   nvidia-smi, the CPUs, where cuBLAS and libcuda were found
#   tests.log     tpusim_runtime_tests --gtest_filter='Gpu*' (the backend against the cpu)
#   step.log      tpusim_gpu_bench's training steps (mnist_cnn at global batch 1024)
#   profile_mxu.txt, profile_fp32.txt   the node profiles of those steps (TPUSIM_GPU_PROFILE)
#   gemm.log      the GEMM benchmarks: the backend's fp32 and mxu paths against cuBLAS (1024^3
#                 five times, interleaved), and the weight gradients split along K or not
#   train.log     tpusim train --backend gpu at the default batch on synthetic input (the
#                 bundle can go without Fashion-MNIST: a call carries at most 64 MiB)
#   opcheck.log   tpusim opcheck --backends gpu,gpu:mxu
# FULLSIZE=1 instead runs the full-size models' training steps (ResNet-50, BERT-Large; issue 36,
# item 5): fullsize.log with the steps, profile_resnet50.txt and profile_bert_large.txt with
# their mxu profiles at 8 x 8.
set -uo pipefail
bundle=${1:?usage: step_call.sh BUNDLE OUT [DEADLINE_S]}
out=${2:?usage: step_call.sh BUNDLE OUT [DEADLINE_S]}
deadline=${3:-400}
here=$(cd "$(dirname "$0")" && pwd)
start=$(date +%s)
mkdir -p "$out"
run="$(cd "$bundle" && pwd)/run"
source "$here/cuda_libraries.sh"
{
  nvidia-smi 2>&1
  echo "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
  echo "TPUSIM_LIBRARY_PATH=$TPUSIM_LIBRARY_PATH"
} >"$out/machine.txt"

# step NAME FILE COMMAND...: runs COMMAND into FILE (stdout and stderr) within the deadline.
step() {
  local name=$1 file=$2
  shift 2
  local left=$((deadline - ($(date +%s) - start)))
  if [ "$left" -le 5 ]; then
    echo "step_call.sh: no time left for $name" | tee -a "$file"
    return
  fi
  local t0=$(date +%s)
  timeout -k 5 "$left" "$@" >"$file" 2>&1
  echo "step_call.sh: $name exit $? in $(($(date +%s) - t0)) s"
}

if [ "${FULLSIZE:-0}" = 1 ]; then
  for m in resnet50 bert_large; do
    TPUSIM_GPU_PROFILE="$out/profile_$m.txt" step "$m mxu" "$out/fullsize_$m.log" "$run" \
      tpusim_gpu_bench --benchmark_filter="BM_GpuTrainingStep/$m/64/8/1" \
      --benchmark_counters_tabular=true
    step "$m fp32" "$out/fullsize_${m}_fp32.log" "$run" tpusim_gpu_bench \
      --benchmark_filter="BM_GpuTrainingStep/$m/(64/8/0|8/1/0)" --benchmark_counters_tabular=true
  done
  cat "$out"/fullsize_*.log >"$out/fullsize.log" && rm -f "$out"/fullsize_*.log
  echo "step_call.sh: $(($(date +%s) - start)) s"
  grep -E 'BM_|ERROR' "$out/fullsize.log"
  for m in resnet50 bert_large; do sed -n '1p;/share  op/,+12p' "$out/profile_$m.txt"; done
  exit 0
fi
step tests "$out/tests.log" "$run" tpusim_runtime_tests --gtest_filter='Gpu*:GemmCall*'
for p in 1:mxu 0:fp32; do
  TPUSIM_GPU_PROFILE="$out/profile_${p#*:}.txt" step "step ${p#*:}" "$out/step_${p#*:}.log" \
    "$run" tpusim_gpu_bench --benchmark_filter="BM_GpuTrainingStep/mnist_cnn/1024/8/${p%%:*}" \
    --benchmark_counters_tabular=true
done
cat "$out/step_mxu.log" "$out/step_fp32.log" >"$out/step.log" && rm -f "$out"/step_*.log
step "1 replica" "$out/step_one.log" "$run" tpusim_gpu_bench \
  --benchmark_filter='BM_GpuTrainingStep/mnist_cnn/1024/1/1' --benchmark_counters_tabular=true
cat "$out/step_one.log" >>"$out/step.log" && rm -f "$out/step_one.log"
# 1024^3, where a product takes about 10 us, five times over with the runs interleaved at
# random (the GPU's clocks and the order of runs move such short figures): the medians.
step "gemm 1024" "$out/gemm_1024.log" "$run" tpusim_gpu_bench \
  --benchmark_filter='BM_GpuBackendGemm/1024/[01]|BM_CublasGemm/1024/1' \
  --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true \
  --benchmark_report_aggregates_only=true --benchmark_counters_tabular=true
step gemm "$out/gemm_rest.log" "$run" tpusim_gpu_bench --benchmark_filter='BM_GpuBackendGemm|BM_CublasGemm/|BM_Fast16bfRounding|BM_WeightGradientGemm' \
  --benchmark_counters_tabular=true
cat "$out/gemm_1024.log" "$out/gemm_rest.log" >"$out/gemm.log" && rm -f "$out"/gemm_*.log
work=$(mktemp -d)
step train "$out/train.log" bash -c "cd $work && time '$run' tpusim train --model mnist_cnn \
  --backend gpu --input synthetic --train-steps 30 --iterations-per-loop 10 --model-dir $work/m"
step opcheck "$out/opcheck.log" "$run" tpusim opcheck --backends gpu,gpu:mxu
echo "step_call.sh: $(($(date +%s) - start)) s"
tail -5 "$out/tests.log"
cat "$out/step.log" | grep -E 'BM_|ms'
head -40 "$out/profile_mxu.txt"
grep -E 'BM_|TFLOPS|vs_mxu|median' "$out/gemm.log"
grep -E 'real|step|loss' "$out/train.log" | tail -8
tail -4 "$out/opcheck.log"
