// The exit-status policy of every ordo command line (the apps, benchmarks and baselines through
// app_cli.hpp, and the tools ordorun and ordo-trace, which link nothing of ordo): one place that
// turns a command line's outcome into a message and an exit status.
//   0  done, or --help (printed to stdout);
//   2  the input is wrong: a bad flag or value ("TOOL: error: WHAT", and for a flag
//      "Run with --help for the list of flags."), or whatever the tool calls bad input;
//   1  anything else went wrong ("TOOL: failed: WHAT"); an app also returns 1 for
//      "verification failed".
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace ordo::cli {

inline constexpr int kBadInput = 2;
inline constexpr int kFailed = 1;

// Parses the command line; returns -1 to go on, or the exit status to return now. `quiet`
// prints nothing (for the ranks of an MPI program other than the one that speaks).
inline int parse(CLI::App& cli, int argc, char** argv, bool quiet = false) {
  // CLI11 reads "--iters= --size 8x8" as --iters with the value "--size", and the message
  // then quotes the wrong flag: an empty "--NAME=" is refused here, naming NAME.
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--") break;
    if (a.size() > 3 && a.substr(0, 2) == "--" && a.back() == '=' && a.find('=') == a.size() - 1) {
      if (!quiet)
        std::fprintf(stderr,
                     "%s: error: %.*s: the value after '=' is empty; give %.*sVALUE\n"
                     "Run with --help for the list of flags.\n",
                     cli.get_name().c_str(), int(a.size() - 1), a.data(), int(a.size()), a.data());
      return kBadInput;
    }
  }
  try {
    cli.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    if (!quiet) std::fputs(cli.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return quiet ? 0 : cli.exit(e);  // --help-all and the like
    if (!quiet)
      std::fprintf(stderr, "%s: error: %s\nRun with --help for the list of flags.\n",
                   cli.get_name().c_str(), e.what());
    return kBadInput;
  }
  return -1;
}

// What a tool says about an exception that escaped its body: the message of a bad-input exit
// (2), or nullopt for a failure (1), whose message is the exception's what().
using BadInput = std::function<std::optional<std::string>(const std::exception&)>;

// Prints what a tool says about `e` ("TOOL: error: ..." or "TOOL: failed: ...") and returns
// its exit status, 2 or 1 as `bad_input` says.
inline int report(const std::string& tool, const std::exception& e, const BadInput& bad_input) {
  if (std::optional<std::string> why = bad_input(e)) {
    std::fprintf(stderr, "%s: error: %s\n", tool.c_str(), why->c_str());
    return kBadInput;
  }
  std::fprintf(stderr, "%s: failed: %s\n", tool.c_str(), e.what());
  return kFailed;
}

// Runs a tool's body: what it returns is the exit status, and an exception that escapes it is
// reported (report()).
inline int guarded_main(const std::string& tool, const std::function<int()>& body,
                        const BadInput& bad_input) {
  try {
    return body();
  } catch (const std::exception& e) {
    return report(tool, e, bad_input);
  }
}

// A BadInput for the exception type E (and those derived from it): its what() is the message.
template <class E>
std::optional<std::string> bad_input_if(const std::exception& e) {
  if (dynamic_cast<const E*>(&e) != nullptr) return std::string(e.what());
  return std::nullopt;
}

}  // namespace ordo::cli
