#!/usr/bin/env python3
"""The reading path of one training step, measured (`make reading-path`).

Runs build/reading-path/reading_path (scripts/dev/reading_path.c: one step
of configs/small.ini traced on each engine: reference, openblas, onednn, one
of which matmul = auto picks on this CPU), names each function it entered
with addr2line, and
prints them in the order the step first enters them: file, function and
its length in lines (from the line of its name to its closing brace). The
OpenMP bodies gcc outlines (NAME._omp_fn.N) count as their function. Last, per
engine, the summary line the docs quote:

    reading path, reference engine: 5 files, 611 lines of executed functions
    reading path, openblas engine: ...

    scripts/dev/reading_path.py BINARY [--summary]
"""
import re
import subprocess
import sys
from collections import OrderedDict

ENGINES = ["reference", "openblas", "onednn"]


def function_extent(path, name, line):
    """(first line, last line) of function `name` whose code addr2line puts at `line`."""
    with open(path) as f:
        src = f.read().split("\n")
    i = line - 1
    pattern = re.compile(r"\b" + re.escape(name) + r"\s*\(")
    while i >= 0 and not pattern.search(src[i]):   # back to the line that names it
        i -= 1
    if i < 0:
        raise SystemExit(f"reading_path: {path}:{line}: no definition of {name} above")
    start = i
    depth, seen_open, in_comment = 0, False, False
    for j in range(start, len(src)):
        text = re.sub(r'"(\\.|[^"\\])*"', '""', src[j])
        text = re.sub(r"'(\\.|[^'\\])*'", "''", text)
        k = 0
        while k < len(text):
            if in_comment:
                end = text.find("*/", k)
                if end < 0:
                    break
                in_comment, k = False, end + 2
                continue
            if text.startswith("//", k):
                break
            if text.startswith("/*", k):
                in_comment, k = True, k + 2
                continue
            c = text[k]
            if c == "{":
                depth, seen_open = depth + 1, True
            elif c == "}":
                depth -= 1
                if seen_open and depth == 0:
                    return start + 1, j + 1
            k += 1
    raise SystemExit(f"reading_path: {path}:{start + 1}: no end of {name}")


def resolve(binary, addresses):
    out = subprocess.run(["addr2line", "-f", "-e", binary] + addresses, capture_output=True, text=True,
                         check=True).stdout.split("\n")
    result = []
    for k in range(len(addresses)):
        name, where = out[2 * k], out[2 * k + 1]
        path, _, line = where.rpartition(":")
        line = re.match(r"\d+", line)
        result.append((name.split("._omp_fn")[0], path, int(line.group()) if line else 0))
    return result


def main():
    binary = sys.argv[1]
    summary_only = "--summary" in sys.argv
    text = subprocess.run([binary] + ENGINES, capture_output=True, text=True, check=True).stdout
    runs, current = OrderedDict(), None
    for line in text.split("\n"):
        if line.startswith("engine "):
            _, key, auto, describe = line.split(" ", 3)
            current = runs.setdefault(key, {"describe": describe, "auto": auto == "1", "addresses": []})
        elif line.strip():
            current["addresses"].append(line.strip())
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True).stdout.strip()
    for key, run in runs.items():
        functions = OrderedDict()
        for name, path, line in resolve(binary, run["addresses"]):
            rel = path[len(root) + 1:] if root and path.startswith(root + "/") else path
            if not rel.startswith("src/") or (rel, name) in functions:
                continue
            first, last = function_extent(path, name, line)
            functions[(rel, name)] = (first, last)
        files = OrderedDict()
        for (rel, name), (first, last) in functions.items():
            files.setdefault(rel, 0)
            files[rel] += last - first + 1
        total = sum(files.values())
        label = f"{key} engine ({run['describe']}{'; matmul = auto picks it on this CPU' if run['auto'] else ''})"
        if not summary_only:
            print(f"{label}: the functions one training step runs (forward, loss, backward), in order")
            for n, ((rel, name), (first, last)) in enumerate(functions.items(), 1):
                print(f"  {n:3d}  {rel + ':' + str(first):<34} {name:<34} {last - first + 1:4d} lines")
            print("  by file: " + ", ".join(f"{rel} {n}" for rel, n in files.items()))
        print(f"reading path, {key} engine: {len(files)} files, {total} lines of executed functions")
        if not summary_only:
            print()


if __name__ == "__main__":
    main()
