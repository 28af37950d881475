#include "prefixer.hpp"

namespace ordorun {

std::string LinePrefixer::feed(std::string_view bytes) {
  std::string lines;
  while (!bytes.empty()) {
    const std::string_view take = bytes.substr(0, max_line - partial_.size());
    if (const std::size_t nl = take.find('\n'); nl != std::string_view::npos) {
      lines += prefix_;
      lines += partial_;
      lines.append(take.substr(0, nl + 1));
      partial_.clear();
      bytes.remove_prefix(nl + 1);
      continue;
    }
    partial_.append(take);
    bytes.remove_prefix(take.size());
    if (partial_.size() < max_line) break;
    // A full piece: cut before the UTF-8 character that the last bytes may have begun.
    std::size_t cut = partial_.size();
    for (int back = 0; back < 3 && (static_cast<unsigned char>(partial_[cut - 1]) & 0xc0) == 0x80;
         ++back)
      --cut;
    if ((static_cast<unsigned char>(partial_[cut - 1]) & 0xc0) == 0xc0)
      --cut;
    else if (cut != partial_.size())
      cut = partial_.size();  // continuation bytes with no lead: not UTF-8
    lines += prefix_;
    lines.append(partial_, 0, cut);
    lines += '\n';
    partial_.erase(0, cut);
  }
  return lines;
}

std::string LinePrefixer::finish() {
  if (partial_.empty()) return "";
  std::string line = prefix_ + partial_ + "\n";
  partial_.clear();
  return line;
}

}  // namespace ordorun
