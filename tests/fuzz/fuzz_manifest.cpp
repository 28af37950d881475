// Fuzz target: a checkpoint's manifest as a file from outside could hold it
// (detail::parse_manifest, api/checkpoint_manifest.hpp). Whatever the bytes, the parser refuses
// them saying why, or accepts exactly the text that format_manifest writes for what it read:
// one spelling per manifest, so that nothing but a manifest ordo wrote (or its exact copy) is
// ever taken for one.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "api/checkpoint_manifest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string why;
  const auto m = ordo::detail::parse_manifest(text, why);
  if (!m) {
    if (why.empty()) std::abort();  // refused without saying why
    return 0;
  }
  if (m->ranks == 0 || ordo::detail::format_manifest(*m) != text) std::abort();
  return 0;
}
