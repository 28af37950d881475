#!/usr/bin/env python3
"""Checkpoints of an app restarted on another number of ranks (multiprocess suite).

  checkpoint_ranks_app_test.py ORDORUN BIN [EVERY] -- ARGS...
      The uninterrupted 1-rank run writes --output plain.npy. Then for 1, 2 and 3 writers:
      the run with --checkpoint DIR --checkpoint-every EVERY (4 unless given; with --iters 10,
      checkpoints 4 and 8), and from its DIR a --restart on 1, 2 and 3 ranks (the last also with --workers 2
      and --verify): each exit 0 with the uninterrupted run's --output bytes and iters=.
"""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "comm"))
import multiprocess as mp  # noqa: E402  (run, fail, ucx_env)


def main():
    ordorun, binary = sys.argv[1], sys.argv[2]
    every = sys.argv[3] if sys.argv[3] != "--" else "4"
    args = sys.argv[sys.argv.index("--") + 1:]
    env = mp.ucx_env("shm,self")
    with tempfile.TemporaryDirectory() as tmp:
        job = lambda n, extra: [ordorun, "--timeout", "60", "-n", str(n), binary] + args + (
            extra if "--workers" in extra else extra + ["--workers", "1"])
        plain = os.path.join(tmp, "plain.npy")
        p, _ = mp.run(job(1, ["--output", plain]), env=env)
        if p.returncode != 0:
            mp.fail("the uninterrupted run exited %d; stderr: %s" % (p.returncode, p.stderr))
        want = open(plain, "rb").read()
        iters = re.search(r"iters=(\d+)", p.stdout).group(1)
        for writers in (1, 2, 3):
            ckpt = os.path.join(tmp, "ckpt-%d" % writers)
            p, _ = mp.run(job(writers, ["--checkpoint", ckpt, "--checkpoint-every", every]), env=env)
            if p.returncode != 0:
                mp.fail("%d writer(s): exit %d; stderr: %s" % (writers, p.returncode, p.stderr))
            for readers in (1, 2, 3):
                out = os.path.join(tmp, "out-%d-%d.npy" % (writers, readers))
                extra = ["--workers", "2", "--verify"] if readers == 3 else ["--workers", "1"]
                p, _ = mp.run(job(readers, ["--restart", ckpt, "--output", out] + extra), env=env)
                what = "written on %d rank(s), restarted on %d" % (writers, readers)
                if p.returncode != 0:
                    mp.fail("%s: exit %d; stderr: %s" % (what, p.returncode, p.stderr))
                if open(out, "rb").read() != want:
                    mp.fail("%s: --output differs from the uninterrupted run's" % what)
                if "iters=%s " % iters not in p.stdout or ("--verify" in extra and "verify=ok" not in p.stdout):
                    mp.fail("%s: the result line is %r, expected iters=%s" % (what, p.stdout, iters))
            print("written on %d rank(s): restarted on 1, 2 and 3 ranks, byte-identical" % writers)


if __name__ == "__main__":
    main()
