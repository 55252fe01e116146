#!/usr/bin/env python3
"""The dependency graph of src/ and its two rules.

    scripts/dev/deps.py [--root DIR] [--order a,b,c] [--dot]

A node is a source file, a header and its implementation counted as one
(train/adamw = train/adamw.h + train/adamw.c). An edge A -> B says A uses B:
  - A's file has the line #include "B.h" (paths from the root, as -Isrc), or
  - A's object uses a global symbol that B's object defines (nm, on objects
    compiled here with -O0 into a temporary directory: the source's own
    references, whatever state build/ is in).
The rules:
  - no cycle: no strongly connected component of more than one node (two
    nodes are in one when each reaches the other);
  - no upward edge: the folders are floors, lowest first (FLOORS, or
    --order), and an edge goes to a file of its own folder or of one below.
Prints the order, then each violation on one line ("cycle: ...",
"upward: ..."), and exits 1 if there is any; --dot prints the graph for
graphviz instead (dot -Tsvg: the users above what they use, the edges of
cycles and upward edges in red), with the same exit status.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

# The folders of src/, lowest floor first. common: what every program uses
# (files, numbers, clock, memory, the command line, the progress line);
# engine: the matrix products; model: the transformer; data: tokenizer and
# token files; format: weights files and exports; train: the training run;
# cli: the programs' mains.
FLOORS = ["common", "engine", "model", "data", "format", "train", "cli"]

INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)
# The Makefile's flags that change what the code means; without ROPELAB_MPI
# (dist.c's MPI calls) or ROPELAB_FAULT_INJECTION (the test hooks), neither
# of which calls into src/.
CFLAGS = ["-std=c11", "-D_GNU_SOURCE", "-fopenmp", "-O0", "-w"]


def source_files(root):
    """Every .c and .h under root, as paths relative to it."""
    found = []
    for d, _, names in os.walk(root):
        for n in names:
            if n.endswith((".c", ".h")):
                found.append(os.path.relpath(os.path.join(d, n), root))
    return sorted(found)


def node(path):
    """The node of a file: its path without .c or .h."""
    return path[:-2]


def folder(path):
    return path.split("/")[0]


def include_edges(root, files):
    """(file, header, reason) for every #include of a file of the root."""
    for f in files:
        with open(os.path.join(root, f), errors="replace") as src:
            for name in INCLUDE.findall(src.read()):
                if name in files:
                    yield f, name, f'#include "{name}"'


def symbol_edges(root, files, cc):
    """(file, file, symbol) for every global symbol one object uses and another defines."""
    c_files = [f for f in files if f.endswith(".c")]
    with tempfile.TemporaryDirectory() as tmp:
        def compile_one(f):
            obj = os.path.join(tmp, f.replace("/", "+") + ".o")
            run = subprocess.run([cc, *CFLAGS, "-I", root, "-c", os.path.join(root, f), "-o", obj],
                                 capture_output=True, text=True)
            if run.returncode != 0:
                sys.exit(f"deps: cannot compile {f}:\n{run.stderr}")
            return obj
        with ThreadPoolExecutor(os.cpu_count()) as pool:
            objects = dict(zip(pool.map(compile_one, c_files), c_files))
        # nm -g -A: "OBJECT:ADDRESS TYPE NAME", or "OBJECT: U NAME" for a use
        # (w and v: a weak use; every other type is a definition).
        listing = subprocess.run(["nm", "-g", "-A", *objects], capture_output=True, text=True, check=True).stdout
    defined, used = {}, []
    for line in listing.splitlines():
        obj, rest = line.split(":", 1)
        kind, name = rest.split()[-2:]
        if kind in ("U", "w", "v"):
            used.append((objects[obj], name))
        else:
            defined[name] = objects[obj]
    for f, name in used:
        if name in defined and defined[name] != f:
            yield f, defined[name], name


def graph(root, files, cc):
    """{(file, file): [reasons]}: the edges between files of different nodes."""
    edges = {}
    for a, b, why in list(include_edges(root, set(files))) + list(symbol_edges(root, files, cc)):
        if node(a) != node(b):
            edges.setdefault((a, b), []).append(why)
    return edges


def cycles(edges):
    """The strongly connected components of more than one node, each a sorted list."""
    succ = {}
    for a, b in edges:
        succ.setdefault(node(a), set()).add(node(b))

    def reach(n):
        seen, todo = set(), [n]
        while todo:
            for m in succ.get(todo.pop(), ()):
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        return seen

    reaches = {n: reach(n) for n in succ}
    found = []
    for n in sorted(succ):
        component = sorted(m for m in reaches[n] if n in reaches.get(m, ()))
        if len(component) > 1 and component not in found:
            found.append(component)
    return found


def upward(edges, floors):
    """The edges to a folder above the file's own."""
    return [(a, b) for a, b in sorted(edges) if floors.index(folder(b)) > floors.index(folder(a))]


def because(edges, a, b):
    why = edges[(a, b)]
    return why[0] + (f" and {len(why) - 1} more" if len(why) > 1 else "")


def print_dot(edges, bad):
    print("digraph src {\n  node [shape=box, fontsize=10];")
    nodes = sorted({node(f) for e in edges for f in e})
    for fold in sorted({folder(n) for n in nodes}):
        print(f'  subgraph "cluster_{fold}" {{ label="{fold}";')
        for n in nodes:
            if folder(n) == fold:
                print(f'    "{n}";')
        print("  }")
    for a, b in sorted({(node(a), node(b)) for a, b in edges}):
        print(f'  "{a}" -> "{b}"' + (" [color=red];" if (a, b) in bad else ";"))
    print("}")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(here, "..", "..", "src"), help="the source tree (default: src/)")
    ap.add_argument("--order", default=",".join(FLOORS), help="its folders, lowest first")
    ap.add_argument("--dot", action="store_true", help="print the graph for graphviz")
    args = ap.parse_args()
    root, floors = os.path.normpath(args.root), args.order.split(",")
    files = source_files(root)
    strays = sorted({folder(f) for f in files} - set(floors))
    if strays:
        sys.exit(f"deps: folders not in the order: {', '.join(strays)}")
    edges = graph(root, files, os.environ.get("CC", "cc"))
    found_cycles, found_upward = cycles(edges), upward(edges, floors)
    failed = 1 if found_cycles or found_upward else 0
    if args.dot:
        inside = {(node(a), node(b)) for a, b in edges
                  if any(node(a) in c and node(b) in c for c in found_cycles)}
        print_dot(edges, inside | {(node(a), node(b)) for a, b in found_upward})
        return failed

    print("folder order, lowest first: " + " < ".join(floors))
    for c in found_cycles:
        inner = [f"{a} -> {b} ({because(edges, a, b)})" for a, b in sorted(edges) if node(a) in c and node(b) in c]
        print(f"cycle: {' '.join(c)}: " + "; ".join(inner))
    for a, b in found_upward:
        print(f"upward: {a} -> {b} ({because(edges, a, b)}): {folder(a)} is below {folder(b)}")
    print(f"{root}: {len({node(f) for f in files})} nodes, {len(edges)} edges between files; "
          f"{len(found_cycles)} cycles, {len(found_upward)} upward edges")
    return failed


if __name__ == "__main__":
    sys.exit(main())
