// A program that links libordo and never builds a Runtime, then faults as its first argument
// says: `fpe` raises SIGFPE, `divide` divides an integer by zero, `segv` raises SIGSEGV. Run by
// test_signals.cpp, which checks that it dies of the signal with the default action.
#include <csignal>
#include <cstdio>
#include <cstring>

#include <ordo/ordo.hpp>

int main(int argc, char** argv) {
  // Something of libordo's (not header-only), so that the program really links it.
  ordo::Graph graph;
  (void)graph;
  if (argc < 2) return 2;
  if (std::strcmp(argv[1], "fpe") == 0) std::raise(SIGFPE);
  if (std::strcmp(argv[1], "segv") == 0) std::raise(SIGSEGV);
  if (std::strcmp(argv[1], "divide") == 0) {
    volatile int zero = 0, seven = 7;
    volatile int x = seven / zero;  // both read at run time: an idiv that traps
    (void)x;
  }
  std::puts("still alive");
  return 0;
}
