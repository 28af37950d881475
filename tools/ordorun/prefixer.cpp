#include "prefixer.hpp"

namespace ordorun {

std::string LinePrefixer::feed(std::string_view bytes) {
  partial_.append(bytes);
  std::string lines;
  std::size_t start = 0, nl;
  while ((nl = partial_.find('\n', start)) != std::string::npos) {
    lines += prefix_;
    lines.append(partial_, start, nl + 1 - start);
    start = nl + 1;
  }
  partial_.erase(0, start);
  return lines;
}

std::string LinePrefixer::finish() {
  if (partial_.empty()) return "";
  std::string line = prefix_ + partial_ + "\n";
  partial_.clear();
  return line;
}

}  // namespace ordorun
