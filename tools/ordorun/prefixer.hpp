// LinePrefixer: turns one stream of a rank's output into whole lines that start with "[R] ",
// so that the lines of several ranks interleave without mixing. A line is passed on once its
// newline has arrived; a last line without one gets one when the stream ends.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ordorun {

class LinePrefixer {
 public:
  explicit LinePrefixer(std::string prefix) : prefix_(std::move(prefix)) {}

  // Appends bytes; returns the complete lines they end, each prefixed (empty when none).
  std::string feed(std::string_view bytes);
  // The stream ended: returns the unterminated last line, prefixed and ended, or "".
  std::string finish();

 private:
  std::string prefix_;
  std::string partial_;
};

}  // namespace ordorun
