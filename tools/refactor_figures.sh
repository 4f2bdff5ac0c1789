#!/usr/bin/env bash
# The figures a refactor must leave unchanged (issue 32's constraint), printed as plain text so
# that two runs, before and after a change, compare with diff:
#
#   tools/refactor_figures.sh [BUILD_DIR] > before.txt   # on the old commit
#   tools/refactor_figures.sh [BUILD_DIR] > after.txt    # on the new one
#   diff before.txt after.txt                            # no output: nothing moved
#
# Each figure is simulated or computed, never timed on the host: weights fingerprints (and the
# simulated step) of the default model trained 20 steps on tpusim and on cpu, its input charged
# at the host config's costs so that the step is the same every run; `tpusim layers` cycles on
# the three SCALE-Sim topologies under both MXU policies; a 256 MiB all-reduce on v3-32
# (timing-only); the simulated step of mnist_cnn on v3-2048 with replica folding (timing-only);
# every opcheck case's verdict and error; and the number of tests ctest knows. About a minute on
# the 2-core build machine.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
tpusim="$build/bin/tpusim"
[ -x "$tpusim" ] || { echo "refactor_figures: no $tpusim (build first: make build)" >&2; exit 2; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# A JSON field read with python3's json module (no jq on the build machine).
field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): d=d[k]
print(repr(d) if isinstance(d,float) else d)' "$1" "$2"; }

for backend in tpusim cpu; do
  "$tpusim" train --train-steps 20 --iterations-per-loop 10 --batch-size 256 --backend "$backend" \
    --host-timing config \
    --model-dir "$scratch/train-$backend" --report "$scratch/train-$backend.json" \
    >/dev/null 2>"$scratch/train-$backend.err" ||
    { cat "$scratch/train-$backend.err" >&2; exit 1; }
  echo "train $backend weights_fingerprint $(field "$scratch/train-$backend.json" weights_fingerprint)"
  echo "train $backend final_loss $(field "$scratch/train-$backend.json" final_loss)"
  # The cpu backend's step time is this host's: not a figure.
  [ "$backend" = cpu ] ||
    echo "train $backend sim_seconds_per_step $(field "$scratch/train-$backend.json" sim_seconds_per_step)"
done

for topology in resnet18 resnet50_mlperf transformer_partial_gemm; do
  for policy in tpu scalesim_ws; do
    "$tpusim" layers --topology "tests/runtime/data/scalesim_topologies/$topology.csv" \
      --mxu-policy "$policy" --json >"$scratch/layers.json"
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
print("layers", sys.argv[2], sys.argv[3], "total_cycles", d["total_cycles"],
      "per_layer", ",".join(str(l["cycles"]) for l in d["layers"]))' \
      "$scratch/layers.json" "$topology" "$policy"
  done
done

# Timing-only: computing the values of 32 cores' 256 MiB takes 24 GiB of host memory.
"$tpusim" allreduce --config v3-32 --bytes 256MiB --timing-only --json >"$scratch/allreduce.json"
# Everything but the host's own time.
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
def drop(x):
    if isinstance(x, dict): return {k: drop(v) for k, v in x.items() if "host" not in k and "wall" not in k}
    if isinstance(x, list): return [drop(v) for v in x]
    return x
print("allreduce v3-32 256MiB", json.dumps(drop(d), sort_keys=True))' "$scratch/allreduce.json"

"$tpusim" train --model mnist_cnn --config v3-2048 --batch-size 262144 --train-steps 4 \
  --iterations-per-loop 2 --timing-only --host-timing config --map-threads 8 \
  --fold-replicas on --allreduce torus --model-dir "$scratch/pod" --report "$scratch/pod.json" \
  >/dev/null 2>"$scratch/pod.err" || { cat "$scratch/pod.err" >&2; exit 1; }
echo "pod v3-2048 folded sim_seconds_per_step $(field "$scratch/pod.json" sim_seconds_per_step)"
echo "pod v3-2048 folded analysis.step_seconds $(field "$scratch/pod.json" analysis.step_seconds)"

"$tpusim" opcheck --json >"$scratch/opcheck.json" || true  # a failing case is a figure too
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
def drop(x):
    if isinstance(x, dict): return {k: drop(v) for k, v in x.items() if "seconds" not in k}
    if isinstance(x, list): return [drop(v) for v in x]
    return x
print("opcheck", json.dumps(drop(d), sort_keys=True))' "$scratch/opcheck.json"

echo "ctest tests $(cd "$build" && ctest -N | sed -n 's/^Total Tests: //p')"
