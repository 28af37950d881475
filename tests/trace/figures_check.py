#!/usr/bin/env python3
"""Every figure of `ordo-trace summary --json` on hand-built traces whose answers are known by
construction: two runs with a gap between them, three instances waiting on one location at
once, a throughput-bound DAG (everything waits for a worker) and a latency-bound chain across
two ranks (everything waits for a message). The files are written here (trace_reader's
write_rank), not by ordo's recorder, and every figure is also recomputed here from the files,
by the definitions of docs/tracing.md, by brute force over elementary intervals: the known
answer, this oracle and the tool must agree.

Usage: figures_check.py ORDO_TRACE
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

from trace_reader import (BEGIN, END, GRANT, NONE, PREV_ITERATION, RECEIVE, RUN_BEGIN, RUN_END,
                          SEND, fail, messages, read_rank, write_rank)


def E(kind, t, **kw):
    return dict(kw, kind=kind, t=t)


def begin(t, task, it=0):
    return E(BEGIN, t, task=task, arg0=it)


def end(t, task, it=0):
    return E(END, t, task=task, arg0=it)


def grant(t, task, loc, requested, it=0, releaser=NONE, prev=False):
    return E(GRANT, t, task=task, loc=loc, arg0=it, arg1=requested, peer=releaser,
             flags=PREV_ITERATION if prev else 0)


# Each case: tasks (name, rank, accesses), locations (name, home), per rank {buffer: events},
# workers per rank, and the known answers (times from the first event, in ns).
CASES = {
    # Run 1 1000-4500: a#0 1000-3000, b#0 3000-4000, whose release grants a#1 and b#1's M for
    # the next run. Run 2 10000-13500: a#1 10500-12000 (ready since 4000), b#1 granted L at
    # 12000, begins 12200. The path goes a#0, b#0, the gap, a#1, b#1. b#1 waits for L from
    # 4000 (request and M) to 12000 while the worker is free: 4000-4500 and 10000-10500 inside
    # the runs.
    "two runs with a gap": dict(
        tasks=[("a", 0, [(0, True)]), ("b", 0, [(0, False), (1, True)])],
        locations=[("L", 0), ("M", 0)], workers=1,
        ranks=[{1: [E(RUN_BEGIN, 1000), E(RUN_END, 4500), E(RUN_BEGIN, 10000),
                    E(RUN_END, 13500)],
                0: [begin(1000, 0), end(3000, 0), grant(3000, 1, 0, 1000, releaser=0),
                    begin(3000, 1), end(4000, 1),
                    grant(4000, 0, 0, 3000, it=1, releaser=1, prev=True),
                    grant(4000, 1, 1, 4000, it=1, releaser=1, prev=True),
                    begin(10500, 0, 1), end(12000, 0, 1), grant(12000, 1, 0, 4000, it=1, releaser=0),
                    begin(12200, 1, 1), end(13000, 1, 1)]}],
        want=dict(window=7000, worker_lock_wait=[1000], task_wait={"a": 0, "b": 1000},
                  location_wait={"L": 1000, "M": 0},
                  path=[(0, "a", 0), (0, "b", 0), (0, "a", 1), (0, "b", 1)],
                  length=12000, compute=5300, dependency=0, worker=700, between=6000,
                  gaps=[(3000, 9000)], advice="task bodies")),
    # Two workers. w#0 1000-5000 releases X to r1, r2, r3 (requested at the run's start, 0):
    # all three wait 0-5000 at once. r1 and r2 run 5000-6000, r3 waits for a worker until 6000.
    "three instances waiting on one location": dict(
        tasks=[("w", 0, [(0, True)]), ("r1", 0, [(0, False)]), ("r2", 0, [(0, False)]),
               ("r3", 0, [(0, False)])],
        locations=[("X", 0)], workers=2,
        ranks=[{2: [E(RUN_BEGIN, 0), E(RUN_END, 7000)],
                0: [begin(1000, 0), end(5000, 0)] +
                   [grant(5000, k, 0, 0, releaser=0) for k in (1, 2, 3)] +
                   [begin(5000, 1), end(6000, 1), begin(6000, 3), end(7000, 3)],
                1: [begin(5000, 2), end(6000, 2)]}],
        # 0-1000: three waiting, both workers free; 1000-5000: worker 1 free.
        want=dict(window=7000, worker_lock_wait=[1000, 5000],
                  task_wait={"w": 0, "r1": 5000, "r2": 5000, "r3": 5000},
                  location_wait={"X": 5000},
                  path=[(0, "w", 0), (0, "r3", 0)],
                  length=6000, compute=5000, dependency=0, worker=1000, between=0, gaps=[],
                  advice="task bodies")),
    # One worker: a#0 releases L to b1..b4 at 1000, which then run one after the other.
    "throughput-bound": dict(
        tasks=[("a", 0, [(0, True)])] + [("b%d" % k, 0, [(0, False)]) for k in range(1, 5)],
        locations=[("L", 0)], workers=1,
        ranks=[{1: [E(RUN_BEGIN, 0), E(RUN_END, 5000)],
                0: [begin(0, 0), end(1000, 0)] +
                   [grant(1000, k, 0, 0, releaser=0) for k in range(1, 5)] +
                   [x for k in range(1, 5) for x in (begin(1000 * k, k), end(1000 * k + 1000, k))]}],
        want=dict(window=5000, worker_lock_wait=[0],
                  task_wait={"a": 0, "b1": 0, "b2": 0, "b3": 0, "b4": 0},
                  location_wait={"L": 0}, path=[(0, "a", 0), (0, "b4", 0)],
                  length=5000, compute=2000, dependency=0, worker=3000, between=0, gaps=[],
                  advice="throughput-bound")),
    # a (rank 0) writes L, sent to rank 1 at 1100 and received at 3000, granting b (rank 1),
    # which writes M, sent back at 4100 and received at 6000, granting c (rank 0).
    "latency-bound chain": dict(
        tasks=[("a", 0, [(0, True)]), ("b", 1, [(0, False), (1, True)]), ("c", 0, [(1, False)])],
        locations=[("L", 0), ("M", 1)], workers=1,
        ranks=[{1: [E(RUN_BEGIN, 0), E(RUN_END, 8000)],
                0: [begin(0, 0), end(1000, 0), E(SEND, 1100, peer=1, loc=0, task=0, arg0=8, arg1=1),
                    E(RECEIVE, 6000, peer=1, loc=1, task=2, arg0=8, arg1=2),
                    grant(6000, 2, 1, 0), begin(6000, 2), end(7000, 2)]},
               {1: [E(RUN_BEGIN, 0), E(RUN_END, 8000)],
                0: [E(RECEIVE, 3000, peer=0, loc=0, task=1, arg0=8, arg1=1), grant(3000, 1, 0, 0),
                    begin(3000, 1), end(4000, 1), E(SEND, 4100, peer=0, loc=1, task=1, arg0=8, arg1=2)]}],
        # Lock wait: b from 0 to 3000 on rank 1, c from 1000 (a done) to 6000 on rank 0.
        want=dict(window=8000, worker_lock_wait=[5000, 3000], task_wait={"a": 0, "b": 3000, "c": 5000},
                  location_wait={"L": 3000, "M": 5000}, path=[(0, "a", 0), (1, "b", 0), (0, "c", 0)],
                  length=7000, compute=3000, dependency=4000, worker=0, between=0, gaps=[],
                  advice="latency-bound", messages=2)),
}


def workers_of(path):
    return struct.unpack_from("<I", open(path, "rb").read(), 28)[0]


def oracle(files):
    """The figures, from the files alone, by the definitions in docs/tracing.md."""
    ranks = [read_rank(f) for f in files]
    workers = [workers_of(f) for f in files]
    origin = min(e["t"] for _, _, _, events in ranks for e in events)
    inst, grants, runs = {}, {}, []  # (rank, task name, iteration) -> ...
    for rank, tasks, _, events in ranks:
        open_at, mine = None, []
        for e in events:
            t = e["t"] - origin
            if e["kind"] == RUN_BEGIN:
                open_at = t
            elif e["kind"] == RUN_END:
                mine.append((open_at, t))
            elif e["kind"] in (BEGIN, END):
                rec = inst.setdefault((rank, tasks[e["task"]][0], e["arg0"]), {"worker": e["worker"]})
                rec["begin" if e["kind"] == BEGIN else "end"] = t
            elif e["kind"] == GRANT:
                grants.setdefault((rank, tasks[e["task"]][0], e["arg0"]), []).append(
                    (t, e["arg1"] - origin, e["loc"], e))
        runs.append(mine)
    names = {rank: [n for n, _ in tasks] for rank, tasks, _, _ in ranks}
    # Lock-wait interval of each instance: from max(request, the grant before the last) to
    # the last grant; it counts where a worker of its rank is free, inside the runs.
    waiting = {}
    for key, gs in grants.items():
        if key not in inst:
            continue
        times = sorted(g[0] for g in gs)
        last = max(gs, key=lambda g: g[0])
        otherwise = max(min(g[1] for g in gs), times[-2] if len(times) > 1 else -1)
        waiting[key] = (otherwise, last[0], last[2])
    cuts = sorted({x for r in runs for a, b in r for x in (a, b)} |
                  {x for v in inst.values() for x in (v["begin"], v["end"])} |
                  {x for w in waiting.values() for x in w[:2]})
    worker_lost = [[0] * workers[rank] for rank in range(len(ranks))]
    task_wait = {n: 0 for rank in names for n in names[rank]}
    location_wait = {}
    in_window = 0
    for lo, hi in zip(cuts, cuts[1:]):
        mid = (lo + hi) / 2
        d = hi - lo
        inside_any = False
        for rank in range(len(ranks)):
            if not any(a <= mid < b for a, b in runs[rank]):
                continue
            inside_any = True
            busy = {v["worker"] for k, v in inst.items() if k[0] == rank and v["begin"] <= mid < v["end"]}
            free = [w for w in range(workers[rank]) if w not in busy]
            if not free:
                continue
            now = [k for k, w in waiting.items() if k[0] == rank and w[0] <= mid < w[1]]
            for w in free[:len(now)]:
                worker_lost[rank][w] += d
            for task in {k[1] for k in now}:
                task_wait[task] += d
            for loc in {waiting[k][2] for k in now}:
                location_wait[loc] = location_wait.get(loc, 0) + d
        in_window += d if inside_any else 0
    return dict(window=in_window, worker_lost=[w for r in worker_lost for w in r],
                task_wait=task_wait, location_wait=location_wait, inst=inst, grants=grants,
                runs=runs, messages=messages(ranks))


def path_split(o, path):
    """Length, compute and the three parts of the waits along `path`, from the files."""
    inst, runs = o["inst"], o["runs"]
    run_of = lambda k: max(i for i, (a, _) in enumerate(runs[k[0]]) if a <= inst[k]["begin"])
    out = dict(length=inst[path[-1]]["end"] - inst[path[0]]["begin"], compute=0, dependency=0,
               worker=0, between=0, gaps=[])
    for i, k in enumerate(path):
        out["compute"] += inst[k]["end"] - inst[k]["begin"]
        if i == 0:
            continue
        prev = path[i - 1]
        start = inst[prev]["end"]
        if run_of(prev) != run_of(k):
            run_start = runs[k[0]][run_of(k)][0]
            out["between"] += run_start - start
            out["gaps"].append((start, run_start))
            start = run_start
        ready = max(start, max(g[0] for g in o["grants"][k]))
        out["dependency"] += ready - start
        out["worker"] += inst[k]["begin"] - ready
    return out


def check(what, want, oracle_says, tool_says):
    if not (want == oracle_says == tool_says):
        fail("%s: known %s, oracle %s, ordo-trace %s" % (what, want, oracle_says, tool_says))


def main():
    tool = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="ordo-figures-") as d:
        for name, case in CASES.items():
            base = os.path.join(d, name.replace(" ", "-") + ".trace")
            n = len(case["ranks"])
            files = [base if n == 1 else "%s.rank%d" % (base, r) for r in range(n)]
            for r, buffers in enumerate(case["ranks"]):
                write_rank(files[r], case["tasks"], case["locations"], buffers, case["workers"],
                           rank=r, ranks=n, run_id=7 if n > 1 else 0)
            s = json.loads(subprocess.run([tool, "summary", "--json", base], check=True,
                                          capture_output=True, text=True).stdout)
            text = subprocess.run([tool, "summary", base], check=True, capture_output=True,
                                  text=True).stdout
            o = oracle(files)
            want = case["want"]
            check(name + ": window", want["window"], o["window"], s["window_ns"])
            check(name + ": lock wait per worker", want["worker_lock_wait"], o["worker_lost"],
                  [w["lock_wait_ns"] for w in s["workers"]])
            check(name + ": lock wait in total", sum(want["worker_lock_wait"]),
                  sum(o["worker_lost"]), s["lock_wait_ns"])
            check(name + ": lock wait per task", want["task_wait"], o["task_wait"],
                  {t["name"]: t["wait_ns"] for t in s["tasks"]})
            loc_index = {l: i for i, (l, _) in enumerate(case["locations"])}
            check(name + ": lock wait per location", want["location_wait"],
                  {l: o["location_wait"].get(i, 0) for l, i in loc_index.items()},
                  {l["name"]: l["wait_ns"] for l in s["locations"]})
            cp = s["critical_path"]
            got_path = [(i["rank"], i["task"], i["iteration"]) for i in cp["instances"]]
            if got_path != want["path"]:
                fail("%s: critical path %s, known %s" % (name, got_path, want["path"]))
            split = path_split(o, want["path"])
            for part, key in (("length", "length_ns"), ("compute", "compute_ns"),
                              ("dependency", "dependency_ns"), ("worker", "worker_ns"),
                              ("between", "between_runs_ns")):
                check("%s: critical path %s" % (name, part), want[part], split[part], cp[key])
            check(name + ": gaps between runs", want["gaps"], split["gaps"],
                  [(g["from_ns"], g["to_ns"]) for g in cp["gaps"]])
            check(name + ": messages on the path", want.get("messages", 0),
                  sum(1 for m in o["messages"] if m["sender"] != m["receiver"]) if n > 1 else 0,
                  cp["messages"])
            if want["advice"] not in text:
                fail("%s: the summary's advice does not say '%s':\n%s" % (name, want["advice"], text))
            print("ok: %s: path %d ns = %d compute + %d dependency + %d worker + %d between runs"
                  % (name, cp["length_ns"], cp["compute_ns"], cp["dependency_ns"], cp["worker_ns"],
                     cp["between_runs_ns"]))


main()
