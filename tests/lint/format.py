#!/usr/bin/env python3
"""Checks that the lines changed since the lint's base commit (tests/lint/base) are formatted
as .clang-format says: `git clang-format --diff BASE` over the C and C++ files, committed or
not. Lines that no commit after the base touched are left as they are (the tree is not
reformatted at once).

Usage: format.py SOURCE_ROOT. Prints the diff clang-format wants and exits 1, or prints "ok".
A clone whose history does not reach the base is a SKIP (77) when it is shallow and a failure
otherwise, as in commits.py; so is a tree that is not a git repository.
"""
import os
import shutil
import subprocess
import sys

SKIP = 77


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
    # --diff prints what it would change and changes nothing; the files as they are in the
    # working tree are checked (git clang-format compares them with the base).
    r = subprocess.run(["git", "clang-format", "--diff", "--extensions",
                        "c,h,cc,cpp,cxx,hh,hpp,hxx,ipp,inc", base, "--"], cwd=root,
                       capture_output=True, text=True)
    out = r.stdout
    if out.startswith("diff ") or "\n+" in out or r.returncode not in (0, 1):
        print(out + r.stderr)
        print(f"lines changed since {base[:10]} are not formatted as .clang-format says: run "
              f"'git clang-format {base[:10]}' (or 'git clang-format main' on a branch) and "
              "commit the result")
        return 1
    print("ok (" + (out.strip() or "nothing to format") + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
