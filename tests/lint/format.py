#!/usr/bin/env python3
"""Checks that the lines changed since the lint's base commit (tests/lint/base) are formatted
as .clang-format says: what `git clang-format --diff BASE` does over the C and C++ files,
committed or not. Lines that no commit after the base touched are left as they are (the tree is
not reformatted at once), and so are the lines of a file moved since the base: the changed lines
come from `git diff -M`, which follows renames, where git clang-format (git diff-index) would
take every line of a moved file for a new one.

Usage: format.py SOURCE_ROOT. Prints the diff clang-format wants and exits 1, or prints "ok".
A clone whose history does not reach the base is a SKIP (77) when it is shallow and a failure
otherwise, as in commits.py; so is a tree that is not a git repository.
"""
import difflib
import os
import re
import shutil
import subprocess
import sys

SKIP = 77
EXTENSIONS = (".c", ".h", ".cc", ".cpp", ".cxx", ".hh", ".hpp", ".hxx", ".ipp", ".inc")
HUNK = re.compile(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@")


def git(root, *args):
    return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True)


def main(root):
    with open(os.path.join(root, "tests", "lint", "base"), encoding="utf-8") as f:
        base = f.read().split()[0]
    if git(root, "rev-parse", "--git-dir").returncode != 0:
        print(f"SKIP: {root} is not a git repository, so there are no changed lines to check")
        return SKIP
    if shutil.which("clang-format") is None or shutil.which("git-clang-format") is None:
        print("clang-format (git clang-format) is not installed: scripts/setup.sh installs it "
              "(Debian package clang-format)")
        return 1
    if git(root, "merge-base", "--is-ancestor", base, "HEAD").returncode != 0:
        if git(root, "rev-parse", "--is-shallow-repository").stdout.strip() == "true":
            print(f"SKIP: this clone is shallow and its history does not reach the lint's base "
                  f"commit {base} (tests/lint/base): run 'git fetch --unshallow' to check the "
                  "lines changed after it")
            return SKIP
        print(f"the lint's base commit {base} (tests/lint/base) is not an ancestor of HEAD: "
              "the history was rewritten or the base is wrong; it must name a commit of main")
        return 1
    # The working tree against the base, renames followed: per file, the line ranges that
    # differ, in the file as it is now.
    r = git(root, "diff", "-M", "-U0", "--no-color", "--no-ext-diff", "--src-prefix=a/",
            "--dst-prefix=b/", base, "--", *["*" + e for e in EXTENSIONS])
    if r.returncode != 0:
        print(r.stderr)
        return 1
    changed = {}
    path = None
    for line in r.stdout.splitlines():
        if line.startswith("+++ "):
            path = line[6:] if line.startswith("+++ b/") else None
        elif line.startswith("@@") and path and path.endswith(EXTENSIONS):
            m = HUNK.match(line)
            start, count = int(m.group(1)), int(m.group(2) or "1")
            if count > 0:
                changed.setdefault(path, []).append("--lines=%d:%d" % (start, start + count - 1))
    out = ""
    for path, lines in sorted(changed.items()):
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            text = f.read()
        c = subprocess.run(["clang-format", "--style=file", "--assume-filename=" + path, *lines],
                           cwd=root, input=text, capture_output=True, text=True)
        if c.returncode != 0:
            print(c.stderr)
            return 1
        if c.stdout != text:
            out += "".join(difflib.unified_diff(text.splitlines(True), c.stdout.splitlines(True),
                                                "a/" + path, "b/" + path))
    if out:
        print(out)
        print(f"lines changed since {base[:10]} are not formatted as .clang-format says: run "
              f"'git clang-format {base[:10]}' (or 'git clang-format main' on a branch) and "
              "commit the result")
        return 1
    print("ok (%d changed file(s) formatted)" % len(changed))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
