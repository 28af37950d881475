#include "runtime/name_index.hpp"

namespace ordo::rt {

namespace {

std::uint32_t text_hash(std::string_view text) {
  const std::uint64_t h = std::hash<std::string_view>{}(text);
  return static_cast<std::uint32_t>(h ^ (h >> 32));
}

std::uint32_t key_hash(std::string_view head, std::string_view tail) {
  return mix_hash((std::uint64_t{text_hash(head)} << 32) ^ text_hash(tail));
}

// A key's array grows to hold a number at most this far past twice its length: a counter that
// starts high or skips a little still lands in it, a lone huge number goes to the hash table.
constexpr std::uint32_t kSlack = 1024;

}  // namespace

NameIndex::Split NameIndex::split(std::string_view name) {
  Split s;
  std::size_t end = name.size();
  while (end > 0 && (name[end - 1] < '0' || name[end - 1] > '9')) --end;
  if (end == 0) return s;
  std::size_t begin = end;
  while (begin > 0 && name[begin - 1] >= '0' && name[begin - 1] <= '9') --begin;
  const std::size_t digits = end - begin;
  // Canonical numbers only, so that each name has one (key, number): "x07" is not "x7".
  if (digits > 9 || (digits > 1 && name[begin] == '0')) return s;
  std::uint32_t number = 0;
  for (std::size_t i = begin; i < end; ++i) number = number * 10 + static_cast<std::uint32_t>(name[i] - '0');
  s.head = name.substr(0, begin);
  s.tail = name.substr(end);
  s.number = number;
  s.counted = true;
  return s;
}

std::uint32_t NameIndex::find_key(std::string_view head, std::string_view tail,
                                  std::uint32_t hash) const {
  return key_table_.find(hash, [&](std::uint32_t k) {
    return keys_[k].head == head && keys_[k].tail == tail;
  });
}

std::int64_t NameIndex::find(std::string_view name, const NameOf& name_of) const {
  const Split s = split(name);
  if (s.counted) {
    const std::uint32_t k = find_key(s.head, s.tail, key_hash(s.head, s.tail));
    if (k == IndexTable::kNone) return kAbsent;  // no name of this key anywhere
    const Key& key = keys_[k];
    if (s.number < key.by_number.size() && key.by_number[s.number] != IndexTable::kNone)
      return key.by_number[s.number];  // (key, number) determines the name
    if (key.hashed == 0) return kAbsent;
  }
  const std::uint32_t l =
      hashed_.find(text_hash(name), [&](std::uint32_t v) { return name_of(v) == name; });
  return l == IndexTable::kNone ? kAbsent : static_cast<std::int64_t>(l);
}

void NameIndex::insert(std::string_view name, std::uint32_t l) {
  const Split s = split(name);
  if (s.counted) {
    const std::uint32_t h = key_hash(s.head, s.tail);
    std::uint32_t k = find_key(s.head, s.tail, h);
    if (k == IndexTable::kNone) {
      k = static_cast<std::uint32_t>(keys_.size());
      keys_.push_back(Key{std::string(s.head), std::string(s.tail), {}, 0});
      key_table_.insert(h, k);
    }
    Key& key = keys_[k];
    const std::size_t size = key.by_number.size();
    if (s.number < size || s.number <= 2 * size + kSlack) {
      if (s.number >= size)
        key.by_number.resize(std::max<std::size_t>(s.number + 1, 2 * size), IndexTable::kNone);
      key.by_number[s.number] = l;
      return;
    }
    ++key.hashed;
  }
  hashed_.insert(text_hash(name), l);
}

}  // namespace ordo::rt
