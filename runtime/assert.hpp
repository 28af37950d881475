// ORDO_ASSERT(condition): a broken invariant of ordo's own code, never bad input
// (docs/developing.md, "Errors": bad input gets an exception that says what to do). Checked where
// NDEBUG is not defined -- debug and debugoptimized builds, which includes the ThreadSanitizer
// build of scripts/test.sh, so the tsan suite runs with every assertion on -- and compiled out of
// release builds (the condition is then not evaluated, though the compiler still sees it). A failed
// assertion prints the condition and where it is, and aborts.
#pragma once

namespace ordo::rt {

[[noreturn]] void assertion_failed(const char* condition, const char* file, int line,
                                   const char* function) noexcept;

}  // namespace ordo::rt

#ifdef NDEBUG
#define ORDO_ASSERT(condition) static_cast<void>(sizeof(!(condition)))
#else
#define ORDO_ASSERT(condition)                                                            \
  ((condition) ? static_cast<void>(0)                                                     \
               : ::ordo::rt::assertion_failed(#condition, __FILE__, __LINE__, __func__))
#endif
