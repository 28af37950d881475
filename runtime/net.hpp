// What the runtime needs from a transport to spread a graph over several processes (ranks):
// reliable delivery of byte messages between ranks, multiplexed by channel (one channel per
// distributed graph; every rank numbers its graphs in the same SPMD order). comm/ provides the
// real transport (UCX); tests use an in-process one.
//
// The runtime's protocol needs no ordering between messages (a location has at most one
// protocol message in flight towards any rank), only that every message sent is delivered
// exactly once, and that a message for a channel nobody has attached yet waits until it is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

namespace ordo::rt {

class Net {
 public:
  virtual ~Net() = default;
  virtual unsigned rank() const = 0;
  virtual unsigned size() const = 0;

  // Delivery callback: runs on the transport's progress thread, one message at a time.
  using Receiver = std::function<void(unsigned from, std::span<const std::byte> header,
                                      std::span<const std::byte> payload)>;
  // Failure callback: a peer died or became unreachable; `what` names the rank and the cause.
  // Runs at most once per channel (at once on attach if a peer already failed).
  using Failure = std::function<void(const std::string& what)>;

  // Starts delivery for `channel`, including the messages that arrived for it before.
  virtual void attach(std::uint32_t channel, Receiver on_message, Failure on_failure) = 0;
  // Stops delivery for `channel`: when it returns, no callback for it runs or will run.
  virtual void detach(std::uint32_t channel) = 0;

  // Sends `header` and `payload` to `peer` (never to self), from any thread. The header is
  // copied before send returns. The payload is read in place (zero copy) and must stay
  // unchanged until the peer has received it; the runtime guarantees this by never writing a
  // sent buffer before the peer has answered.
  virtual void send(unsigned peer, std::uint32_t channel, std::span<const std::byte> header,
                    std::span<const std::byte> payload) = 0;
};

}  // namespace ordo::rt
