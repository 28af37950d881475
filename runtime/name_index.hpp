// Finds a location by name in O(1), for the uniqueness check of every declaration.
//
// Names are usually a stem and a counter ("block17", "x[3]", "b4.main"): a program declares
// them in a loop. A plain hash table sends each of those to a random slot, which costs a cache
// miss per declaration once the table outgrows the caches (a 256k-location graph). So a name
// whose last run of digits is a canonical number (no leading zero, below 10^9) is split into
// its *key* (the text before and after the number) and the number, and found in its key's
// array indexed by number: a loop over the counter walks that array in order. Other names,
// and numbers far beyond the end of their key's array (which would make it mostly empty), go
// to one hash table. A name lies in exactly one place, and each key counts its names in the
// hash table, so a lookup of a counted name reads the table only when some exist.
//
// The index stores location numbers, never names: the caller passes `name_of(l)` to read the
// name of location l back.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/index_table.hpp"

namespace ordo::rt {

class NameIndex {
 public:
  using NameOf = std::function<std::string_view(std::uint32_t)>;
  static constexpr std::int64_t kAbsent = -1;

  // The location called `name`, or kAbsent.
  std::int64_t find(std::string_view name, const NameOf& name_of) const;
  // Records location `l` as `name`, which find() says is absent.
  void insert(std::string_view name, std::uint32_t l);

 private:
  struct Split {
    std::string_view head, tail;
    std::uint32_t number = 0;
    bool counted = false;  // head + number + tail, the number canonical
  };
  static Split split(std::string_view name);
  struct Key {
    std::string head, tail;
    std::vector<std::uint32_t> by_number;  // location, or IndexTable::kNone
    std::uint32_t hashed = 0;              // names of this key in hashed_
  };
  // The index in keys_ of the key (head, tail), or IndexTable::kNone.
  std::uint32_t find_key(std::string_view head, std::string_view tail, std::uint32_t hash) const;

  std::vector<Key> keys_;
  IndexTable key_table_;  // indices into keys_, hashed by (head, tail)
  IndexTable hashed_;     // locations, hashed by name
};

}  // namespace ordo::rt
