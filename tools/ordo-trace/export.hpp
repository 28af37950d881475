// Exporters of `ordo-trace`: Chrome Trace Event JSON (Perfetto, chrome://tracing) and a
// self-contained HTML timeline.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis.hpp"
#include "trace_file.hpp"

namespace ordo::tracefile {

// Chrome Trace Event format, JSON object form. pid = rank, tid = worker (the runtime's caller
// thread is tid = workers). Task instances, idle periods and trace flushes are complete
// ("X") events; lock waits are async ("b"/"e") events; release -> grant and send -> receive
// are flow ("s"/"f") events.
nlohmann::json export_perfetto(const Trace& t, const Summary& s);

// One self-contained HTML page (viewer/viewer.html, with d3 inlined at build time; it loads
// nothing from the network): lanes per rank and worker, utilisation per rank, the critical
// path, messages, a location's FIFO, histograms per task kind, and the summary tables.
std::string export_html(const Trace& t, const Summary& s);

}  // namespace ordo::tracefile
