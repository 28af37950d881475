#!/usr/bin/env python3
"""Tests commits.py on a scratch repository it builds: a good commit passes; a subject of 73
characters, one without an area, one without a blank second line and one without a body each
fail (and are named); the commit-msg hook refuses them as well; a shallow clone that does not
reach the base is a SKIP (77), and a base that is not in the history a failure.

Usage: commits_test.py SOURCE_ROOT (the checker is SOURCE_ROOT/tests/lint/commits.py).
"""
import os
import subprocess
import sys
import tempfile

GOOD = "engine: stop run_until in the dataflow\n\nWhy, and what fails without it.\n"
BAD = {
    "long": "engine: " + "x" * 65 + "\n\nA subject of 73 characters.\n",
    "no area": "Stop run_until in the dataflow\n\nNo area before a colon.\n",
    "no blank": "engine: stop run_until\nin the dataflow, a paragraph as a subject.\n",
    "no body": "engine: stop run_until in the dataflow\n",
}


def run(*args, cwd=None, env=None):
    return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, env=env)


def main(root):
    checker = os.path.join(root, "tests", "lint", "commits.py")
    hook = os.path.join(root, "scripts", "commit-msg")
    failures = []

    def expect(what, cond, detail=""):
        if not cond:
            failures.append(f"{what}: {detail}")

    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t", GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    with tempfile.TemporaryDirectory() as tmp:
        repo = os.path.join(tmp, "repo")
        run("git", "init", "-q", repo, env=env)

        def commit(message):
            subprocess.run(["git", "commit", "-q", "--allow-empty", "--cleanup=verbatim", "-F",
                            "-"], cwd=repo, env=env, input=message, capture_output=True,
                           text=True, check=True)

        commit("A paragraph before the base, which is not checked " + "y" * 80 + "\n")
        base = run("git", "rev-parse", "HEAD", cwd=repo).stdout.strip()
        commit(GOOD)
        r = run(sys.executable, checker, "--range", f"{base}..HEAD", repo)
        expect("a good commit", r.returncode == 0, r.stdout + r.stderr)
        for name, message in BAD.items():
            commit(message)
            sha = run("git", "rev-parse", "--short=10", "HEAD", cwd=repo).stdout.strip()
            r = run(sys.executable, checker, "--range", "HEAD~1..HEAD", repo)
            expect(f"'{name}' fails", r.returncode == 1 and sha in r.stdout, r.stdout + r.stderr)
            msg = os.path.join(tmp, "msg")
            with open(msg, "w") as f:
                f.write(message + "# Please enter the commit message (a comment git drops)\n")
            r = run(hook, msg)
            expect(f"the hook refuses '{name}'", r.returncode != 0, r.stdout + r.stderr)
        r = run(sys.executable, checker, "--range", f"{base}..HEAD", repo)
        expect("the range names each bad commit", r.returncode == 1
               and r.stdout.count("\n") == len(BAD) + 1, r.stdout)
        msg = os.path.join(tmp, "msg")
        with open(msg, "w") as f:
            f.write("# a comment first\n" + GOOD + "# Please enter the commit message\n"
                    "# ------------------------ >8 ------------------------\nlong diff " +
                    "z" * 100 + "\n")
        r = run(hook, msg)
        expect("the hook takes a good message with git's comments", r.returncode == 0,
               r.stdout + r.stderr)

        # The whole check on a copy of the source tree's lint folder, in the scratch repo.
        os.makedirs(os.path.join(repo, "tests", "lint"))
        with open(os.path.join(repo, "tests", "lint", "base"), "w") as f:
            f.write(base + "\n")
        r = run(sys.executable, checker, repo)
        expect("the whole check fails on the bad commits", r.returncode == 1, r.stdout)
        shallow = os.path.join(tmp, "shallow")
        run("git", "clone", "-q", "--depth", "1", "file://" + repo, shallow, env=env)
        os.makedirs(os.path.join(shallow, "tests", "lint"))
        with open(os.path.join(shallow, "tests", "lint", "base"), "w") as f:
            f.write(base + "\n")
        r = run(sys.executable, checker, shallow)
        expect("a shallow clone is a SKIP", r.returncode == 77 and "SKIP" in r.stdout, r.stdout)
        with open(os.path.join(repo, "tests", "lint", "base"), "w") as f:
            f.write("0" * 40 + "\n")
        r = run(sys.executable, checker, repo)
        expect("a base not in the history fails", r.returncode == 1
               and "not an ancestor" in r.stdout, r.stdout)

    for f in failures:
        print("FAIL", f)
    if not failures:
        print("ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
