#!/usr/bin/env bash
# Issue 9's checks in one device call, fitted to the lease: a lent GPU machine gives a session
# 15 minutes, and returns at most 8 files from $OUT.
#
#   bash tools/device/device_call.sh BUNDLE OUT [DEADLINE_S]   (default 470)
#
# 1. probe: the machine (nvidia-smi, CPUs, glibc) and where cuBLAS and the driver's libcuda lie,
#    passed to BUNDLE/run as TPUSIM_LIBRARY_PATH (the bundle carries neither);
# 2. $SOLO (default: backends tests bench, gpu_checks.sh's steps) one after another on an idle
#    machine, so the GEMM timings have the GPU and the CPUs to themselves;
# 3. $PARALLEL's steps side by side (default: opcheck, the 200-step compares of mnist_cnn at
#    batch 256, float32 and mixed_bfloat16, and the same at batch 64 as a fallback should those
#    outlast the deadline); a step written short:STEP runs at batch 64 into RESULTS/short. The cpu
#    backend and the simulator's GEMMs run on OpenMP threads, so each compare gets an equal share
#    of the cores (OMP_NUM_THREADS): on the first H200 call, four compares at 16 threads each
#    oversubscribed the 16 cores and none finished its cpu run in 390 s.
# Each step past the deadline is killed (its .rc file then says 124). Everything is packed into
# OUT/results.tar.gz and tools/device/gpu_report.py's tables are printed last, so the call's
# output holds them even if the archive does not come back.
#   SOLO="backends tests" PARALLEL="compare short:compare short:compare_mixed" bash ... 240
set -uo pipefail
bundle=${1:?usage: device_call.sh BUNDLE OUT [DEADLINE_S]}
out=${2:?usage: device_call.sh BUNDLE OUT [DEADLINE_S]}
deadline=${3:-470}
here=$(cd "$(dirname "$0")" && pwd)
start=$(date +%s)
left() { echo $((deadline - ($(date +%s) - start))); }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
results=$work/results
mkdir -p "$results/short" "$out"

{
  echo "== nvidia-smi"
  nvidia-smi 2>&1
  echo "== CPU"
  echo "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
  echo "== glibc"
  ldd --version 2>&1 | head -1
  echo "== LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  echo "== libcuda.so.1, libcublas.so.13"
  ldconfig -p 2>/dev/null | grep -E 'libcuda\.so\.1|libcublas' || echo "(not in the loader's cache)"
} >"$results/machine.txt"
source "$here/cuda_libraries.sh"
echo "== TPUSIM_LIBRARY_PATH=$TPUSIM_LIBRARY_PATH" >>"$results/machine.txt"
echo "device_call.sh: cuBLAS in '${cublas}', libcuda in '${cuda_driver}'"

# One gpu_checks.sh run, killed at the deadline.
checks() {
  local dir=$1
  shift
  local s
  s=$(left)
  [ "$s" -gt 5 ] || { echo "device_call.sh: no time left for $*"; return; }
  timeout -k 5 "$s" bash "$here/gpu_checks.sh" "$bundle" "$dir" "$@"
  local rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "device_call.sh: $* passed the ${deadline} s deadline" | tee -a "$dir/deadline.log"
    for step in "$@"; do [ -e "$dir/$step.rc" ] || echo 124 >"$dir/$step.rc"; done
  fi
}

read -r -a solo <<<"${SOLO:-backends tests bench}"
read -r -a parallel <<<"${PARALLEL:-opcheck compare compare_mixed short:compare short:compare_mixed}"
[ ${#solo[@]} -eq 0 ] || checks "$results" "${solo[@]}"
# The loader's account of a backend that found no GPU, to tell a missing library from no device.
if ! grep -q '"available": *true' "$results/backends.json" 2>/dev/null; then
  LD_DEBUG=libs "$bundle/run" tpusim backends >"$results/ld_debug.log" 2>&1
fi
compares=$(printf '%s\n' "${parallel[@]}" | grep -c compare)
threads=$(($(nproc) / (compares > 0 ? compares : 1)))
export OMP_NUM_THREADS=$((threads > 0 ? threads : 1))
echo "device_call.sh: ${compares} compares side by side, ${OMP_NUM_THREADS} OpenMP threads each"
for step in "${parallel[@]}"; do
  case "$step" in
    short:*) BATCH=64 checks "$results/short" "${step#short:}" & ;;
    *) checks "$results" "$step" & ;;
  esac
done
wait

tar -C "$work" -czf "$out/results.tar.gz" results
echo "device_call.sh: $(($(date +%s) - start)) s; $(du -h "$out/results.tar.gz" | cut -f1) of results"
python3 "$here/gpu_report.py" "$results"
echo "== the batch-64 fallback"
python3 "$here/gpu_report.py" "$results/short" | sed -n '/ompare/,$p'
