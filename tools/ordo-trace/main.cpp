// ordo-trace: reads the per-rank trace files a traced ordo run writes (docs/tracing.md).
//
//   ordo-trace summary [--json] FILE...          utilisation, compute vs wait, bytes, critical path
//   ordo-trace export --format perfetto -o OUT FILE...   Chrome Trace Event JSON
//   ordo-trace perfetto -o OUT FILE...           the same (an alias of export)
//   ordo-trace html -o OUT FILE...               self-contained HTML timeline
//   ordo-trace compare A B                       per task kind and location, what changed
//
// FILE is a trace file, or the base path of a multi-rank trace (BASE.rank0, BASE.rank1, ...).
// Exit status: 0 ok, 2 bad input (unreadable, truncated, corrupt or too new a file; bad flags).
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "analysis.hpp"
#include "cli_main.hpp"
#include "compare.hpp"
#include "export.hpp"
#include "runtime/regular_file.hpp"
#include "trace_file.hpp"

namespace {

using namespace ordo::tracefile;

// Names are UTF-8 once read (trace_file.cpp escapes what is not); a path given on the command
// line may not be, and costs a replacement character rather than an exception.
constexpr auto replace = nlohmann::json::error_handler_t::replace;

// Written beside the path and renamed into place, so that a failed write (a full disk, a
// killed process) leaves the previous file as it was rather than a truncated one; only over a
// regular file, whose mode it keeps (runtime/regular_file.hpp).
void write_file(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  const auto refuse = [&](const std::string& why) {
    std::remove(temporary.c_str());
    return TraceError("cannot write '" + path + "' (" + why +
                      "); give a writable output path with -o");
  };
  if (const std::string why = ordo::files::output_refusal(path); !why.empty())
    throw TraceError("cannot write '" + path + "': " + why);
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw refuse(std::strerror(errno));
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n < 0 ? errno : EIO;
      ::close(fd);
      throw refuse(std::strerror(e));
    }
    done += static_cast<std::size_t>(n);
  }
  const int synced = ::fsync(fd) == 0 ? 0 : errno;
  if (::close(fd) != 0 && synced == 0) throw refuse(std::strerror(errno));
  if (synced != 0) throw refuse(std::strerror(synced));
  if (const std::string why = ordo::files::output_refusal(path); !why.empty()) throw refuse(why);
  if (!ordo::files::keep_mode(temporary, path)) throw refuse(std::strerror(errno));
  if (std::rename(temporary.c_str(), path.c_str()) != 0) throw refuse(std::strerror(errno));
}

int run(int argc, char** argv) {
  CLI::App cli{"Summaries, Perfetto export and HTML timelines of ordo traces", "ordo-trace"};
  cli.require_subcommand(1);
  std::vector<std::string> inputs;
  bool json = false;
  std::string format = "perfetto", output;

  auto* summary = cli.add_subcommand("summary", "print utilisation, compute vs lock-wait vs "
                                                "idle, bytes moved and the critical path");
  summary->add_flag("--json", json, "print the figures as JSON");
  summary->footer(figure_explanations());
  summary->add_option("files", inputs, "trace files, or the base path of a multi-rank trace")
      ->required();

  auto* exp = cli.add_subcommand("export", "convert to Chrome Trace Event JSON (Perfetto UI, "
                                           "chrome://tracing)");
  // Perfetto is the format people ask for by name.
  exp->alias("perfetto");
  exp->add_option("--format", format, "output format")->check(CLI::IsMember({"perfetto"}))
      ->capture_default_str();
  exp->add_option("-o,--output", output, "output file")->required();
  exp->add_option("files", inputs, "trace files, or the base path of a multi-rank trace")
      ->required();

  auto* html = cli.add_subcommand("html", "write a self-contained HTML timeline with the "
                                          "summary tables");
  html->add_option("-o,--output", output, "output file")->required();
  html->add_option("files", inputs, "trace files, or the base path of a multi-rank trace")
      ->required();

  std::vector<std::string> compared;
  auto* cmp = cli.add_subcommand("compare", "compare two runs of the same graph: per task kind "
                                            "and per location, the change in compute, lock-wait "
                                            "and critical-path share, sorted by impact");
  cmp->add_flag("--json", json, "print the figures as JSON");
  cmp->add_option("traces", compared, "two traces (files, or base paths of multi-rank traces)")
      ->required()
      ->expected(2);
  cmp->footer("Each trace is summarised as by `ordo-trace summary` (see its --help); a kind is "
              "a task family's name without its index (step[1,2] -> step).");

  // Without a subcommand CLI11 says only "A subcommand is required": say which there are.
  const bool asks_help =
      argc > 1 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 ||
                   std::strcmp(argv[1], "--help-all") == 0);
  if (!asks_help) {
    bool known = false;
    for (const CLI::App* sub : cli.get_subcommands([](const CLI::App*) { return true; }))
      known |= argc > 1 && sub->check_name(argv[1]);
    if (!known) {
      std::fprintf(stderr,
                   "ordo-trace: error: %s%s%s; say what to do: summary, compare, export "
                   "(or perfetto) or html, then the trace files (ordo-trace --help)\n",
                   argc > 1 ? "no subcommand '" : "no subcommand given", argc > 1 ? argv[1] : "",
                   argc > 1 ? "'" : "");
      return ordo::cli::kBadInput;
    }
  }
  if (int rc = ordo::cli::parse(cli, argc, argv); rc >= 0) return rc;

  if (cmp->parsed()) {
    const Trace ta = load({compared[0]}), tb = load({compared[1]});
    const Comparison c = compare(summarize(ta), ta, summarize(tb), tb);
    // Loud also where stdout goes to a file or a JSON reader.
    if (c.different_graphs)
      std::fprintf(stderr,
                   "ordo-trace compare: WARNING: '%s' and '%s' are traces of different graphs "
                   "(%llu tasks against %llu): the figures compare different work\n",
                   compared[0].c_str(), compared[1].c_str(),
                   static_cast<unsigned long long>(c.tasks_a),
                   static_cast<unsigned long long>(c.tasks_b));
    const std::string text = json ? render_json(c).dump(2, ' ', false, replace) + "\n"
                                  : render_text(c, compared[0], compared[1]);
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  Trace t = load(inputs);
  Summary s = summarize(t);
  if (summary->parsed()) {
    std::string text =
        json ? render_json(s, t).dump(2, ' ', false, replace) + "\n" : render_text(s, t);
    std::fputs(text.c_str(), stdout);
  } else if (exp->parsed()) {
    write_file(output, export_perfetto(t, s).dump(-1, ' ', false, replace) + "\n");
  } else if (html->parsed()) {
    write_file(output, export_html(t, s));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ordo::cli::guarded_main("ordo-trace", [&] { return run(argc, argv); },
                                 ordo::cli::bad_input_if<TraceError>);
}
