// Wire protocol of ordorun's rendezvous store, shared by the client (comm/bootstrap.cpp) and
// the server (tools/ordorun). Header-only and free of UCX so that the launcher can use it.
//
// One TCP connection per rank, requests answered in order:
//   request  = op:u8  key_len:u32  value_len:u32  key  value      (integers big-endian)
//   response = status:u8  value_len:u32  value
// ops:
//   hello  key = decimal rank, value = the job's token (ORDO_STORE_TOKEN, random per job).
//          Tells ordorun the rank is up (ends its startup clock for it). Answered at once. The
//          store listens on every address with --hosts: a connection whose first request is
//          not a hello with the right token and a rank of the job is dropped, so a stray or
//          hostile client cannot read or write the job's keys. A hello's key is at most
//          max_hello_key digits and its token at most max_token bytes: the server reads no more
//          than that from a connection that has not authenticated. Every connection says
//          hello, the lifeline (a rank's second, silent connection) included. A rank has one
//          spelling, std::to_string's: "01" is refused like a wrong token.
//   put    stores value under key (a later put overwrites). Answered at once.
//   get    answered when key has a value: the value. The server parks the request until then;
//          the client bounds the wait with its own timeout, so a missing peer is an error,
//          never a hang. Once ordorun stops the job (a rank failed, a signal, a timeout), every
//          get or get_range still parked, and every later one that lacks a value, is answered
//          with status job_stopping and, as the value, why: a rank waiting for a peer that died
//          before its put ends at once with that reason, even one that ignores SIGTERM.
//   get_range  key = a prefix P, value = first:u32 count:u32 (8 bytes, count at most the job's
//          ranks): answered, like get, once every key P<first>, ..., P<first + count - 1>
//          (decimal) has a value, with all of them in one value: for each, len:u32 then its
//          bytes. Anything else is answered bad_request.
//   get_runs   as get_range, answered when the same keys all have values, but with equal
//          values of consecutive keys sent once: for each run, count:u32 len:u32 then its
//          bytes, the counts adding up to the range's. What many ranks share (their host)
//          then costs a reply per run (per host, as ordorun places ranks in blocks), not per
//          rank.
//   get_list   key = a prefix P, value = n:u32 then n indices i:u32 (n at most the job's
//          ranks, each index below them): the values of P<i> for each, answered at once in
//          its turn as get_range's are (len:u32 then bytes, in the order asked). A key without
//          a value is answered missing, with that key as the value: a rank asks only for what
//          every rank has put before a collective it has passed, so a missing key is an error,
//          never something to wait for. Anything else is answered bad_request.
// Collectives are built on these by the client: allgather number s puts "ag/s/<rank>", then
// asks for "ag/s/0" .. "ag/s/<size-1>" with one get_range: two requests per rank and
// collective, where a get per rank made each rank's start-up N requests and the store's N²;
// barrier is an allgather of nothing. The start-up exchange (Bootstrap::exchange) puts a
// rank's own blob (its address) under "pub/<rank>" and its shared one (its host) under
// "ag/s/<rank>", and asks get_runs for the shared ones: each rank's reply weighs O(hosts), not
// O(ranks); the addresses a rank needs are asked for by get_list, once per batch of peers.
// Keys are never deleted; a job's store lives as long as the job.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace ordo::comm::store {

enum class Op : std::uint8_t { hello = 1, put = 2, get = 3, get_range = 4, get_runs = 5, get_list = 6 };
inline constexpr std::uint8_t max_op = 6;
enum class Status : std::uint8_t { ok = 0, bad_request = 1, job_stopping = 2, missing = 3 };

// Keys and values beyond this are a protocol error (the store is for small blobs).
inline constexpr std::uint32_t max_field = 1u << 20;
// The largest hello: a rank's decimal digits and a token (ordorun's are 32 hex digits).
inline constexpr std::uint32_t max_hello_key = 10;
inline constexpr std::uint32_t max_token = 256;
inline constexpr std::size_t request_header_bytes = 9;

struct Request {
  Op op;
  std::string key;
  std::vector<std::byte> value;
};

inline void put_u32(std::vector<std::byte>& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(std::byte((v >> shift) & 0xff));
}

inline std::uint32_t get_u32(const std::byte* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) |
         std::uint32_t(p[3]);
}

inline std::vector<std::byte> encode_request(Op op, const std::string& key,
                                             const std::byte* value, std::size_t value_len) {
  std::vector<std::byte> out;
  out.reserve(9 + key.size() + value_len);
  out.push_back(std::byte(op));
  put_u32(out, std::uint32_t(key.size()));
  put_u32(out, std::uint32_t(value_len));
  for (char c : key) out.push_back(std::byte(c));
  out.insert(out.end(), value, value + value_len);
  return out;
}

inline std::vector<std::byte> encode_response(Status status, const std::vector<std::byte>& value) {
  std::vector<std::byte> out;
  out.reserve(5 + value.size());
  out.push_back(std::byte(status));
  put_u32(out, std::uint32_t(value.size()));
  out.insert(out.end(), value.begin(), value.end());
  return out;
}

// get_range's value (first, count), and its answer's entries.
inline std::vector<std::byte> encode_range(std::uint32_t first, std::uint32_t count) {
  std::vector<std::byte> out;
  put_u32(out, first);
  put_u32(out, count);
  return out;
}

inline void append_entry(std::vector<std::byte>& out, std::span<const std::byte> value) {
  // Room for both first, growing geometrically: GCC 12 at -O3 takes an insert right after
  // put_u32 grew a small vector for an overflow (-Wstringop-overflow, a false positive).
  if (const std::size_t need = out.size() + 4 + value.size(); need > out.capacity())
    out.reserve(std::max(need, 2 * out.capacity()));
  put_u32(out, std::uint32_t(value.size()));
  out.insert(out.end(), value.begin(), value.end());
}

// The `count` entries of a get_range answer, or nothing when `value` does not hold exactly
// that many well-formed entries (each length checked against what is there).
inline std::optional<std::vector<std::vector<std::byte>>> parse_entries(
    const std::vector<std::byte>& value, std::size_t count) {
  std::vector<std::vector<std::byte>> out;
  std::size_t at = 0;
  while (out.size() < count) {
    if (value.size() - at < 4) return std::nullopt;
    const std::size_t len = get_u32(value.data() + at);
    at += 4;
    if (value.size() - at < len) return std::nullopt;
    out.emplace_back(value.begin() + std::ptrdiff_t(at), value.begin() + std::ptrdiff_t(at + len));
    at += len;
  }
  if (at != value.size()) return std::nullopt;
  return out;
}

// A run of a get_runs answer: `count` consecutive keys whose value is `value` (also what
// Bootstrap::exchange returns, whatever the bootstrap).
struct Run {
  std::uint32_t count = 0;
  std::vector<std::byte> value;
};

inline void append_run(std::vector<std::byte>& out, std::uint32_t count,
                       std::span<const std::byte> value) {
  put_u32(out, count);
  append_entry(out, value);
}

// The runs of a get_runs answer for `count` keys, or nothing when `value` is not exactly runs
// of at least one key each whose counts add up to `count` (each length checked against what is
// there, as parse_entries does).
inline std::optional<std::vector<Run>> parse_runs(const std::vector<std::byte>& value,
                                                  std::size_t count) {
  std::vector<Run> out;
  std::size_t at = 0, covered = 0;
  while (covered < count) {
    if (value.size() - at < 8) return std::nullopt;
    const std::size_t n = get_u32(value.data() + at);
    const std::size_t len = get_u32(value.data() + at + 4);
    at += 8;
    if (n == 0 || n > count - covered || value.size() - at < len) return std::nullopt;
    out.push_back({std::uint32_t(n), std::vector<std::byte>(value.begin() + std::ptrdiff_t(at),
                                                            value.begin() + std::ptrdiff_t(at + len))});
    at += len;
    covered += n;
  }
  if (at != value.size()) return std::nullopt;
  return out;
}

// get_list's value: the indices asked for.
inline std::vector<std::byte> encode_list(const std::vector<std::uint32_t>& indices) {
  std::vector<std::byte> out;
  out.reserve(4 + 4 * indices.size());
  put_u32(out, std::uint32_t(indices.size()));
  for (std::uint32_t i : indices) put_u32(out, i);
  return out;
}

// The indices of a get_list value, or nothing when it is not n:u32 then exactly n indices.
inline std::optional<std::vector<std::uint32_t>> parse_list(const std::vector<std::byte>& value) {
  if (value.size() < 4) return std::nullopt;
  const std::size_t n = get_u32(value.data());
  if ((value.size() - 4) / 4 != n || (value.size() - 4) % 4 != 0) return std::nullopt;
  std::vector<std::uint32_t> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = get_u32(value.data() + 4 + 4 * i);
  return out;
}

// Parses one request from the front of `in`. Returns nothing while incomplete; sets `consumed`
// to the bytes used. Sets `bad` (and returns nothing) on a malformed request: the server then
// drops the connection.
inline std::optional<Request> parse_request(const std::vector<std::byte>& in, std::size_t& consumed,
                                            bool& bad) {
  bad = false;
  consumed = 0;
  if (in.size() < 9) return std::nullopt;
  const auto op = std::uint8_t(in[0]);
  const std::uint32_t key_len = get_u32(in.data() + 1);
  const std::uint32_t value_len = get_u32(in.data() + 5);
  if (op < 1 || op > max_op || key_len > max_field || value_len > max_field) {
    bad = true;
    return std::nullopt;
  }
  const std::size_t total = 9 + std::size_t(key_len) + value_len;
  if (in.size() < total) return std::nullopt;
  Request r{Op(op), std::string(reinterpret_cast<const char*>(in.data() + 9), key_len),
            std::vector<std::byte>(in.begin() + 9 + key_len, in.begin() + std::ptrdiff_t(total))};
  consumed = total;
  return r;
}

}  // namespace ordo::comm::store
