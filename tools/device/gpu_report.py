#!/usr/bin/env python3
"""Turns tools/device/gpu_checks.sh's RESULTS folder into the Markdown docs/runtime.md records.

    python3 tools/device/gpu_report.py RESULTS

Prints: the device, the GPU tests' outcome, opcheck's largest relative error per op and backend
(against its reference, with each op's tolerance), the mnist_cnn compare's verdicts against the
rounding baseline, and the GEMM throughput of the gpu backend next to bare cuBLAS for the same
shapes. A missing or failed step is said as such, with its log's last line. Standard library only.
"""
import json
import math
import os
import sys


def num(x):
    """A JSON number; NaN for null (nlohmann writes NaN and infinities as null)."""
    return float("nan") if x is None else float(x)


def worse(a, b):
    """The larger of two errors, NaN when either is (a NaN error is the worst there is)."""
    return float("nan") if math.isnan(a) or math.isnan(b) else max(a, b)


def load(results, name):
    path = os.path.join(results, name)
    try:
        with open(path) as f:
            return json.load(f), None
    except FileNotFoundError:
        return None, f"no {name}"
    except json.JSONDecodeError as e:
        return None, f"{name} is not JSON ({e})"


def why(results, step):
    """The step's exit status and its log's last line, for a step that gave no result."""
    rc_path, log_path = os.path.join(results, f"{step}.rc"), os.path.join(results, f"{step}.log")
    rc = open(rc_path).read().strip() if os.path.exists(rc_path) else "not run"
    last = ""
    if os.path.exists(log_path):
        lines = [l for l in open(log_path, errors="replace").read().splitlines() if l.strip()]
        last = lines[-1] if lines else ""
    return f"exit {rc}" + (f": {last}" if last else "")


def device(results):
    j, err = load(results, "backends.json")
    if j is None:
        return f"device unknown ({err})"
    cuda = j.get("cuda", {})
    devices = cuda.get("devices", [])
    if not devices:
        return f"no GPU: {cuda.get('reason', '')}"
    d = devices[0]
    return (f"{d['name']} (compute capability {d['compute_capability']}, "
            f"{d['memory_bytes'] / 2**30:.0f} GiB), CUDA runtime {cuda.get('runtime_version')}, "
            f"driver {cuda.get('driver_version')}")


def tests(results):
    j, err = load(results, "gpu_tests.json")
    if j is None:
        return [f"GPU tests: no result ({err}; {why(results, 'tests')})"]
    cases = [t for s in j.get("testsuites", []) for t in s.get("testsuite", [])]
    skipped = [t for t in cases if t.get("result") == "SKIPPED"]
    failed = [t for t in cases if t.get("failures")]
    line = (f"GPU tests (`tpusim_runtime_tests --gtest_filter='Gpu*'`): {len(cases)} run, "
            f"{len(cases) - len(skipped) - len(failed)} passed, {len(failed)} failed, "
            f"{len(skipped)} skipped")
    out = [line]
    out += [f"- FAILED {t['classname']}.{t['name']}: "
            f"{t['failures'][0].get('failure', '').splitlines()[0]}" for t in failed]
    return out


def opcheck(results):
    j, err = load(results, "opcheck.json")
    if j is None:
        return [f"opcheck: no result ({err}; {why(results, 'opcheck')})"]
    cases = j.get("cases", [])
    backends = list(dict.fromkeys(c["backend"] for c in cases))
    ops = list(dict.fromkeys(c["op"] for c in cases))
    worst = {}  # (op, backend) -> (max rel error, tolerance, any failed)
    errors = []  # cases a backend could not run: (op, backend, shape, why)
    for c in cases:
        key = (c["op"], c["backend"])
        if "error" in c:
            errors.append((c["op"], c["backend"], c["shape"], c["error"]))
            worst.setdefault(key, None)  # an op with no case run shows as ERROR
            continue
        rel, tol, failed = worst.get(key) or (0.0, 0.0, False)
        worst[key] = (worse(rel, num(c["max_rel_error"])), max(tol, num(c["tolerance"])),
                      failed or not c["passed"])
    passed = sum(c["passed"] for c in cases)
    out = [f"opcheck (`tpusim opcheck --backends {','.join(backends)} --json`, reference "
           f"{j.get('reference', 'cpu')}): {passed} passed, "
           f"{len(cases) - passed} failed; the largest max |got - reference| / max |reference| "
           f"over each op's cases (forward and backward), its tolerance in brackets:", "",
           "| op | " + " | ".join(backends) + " |", "|---|" + "---|" * len(backends)]
    for op in ops:
        cells = []
        for b in backends:
            if (op, b) not in worst:
                cells.append("")
                continue
            if worst[(op, b)] is None:
                cells.append("**ERROR**")
                continue
            rel, tol, failed = worst[(op, b)]
            failed = failed or any(e[0] == op and e[1] == b for e in errors)
            cells.append(f"{'**FAILED** ' if failed else ''}{rel:.3g} ({tol:.3g})")
        out.append(f"| {op} | " + " | ".join(cells) + " |")
    if errors:
        out += ["", "Cases a backend could not run:"]
        out += [f"- {op} {shape} on {backend}: {error}" for op, backend, shape, error in errors]
    return out


def compare(results, step="compare"):
    j, err = load(results, f"{step}.json")
    if j is None:
        return [f"{step}: no result ({err}; {why(results, step)})"]
    policy = j.get("dtype_policy", "float32")
    batch = f"--batch-size {j['batch_size']} " if "batch_size" in j else ""
    out = [f"compare (`tpusim compare --model {j['model']} --steps {j['steps']} {batch}"
           f"--dtype-policy {policy} --json`), reference {j['reference']}:", ""]
    base = j.get("baseline")
    if base:
        drift = 0.0
        for d in base["loss_differences"]:
            drift = worse(drift, num(d))
        out.append(f"- rounding baseline ({base['backend']} from initial weights one ulp apart): "
                   f"loss up to {drift:.2e} from its own run, noise factor {base['noise_factor']:g}")
    for name, a in j["against"].items():
        final = a["losses"][-1] if a["losses"] else None
        out.append(
            f"- {name}: {a['verdict']}; max loss difference {num(a['max_loss_difference']):.2e}, "
            f"{a['steps_over_tolerance']} steps and {len(a['variables_over_tolerance'])} "
            f"variables over tolerance"
            + (f"; final loss {num(final['loss']):.6f} vs {num(final['reference_loss']):.6f}"
               if final else ""))
    return out


def gemm(results):
    j, err = load(results, "gemm_bench.json")
    if j is None:
        return [f"GEMM: no result ({err}; {why(results, 'bench')})"]
    rows = {}  # (n, bf16) -> {"backend": tflops or error, "cublas": ...}
    for b in j.get("benchmarks", []):
        family, n, bf16 = b["name"].split("/")[:3]
        which = "backend" if family == "BM_GpuBackendGemm" else "cublas"
        value = b["error_message"] if b.get("error_occurred") else num(b.get("TFLOPS"))
        rows.setdefault((int(n), bf16 == "1"), {})[which] = value
    out = ["GEMM throughput (`tpusim_gpu_bench`, N x N x N, TFLOPS = 2 N^3 / time):", "",
           "| N | inputs | gpu backend | cuBLAS | backend / cuBLAS |", "|---|---|---|---|---|"]
    for (n, bf16), r in sorted(rows.items()):
        b, c = r.get("backend"), r.get("cublas")
        if isinstance(b, (int, float)) and isinstance(c, (int, float)):
            out.append(f"| {n} | {'bf16' if bf16 else 'fp32'} | {b:.1f} | {c:.1f} | {b / c:.2f} |")
        else:
            problem = b if isinstance(b, str) else c
            out.append(f"| {n} | {'bf16' if bf16 else 'fp32'} | | | no result: {problem} |")
    return out


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    results = sys.argv[1]
    if not os.path.isdir(results):
        print(f"gpu_report.py: no folder {results}", file=sys.stderr)
        return 2
    sections = [[f"Device: {device(results)}"], tests(results), opcheck(results),
                compare(results), compare(results, "compare_mixed"), gemm(results)]
    print("\n\n".join("\n".join(s) for s in sections))
    return 0


if __name__ == "__main__":
    sys.exit(main())
