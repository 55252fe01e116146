#!/usr/bin/env python3
"""docs_check.py: the docs say what the tree holds, so that no list in them goes stale.

    scripts/dev/docs_check.py [--root DIR]

Checks, from the repository root (or DIR):
  - docs/ARCHITECTURE.md names every file of src/*/ ("NAME.c/.h" names both),
    and every file it names exists: a src/ path as written, a bare NAME.c or
    NAME.h somewhere in src/, tests/, bench/ or scripts/ (or a system header, or NOT_OURS);
  - tests/README.md names every tests/test_*.c and test_*.py (as test_NAME),
    every test_NAME it names is one, and every file it names exists;
  - every relative link of README.md, docs/*.md, tests/README.md,
    scripts/README.md, bench/README.md and docs/results/bench/*.md leads to a
    file, and a #anchor to a heading of it (GitHub's slugs);
  - docs/TRAINING.md's key list is ./train --help's, character for character;
  - the front door and the maps keep their size: README.md at most 120 lines
    with "## Read the code" in its first 60, docs/ARCHITECTURE.md and
    docs/PERFORMANCE.md at most 200 lines each.
Prints one line per violation and exits 1, or says what it checked and exits 0.
"""
import argparse
import os
import re
import subprocess
import sys

LINK_FILES = ["README.md", "docs/*.md", "tests/README.md", "scripts/README.md", "bench/README.md",
              "docs/results/bench/README.md", "docs/results/bench/link.md"]
NAME_DIRS = ["src", "tests", "bench", "scripts"]
NOT_OURS = {"llm.c", "mpi.h"}   # names like C files that are not ropelab's: a project, Open MPI's header
LIMITS = [("README.md", 120), ("docs/ARCHITECTURE.md", 200), ("docs/PERFORMANCE.md", 200)]
FRONT_HEADING, FRONT_WITHIN = "## Read the code", 60


def read(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        return f.read()


def without_code(text):
    """The text with fenced code blocks blanked (line numbers kept)."""
    out, fenced = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return "\n".join(out)


def slugs(text):
    """GitHub's anchors of a Markdown text's headings."""
    seen, out = {}, set()
    for line in without_code(text).split("\n"):
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        s = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def repo_names(root):
    names = set()
    for d in NAME_DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            names.update(files)
    return names


def named_files(text):
    """The C file names a text names: NAME.c, NAME.h, and both of NAME.c/.h or NAME.h/.c."""
    names = set()
    for m in re.finditer(r"(?<![\w*/.-])(?:[\w-]+/)*([A-Za-z0-9_]+)\.([ch])(?:/\.([ch]))?(?![\w*])", text):
        names.add(f"{m.group(1)}.{m.group(2)}")
        if m.group(3):
            names.add(f"{m.group(1)}.{m.group(3)}")
    return {n for n in names if not re.search(r"[A-Z]{3,}", n)}   # NAME_main.c, bench_NAME.c: patterns


def check_names(root, rel, problems, must_name_src):
    text = read(root, rel)
    have = repo_names(root)
    for n in sorted(named_files(text)):
        if n not in have and n not in NOT_OURS and not os.path.exists(os.path.join("/usr/include", n)):
            problems.append(f"{rel}: names {n}, which is not a file of {', '.join(NAME_DIRS)}")
    for m in sorted(set(re.findall(r"(?<![\w/.])(src/[\w/.-]*[\w/])(?![*\w])", text))):
        if not os.path.exists(os.path.join(root, m)):
            problems.append(f"{rel}: names {m}, which does not exist")
    if must_name_src:
        named = named_files(text)
        for d in sorted(os.listdir(os.path.join(root, "src"))):
            full = os.path.join(root, "src", d)
            if not os.path.isdir(full):
                continue
            for f in sorted(os.listdir(full)):
                if f.endswith((".c", ".h")) and f not in named:
                    problems.append(f"{rel}: does not name src/{d}/{f}")


def check_tests(root, problems):
    rel = "tests/README.md"
    if not os.path.exists(os.path.join(root, rel)):
        return
    text = read(root, rel)
    tests = {os.path.splitext(f)[0] for f in os.listdir(os.path.join(root, "tests"))
             if re.match(r"test_\w+\.(c|py)$", f)}
    named = set(re.findall(r"(?<![\w/])(test_\w+?)(?:\.c|\.py)?(?!\w)", text))
    for t in sorted(tests - named):
        problems.append(f"{rel}: does not name tests/{t}")
    for t in sorted(named - tests):
        problems.append(f"{rel}: names {t}, which is not a test of tests/")
    check_names(root, rel, problems, False)


def check_links(root, problems):
    files = []
    for pat in LINK_FILES:
        if pat.endswith("*.md"):
            d = os.path.join(root, os.path.dirname(pat))
            if os.path.isdir(d):
                files += sorted(os.path.join(os.path.dirname(pat), f) for f in os.listdir(d) if f.endswith(".md"))
        elif os.path.exists(os.path.join(root, pat)):
            files.append(pat)
    n = 0
    for rel in files:
        text = without_code(read(root, rel))
        text = re.sub(r"`[^`\n]*`", "", text)   # inline code is not a link
        for m in re.finditer(r"\]\(([^)\s]+)\)", text):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue
            n += 1
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(root, os.path.dirname(rel), path)) if path else \
                os.path.join(root, rel)
            if not os.path.exists(full):
                problems.append(f"{rel}: link {target}: no such file")
            elif anchor and full.endswith(".md") and anchor not in slugs(open(full, encoding="utf-8").read()):
                problems.append(f"{rel}: link {target}: no heading #{anchor} there")
    return n


def check_keys(root, problems):
    rel = "docs/TRAINING.md"
    if not os.path.exists(os.path.join(root, rel)):
        return
    doc = read(root, rel)
    m = re.search(r"```\n(\[model\]\n.*?)```", doc, re.S)
    if not m:
        problems.append(f"{rel}: no key list (a fenced block starting with [model])")
        return
    train = os.path.join(root, "train")
    if not os.access(train, os.X_OK):
        problems.append(f"{rel}: ./train is not built, its --help cannot be compared (make)")
        return
    out = subprocess.run([train, "--help"], capture_output=True, text=True, cwd=root).stdout
    # its sections, [model] to the last, up to the first blank line not followed by a section
    k = re.search(r"\[model\]\n.*?\n(?=\n[^\[]|$)", out, re.S)
    if not k or k.group(0) != m.group(1):
        problems.append(f"{rel}: the key list is not ./train --help's (paste its [model] .. [run] sections)")


def check_limits(root, problems):
    for rel, most in LIMITS:
        if os.path.exists(os.path.join(root, rel)):
            lines = read(root, rel).count("\n")
            if lines > most:
                problems.append(f"{rel}: {lines} lines, more than {most}")
    if os.path.exists(os.path.join(root, "README.md")):
        head = read(root, "README.md").split("\n")[:FRONT_WITHIN]
        if FRONT_HEADING not in head:
            problems.append(f"README.md: no \"{FRONT_HEADING}\" in its first {FRONT_WITHIN} lines")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=".", help="the repository root")
    root = ap.parse_args().root
    problems = []
    check_names(root, "docs/ARCHITECTURE.md", problems, True)
    check_tests(root, problems)
    links = check_links(root, problems)
    check_keys(root, problems)
    check_limits(root, problems)
    for p in problems:
        print(p)
    print(f"docs: {links} relative links; {len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
