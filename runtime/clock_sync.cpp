// Clock offsets over the tree (the method and its error bound are in clock_sync.hpp).
#include "runtime/clock_sync.hpp"

#include <utility>

#include "runtime/tree.hpp"
#include "runtime/wire.hpp"

namespace ordo::rt {

namespace {

// A message: one kind byte, then two signed 64-bit words.
enum class Kind : std::uint8_t {
  ping = 1,    // child to parent: its clock t0
  answer = 2,  // parent to child: the ping's t0 back (to match it), and its own clock t1
  offset = 3,  // parent to child: its offset to rank 0 and the bound on its error (-1: unknown)
};
constexpr std::size_t kSize = 1 + 2 * sizeof(std::uint64_t);

ClockSync::Message encode(Kind kind, std::int64_t a, std::int64_t b) {
  ClockSync::Message m{static_cast<std::byte>(kind)};
  wire::put_u64(m, static_cast<std::uint64_t>(a));
  wire::put_u64(m, static_cast<std::uint64_t>(b));
  return m;
}

// "+12" or "-12", as printf's %+lld.
std::string signed_text(std::int64_t v) { return (v >= 0 ? "+" : "") + std::to_string(v); }

}  // namespace

ClockSync::ClockSync(unsigned rank, unsigned ranks, SharesClock shares_clock_with, Send send,
                     Now now)
    : rank_(rank),
      ranks_(ranks),
      parent_(tree::parent(rank)),
      shares_clock_with_(std::move(shares_clock_with)),
      send_(std::move(send)),
      now_(std::move(now)) {}

std::optional<std::int64_t> ClockSync::measure_to_parent(std::chrono::milliseconds patience,
                                                         std::int64_t& error_ns) {
  std::optional<std::int64_t> best;
  std::int64_t best_round_trip = -1;
  for (int i = 0; i < kPings; ++i) {
    std::int64_t t0;
    {
      std::lock_guard lock(mu_);
      answer_.reset();
      t0 = ping_sent_ = now_();
    }
    send_(parent_, encode(Kind::ping, t0, 0));
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, patience, [&] { return answer_.has_value() || stopped_; }) || stopped_)
      break;  // keep what earlier pings gave, if any
    const std::int64_t t2 = now_(), t1 = *answer_;
    if (best_round_trip < 0 || t2 - t0 < best_round_trip) {
      best_round_trip = t2 - t0;
      best = t1 + (t2 - t0) / 2 - t2;
    }
  }
  error_ns = (best_round_trip + 1) / 2;
  return best;
}

ClockOffset ClockSync::measure(std::chrono::milliseconds patience) {
  const bool on_root_clock = rank_ == 0 || shares_clock_with_(0);
  ClockOffset mine;
  if (!on_root_clock) {
    std::int64_t to_parent = 0, to_parent_error = 0;
    bool is_known = true;
    if (!shares_clock_with_(parent_)) {
      const auto measured = measure_to_parent(patience, to_parent_error);
      is_known = measured.has_value();
      to_parent = measured.value_or(0);
    }
    ClockOffset parent;  // rank 0's own: zero
    if (parent_ != 0) {
      // The parent sends its offset once it has it: after its own pings and its own wait for
      // its parent, each bounded in the same way, one level up.
      const auto bound = patience * (kPings * tree::depth(parent_) + 1);
      std::unique_lock lock(mu_);
      if (cv_.wait_for(lock, bound, [&] { return parent_offset_.has_value() || stopped_; }) &&
          parent_offset_)
        parent = *parent_offset_;
      else
        parent.is_known = false;
    }
    if (is_known && parent.is_known)
      mine = {parent.ns + to_parent, parent.error_ns + to_parent_error, true};
    else
      mine = {0, 0, false};
  }
  // A child waits for this offset unless it reads rank 0's clock, and rank 0's children need
  // none (theirs is their offset to rank 0 itself).
  if (rank_ != 0)
    for (unsigned child : tree::children(rank_, ranks_))
      if (!(on_root_clock && shares_clock_with_(child)))
        send_(child, encode(Kind::offset, mine.ns, mine.is_known ? mine.error_ns : -1));
  return mine;
}

std::optional<ClockSync::Message> ClockSync::deliver(unsigned from,
                                                     std::span<const std::byte> message) {
  if (message.size() != kSize) return std::nullopt;
  const auto kind = static_cast<Kind>(message[0]);
  const auto a = static_cast<std::int64_t>(wire::get_u64(message, 1));
  const auto b = static_cast<std::int64_t>(wire::get_u64(message, 1 + sizeof(std::uint64_t)));
  const bool from_child = from != 0 && from < ranks_ && from != rank_ && tree::parent(from) == rank_;
  const bool from_parent = rank_ != 0 && from == parent_;
  if (kind == Kind::ping && from_child) return encode(Kind::answer, a, now_());
  if (!from_parent || (kind != Kind::answer && kind != Kind::offset)) return std::nullopt;
  {
    std::lock_guard lock(mu_);
    if (kind == Kind::answer) {
      if (a != ping_sent_ || answer_) return std::nullopt;  // a late answer to an earlier ping
      answer_ = b;
    } else {
      if (parent_offset_) return std::nullopt;
      parent_offset_ = b < 0 ? ClockOffset{0, 0, false} : ClockOffset{a, b, true};
    }
  }
  cv_.notify_all();
  return std::nullopt;
}

void ClockSync::stop() {
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  cv_.notify_all();
}

std::string clock_report(const ClockOffset& offset, bool verbose, bool tracing) {
  if (!offset.is_known)
    return verbose || tracing
               ? "ordo: clock: the offset to rank 0's clock is unknown (a clock ping or the "
                 "offset from the rank above went unanswered at start-up): this rank's trace "
                 "times are not aligned with rank 0's\n"
               : "";
  if (offset.error_ns == 0 || !verbose) return "";
  return "ordo: clock: rank 0's steady clock = this rank's " + signed_text(offset.ns) +
         " ns (within " + std::to_string(offset.error_ns) + " ns)\n";
}

}  // namespace ordo::rt
