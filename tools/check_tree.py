#!/usr/bin/env python3
"""Checks the source tree's house rules that a reader can count:

  - no C++ or CUDA source file over 500 lines (a file past that holds several responsibilities);
  - no function body over 80 lines (a function past that is a conductor to split along its
    seams): free functions, member functions (defined inside their class or outside it),
    constructors and GoogleTest bodies (TEST, TEST_F, TEST_P) alike (a lambda counts as part of
    the function it is written in);
  - no option value compared with a string literal: the CLI's and the files' words become enums
    through one NamedValues table each (common/named_values.h: precision, dtype policy,
    all-reduce algorithm, MXU policy, input kind, tensor dtype, optimizer, host timing, topology
    format, compression, on/off), and the code compares enums.

  tools/check_tree.py [--root DIR] [--only sizes|options] [--list]

Prints one line per finding (FILE:LINE what) and exits 1 when there is any, 0 otherwise; --only
checks one rule (sizes: the files' and functions' lengths; options: the option words); --list
prints the twelve longest functions and files whatever the limits. make test runs each rule as a
test of its own (Tree.*).
"""

import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE_DIRS = ["bench", "common", "configs", "estimator", "examples", "runtime", "sim", "tests",
               "tools", "traces"]
EXTENSIONS = (".cc", ".h", ".cu", ".cuh")
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80

# The words options take. A comparison of one of these with == or != is an option's value compared
# as a string, which only a parser may do.
OPTION_WORDS = ["fp32", "mxu", "float32", "mixed_bfloat16", "ring", "bidir_ring", "torus2d",
                "torus", "tpu", "scalesim_ws", "raw", "jpeg", "synthetic", "examples", "f32",
                "bf16", "softmax_cross_entropy", "mean_squared_error", "sgd", "momentum", "adam",
                "lamb", "measured", "config", "default", "high", "highest", "on", "off",
                "conv", "gemm", "gzip", "zlib", "none"]
OPTION_COMPARISON = re.compile(r'(==|!=)\s*"(' + "|".join(OPTION_WORDS) + r')"|"(' +
                               "|".join(OPTION_WORDS) + r')"\s*(==|!=)')
# Every parser reads its words through a NamedValues table (common/named_values.h), so no file is
# exempt but the tests, which may compare what a program printed.
PARSER_FILES = set()


def source_files(root):
    for top in SOURCE_DIRS:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in sorted(files):
                if name.endswith(EXTENSIONS):
                    path = os.path.join(folder, name)
                    yield os.path.relpath(path, root), path


def code_of(line):
    """The line without string and character literals and // comments."""
    line = re.sub(r'"([^"\\]|\\.)*"', '""', line)
    line = re.sub(r"'([^'\\]|\\.)*'", "''", line)
    return line.split("//", 1)[0]


CONTROL = re.compile(r"^\s*(\}\s*)?(if|for|while|switch|catch|else|do|return)\b")
NOT_A_FUNCTION = re.compile(r"^\s*(namespace|class|struct|union|enum|extern)\b|=\s*\{?\s*$|"
                            r"\breturn\b|^\s*[\]\)}]")
LAMBDA = re.compile(r"\]\s*(\([^)]*\))?\s*(mutable\s*)?(->\s*[^{]*)?\{\s*$")
TEST_BODY = re.compile(r"^\s*TEST(_F|_P)?\s*\(")


def function_name(header):
    """The function's name from the lines before its body's brace."""
    test = TEST_BODY.search(header)
    if test:
        return re.sub(r"\s+", " ", header[test.start():].split(")")[0].strip()) + ")"
    head = header.split("(")[0] if "(" in header else header
    words = re.findall(r"[~\w:]+", head)
    return words[-1] if words else "?"


def long_functions(lines, limit):
    """(line, name, length) of every function body longer than `limit` lines."""
    found = []
    depth = 0
    stack = []  # (depth at the body's opening, first line, name) of the bodies open now
    header = ""  # the statement so far, since the last ; { or }
    in_block_comment = False
    for number, raw in enumerate(lines, 1):
        line = raw
        if in_block_comment:
            if "*/" not in line:
                continue
            line = line.split("*/", 1)[1]
            in_block_comment = False
        if "/*" in line and "*/" not in line.split("/*", 1)[1]:
            in_block_comment = True
            line = line.split("/*", 1)[0]
        if line.lstrip().startswith("#"):
            continue
        code = code_of(line)
        for i, ch in enumerate(code):
            if ch == "{":
                statement = (header + code[:i]).strip()
                opens_function = (
                    statement.endswith(")") or re.search(r"\)(\s*(const|override|final|noexcept|"
                                                         r"mutable|->\s*[\w:<>,\s*&]+))*\s*$",
                                                         statement) or
                    re.search(r"\)\s*:\s*[\w:]+[({]", statement)) and not CONTROL.search(
                        statement) and not NOT_A_FUNCTION.search(statement)
                is_lambda = LAMBDA.search(statement + "{")
                if (opens_function or TEST_BODY.search(statement)) and not is_lambda:
                    stack.append((depth, number, function_name(statement)))
                depth += 1
                header = ""
            elif ch == "}":
                depth -= 1
                if stack and stack[-1][0] == depth:
                    _, first, name = stack.pop()
                    length = number - first - 1
                    if length > limit:
                        found.append((first, name, length))
                header = ""
            elif ch == ";":
                header = ""
        tail = code.rsplit("{", 1)[-1].rsplit("}", 1)[-1].rsplit(";", 1)[-1]
        if code.strip() and not re.search(r"[{};]\s*$", code):
            header += " " + tail.strip()
        elif ";" not in code and "{" not in code and "}" not in code:
            header += " " + code.strip()
        else:
            header = tail.strip() if not re.search(r"[{};]\s*$", code) else ""
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=ROOT)
    parser.add_argument("--only", choices=["sizes", "options"])
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    findings, functions, sizes = [], [], []
    for rel, path in source_files(args.root):
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
        sizes.append((len(lines), rel))
        check_sizes = args.only in (None, "sizes")
        if check_sizes and len(lines) > MAX_FILE_LINES:
            findings.append(f"{rel}:1 file of {len(lines)} lines (at most {MAX_FILE_LINES})")
        for first, name, length in long_functions(lines, 0 if args.list else MAX_FUNCTION_LINES):
            functions.append((length, f"{rel}:{first} {name}"))
            if check_sizes and length > MAX_FUNCTION_LINES:
                findings.append(f"{rel}:{first} {name}: a body of {length} lines "
                                f"(at most {MAX_FUNCTION_LINES})")
        if rel.startswith("tests/") or rel in PARSER_FILES or args.only == "sizes":
            continue
        for number, line in enumerate(lines, 1):
            match = OPTION_COMPARISON.search(line.split("//", 1)[0])
            if match:
                findings.append(f"{rel}:{number} an option value compared as a string "
                                f"({match.group(0).strip()}): compare the enum its parser gives")
    if args.list:
        for length, where in sorted(functions, reverse=True)[:12]:
            print(f"function {length:4d} lines  {where}")
        for length, rel in sorted(sizes, reverse=True)[:12]:
            print(f"file     {length:4d} lines  {rel}")
        return 0
    for finding in findings:
        print(finding)
    print(f"check_tree: {len(findings)} finding(s) in {len(sizes)} files")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
