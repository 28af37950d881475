// A work-stealing deque: one owner pushes and pops at the bottom, any number of thieves steal
// at the top.
//
// The algorithm is Chase & Lev, "Dynamic circular work-stealing deque" (SPAA 2005), with the
// memory orders of Lê, Pop, Cohen & Zappa Nardelli, "Correct and efficient work-stealing for
// weak memory models" (PPoPP 2013), the C11 version that is proved correct there. Two
// deliberate changes from their listing:
//   - push publishes `bottom` with a release store instead of a release fence followed by a
//     relaxed store. Same cost on x86 and ARM, and ThreadSanitizer (which does not model
//     fences) then sees the synchronisation that is really there.
//   - steal loads `array` with acquire instead of consume (compilers promote consume anyway).
//
// Roles are types: Deque<T>::owner() hands out the one Owner (push, pop), stealer() any number
// of Stealers (steal only). Indices are signed 64-bit, so `bottom - 1` on an empty deque is -1
// rather than a wrap-around, and they never overflow in practice.
//
// Growth: a push into a full array copies the live range into one twice as large and
// publishes it. A thief may still read the old array, so old arrays are retired, not freed,
// until the deque is destroyed; they sum to less than the final array's size.
//
// Protocol summary (t = top, b = bottom; the live range is [t, b)):
//   push:  write slot b; store b+1 (release -- pairs with the acquire load of bottom in steal).
//   pop:   b-1 -> bottom; seq_cst fence; read top. If t < b-1 the slot is ours. If t == b-1 it
//          is the last element: owner and thieves race for it with a CAS on top (seq_cst, pairs
//          with the thieves' CAS); the owner restores bottom whatever the outcome.
//   steal: read top (acquire); seq_cst fence (pairs with pop's fence: either the thief sees
//          pop's decrement of bottom or the owner sees the thief's later CAS on top); read
//          bottom (acquire); if t < b read slot t and claim it by CAS top t -> t+1.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

namespace ordo::sched {

// A sequentially consistent fence (the store -> load barrier of the Dekker-style handshakes in
// the deque's pop/steal and the pool's parking). ThreadSanitizer does not model fences and GCC
// refuses them under -fsanitize=thread (-Wtsan): there a seq_cst read-modify-write of a
// thread-local word stands in, a full barrier on x86 (the lock prefix), the target the TSan
// build runs on, and thread-local so that it adds no happens-before edge that could hide a race.
// (The fences order, they do not publish: every publication here is a release/acquire pair.)
inline void full_fence() {
#if defined(__SANITIZE_THREAD__)
  thread_local std::atomic<int> word{0};
  word.fetch_add(0, std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

template <class T>
class Deque {
  static_assert(std::is_trivially_copyable_v<T>, "deque slots are copied as atomics");

  struct Array {
    explicit Array(std::int64_t capacity)
        : mask(capacity - 1), slots(new std::atomic<T>[static_cast<std::size_t>(capacity)]) {}
    std::int64_t capacity() const { return mask + 1; }
    T get(std::int64_t i) const { return slots[i & mask].load(std::memory_order_relaxed); }
    void put(std::int64_t i, T v) { slots[i & mask].store(v, std::memory_order_relaxed); }
    std::int64_t mask;
    std::unique_ptr<std::atomic<T>[]> slots;
  };

 public:
  // `capacity` is rounded up to a power of two (at least 2). Tests use tiny capacities to force
  // wrap-around and growth.
  explicit Deque(std::size_t capacity = 256) {
    std::int64_t c = 2;
    while (c < static_cast<std::int64_t>(capacity)) c *= 2;
    arrays_.push_back(std::make_unique<Array>(c));
    array_.store(arrays_.back().get(), std::memory_order_relaxed);
  }
  Deque(const Deque&) = delete;
  Deque& operator=(const Deque&) = delete;

  enum class Steal : std::uint8_t { success, empty, lost_race };
  struct Stolen {
    Steal status;
    T value{};
  };

  // The owner end. Exactly one thread may use it at a time (the deque's owner).
  class Owner {
   public:
    void push(T value) { q_->push(value); }
    std::optional<T> pop() { return q_->pop(); }
    // Number of elements, approximate while thieves are active.
    std::int64_t size() const { return q_->size(); }

   private:
    friend class Deque;
    explicit Owner(Deque* q) : q_(q) {}
    Deque* q_;
  };

  // The thief end. Copyable; any thread may steal concurrently with the owner and each other.
  class Stealer {
   public:
    Stealer() = default;
    // Takes the oldest element. `lost_race` means another thread took it first; the deque may
    // still hold more, so a thief that wants certainty about emptiness retries.
    Stolen steal() const { return q_->steal(); }
    bool empty() const { return q_->size() <= 0; }

   private:
    friend class Deque;
    explicit Stealer(Deque* q) : q_(q) {}
    Deque* q_ = nullptr;
  };

  Owner owner() { return Owner(this); }
  Stealer stealer() { return Stealer(this); }
  std::int64_t capacity() const { return array_.load(std::memory_order_relaxed)->capacity(); }

 private:
  std::int64_t size() const {
    std::int64_t b = bottom_.load(std::memory_order_relaxed);
    std::int64_t t = top_.load(std::memory_order_relaxed);
    return b - t;
  }

  void push(T value) {
    std::int64_t b = bottom_.load(std::memory_order_relaxed);
    // acquire: pairs with the thieves' CAS on top, so a slot is reused only after its thief
    // has read it.
    std::int64_t t = top_.load(std::memory_order_acquire);
    Array* a = array_.load(std::memory_order_relaxed);
    if (b - t > a->capacity() - 1) a = grow(a, t, b);
    a->put(b, value);
    // release: pairs with the acquire load of bottom in steal(); publishes the slot.
    bottom_.store(b + 1, std::memory_order_release);
  }

  std::optional<T> pop() {
    std::int64_t b = bottom_.load(std::memory_order_relaxed) - 1;
    // Empty for sure (only the owner moves bottom, and top only grows): answer without the
    // stores and the fence, which an idle owner would otherwise pay on every look.
    if (top_.load(std::memory_order_relaxed) > b) return std::nullopt;
    Array* a = array_.load(std::memory_order_relaxed);
    bottom_.store(b, std::memory_order_relaxed);
    // seq_cst: pairs with the fence in steal(); orders our bottom store before the top load.
    full_fence();
    std::int64_t t = top_.load(std::memory_order_relaxed);
    if (t > b) {  // empty
      bottom_.store(b + 1, std::memory_order_relaxed);
      return std::nullopt;
    }
    T value = a->get(b);
    if (t == b) {
      // The last element: race the thieves for it. seq_cst pairs with their CAS on top.
      bool won = top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                              std::memory_order_relaxed);
      bottom_.store(b + 1, std::memory_order_relaxed);
      if (!won) return std::nullopt;
    }
    return value;
  }

  Stolen steal() {
    // Looks empty: answer without the fence. Relaxed loads suffice: an empty answer is a
    // snapshot anyway, and a searcher that must not miss a push (the pool's parking) fences
    // before it looks.
    if (top_.load(std::memory_order_relaxed) >= bottom_.load(std::memory_order_relaxed))
      return {Steal::empty, T{}};
    // acquire: pairs with the CAS of the previous thief (or pop) that advanced top.
    std::int64_t t = top_.load(std::memory_order_acquire);
    // seq_cst: pairs with the fence in pop() (see the protocol at the top).
    full_fence();
    // acquire: pairs with the release store of bottom in push(); the slot below it is written.
    std::int64_t b = bottom_.load(std::memory_order_acquire);
    if (t >= b) return {Steal::empty, T{}};
    // acquire: pairs with the release store of a grown array in grow().
    Array* a = array_.load(std::memory_order_acquire);
    T value = a->get(t);
    // seq_cst: pairs with the other thieves' CAS and with pop's CAS on the last element.
    if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                      std::memory_order_relaxed))
      return {Steal::lost_race, T{}};
    return {Steal::success, value};
  }

  Array* grow(Array* old, std::int64_t t, std::int64_t b) {
    auto bigger = std::make_unique<Array>(old->capacity() * 2);
    for (std::int64_t i = t; i < b; ++i) bigger->put(i, old->get(i));
    Array* a = bigger.get();
    arrays_.push_back(std::move(bigger));  // the old array stays alive for late thieves
    // release: pairs with the acquire load of array_ in steal(); publishes the copied slots.
    array_.store(a, std::memory_order_release);
    return a;
  }

  alignas(64) std::atomic<std::int64_t> top_{0};
  alignas(64) std::atomic<std::int64_t> bottom_{0};
  alignas(64) std::atomic<Array*> array_{nullptr};
  std::vector<std::unique_ptr<Array>> arrays_;  // owner only: every array ever used
};

}  // namespace ordo::sched
