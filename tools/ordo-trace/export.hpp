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

// One HTML page with inline script and no network access: a canvas timeline with one row per
// worker per rank (each row also a <div class="timeline-row"> for machine checks), lock waits,
// release -> grant and message arrows, and the summary tables.
std::string export_html(const Trace& t, const Summary& s);

}  // namespace ordo::tracefile
