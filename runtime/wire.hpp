// The messages the ranks of a job exchange on an engine's channel (rt::Net), for the
// remote-lock protocol (remote_locks.hpp), the control plane (control_plane.hpp) and failures
// (engine.hpp). Every message starts with a Header, in host byte order (UCX does not cross
// endianness either):
//   GRANT    location, phase; the location's bytes as payload (none when the two ranks share
//            the location's memory: kShared); kEarly: an early read grant; `initial`: the
//            first grant of the location, sent while the engine is built
//   RELEASE  location, phase; the bytes after a write phase (none after a read, or kShared);
//            kEarly: the release of an early grant
//   CONTROL  the round number (8 bytes) and the round's bytes, after the header (headers are
//            copied by the transport, so the sender need not keep them)
//   ABORT    a message naming the failing rank, after the header: a body threw on the sender;
//            kFatal: the sender has stopped (the receiver takes it as that rank's loss);
//            kRelayed: the sender heard that rank `location` failed (kFatal: was lost), and
//            passes it on (Engine::fail). Every ABORT stops its receiver.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace ordo::rt::wire {

enum class Kind : std::uint8_t { grant = 1, release = 2, control = 3, abort = 4 };

struct Header {
  Kind kind;
  std::uint8_t initial;  // GRANT: the initial (partial) grant of the phase
  std::uint16_t flags;
  std::uint32_t location;
  std::uint32_t phase;
};
static_assert(sizeof(Header) == 12);

constexpr std::uint16_t kEarly = 1;   // GRANT: early read grant; RELEASE: the release of one
constexpr std::uint16_t kFatal = 2;   // ABORT: the sender has stopped
constexpr std::uint16_t kShared = 4;  // GRANT, RELEASE: the ranks share the bytes, none sent
constexpr std::uint16_t kRelayed = 8;  // ABORT: about rank `location`, not the sender

inline std::span<const std::byte> as_bytes(const Header& h) {
  return {reinterpret_cast<const std::byte*>(&h), sizeof h};
}

// resize + memcpy rather than vector::insert: GCC 12 warns falsely (-Wstringop-overflow) on
// inserting byte ranges.
inline void append(std::vector<std::byte>& out, const void* data, std::size_t n) {
  const std::size_t at = out.size();
  out.resize(at + n);
  if (n) std::memcpy(out.data() + at, data, n);
}
inline void put_u64(std::vector<std::byte>& out, std::uint64_t v) { append(out, &v, sizeof v); }
// The word at `at`, or 0 past the end (callers check sizes where a short message matters).
inline std::uint64_t get_u64(std::span<const std::byte> in, std::size_t at) {
  std::uint64_t v = 0;
  if (at + sizeof v <= in.size()) std::memcpy(&v, in.data() + at, sizeof v);
  return v;
}

}  // namespace ordo::rt::wire
