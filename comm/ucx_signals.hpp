// UCX's error-signal handlers, given back to the program. libucs installs handlers for
// SIGSEGV, SIGBUS, SIGILL, SIGFPE (UCX_ERROR_SIGNALS) as soon as it is loaded, in every process
// that links ordo, whether it ever builds a Runtime or not: a program's own crash then prints
// UCX's backtrace ("Caught signal 8 ... libucs.so") and, with UCX_HANDLE_ERRORS=freeze, may
// even wait for a debugger. ordo changes no signal disposition unless the user asks for it.
#pragma once

namespace ordo::comm {

// Restores the default action of every signal whose handler lies in one of UCX's libraries,
// and returns how many it restored. Async-signal-safe enough for a library constructor (no
// allocation): api/settings.cpp calls it when libordo is loaded, unless UCX_HANDLE_ERRORS is
// set (the user asked for UCX's handling).
int restore_signals_taken_by_ucx();

}  // namespace ordo::comm
