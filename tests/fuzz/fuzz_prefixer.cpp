// Fuzz target: a rank's output as ordorun's LinePrefixer (tools/ordorun/prefixer.hpp) sees it,
// in reads of any size. Byte 0 sets the read size, byte 1 how many times the rest is repeated
// (so that lines grow past max_line, where the prefixer cuts them). Whatever the bytes:
//   - every line it passes on starts with the prefix, ends with one newline, and holds at most
//     max_line bytes of the rank's output;
//   - those bytes, newlines aside, are the rank's output, in order, none lost or added;
//   - a line is cut only where the output had its newline or at max_line, never inside a
//     UTF-8 character of valid UTF-8 output.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "prefixer.hpp"

namespace {

bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = c < 0x80             ? 1
                          : (c & 0xe0) == 0xc0 ? 2
                          : (c & 0xf0) == 0xe0 ? 3
                          : (c & 0xf8) == 0xf0 ? 4
                                               : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    i += n;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::size_t read = 1 + std::size_t(data[0]) * 293;  // 1 .. 74,716 bytes per read
  const std::size_t repeat = 1 + data[1] % 64;
  const std::string_view body(reinterpret_cast<const char*>(data + 2), size - 2);
  std::string in;
  for (std::size_t r = 0; r < repeat; ++r) in += body;

  const std::string prefix = "[7] ";
  ordorun::LinePrefixer lines(prefix);
  std::string out;
  for (std::size_t at = 0; at < in.size(); at += read)
    out += lines.feed(std::string_view(in).substr(at, read));
  out += lines.finish();
  if (!lines.finish().empty()) std::abort();  // finish() twice passes nothing on

  const bool utf8 = valid_utf8(in);
  std::string content, original;
  std::size_t cuts = 0;
  for (std::size_t at = 0; at < out.size();) {
    const std::size_t nl = out.find('\n', at);
    if (nl == std::string::npos) std::abort();  // a line without its newline
    const std::string_view line = std::string_view(out).substr(at, nl - at);
    if (line.substr(0, prefix.size()) != prefix) std::abort();
    const std::string_view text = line.substr(prefix.size());
    if (text.size() > ordorun::LinePrefixer::max_line) std::abort();
    if (utf8 && !valid_utf8(text)) std::abort();  // cut inside a character
    content += text;
    at = nl + 1;
    ++cuts;
  }
  std::size_t newlines = 0;
  for (char c : in)
    if (c == '\n')
      ++newlines;
    else
      original += c;
  if (content != original) std::abort();
  // One line per newline, one for an unterminated end, and the pieces of overlong lines: no
  // fewer, and no more than one piece per max_line - 3 bytes (a cut moves back at most 3).
  const bool tail = !in.empty() && in.back() != '\n';
  if (cuts < newlines + (tail ? 1 : 0)) std::abort();
  if (cuts > newlines + 1 + in.size() / (ordorun::LinePrefixer::max_line - 3)) std::abort();
  return 0;
}
