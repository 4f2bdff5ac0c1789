#!/usr/bin/env python3
"""Runs the commands the docs show and checks that their output still holds.

A command is a line in a fenced block that starts with "$ " (with "\\" continuation lines); the
lines after it, up to the next "$ " line or the end of the block, are its output as the doc shows
it. A block with no "$ " line right after a command with no output is that command's output.

An output holds when every line the doc shows is found in the command's output (stdout and stderr
together), in order: the doc may leave lines out, a line "..." (or "... what is left out")
stands for any number of lines, and a line ending in "..." must only start with what comes
before. Within a line the words must
be the same and so must every number, as printed, except where the line reports host time (the
spans VOLATILE matches), whose numbers vary from run to run and from machine to machine.

An HTML comment on the line before a block sets how its commands are checked, as "key" or
"key=value" items separated by " ; ":
  <!-- check: slow -->            run only with --all (minutes; the ctest runs the rest)
  <!-- check: gpu -->             needs a CUDA device: skipped (and said so) without one
  <!-- check: venv -->            needs the interop virtualenv (.venv, `make deps`): skipped (and
                                  said so) without one
  <!-- check: cuda-build -->      shows a build with the CUDA backend compiled in: skipped (and said
                                  so) in one without (the sanitizer builds, TPUSIM_WITH_CUDA=OFF)
  <!-- check: setup=CMD -->       a shell command run before the block's commands, unshown
  <!-- check: volatile=REGEX -->  more spans whose numbers are not compared (".*": the line's)
  <!-- check: tolerance=X -->     numbers within a relative X (results of measured host timing)
  <!-- check: not-run=REASON -->  shown but never run by this script, and why (make test runs
                                  this script; a device script needs the device machine)

Each doc file runs in a scratch folder of its own, its commands one after another (a later one may
read what an earlier one wrote). "/tmp/" in a command is that folder's tmp/, and the folder's path
reads back as "/tmp/" in the output; build/, configs/, tests/, tools/, examples/, docs/ and .venv/
are the project's.

  tools/check_docs.py [--build DIR] [--all] [--file docs/x.md] [--match TEXT] [--list] [--update]
                      [--full] [--docs]

--docs prints the docs that show a command a run without --all would try (not slow, not
not-run), one path a line: tests/CMakeLists.txt registers a test for each
(Docs.CommandsStillHold/PATH), so ctest runs the docs side by side.

--update rewrites the doc lines whose words still match but whose figures changed with today's
output (a maintainer's tool: review the diff, since a changed figure may be a regression).
Exit status: 0 when every command run holds, 1 when one does not, 2 on a usage problem.
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["README.md", "docs/*.md", "bench/README.md", "examples/README.md"]
# Where a line holds host measurements (host time, compile time, the host's throughput): numbers
# inside a match of one of these are not compared. A block adds its own with volatile=REGEX.
NUM = r"[-+]?[0-9][0-9.]*(?:e[-+]?[0-9]+)?"
VOLATILE = [NUM + r" s on this host", r"host time\s+" + NUM, r"host_seconds\"?:\s*" + NUM,
            r"\bin " + NUM + r" s\b", r"ETA [0-9:]+", NUM + r" steps/s", r"\(" + NUM + r" s\)"]
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
# A figure standing alone, not the digits of a name (conv2d_2, p000): what --update may change.
FIGURE = re.compile(r"(?<![A-Za-z_])" + NUMBER.pattern + r"(?![A-Za-z_])")


class Command:
    def __init__(self, doc, line, text, options):
        self.doc, self.line, self.text, self.options = doc, line, text, options
        self.expected = []
        self.expected_at = []  # each expected line's index in the doc's lines

    def where(self):
        return f"{self.doc}:{self.line}"


def parse_options(comment):
    options = {"volatile": []}
    for item in comment.split(" ; "):
        item = item.strip()
        if not item:
            continue
        key, _, value = item.partition("=")
        if key == "volatile":
            options["volatile"].append(value)
        else:
            options[key] = value if value else True
    return options


def parse_doc(path):
    """The commands of one markdown file, in order."""
    lines = open(path, encoding="utf-8").read().splitlines()
    rel = os.path.relpath(path, ROOT)
    commands, options, pending = [], {"volatile": []}, None
    i = 0
    while i < len(lines):
        fence = re.match(r"(\s*)```(\S*)\s*$", lines[i])
        check = re.match(r"\s*<!-- check: (.*) -->\s*$", lines[i])
        if check:
            options = parse_options(check.group(1))
        elif fence:
            indent, language = len(fence.group(1)), fence.group(2)
            block, i = [], i + 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                block.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i])
                i += 1
            if language in ("", "console", "sh"):
                pending = parse_block(block, rel, i - len(block), options, commands, pending)
            options = {"volatile": []}
        i += 1
    return commands


def parse_block(block, rel, first_line, options, commands, pending):
    """Adds a block's commands; returns the command a next output-only block belongs to."""
    current = None
    j = 0
    while j < len(block):
        line = block[j]
        if line.startswith("$ "):
            text, where = line[2:], first_line + j + 1
            while text.endswith("\\") and j + 1 < len(block):
                j += 1
                text = text[:-1] + " " + block[j].strip()
            current = Command(rel, where, text, options)
            commands.append(current)
        elif current is not None:
            current.expected.append(line)
            current.expected_at.append(first_line + j)
        elif pending is not None:  # the output of the command the block before showed
            pending.expected.append(line)
            pending.expected_at.append(first_line + j)
        j += 1
    return current if (current is not None and not current.expected) else None


def volatile_spans(line, options):
    """The [start, end) spans of a doc line whose numbers are host measurements."""
    return [m.span() for p in VOLATILE + options["volatile"] for m in re.finditer(p, line, re.I)]


def same_line(expected, actual, options):
    """Whether an actual output line is the doc's line: the same words and numbers."""
    if expected.rstrip().endswith("...") and expected.strip() != "...":
        expected = expected.rstrip()[:-3]
        actual = actual[:len(expected) + 40]
        prefix = True
    else:
        prefix = False
    e_words = [w for w in NUMBER.split(expected)]
    a_words = [w for w in NUMBER.split(actual)]
    e_nums, a_nums = NUMBER.findall(expected), NUMBER.findall(actual)
    norm = lambda w: " ".join(w.split())
    if prefix:
        n = len(e_nums)
        if len(a_nums) < n or [norm(w) for w in e_words[:n]] != [norm(w) for w in a_words[:n]]:
            return False
        if not norm(a_words[n]).startswith(norm(e_words[n])):
            return False
        a_nums = a_nums[:n]
    elif len(e_nums) != len(a_nums) or [norm(w) for w in e_words] != [norm(w) for w in a_words]:
        return False
    spans = volatile_spans(expected, options)
    starts = [m.start() for m in NUMBER.finditer(expected)]
    tolerance = float(options.get("tolerance", 0))
    for e, a, start in zip(e_nums, a_nums, starts):
        if e == a or any(lo <= start < hi for lo, hi in spans):
            continue
        if tolerance == 0:
            return False
        e_value, a_value = float(e), float(a)
        if abs(e_value - a_value) > tolerance * max(abs(e_value), abs(a_value)):
            return False
    return True


def skeleton(line):
    """A line's words with every number blanked: what a stale figure leaves the same."""
    return FIGURE.sub("#", " ".join(line.split()))


def stale_twin(line, actual, cursor):
    """The output line from `cursor` on with `line`'s words and the most of its figures in their
    places (the first such; len(actual) when none has its words). "global_step 200: loss = 0.34"
    after an elided "..." is the output's step-200 line, not the step-100 line just after the
    cursor, whose words are the same."""
    figures = FIGURE.findall(line)
    best, best_shared = len(actual), -1
    for at in range(cursor, len(actual)):
        if skeleton(actual[at]) != skeleton(line):
            continue
        shared = sum(e == a for e, a in zip(figures, FIGURE.findall(actual[at])))
        if shared > best_shared:
            best, best_shared = at, shared
    return best


def holds(expected, actual, options, updates=None):
    """None when every expected line is found in order, else the first line that is not.

    With `updates` (a list), a line whose figures alone changed is matched to the next output line
    with the same words, and (its index in `expected`, the output line) is added to it.
    """
    cursor = 0
    for k, line in enumerate(expected):
        if not line.strip() or line.strip().startswith("..."):
            continue  # "..." (or "... what was left out"): any number of lines
        at = cursor
        while at < len(actual) and not same_line(line, actual[at], options):
            at += 1
        if at == len(actual) and updates is not None:
            at = stale_twin(line, actual, cursor)
            if at < len(actual):
                updates.append((k, actual[at]))
        if at == len(actual):
            return line
        cursor = at + 1
    return None


def apply_updates(path, fixes):
    """Rewrites the doc lines `fixes` maps (line index -> (as parsed, new text)), keeping the
    indentation of their block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    for index, (parsed, text) in fixes.items():
        indent = lines[index][:len(lines[index]) - len(parsed)]
        lines[index] = indent + text.rstrip()
    open(path, "w", encoding="utf-8").write("\n".join(lines))


def output_lines(raw, scratch):
    text = raw.replace(scratch + "/tmp/", "/tmp/").replace(scratch + "/", "")
    # A progress bar redraws itself with carriage returns: keep what the last draw left.
    return [line.split("\r")[-1] for line in text.splitlines()]


def make_scratch(build):
    scratch = tempfile.mkdtemp(prefix="tpusim-docs-")
    os.makedirs(os.path.join(scratch, "tmp"))
    for name in ("configs", "tests", "tools", "examples", "docs"):
        os.symlink(os.path.join(ROOT, name), os.path.join(scratch, name))
    os.symlink(os.path.abspath(build), os.path.join(scratch, "build"))
    if have_venv():
        os.symlink(VENV, os.path.join(scratch, ".venv"))
    return scratch


VENV = os.path.join(ROOT, ".venv")


def have_venv():
    return os.access(os.path.join(VENV, "bin", "python"), os.X_OK)


def have_gpu():
    return shutil.which("nvidia-smi") is not None and subprocess.run(
        ["nvidia-smi", "-L"], capture_output=True).returncode == 0


def cuda_built(build):
    """Whether the build's tpusim has the CUDA backend compiled in (`tpusim backends` says)."""
    done = subprocess.run([os.path.join(build, "bin", "tpusim"), "backends"],
                          capture_output=True, text=True, check=False)
    return "built without CUDA" not in done.stdout + done.stderr


def run_command(command, scratch, timeout):
    text = command.text.replace("/tmp/", scratch + "/tmp/")
    env = dict(os.environ, TMPDIR=os.path.join(scratch, "tmp"))
    if os.geteuid() == 0:
        # mpirun refuses to start ranks as root unless told twice; CI runs as root, a user not.
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if "mpirun" in text and "ASAN_OPTIONS" in env:
        # Under ASan (make test-asan), MPI ranks run without LeakSanitizer, as the MPI tests do:
        # Open MPI 4.1 leaks in the plugins it unloads at MPI_Finalize (the Makefile's MPI_TESTS).
        env["ASAN_OPTIONS"] = env["ASAN_OPTIONS"] + ":detect_leaks=0"
    started = time.monotonic()
    try:
        done = subprocess.run(["bash", "-o", "pipefail", "-c", text], cwd=scratch, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        raw, status = done.stdout.decode("utf-8", "replace"), done.returncode
    except subprocess.TimeoutExpired as e:
        raw, status = (e.output or b"").decode("utf-8", "replace"), "timeout"
    return output_lines(raw, scratch), status, time.monotonic() - started


def check_file(commands, args, gpu):
    """Runs one doc's commands; returns (passed, failed, skipped) lists of messages."""
    passed, failed, skipped = [], [], []
    scratch = make_scratch(args.build)
    setups_done = set()
    fixes = {}
    try:
        for c in commands:
            o = c.options
            if "not-run" in o:
                skipped.append(f"{c.where()}: not run ({o['not-run']}): {c.text}")
                continue
            if "slow" in o and not args.all:
                skipped.append(f"{c.where()}: slow, run with --all: {c.text}")
                continue
            if "gpu" in o and not gpu:
                skipped.append(f"{c.where()}: needs a GPU: {c.text}")
                continue
            if "cuda-build" in o and not args.cuda_built:
                skipped.append(f"{c.where()}: needs a build with CUDA: {c.text}")
                continue
            if "venv" in o and not have_venv():
                skipped.append(f"{c.where()}: needs the interop virtualenv (make deps): {c.text}")
                continue
            if "setup" in o and id(o) not in setups_done:
                setups_done.add(id(o))
                subprocess.run(["bash", "-c", o["setup"].replace("/tmp/", scratch + "/tmp/")],
                               cwd=scratch, check=False, capture_output=True)
            actual, status, seconds = run_command(c, scratch, args.timeout)
            expected_status = int(o.get("exit", 0))
            updates = [] if args.update else None
            missing = holds(c.expected, actual, o, updates)
            for k, text in updates or []:
                fixes[c.expected_at[k]] = (c.expected[k], text)
                print(f"     update {c.doc}:{c.expected_at[k] + 1}: {text.strip()[:100]}")
            if status != expected_status or missing is not None:
                why = (f"exit status {status}, the doc expects {expected_status}"
                       if status != expected_status else f"no line matches: {missing.strip()}")
                tail = "\n".join("      | " + l for l in (actual if args.full else actual[-15:]))
                failed.append(f"{c.where()}: {c.text}\n    {why}\n    its output ends:\n{tail}")
            else:
                passed.append(f"{c.where()}: {seconds:.1f} s: {c.text}")
            print(("ok   " if missing is None and status == expected_status else "FAIL ") +
                  f"{seconds:6.1f} s  {c.where()}  {c.text[:100]}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if fixes:
        apply_updates(os.path.join(ROOT, commands[0].doc), fixes)
    return passed, failed, skipped


def doc_paths():
    return sorted({p for pattern in DOCS for p in glob.glob(os.path.join(ROOT, pattern))})


def print_docs_with_commands():
    """--docs: the docs ctest checks, one relative path a line (no build needed)."""
    for path in doc_paths():
        if any("slow" not in c.options and "not-run" not in c.options for c in parse_doc(path)):
            print(os.path.relpath(path, ROOT))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--all", action="store_true", help="also the slow commands")
    parser.add_argument("--file", action="append", help="only this doc (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the commands and exit")
    parser.add_argument("--match", help="only the commands that contain this text")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per command")
    parser.add_argument("--update", action="store_true",
                        help="rewrite doc lines whose figures alone changed with today's (review "
                             "the diff: a changed figure may be a regression)")
    parser.add_argument("--full", action="store_true", help="print a failing command's whole output")
    parser.add_argument("--docs", action="store_true",
                        help="print the docs with a command a run without --all tries, and exit")
    args = parser.parse_args()
    if args.docs:
        return print_docs_with_commands()
    if not os.access(os.path.join(args.build, "bin", "tpusim"), os.X_OK):
        print(f"check_docs: no {args.build}/bin/tpusim (build first: make build)", file=sys.stderr)
        return 2
    paths = doc_paths()
    if args.file:
        paths = [os.path.join(ROOT, f) for f in args.file]
    gpu = have_gpu()
    args.cuda_built = cuda_built(args.build)
    passed, failed, skipped = [], [], []
    for path in paths:
        commands = parse_doc(path)
        if args.match:
            commands = [c for c in commands if args.match in c.text]
        if args.list:
            for c in commands:
                tags = ",".join(k for k in c.options if k != "volatile") or "-"
                print(f"{c.where()}  [{tags}]  {c.text}")
            continue
        if not commands:
            continue
        p, f, s = check_file(commands, args, gpu)
        passed += p
        failed += f
        skipped += s
    if args.list:
        return 0
    for message in skipped:
        print("skip " + message)
    for message in failed:
        print("\nFAILED " + message)
    print(f"\n{len(passed)} commands hold, {len(failed)} do not, {len(skipped)} not run")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
