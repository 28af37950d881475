"""Trace files read in Python, independently of ordo-trace (docs/trace-format.md), for the trace
suite's checks."""
import struct
import sys

GRANT, BEGIN, END, SEND, RECEIVE = 3, 1, 2, 9, 10
NONE = 0xFFFFFFFF
PREV_ITERATION = 1


def fail(why):
    print("FAIL: " + why)
    sys.exit(1)


def read_rank(path):
    """One rank's file: its rank, tasks (name, accessed locations), location graphs, events."""
    data = open(path, "rb").read()
    magic, _, _, _, rank, _, _, offset = struct.unpack_from("<8sIIIIIIq", data, 0)
    if magic != b"ORDOTRC\0":
        fail(path + " is not a trace file")
    pos, tasks, loc_graph, events = 64, [], [], []
    while pos < len(data):
        kind, arg, size = struct.unpack_from("<IIQ", data, pos)
        body = data[pos + 16:pos + 16 + size]
        pos += 16 + size
        if kind == 1:  # graph: u32 id, task_base, location_base, tasks, locations
            graph, _, location_base, ntasks, nlocs = struct.unpack_from("<5I", body, 0)
            at = 20
            for _ in range(nlocs):
                _, _, length = struct.unpack_from("<QII", body, at)
                at += 16 + length
                loc_graph.append(graph)
            for _ in range(ntasks):
                _, length = struct.unpack_from("<II", body, at)
                name = body[at + 8:at + 8 + length].decode()
                at += 8 + length
                (naccess,) = struct.unpack_from("<I", body, at)
                at += 4
                accessed = set()
                for _ in range(naccess):
                    (location,) = struct.unpack_from("<I", body, at)
                    accessed.add(location_base + location)
                    at += 5
                tasks.append((name, accessed))
        elif kind == 2:  # events of buffer `arg`
            for i in range(size // 40):
                e = struct.unpack_from("<QQQIIIHBB", body, 40 * i)
                events.append({"t": e[0] + offset, "arg0": e[1], "arg1": e[2], "task": e[3],
                               "loc": e[4], "peer": e[5], "worker": e[6], "kind": e[7],
                               "flags": e[8]})
    events.sort(key=lambda e: e["t"])
    return rank, tasks, loc_graph, events


def messages(ranks):
    """Every message whose send and receive are both in `ranks` (read_rank's results), paired
    by sender, receiver, graph and tag (unique among one graph's messages from one rank to
    another): dicts of sender, receiver, sent and received (aligned times), loc (the
    receiver's location index)."""
    sends = {}
    for rank, _, loc_graph, events in ranks:
        for e in events:
            if e["kind"] == SEND:
                sends[(rank, e["peer"], loc_graph[e["loc"]], e["arg1"])] = e["t"]
    out = []
    for rank, _, loc_graph, events in ranks:
        for e in events:
            if e["kind"] == RECEIVE:
                sent = sends.get((e["peer"], rank, loc_graph[e["loc"]], e["arg1"]))
                if sent is not None:
                    out.append({"sender": e["peer"], "receiver": rank, "sent": sent,
                                "received": e["t"], "loc": e["loc"]})
    return out


RUN_BEGIN, RUN_END = 12, 13


def write_rank(path, tasks, locations, buffers, workers, rank=0, ranks=1, run_id=0):
    """Writes one rank's trace file (docs/trace-format.md, version 2) from scratch, without
    ordo's recorder: tasks are (name, rank, [(location index, write)]), locations (name, home),
    buffers {buffer index: [events]}, each event a dict of kind, t and optionally task, loc,
    peer, arg0, arg1, flags (missing ids: none)."""
    out = bytearray(struct.pack("<8sIIIIIIqQQ8s", b"ORDOTRC\0", 2, 64, 40, rank, ranks, workers,
                                0, 0, run_id, bytes(8)))
    body = bytearray(struct.pack("<5I", 0, 0, 0, len(tasks), len(locations)))
    for name, home in locations:
        body += struct.pack("<QII", 8, home, len(name)) + name.encode()
    for name, runs_on, accesses in tasks:
        body += struct.pack("<II", runs_on, len(name)) + name.encode()
        body += struct.pack("<I", len(accesses))
        for location, write in accesses:
            body += struct.pack("<IB", location, 1 if write else 0)
    out += struct.pack("<IIQ", 1, 0, len(body)) + body
    count = 0
    for buffer, events in sorted(buffers.items()):
        data = bytearray()
        for e in events:
            data += struct.pack("<QQQIIIHBB", e["t"], e.get("arg0", 0), e.get("arg1", 0),
                                e.get("task", NONE), e.get("loc", NONE), e.get("peer", NONE),
                                buffer, e["kind"], e.get("flags", 0))
        count += len(events)
        out += struct.pack("<IIQ", 2, buffer, len(data)) + data
    out += struct.pack("<IIQQ", 3, 0, 8, count)
    with open(path, "wb") as f:
        f.write(out)
