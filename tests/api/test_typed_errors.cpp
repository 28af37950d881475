// The engine's failures across ranks reach the user as typed errors derived from ordo::Error
// (api/errors.hpp); which failure gives which type is checked here, where each can be made
// directly, and end to end by the runtime suite (runtime_failures, over the loopback net)
// and the multiprocess suite (api_dist_*).
#include <catch2/catch.hpp>

#include "api/errors.hpp"

using namespace ordo;
using Kind = rt::Failure::Kind;

namespace {

template <class Want>
void check_typed(Kind kind, unsigned rank, const char* what) {
  try {
    detail::throw_typed(rt::RunError(kind, rank, what));
  } catch (const Want& e) {
    CHECK(std::string(e.what()) == what);
    if constexpr (std::is_base_of_v<PeerFailure, Want>) CHECK(e.rank() == rank);
    return;
  } catch (...) {
  }
  FAIL("kind " << static_cast<int>(kind) << " did not give the expected type");
}

}  // namespace

TEST_CASE("each failure across ranks has its public type", "[errors]") {
  check_typed<PeerFailure>(Kind::peer_lost, 2, "rank 2 failed (process exited)");
  check_typed<PeerFailure>(Kind::peer_body, 1, "rank 1 failed: boom");
  check_typed<ProtocolError>(Kind::protocol, 3, "rank 0 stopped: rank 3 sent a malformed message");
  check_typed<GraphMismatch>(Kind::mismatch, 0, "ranks 0 and 1 built different graphs");
  // This rank's own failure (before the graph ran): no peer to blame, so no PeerFailure.
  check_typed<Error>(Kind::own, 1, "rank 1 (this rank) failed: boom");
  try {
    detail::throw_typed(rt::RunError(Kind::own, 1, "x"));
  } catch (const PeerFailure&) {
    FAIL("this rank's own failure reported as a peer's");
  } catch (const Error&) {
  }
  // Every one is an ordo::Error; a lost peer is not a protocol error.
  CHECK_THROWS_AS(detail::throw_typed(rt::RunError(Kind::mismatch, 0, "x")), Error);
  CHECK_THROWS_AS(detail::throw_typed(rt::RunError(Kind::peer_lost, 0, "x")), Error);
  try {
    detail::throw_typed(rt::RunError(Kind::peer_lost, 0, "x"));
  } catch (const ProtocolError&) {
    FAIL("a lost peer reported as a protocol error");
  } catch (const PeerFailure&) {
  }
}
