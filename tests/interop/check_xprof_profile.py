"""XProf itself reads the profile `tpusim train --profile` writes: TensorFlow's own XSpace schema
parses it (a plane per simulated TensorCore and the host's), and XProf's tool converters (the
ones its server calls to build each page) give the overview page's step time within 1% of the
step analyzer's and its input-bound verdict, the input pipeline analyzer's slowest stage as the
analyzer's, and the op profile's FLOPs as the per-op report's; the roofline and trace viewer
tools produce data. Then `xprof --logdir MODEL_DIR` serves it: the run, its tools and its host
are listed over HTTP, and the overview page's data endpoint gives the same step time.

Usage: check_xprof_profile.py TPUSIM
"""
import contextlib
import glob
import gzip
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

STEPS = 6
CHIPS = 4  # v3-8: four chips of two TensorCores, every core simulated


def tool(path, name):
    from xprof.convert import raw_to_tool_data

    data, _ = raw_to_tool_data.xspace_to_tool_data([path], name, {"use_saved_result": False})
    return data


def camel(stage):
    return "".join(part[:1].upper() + part[1:] for part in stage.split("_"))


def check_planes(path):
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    names = [p.name for p in space.planes]
    assert names == [f"/device:TPU:{i}" for i in range(8)] + ["/host:CPU"], names
    device = space.planes[0]
    stats = {device.stat_metadata[s.metadata_id].name: s for s in device.stats}
    assert stats["device_type_string"].str_value == "TPU v3", stats
    assert abs(stats["peak_teraflops_per_second"].double_value - 61.6) < 0.1, stats
    assert abs(stats["peak_hbm_bw_gigabytes_per_second"].double_value - 450) < 1, stats
    lines = {line.name: line for line in device.lines}
    assert set(lines) == {"Steps", "XLA Modules", "XLA Ops"}, list(lines)
    assert len(lines["Steps"].events) == STEPS, len(lines["Steps"].events)
    print("TensorFlow's xplane_pb2:", len(names), "planes,", len(lines["XLA Ops"].events),
          "op events on TPU:0: ok")


def check_overview(path, analysis):
    tables = json.loads(tool(path, "overview_page"))
    steps = next(t["p"] for t in tables if "steptime_ms_average" in t.get("p", {}))
    xprof_ms = float(steps["steptime_ms_average"])
    tpusim_ms = analysis["step_seconds"] * 1e3
    assert abs(xprof_ms - tpusim_ms) <= 0.01 * tpusim_ms, (xprof_ms, tpusim_ms)
    verdict = steps["input_conclusion"]
    highly = analysis["classification"] == "highly_input_bound"
    assert ("HIGHLY input-bound" in verdict) == highly, (verdict, analysis["classification"])
    print(f"overview_page: step {xprof_ms:.3f} ms (tpusim {tpusim_ms:.3f} ms), '{verdict[:40]}...'")


def check_input_pipeline(path, analysis):
    tables = json.loads(tool(path, "input_pipeline_analyzer"))
    ops = next(t for t in tables if any(c.get("id") == "opName" for c in t.get("cols", [])))
    names = [row["c"][0]["v"] for row in ops["rows"]]
    slowest = analysis["slowest_host_stage"]["name"]
    want = "InfeedEnqueueTuple" if slowest == "enqueue" else "::" + camel(slowest)
    assert names[0].endswith(want), (names, slowest)
    print("input_pipeline_analyzer: slowest", names[0], "(tpusim:", slowest + "): ok")


def op_metrics(path, metric):
    """XProf's op profile: each XLA op's `metric` ("rawFlops", "rawTime"), by name."""
    profile = json.loads(tool(path, "op_profile"))
    ops = {}

    def walk(node):
        if "xla" in node:
            ops[node["name"]] = node["metrics"].get(metric, 0)
        for child in node.get("children", []):
            walk(child)

    walk(profile["byProgram"])
    return ops


def check_op_profile(path, report):
    xprof_flops = op_metrics(path, "rawFlops")
    top = sorted((op for op in report["ops"] if op["flops"] > 0), key=lambda op: -op["flops"])[:5]
    for op in top:
        want = op["flops"] * CHIPS * STEPS
        got = xprof_flops.get(op["label"], 0)
        assert abs(got - want) <= 1e-3 * want, (op["label"], got, want)
    print("op_profile: the", len(top), "ops of most FLOPs match the per-op report: ok")


def free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def fetch(port, route):
    with urllib.request.urlopen(f"http://localhost:{port}/data/plugin/profile/{route}",
                                timeout=60) as r:
        body = r.read()
        if r.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        return json.loads(body)


@contextlib.contextmanager
def xprof_server(model_dir):
    """`xprof --logdir MODEL_DIR` on a free port, once it answers: (port, the runs it lists)."""
    port = free_port()
    xprof = os.path.join(os.path.dirname(sys.executable), "xprof")
    server = subprocess.Popen([xprof, "--logdir", model_dir, "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while True:
            try:
                runs = fetch(port, "runs")
                break
            except OSError:
                assert server.poll() is None, "xprof exited"
                assert time.time() < deadline, "xprof did not answer within 120 s"
                time.sleep(0.5)
        yield port, runs
    finally:
        server.terminate()
        server.wait(timeout=30)


def check_served(model_dir, path, analysis):
    """Starts `xprof --logdir MODEL_DIR` and reads the run through its HTTP endpoints."""
    run = os.path.basename(os.path.dirname(path))
    with xprof_server(model_dir) as (port, runs):
        assert runs == [run], runs
        tools = fetch(port, f"run_tools?run={run}")
        for want in ("overview_page", "input_pipeline_analyzer", "op_profile"):
            assert want in tools, tools
        hosts = fetch(port, f"hosts?run={run}&tag=overview_page")
        assert [h["hostname"] for h in hosts] == ["tpusim-host0"], hosts
        tables = fetch(port, f"data?run={run}&tag=overview_page&host=tpusim-host0")
        steps = next(t["p"] for t in tables if "steptime_ms_average" in t.get("p", {}))
        served_ms = float(steps["steptime_ms_average"])
        tpusim_ms = analysis["step_seconds"] * 1e3
        assert abs(served_ms - tpusim_ms) <= 0.01 * tpusim_ms, (served_ms, tpusim_ms)
        print(f"xprof --logdir served run {run}: {len(tools)} tools, overview step "
              f"{served_ms:.3f} ms over HTTP: ok")


def main():
    tpusim = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        model_dir = os.path.join(d, "model")
        report_path = os.path.join(d, "report.json")
        subprocess.run([tpusim, "train", "--model", "mlp", "--train-steps", str(STEPS),
                        "--iterations-per-loop", "2", "--timing-only", "--host-timing", "config",
                        "--model-dir", model_dir, "--profile", "--report", report_path],
                       check=True, capture_output=True, text=True)
        with open(report_path) as f:
            report = json.load(f)
        paths = glob.glob(os.path.join(model_dir, "plugins", "profile", "*", "*.xplane.pb"))
        assert len(paths) == 1, paths
        path = paths[0]
        print("tpusim wrote", os.path.relpath(path, d))
        check_planes(path)
        check_overview(path, report["analysis"])
        check_input_pipeline(path, report["analysis"])
        check_op_profile(path, report)
        roofline = json.loads(tool(path, "roofline_model"))
        assert any(t.get("rows") for t in roofline), "roofline_model: no rows"
        trace = json.loads(tool(path, "trace_viewer"))
        assert len(trace["traceEvents"]) > 0, "trace_viewer: no events"
        print("roofline_model and trace_viewer: data: ok")
        check_served(model_dir, path, report["analysis"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
