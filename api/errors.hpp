// The engine's failures across ranks (runtime/failure.hpp) as the public error types
// (ordo.hpp): what Runtime::run throws when a run fails elsewhere than in one of this rank's
// task bodies, whose exception passes unchanged.
#pragma once

#include "runtime/failure.hpp"
#include <ordo/ordo.hpp>

namespace ordo::detail {

[[noreturn]] inline void throw_typed(const rt::RunError& e) {
  switch (e.kind()) {
    case rt::Failure::Kind::mismatch:
      throw GraphMismatch(e.what());
    case rt::Failure::Kind::protocol:
      throw ProtocolError(e.what(), e.rank());
    case rt::Failure::Kind::own:  // this rank's own failure: no peer to name
      throw Error(e.what());
    case rt::Failure::Kind::body:  // never a RunError: the body's exception is rethrown
    case rt::Failure::Kind::peer_body:
    case rt::Failure::Kind::peer_lost:
      break;
  }
  throw PeerFailure(e.what(), e.rank());
}

}  // namespace ordo::detail
