#!/usr/bin/env python3
"""The infeed study's input-bound run in XProf, page by page, as its user sees it: runs
`tpusim train --model image_cnn --input jpeg --image-size 224 --map-threads 1 --batch-size 256
--timing-only --host-timing config --profile` (or takes a model_dir such a run wrote), serves it
with `xprof --logdir`, and checks:
  - the overview page's data: the average step time within 1% of tpusim's step analyzer, and
    "HIGHLY input-bound" where the analyzer says highly_input_bound;
  - the input pipeline analyzer's data: its slowest input op is the map stage's iterator;
  - the input pipeline analyzer's page rendered by a real headless browser (Debian's chromium):
    the rendered DOM says the program is HIGHLY input-bound and shows the average step time,
    within 1% of tpusim's;
  - the op profile: its costliest ops are the ones `tpusim analyze` lists for the profile, with
    the same times (XProf leaves the all-reduce ops out of its op profile; they are left out of
    the comparison);
and with --screenshots DIR writes the overview page, the input pipeline analyzer and the op
profile as PNGs (docs/images/xprof_*.png are these). Google Charts comes from the network, which
the browser here cannot reach, so the pages' charts are empty; their text and tables are XProf's.

Usage: xprof_in_browser.py TPUSIM [--model-dir DIR] [--screenshots DIR]
(run with the project's virtualenv: .venv/bin/python tools/xprof_in_browser.py build/bin/tpusim)
"""
import argparse
import glob
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "interop"))
from check_xprof_profile import (  # noqa: E402
    check_input_pipeline, check_overview, op_metrics, xprof_server)

INFEED_STUDY = ["train", "--model", "image_cnn", "--input", "jpeg", "--image-size", "224",
                "--map-threads", "1", "--batch-size", "256", "--timing-only", "--host-timing",
                "config", "--profile"]
TOP = 5


def browser():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    sys.exit("no headless browser: `make deps` installs Debian's chromium")


def render(url, screenshot=None):
    """The page's rendered DOM as text, or its screenshot, from headless chromium."""
    args = [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--window-size=1400,1100", "--virtual-time-budget=60000"]
    args += [f"--screenshot={screenshot}"] if screenshot else ["--dump-dom"]
    out = subprocess.run(args + [url], check=True, capture_output=True, text=True,
                         timeout=180).stdout
    dom = re.sub(r"<(style|script)[^>]*>.*?</\1>", " ", out, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", dom)))


def check_op_profile(tpusim, path):
    xprof = op_metrics(path, "rawTime")
    mine = json.loads(subprocess.run([tpusim, "analyze", path, "--json", "--ops", "0"],
                                     check=True, capture_output=True, text=True).stdout)
    scale = mine["steps"] * 8  # analyze gives a step on one device; XProf sums every core's
    ours = [(op["name"], op["seconds_per_step"] * scale * 1e12) for op in mine["ops"]
            if op["name"] in xprof]
    theirs = sorted(xprof.items(), key=lambda kv: -kv[1])[:TOP]
    assert [n for n, _ in ours[:TOP]] == [n for n, _ in theirs], (ours[:TOP], theirs)
    for (name, ps), (_, xps) in zip(ours[:TOP], theirs):
        assert abs(ps - xps) <= 1e-3 * xps, (name, ps, xps)
    print(f"op_profile: the {TOP} costliest ops are analyze's, at the same times:",
          ", ".join(n for n, _ in theirs))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("tpusim")
    parser.add_argument("--model-dir")
    parser.add_argument("--screenshots")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = args.model_dir or os.path.join(tmp, "model")
        report_path = os.path.join(tmp, "report.json")
        if not args.model_dir:
            subprocess.run([args.tpusim] + INFEED_STUDY + ["--model-dir", model_dir,
                                                           "--report", report_path],
                           check=True, capture_output=True, text=True)
        (path,) = glob.glob(os.path.join(model_dir, "plugins", "profile", "*", "*.xplane.pb"))
        analysis = json.loads(subprocess.run([args.tpusim, "analyze", path, "--json"], check=True,
                                             capture_output=True, text=True).stdout)
        check_overview(path, analysis)
        check_input_pipeline(path, analysis)
        check_op_profile(args.tpusim, path)
        serve(model_dir, path, analysis, args.screenshots)


def serve(model_dir, path, analysis, screenshots):
    run = os.path.basename(os.path.dirname(path))
    with xprof_server(model_dir) as (port, _):
        base = f"http://localhost:{port}/data/plugin/profile"
        page = lambda tool_name: f"{base}/{tool_name}/?run={run}&tag={tool_name}&host=tpusim-host0"
        text = render(page("input_pipeline_analyzer"))
        assert "HIGHLY input-bound" in text, text[:2000]
        m = re.search(r"Device step-time statistics Average: ([0-9.]+) ms", text)
        assert m, text[:2000]
        shown, tpusim_ms = float(m.group(1)), analysis["step_seconds"] * 1e3
        assert abs(shown - tpusim_ms) <= 0.01 * tpusim_ms, (shown, tpusim_ms)
        print(f"chromium rendered the input pipeline analyzer: HIGHLY input-bound, average step "
              f"{shown:.2f} ms (tpusim {tpusim_ms:.2f} ms): ok")
        if screenshots:
            os.makedirs(screenshots, exist_ok=True)
            for tool_name in ("overview_page", "input_pipeline_analyzer", "op_profile"):
                out = os.path.join(screenshots, f"xprof_{tool_name}.png")
                render(page(tool_name), screenshot=os.path.abspath(out))
                print("wrote", out)


if __name__ == "__main__":
    main()
