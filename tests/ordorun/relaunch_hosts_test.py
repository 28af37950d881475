#!/usr/bin/env python3
"""ordorun --restarts with --hosts leaves out a host that went down (multiprocess suite).

  relaunch_hosts_test.py ORDORUN CHECKPOINT_RANKS

Two network namespaces, a and b, are the hosts, 2 ranks each, started through a remote shell
that is `ip netns exec` until a host is taken down: from then on it exits 255 for that host,
as ssh does for a host it cannot reach. The host is taken down by the checkpoint_ranks program
itself: rank 3 (on b) creates the marker file (--die-once) and kills itself (SIGKILL) in
iteration 13 of 30, with a checkpoint every 4 iterations.
  1. b down: ordorun says it leaves out host b and relaunches on 2 rank(s) (a's), which resume
     from the newest complete checkpoint and end with exit 0 and the blocks and energy of an
     uninterrupted run on all 4 ranks, byte for byte;
  2. a and b down (a's remote shell fails on the relaunch too): ordorun leaves out b, the
     relaunch on a fails, and with no host left it stops with exit 2, saying so.
Skips (77) where network namespaces are not permitted.
"""
import os
import re
import shutil
import stat
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "comm"))
import multiprocess as mp  # noqa: E402  (run, fail, netns_hosts)

ITERS, EVERY, DIE_AT = "30", "4", "13"

# The remote shell: `rsh MARKER DOWN HOST COMMAND...`, DOWN a comma-separated list of hosts
# that are unreachable once MARKER exists.
RSH = """#!/bin/sh
marker=$1 down=$2 host=$3
shift 2
case ",$down," in
  *,"$host",*)
    if [ -e "$marker" ]; then
      echo "ssh: connect to host $host port 22: No route to host" >&2
      exit 255
    fi ;;
esac
exec ip netns exec "$@"
"""


def combined(prefix, ranks):
    """Every rank's blocks in rank order (homes are chunks of the blocks' order), then the
    energy, which every rank holds: the same bytes on any rank count."""
    parts = []
    for r in range(ranks):
        with open("%s.%d" % (prefix, r), "rb") as f:
            parts.append(f.read())
    return b"".join(p[:-8] for p in parts) + parts[0][-8:]


def with_rsh(launch, rsh):
    i = launch.index("--rsh")
    return launch[:i + 1] + [rsh] + launch[i + 2:]


def main():
    ordorun, binary = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="ordo-relaunch-hosts-%d-" % os.getpid())
    try:
        # Not named "rsh" or "ssh", which ordorun hands the command as one string.
        rsh = os.path.join(tmp, "netns-rsh")
        with open(rsh, "w") as f:
            f.write(RSH)
        os.chmod(rsh, stat.S_IRWXU)
        with mp.netns_hosts(ordorun, per_host=2) as (launch, env, (a, b)):
            prog = [binary, "--iters", ITERS, "--blocks", "6"]
            ref = os.path.join(tmp, "plain")
            p, _ = mp.run(launch + prog + ["--out", ref], env=env, timeout=180)
            if p.returncode != 0:
                mp.fail("the uninterrupted run on %s:2,%s:2 exited %d" % (a, b, p.returncode))
            want = combined(ref, 4)

            for down in ([b], [a, b]):
                case = os.path.join(tmp, "-".join(down))
                os.makedirs(case)
                marker = os.path.join(case, "down")
                out = os.path.join(case, "out")
                cmd = with_rsh(launch, "%s %s %s" % (rsh, marker, ",".join(down)))
                at = cmd.index(ordorun) + 1
                cmd = cmd[:at] + ["--restarts", "2"] + cmd[at:] + prog + [
                    "--checkpoint", os.path.join(case, "ckpt"), "--every", EVERY,
                    "--die-at", DIE_AT, "--die-rank", "3", "--die-once", marker, "--out", out]
                p, _ = mp.run(cmd, env=env, timeout=300)
                what = "hosts %s taken down" % " and ".join(down)
                said = ["rank 3 (pid", "on host %s) was killed by signal 9" % b,
                        "leaving out host %s;" % b, "relaunching the job on 2 rank(s)",
                        "(relaunch 1 of 2)"]
                if down == [a, b]:
                    said += ["every host of the job was found down (hosts %s, %s)" % (a, b),
                             "no host is left to relaunch the job on"]
                for s in said:
                    if s not in p.stderr:
                        mp.fail("%s: stderr does not say %r: %s" % (what, s, p.stderr))
                if down == [b]:
                    if p.returncode != 0:
                        mp.fail("%s: exit %d, expected 0 after the relaunch on %s; stderr: %s"
                                % (what, p.returncode, a, p.stderr))
                    if "relaunch 2 of 2" in p.stderr:
                        mp.fail("%s: relaunched twice: %s" % (what, p.stderr))
                    if not re.search(r"resumed after iteration (8|12) ", p.stderr):
                        mp.fail("%s: the relaunch did not say it resumed after iteration 12 (or "
                                "8, while 12 was still being written): %s" % (what, p.stderr))
                    if combined(out, 2) != want:
                        mp.fail("%s: the relaunched job's bytes on 2 ranks differ from the "
                                "uninterrupted run's on 4" % what)
                    print("host %s down: left out, relaunched on %s's 2 ranks, exit 0, bytes "
                          "identical to the uninterrupted 4-rank run" % (b, a))
                else:
                    if p.returncode != 2:
                        mp.fail("%s: exit %d, expected 2 with no host left; stderr: %s"
                                % (what, p.returncode, p.stderr))
                    print("hosts %s and %s down: %s left out, the relaunch on %s failed, exit 2 "
                          "with no host left" % (a, b, b, a))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
