#!/usr/bin/env python3
"""scripts/scaling.sh writes every key it promises, with sane values (stdlib only).

  scaling_test.py SCRIPT BUILD_DIR
      First the refusals: an unknown flag, a count that is not one, an unknown section and an
      --out that is not a regular file must each exit 2 with a message naming what is wrong,
      and write nothing. Then one run, `SCRIPT --quick --no-build --build-dir BUILD_DIR
      --counts 1,2,C --numa always`, C one more than this machine's cores: C must be
      reported skipped (a skipped.count.C key and a note on stderr), and for 1 and 2 workers
      every section must give its keys: METG of ordo, MPI and OpenMP with finite ratios; ns
      per task of ordo, OpenMP, oneTBB and StarPU for each pattern with finite ratios;
      heat2d and heat3d Gstencils/s of ordo at depth 1 and 8, OpenMP and MPI with the STREAM
      triad and the fractions of its bound; heat2d as 2 ranks x 1 worker and 1 x 2;
      ordo-bench-scale's run times against MPI; NUMA placement off and on; the topology.
      Numbers are checked for what they can be (a fraction of the STREAM bound is below 10, a
      ratio positive and finite), never against a time.
"""
import math
import os
import subprocess
import sys
import tempfile


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def cores():
    try:
        return int(subprocess.check_output(["hwloc-calc", "--number-of", "core", "machine:0"],
                                           text=True))
    except (OSError, subprocess.CalledProcessError, ValueError):
        return os.cpu_count() or 1


def refusals(script, build, tmp):
    out = os.path.join(tmp, "refused.txt")
    fifo = os.path.join(tmp, "fifo")
    os.mkfifo(fifo)
    cases = [
        (["--bogus"], "unknown option '--bogus'"),
        (["--counts", "1,0"], "'0' is not a count"),
        (["--sections", "metg,speed"], "unknown section 'speed'"),
        (["--numa", "maybe"], "--numa 'maybe'"),
        (["--reps"], "--reps needs a value"),
        (["--out", fifo], "is not a regular file"),
    ]
    for args, message in cases:
        argv = [script, "--no-build", "--build-dir", build, "--out", out] + args
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        if p.returncode != 2:
            fail(f"{args}: exit {p.returncode}, expected 2; stderr: {p.stderr}")
        if message not in p.stderr:
            fail(f"{args}: the message does not say {message!r}: {p.stderr}")
        if os.path.exists(out):
            fail(f"{args}: refused, yet it wrote {out}")


def number(results, key, low=0.0, high=math.inf):
    if key not in results:
        fail(f"no key {key}")
    try:
        v = float(results[key])
    except ValueError:
        fail(f"{key}={results[key]} is not a number")
    if not math.isfinite(v) or not low < v < high:
        fail(f"{key}={results[key]} is not in ({low}, {high})")
    return v


def main():
    script, build = sys.argv[1:3]
    with tempfile.TemporaryDirectory(prefix="ordo-scaling-test-") as tmp:
        refusals(script, build, tmp)
        n = cores()
        too_many = n + 1
        out = os.path.join(tmp, "scaling.txt")
        argv = [script, "--quick", "--no-build", "--build-dir", build, "--out", out,
                "--counts", f"1,2,{too_many}", "--numa", "always"]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=900)
        if p.returncode != 0:
            fail(f"exit {p.returncode}; stderr:\n{p.stderr}")
        results = {}
        with open(out) as f:
            for line in f:
                key, eq, value = line.rstrip("\n").partition("=")
                if not eq or key in results:
                    fail(f"line {line!r}: not key=value, or a key twice")
                results[key] = value
        print(f"{len(results)} keys; run.seconds={results.get('run.seconds')}")
        if f"skipped.count.{too_many}" not in results or f"skipped count.{too_many}" not in p.stderr:
            fail(f"{too_many} workers on {n} cores: not reported as skipped")
        if n < 2:
            print("SKIP: fewer than 2 cores, the 2-worker keys cannot be checked")
            sys.exit(77)
        number(results, "run.seconds", -1)
        number(results, "host.cores", 0)
        if not results.get("topology.lstopo", "").startswith("Machine"):
            fail(f"topology.lstopo is not lstopo's: {results.get('topology.lstopo')!r}")
        for s in ["ordo", "mpi", "omp"]:
            number(results, f"metg.w2.{s}_us")
        for r in ["ordo_vs_mpi", "ordo_vs_omp"]:
            number(results, f"metg.w2.{r}")
        number(results, "metg.w2.peak_gflops")
        if any(k.startswith("metg.w1.") for k in results):
            fail("METG at 1 worker: the issue asks for 2 and more")
        for pattern in ["independent", "chain", "stencil1d"]:
            for t in [1, 2]:
                number(results, f"tasks.{pattern}.t{t}.ordo_ns")
                for s in ["omp", "tbb", "starpu"]:
                    number(results, f"tasks.{pattern}.t{t}.{s}_ns")
                    number(results, f"tasks.{pattern}.t{t}.ordo_vs_{s}")
            number(results, f"tasks.{pattern}.ordo_vs_best_peer")
        for app in ["heat2d", "heat3d"]:
            for w in [1, 2]:
                k = f"stencil.{app}.w{w}"
                for s in ["ordo", "ordo_tb8", "openmp", "mpi"]:
                    number(results, f"{k}.{s}_gst")
                for r in ["ordo_vs_openmp", "ordo_vs_mpi", "ordo_tb8_vs_openmp",
                          "ordo_tb8_vs_mpi", "ordo_speedup"]:
                    number(results, f"{k}.{r}")
                number(results, f"{k}.triad_gbs")
                bound = number(results, f"{k}.bound_gst")
                number(results, f"{k}.ordo_fraction_of_stream", 0, 10)
                tb = number(results, f"{k}.ordo_tb8_fraction_of_stream", 0, 100)
                # The fraction is the triad's next to each run; the bound the median triad.
                if abs(tb * bound - number(results, f"{k}.ordo_tb8_gst")) > 1e-3 * bound + 1e-3:
                    fail(f"{k}: ordo_tb8_fraction_of_stream is not ordo_tb8_gst / bound_gst")
            if results.get(f"stencil.{app}.w1.ordo_speedup") != "1.000":
                fail(f"{app}: the speed-up at 1 worker is not 1")
            number(results, f"numa.{app}.placement_off_gst")
            number(results, f"numa.{app}.placement_on_gst")
            number(results, f"numa.{app}.on_vs_off")
        if results.get("ranks.layouts") != "2x1,1x2":
            fail(f"ranks.layouts={results.get('ranks.layouts')}, expected 2x1,1x2 on 2 cores")
        a = number(results, "ranks.heat2d.r2x1.gst")
        b = number(results, "ranks.heat2d.r1x2.gst")
        if abs(number(results, "ranks.heat2d.r2x1_vs_r1x2") - a / b) > 1e-3 * (a / b) + 1e-3:
            fail("ranks.heat2d.r2x1_vs_r1x2 is not r2x1 / r1x2")
        for k in ["run_seconds", "mpi_run_seconds", "ordo_vs_mpi", "startup_seconds",
                  "control_messages_per_rank_per_run"]:
            number(results, f"scale.r2.{k}")
        if any(v in ("", "nan") for v in results.values()):
            fail("empty or nan values: " +
                 ", ".join(k for k, v in results.items() if v in ("", "nan")))
    print("ok")


if __name__ == "__main__":
    main()
