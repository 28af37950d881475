#!/usr/bin/env python3
"""Checks commit messages: a subject `area: imperative summary` of at most 72 characters, a
blank second line, then a body (why, the evidence, what fails without the change).

Usage:
  commits.py SOURCE_ROOT            every non-merge commit after the base (tests/lint/base)
                                    up to HEAD; prints one line per bad commit and exits 1
  commits.py --message FILE         one message, as git's commit-msg hook gets it (lines
                                    starting with '#' and everything below git's scissors line
                                    are dropped first); scripts/commit-msg runs this
  commits.py --range A..B DIR       the commits of a range in the repository at DIR

History before the base is not checked (it is not rewritten). A clone whose history does not
reach the base gives exit 77 (meson: SKIP) with the reason when it is shallow, and a failure
otherwise (the base file names a commit this history does not have).
"""
import os
import re
import subprocess
import sys

MAX_SUBJECT = 72
# `area: summary`; an area is a word with / . _ + - (a path, a tool's name), or several joined
# by ", " ("api, docs: ..."). The summary starts right after ": ".
SUBJECT = re.compile(r"^[A-Za-z0-9_][\w./+-]*(, [A-Za-z0-9_][\w./+-]*)*: \S")
SKIP = 77


def problems(message):
    """What is wrong with one commit message (a list of sentences; empty when it is good)."""
    lines = message.rstrip("\n").split("\n")
    subject = lines[0] if lines else ""
    found = []
    if not subject.strip():
        return ["empty subject"]
    if len(subject) > MAX_SUBJECT:
        found.append(f"subject of {len(subject)} characters (at most {MAX_SUBJECT}): move the "
                     "detail into the body")
    if not SUBJECT.match(subject):
        found.append("subject not of the form 'area: imperative summary'")
    if len(lines) >= 2 and lines[1].strip():
        found.append("second line not blank (a subject line, a blank line, then the body)")
    if not any(line.strip() for line in lines[2:]):
        found.append("no body: say why, the evidence, and what fails without the change")
    return found


def hook_message(text):
    """The message as git will record it from a commit-msg hook's file (default cleanup)."""
    out = []
    for line in text.split("\n"):
        if re.match(r"^# -+ >8 -+$", line):
            break
        if line.startswith("#"):
            continue
        out.append(line.rstrip())
    while out and not out[0].strip():
        out.pop(0)
    return "\n".join(out)


def git(root, *args, check=True):
    return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, check=check)


def check_range(root, rev_range):
    log = git(root, "log", "--no-merges", "--format=%H%x00%B%x01", rev_range).stdout
    bad = 0
    count = 0
    for entry in log.split("\x01"):
        entry = entry.lstrip("\n")
        if not entry:
            continue
        sha, message = entry.split("\x00", 1)
        count += 1
        found = problems(message)
        if found:
            bad += 1
            subject = message.split("\n", 1)[0]
            shown = subject if len(subject) <= 60 else subject[:57] + "..."
            print(f"{sha[:10]} \"{shown}\": " + "; ".join(found))
    return count, bad


def main(argv):
    if len(argv) == 3 and argv[1] == "--message":
        with open(argv[2], encoding="utf-8", errors="replace") as f:
            found = problems(hook_message(f.read()))
        for p in found:
            print(f"commit-msg: {p}", file=sys.stderr)
        if found:
            print("commit-msg: the rule (docs/developing.md): 'area: imperative summary' in at "
                  f"most {MAX_SUBJECT} characters, a blank line, then a body. The message is "
                  "kept in .git/COMMIT_EDITMSG.", file=sys.stderr)
        return 1 if found else 0
    if len(argv) == 4 and argv[1] == "--range":
        count, bad = check_range(argv[3], argv[2])
        print(f"{count} commits, {bad} bad" if bad else f"ok ({count} commits)")
        return 1 if bad else 0
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    base_file = os.path.join(root, "tests", "lint", "base")
    with open(base_file, encoding="utf-8") as f:
        base = f.read().split()[0]
    if git(root, "rev-parse", "--git-dir", check=False).returncode != 0:
        print(f"SKIP: {root} is not a git repository, so there are no commits to check")
        return SKIP
    if git(root, "merge-base", "--is-ancestor", base, "HEAD", check=False).returncode != 0:
        shallow = git(root, "rev-parse", "--is-shallow-repository").stdout.strip() == "true"
        if shallow:
            print(f"SKIP: this clone is shallow and its history does not reach the lint's base "
                  f"commit {base} (tests/lint/base): run 'git fetch --unshallow' to check the "
                  "commits after it")
            return SKIP
        print(f"the lint's base commit {base} (tests/lint/base) is not an ancestor of HEAD: "
              "the history was rewritten or the base is wrong; it must name a commit of main")
        return 1
    count, bad = check_range(root, f"{base}..HEAD")
    if bad:
        print(f"{bad} of the {count} commits after {base[:10]} break the commit rule "
              "(docs/developing.md, 'Commits'); reword them before they land (git rebase -i)")
        return 1
    print(f"ok ({count} commits after {base[:10]})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
