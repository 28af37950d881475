// LinePrefixer: turns one stream of a rank's output into whole lines that start with "[R] ",
// so that the lines of several ranks interleave without mixing. A line is passed on once its
// newline has arrived; a last line without one gets one when the stream ends. A line is held
// whole only up to max_line bytes: a longer one (a rank printing an array on one line) is
// passed on in pieces of at most max_line bytes, each ended and prefixed as a line of its own
// and cut before a UTF-8 character rather than inside it, so that ordorun's memory and its
// time per byte stay bounded whatever a rank prints.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ordorun {

class LinePrefixer {
 public:
  static constexpr std::size_t max_line = 64 * 1024;

  explicit LinePrefixer(std::string prefix) : prefix_(std::move(prefix)) {}

  // Appends bytes; returns the complete lines they end, and the pieces of lines that reached
  // max_line, each prefixed (empty when none).
  std::string feed(std::string_view bytes);
  // The stream ended: returns the unterminated last line, prefixed and ended, or "".
  std::string finish();

 private:
  std::string prefix_;
  std::string partial_;
};

}  // namespace ordorun
