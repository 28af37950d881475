// A hash set of 32-bit indices into a table the caller owns (open addressing, linear probing).
// The caller hashes and compares: a slot holds the index and its 32-bit hash, so the keys
// (location names, a task's accesses) are never copied, a probe compares a key (a cache miss
// into the caller's table, for a large graph) only when the hashes match, and growing never
// reads a key. 16 bytes per entry at the worst load. Graph finds a wide task's accesses with
// it, NameIndex the names that are not a stem and a counter.
#pragma once

#include <cstdint>
#include <vector>

namespace ordo::rt {

class IndexTable {
 public:
  static constexpr std::uint32_t kNone = ~std::uint32_t{0};

  // The stored index whose entry `matches`, among those inserted with `hash`; kNone if none.
  template <class Matches>
  std::uint32_t find(std::uint32_t hash, Matches&& matches) const {
    if (slots_.empty()) return kNone;
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t s = hash & mask;; s = (s + 1) & mask) {
      const Slot& slot = slots_[s];
      if (slot.index == kNone) return kNone;
      if (slot.hash == hash && matches(slot.index)) return slot.index;
    }
  }

  // Adds `index` under `hash` (the caller has checked it is not there).
  void insert(std::uint32_t hash, std::uint32_t index) {
    if (2 * (used_ + 1) > slots_.size()) grow(slots_.empty() ? 16 : 2 * slots_.size());
    place(Slot{index, hash});
    ++used_;
  }

  // Keeps only the indices for which `keep` holds (rare: undoing a refused declaration).
  template <class Keep>
  void retain(Keep&& keep) {
    std::vector<Slot> old(slots_.size());
    old.swap(slots_);
    used_ = 0;
    for (const Slot& slot : old)
      if (slot.index != kNone && keep(slot.index)) {
        place(slot);
        ++used_;
      }
  }

  std::size_t size() const { return used_; }

 private:
  struct Slot {
    std::uint32_t index = kNone;
    std::uint32_t hash = 0;
  };
  void place(Slot entry) {
    const std::size_t mask = slots_.size() - 1;
    std::size_t s = entry.hash & mask;
    while (slots_[s].index != kNone) s = (s + 1) & mask;
    slots_[s] = entry;
  }
  void grow(std::size_t capacity) {
    std::vector<Slot> old(capacity);
    old.swap(slots_);
    for (const Slot& slot : old)
      if (slot.index != kNone) place(slot);
  }

  std::vector<Slot> slots_;  // a power of two, at most half full
  std::size_t used_ = 0;
};

// A 64-bit mixer (SplitMix64's finaliser), folded to 32 bits: spreads small keys (indices)
// over every bit, which linear probing needs.
inline std::uint32_t mix_hash(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<std::uint32_t>(x ^ (x >> 32));
}

}  // namespace ordo::rt
