#!/usr/bin/env python3
"""Writes the hand-made seeds of the fuzz corpus (tests/fuzz/corpus/<target>/seed-*): well-formed
inputs the fuzzers mutate from. Inputs the fuzzers found (crash-*, named by their hash) sit
beside them and are kept. Run from anywhere: python3 tests/fuzz/make_seeds.py.
The trace seeds are real trace files: make_seeds.py --trace FILE... copies them in."""
import os
import struct
import sys

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def npy(shape_text, data_bytes, claimed_size=None, dict_text=None):
    d = dict_text or "{'descr': '<f8', 'fortran_order': False, 'shape': %s, }" % shape_text
    d += " " * ((64 - (10 + len(d) + 1) % 64) % 64) + "\n"
    head = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode("latin1")
    size = len(head) + data_bytes if claimed_size is None else claimed_size
    # fuzz_npy.cpp: 8 bytes of file size, then the file's beginning.
    return struct.pack("<Q", size) + head + b"\0" * min(data_bytes, 64)


def request(op, key, value=b""):
    return struct.pack(">BII", op, len(key), len(value)) + key + value


def script(*chunks):
    """fuzz_store.cpp: [client][length][bytes] chunks."""
    out = b""
    for client, data in chunks:
        while data:
            part, data = data[:255], data[255:]
            out += bytes([client, len(part)]) + part
    return out


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--trace":
        for i, path in enumerate(sys.argv[2:]):
            with open(path, "rb") as f:
                put("trace", "run%d" % i, f.read())
        return
    # Matrix Market (fuzz_matrix_market.cpp): a file as ordo-spcg reads it.
    mm = b"%%MatrixMarket matrix coordinate real "
    put("matrix_market", "general", mm + b"general\n% a comment\n3 3 7\n1 1 4\n1 2 -1\n2 1 -1\n"
        b"2 2 4\n2 3 -1\n3 2 -1\n3 3 4\n")
    put("matrix_market", "symmetric", mm + b"symmetric\n4 4 6\n1 1 2\n2 1 -1\n2 2 2\n3 3 2\n"
        b"4 3 -0.5\n4 4 2\n")
    put("matrix_market", "pattern", b"%%MatrixMarket matrix coordinate pattern symmetric\n2 2 3\n"
        b"1 1\n2 1\n2 2\n")
    put("matrix_market", "lying_count", mm + b"general\n2 2 4000000000\n1 1 1\n2 2 1\n")
    put("matrix_market", "lying_size", mm + b"general\n1000000000 1000000000 2\n1 1 1\n2 2 1\n")
    put("matrix_market", "past_n", mm + b"general\n2 2 2\n1 1 1\n3 2 1\n")
    put("matrix_market", "duplicate", mm + b"general\n2 2 3\n1 1 1\n2 2 1\n1 1 2\n")
    put("matrix_market", "not_symmetric", mm + b"general\n2 2 3\n1 1 1\n1 2 1\n2 2 1\n")
    # Edge lists (fuzz_edge_list.cpp): as ordo-pagerank reads them.
    for name, text in (("good", b"# a graph\n% another comment\n4 5\n0 1\n1 2\n2 0\n2 0\n3 3\n"),
                       ("huge_vertices", b"1099511627776 2\n0 1\n1 2\n"),
                       ("big_vertices", b"4000000000 2\n0 1\n1 2\n"),
                       ("lying_edges", b"3 4000000000\n0 1\n"),
                       ("past_count", b"3 2\n0 1\n1 3\n"),
                       ("fewer_edges", b"3 3\n0 1\n1 2\n")):
        put("edge_list", name, text)
    put("npy", "2d", npy("(4, 4)", 128))
    put("npy", "1d", npy("(3,)", 24))
    put("npy", "5d", npy("(2, 1, 2, 1, 2)", 64))
    put("npy", "levels", npy("(2, 3, 4)", 192))
    put("npy", "lying", npy("(8000, 8000)", 64, claimed_size=192))
    put("npy", "huge", npy("(4294967296, 4294967296, 16)", 64))
    # A key given twice (numpy takes the last, ordo refuses): the parser's key scan.
    put("npy", "twice", npy(None, 128, dict_text="{'descr': '<f8', 'fortran_order': False, "
                                                 "'shape': (4, 4), 'shape': (2, 8), }"))
    put("npy", "quoted", npy(None, 128, dict_text="{\"descr\": '<f8', 'fortran_order': False, "
                                                  "'shape': (4, 4), 'x': ('shape', 1), }"))
    hello0 = request(1, b"0", b"tok")
    hello1 = request(1, b"1", b"tok")
    put("store", "put_get", script((0, hello0 + request(2, b"k", b"value")), (1, hello1 + request(3, b"k"))))
    put("store", "parked", script((1, hello1 + request(3, b"ag/0/0")), (0, hello0 + request(2, b"ag/0/0", b"x" * 40))))
    put("store", "stranger", script((2, request(2, b"k", b"v")), (0, hello0), (2, request(1, b"0", b"bad"))))
    put("store", "big_hello", script((2, struct.pack(">BII", 1, 1, 1 << 20) + b"0" + b"t" * 600)))
    put("store", "lifeline", script((0, hello0), (1, hello0), (2, hello0)))
    # A refused hello is answered bad_request, then dropped: nothing after it is read.
    put("store", "refused", script((2, request(1, b"0", b"bad") + request(2, b"k", b"v")), (0, hello0),
                                   (1, request(1, b"2", b"tok") + request(3, b"k"))))
    # A rank spelt otherwise than std::to_string does is no rank: each hello must be refused.
    put("store", "rank_spelling", script((0, request(1, b"01", b"tok") + request(2, b"k", b"v")),
                                         (1, request(1, b"00", b"tok")),
                                         (2, request(1, b"0000000001", b"tok") + request(3, b"k"))))
    # get_range (op 4): rank 1 asks for ag/0/0 and ag/0/1 before either is put.
    put("store", "range", script((1, hello1 + request(4, b"ag/0/", struct.pack(">II", 0, 2))),
                                 (0, hello0 + request(2, b"ag/0/0", b"x" * 10)),
                                 (1, request(2, b"ag/0/1", b"y"))))
    # get_runs (op 5) of two equal values, then get_list (op 6) of a key put, one nobody put
    # (answered missing) and an index past the ranks (refused).
    put("store", "runs_list", script((1, hello1 + request(5, b"h/", struct.pack(">II", 0, 2))),
                                     (0, hello0 + request(2, b"h/0", b"same") + request(2, b"h/1", b"same")),
                                     (1, request(6, b"h/", struct.pack(">III", 2, 1, 0))
                                         + request(6, b"none/", struct.pack(">II", 1, 0))
                                         + request(6, b"h/", struct.pack(">II", 1, 7)))))
    # fuzz_remote_lock.cpp: [header length (top bit: to rank 1)][header][payload]; the wire
    # header is kind u8 (1 GRANT, 2 RELEASE), initial u8, flags u16 (1 early, 4 shared),
    # location u32 (0 x, 1 y, 2 z), phase u32. x (32 bytes) and z (512) live on rank 0; x's
    # phase 1 and z's phase 1 are rank 1's reads (early).
    def lock(kind, flags, location, phase, payload=b"", to_rank1=False, initial=0):
        h = struct.pack("<BBHII", kind, initial, flags, location, phase)
        return bytes([len(h) | (0x80 if to_rank1 else 0)]) + h + payload
    put("remote_lock", "release_x_early", lock(2, 1, 0, 1))
    put("remote_lock", "release_z_early", lock(2, 1, 2, 1))
    put("remote_lock", "release_x_write", lock(2, 0, 0, 0, b"\0" * 32))
    put("remote_lock", "grant_x_to_home", lock(1, 0, 0, 1, b"\0" * 32))
    put("remote_lock", "unknown_location", lock(2, 0, 99, 0))
    put("remote_lock", "short", bytes([3, 1, 0, 0]))
    put("remote_lock", "grant_x_early", lock(1, 1, 0, 1, b"\0" * 32, to_rank1=True))
    put("remote_lock", "grant_z_early", lock(1, 1, 2, 1, b"\0" * 512, to_rank1=True))
    put("remote_lock", "grant_x_initial", lock(1, 0, 0, 1, b"\0" * 32, to_rank1=True, initial=1))
    put("remote_lock", "release_y_at_proxy", lock(2, 0, 1, 0, b"\0" * 32, to_rank1=True))
    # ABORTs (kind 4; flags 2 fatal, 8 relayed; location: the rank a relay names; the text
    # follows in the header) that no failure caused: each must still end the run on all three
    # ranks.
    def abort(flags, named, to_rank1=False):
        h = struct.pack("<BBHII", 4, 0, flags, named, 0) + b"forged"
        return bytes([len(h) | (0x80 if to_rank1 else 0)]) + h
    # fuzz_manifest.cpp: a manifest as write_checkpoint writes it, and near misses.
    put("manifest", "good", b"ordo checkpoint 2\ngraph 0d8b26157019b1af\niteration 10\nranks 1\n")
    put("manifest", "older", b"ordo checkpoint 1\ngraph 0d8b26157019b1af\niteration 10\nranks 1\n")
    put("manifest", "big", b"ordo checkpoint 2\ngraph ffffffffffffffff\niteration 18446744073709551615\nranks 4294967295\n")
    put("manifest", "negative", b"ordo checkpoint 2\ngraph 0000000000000000\niteration -4\nranks 2\n")
    put("manifest", "leading_zero", b"ordo checkpoint 2\ngraph 0000000000000000\niteration 010\nranks 2\n")
    put("manifest", "trailing", b"ordo checkpoint 2\ngraph 0000000000000000\niteration 4\nranks 2\nranks 3\n")
    put("remote_lock", "abort_body", abort(0, 0))
    put("remote_lock", "abort_fatal", abort(2, 0))
    put("remote_lock", "abort_relayed_rank2", abort(2 | 8, 2))
    put("remote_lock", "abort_relayed_body_rank2", abort(8, 2, to_rank1=True))
    put("remote_lock", "abort_relayed_body_receiver", abort(8, 0))
    # fuzz_prefixer.cpp: [read size][repeats] then a rank's output: lines, an unterminated
    # one, and lines past max_line of UTF-8 and of bytes that are not UTF-8.
    put("prefixer", "lines", b"\x00\x00hello\nworld\n\n")
    put("prefixer", "unterminated", b"\x05\x00a last line without its newline")
    put("prefixer", "long_utf8", b"\xff\x3f" + "é€😀".encode() * 300)
    put("prefixer", "long_utf8_small_reads", b"\x01\x3f" + "ab€\n".encode() * 10 + "ab€".encode() * 1200)
    put("prefixer", "long_not_utf8", b"\x10\x20" + b"\x80\x80\xc3" * 1000)


if __name__ == "__main__":
    main()
