#!/usr/bin/env python3
"""A stencil app's --restart reads block headers from the checkpoint (apps suite, one process).

  checkpoint_input_test.py BIN -- ARGS...
      BIN ARGS --iters 10 --checkpoint DIR --checkpoint-every 5 writes a checkpoint; then each
      case copies it, changes the header of the first block (location 0: steps done, then
      where each buffer's block lies, 0 or 1, as doubles) in rank-0.part, and runs BIN ARGS
      --iters 20 --restart: each must exit 2 naming the block and what is wrong. The headers'
      numbers become pointer offsets and loop counts in the sweeps: a shift no run writes (the
      mark's older form) once read outside the
      block (a segfault), steps done that differ between blocks silently mixed time levels.
      The undamaged copy restarts with exit 0.
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    sep = sys.argv.index("--")
    binary, args = sys.argv[1], sys.argv[sep + 1:]
    tmp = tempfile.mkdtemp(prefix="ordo-ckpt-input-%d-" % os.getpid())
    try:
        good = os.path.join(tmp, "good")
        p = subprocess.run([binary] + args + ["--iters", "10", "--checkpoint", good,
                                              "--checkpoint-every", "5"],
                           capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            fail("the run that writes the checkpoint exited %d: %s" % (p.returncode, p.stderr))
        sub = sorted(d for d in os.listdir(good) if d.startswith("ckpt-"))[-1]
        with open(os.path.join(good, sub, "rank-0.part"), "rb") as f:
            part = f.read()
        # docs/checkpoint.md: a 48-byte header, then per location (offset u64, bytes u64,
        # name bytes u32, reserved u32), the names, the bytes.
        records = struct.unpack_from("<Q", part, 40)[0]
        steps_at, size, name_bytes, _ = struct.unpack_from("<QQII", part, 48)
        name_at = 48 + 24 * records
        name = part[name_at:name_at + name_bytes].decode()
        if name != "u[0,0]" or struct.unpack_from("<d", part, steps_at)[0] != 10.0:
            fail("the first record is not block 0's header after 10 steps (%r)" % name)

        def restart(edit):
            case = os.path.join(tmp, "case")
            shutil.rmtree(case, ignore_errors=True)
            shutil.copytree(good, case)
            data = bytearray(part)
            edit(data)
            with open(os.path.join(case, sub, "rank-0.part"), "wb") as f:
                f.write(data)
            return subprocess.run([binary] + args + ["--iters", "20", "--restart", case],
                                  capture_output=True, text=True, timeout=120)

        p = restart(lambda d: None)
        if p.returncode != 0:
            fail("the undamaged checkpoint did not restart: exit %d: %s" % (p.returncode, p.stderr))
        cases = [
            ("a mark no sweep makes", steps_at + 8, 1e6,
             ["is corrupt", "block u[0,0] marks where it lies in buffer 0 as 1000000, where a sweep marks 0"]),
            # What an ordo before the named mark wrote for a moved block: -shift, and heat2d's
            # in-place sweep by rows (a 2-D star on rows of 512 points) shifts by h = 1 plane.
            ("the mark an older ordo wrote", steps_at + 8, -1.0,
             ["is corrupt", "marks where it lies in buffer 0 as -1", "an older ordo wrote this "
              "checkpoint: run from the start, or finish with the ordo that wrote it"]),
            ("steps done that are not a number", steps_at, float("nan"), ["nan steps done"]),
            ("negative steps done", steps_at, -3.0, ["-3 steps done"]),
            ("steps done unlike the other blocks'", steps_at, 7.0,
             ["7 steps done, another block 10", "10 steps done, another block 7"]),
        ]
        for name, at, value, words in cases:
            p = restart(lambda d: struct.pack_into("<d", d, at, value))
            print("%s: exit %d: %s" % (name, p.returncode, p.stderr.strip()))
            if p.returncode != 2:
                fail("%s: expected exit 2, got %d" % (name, p.returncode))
            if name.startswith("steps done unlike"):  # either block may be checked first
                words = [w for w in words if w in p.stderr][:1] or words
            for w in words:
                if w not in p.stderr:
                    fail("%s: the message does not say %r" % (name, w))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS: every damaged block header refused with exit 2, naming it")


if __name__ == "__main__":
    main()
