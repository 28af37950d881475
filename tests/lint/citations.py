#!/usr/bin/env python3
"""Checks that code and docs cite nothing a clone does not have: no issue numbers ("issue 14",
"#19's bound", "(#15, item 3)"), no files of the brief or its papers outside the repository.
The papers are cited by author and year, with their titles in docs/references.md; the design
principles the code relies on are written in docs/ (docs/architecture.md, docs/developing.md).

Usage: citations.py SOURCE_ROOT. Prints one line per citation and exits 1, or prints "ok".
Outside a git repository it checks every file under SOURCE_ROOT but build folders.
"""
import os
import re
import subprocess
import sys

# Written so that this file does not match itself.
PATTERNS = [
    (re.compile(r"\bpapers" r"/"), "a path into the papers: cite the paper by author and year "
     "(docs/references.md)"),
    (re.compile(r"\b(DESIGN|STYLE)" r"\.md\b"), "a file outside the repository: say the "
     "principle in the project's own words (docs/)"),
    (re.compile(r"\b[Ii]ssues? #?\d+"), "an issue number: say what it was about"),
    # '#19 bounds', '(#15, item 3)', "#14's bar"; not 'task #5' or 'location #2' (messages
    # that number a task or a location), nor '(#0)' naming a location by index, nor colours.
    (re.compile(r"(?<![\w&#'\"])(?<!task )(?<!location )#\d+(?=[ ,;:.']|$)"),
     "an issue number: say what it was about"),
]
SKIP_DIRS = ("tests/fuzz/corpus", "tools/ordo-trace/viewer/node_modules")
SKIP_SUFFIXES = (".png", ".jpg", ".css", ".json", ".npy", ".bin", ".gz")


def tracked(root):
    r = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True)
    if r.returncode == 0:
        return [p for p in r.stdout.decode().split("\0") if p]
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(("build", ".git", "node_modules"))]
        out += [os.path.relpath(os.path.join(d, f), root) for f in files]
    return out


def main(root):
    me = "tests/lint/citations.py"  # its patterns' examples are citations
    found = 0
    for path in sorted(tracked(root)):
        if path == me or path.startswith(SKIP_DIRS) or path.endswith(SKIP_SUFFIXES):
            continue
        try:
            with open(os.path.join(root, path), encoding="utf-8") as f:
                lines = f.read().split("\n")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        for n, line in enumerate(lines, 1):
            for pattern, why in PATTERNS:
                m = pattern.search(line)
                if m:
                    found += 1
                    print(f"{path}:{n}: '{m.group(0)}': {why}")
    if found:
        print(f"{found} citation(s) of things a clone does not have")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
