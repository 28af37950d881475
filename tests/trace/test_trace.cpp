// Over 600 lines: one suite for the recorder, the file format and ordo-trace together, since
// each case checks the tool's figures against the events the recorder wrote for it.
// Tracing: the recorder writes exactly the expected events for a known graph, the tool's
// figures match what this test recomputes from the decoded events, the Perfetto export is
// well-formed, multi-rank merges respect clock offsets, and bad files are refused clearly.
#include <fmt/core.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <ordo/ordo.hpp>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "analysis.hpp"
#include "compare.hpp"
#include "export.hpp"
#include "runtime/trace.hpp"
#include "trace_file.hpp"

namespace fs = std::filesystem;
namespace tf = ordo::tracefile;
namespace rtt = ordo::rt::trace;

namespace {

// A fresh file name per call, removed with the process's temporary directory.
struct TempDir {
  fs::path path = fs::temp_directory_path() / ("ordo-test-trace-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string temp_path(const std::string& stem) {
  static const TempDir dir;
  static int n = 0;
  return (dir.path / (stem + "-" + std::to_string(n++))).string();
}

// Events of one buffer, minus those whose presence depends on thread timing (park, unpark,
// flush).
std::vector<tf::Event> deterministic(const tf::RankTrace& r, unsigned buffer) {
  std::vector<tf::Event> out;
  for (const tf::Event& e : r.events) {
    if (e.worker != buffer) continue;
    if (e.k() == tf::Kind::park || e.k() == tf::Kind::unpark || e.k() == tf::Kind::flush) continue;
    out.push_back(e);
  }
  return out;
}

std::string describe(const tf::Event& e) {
  return std::string(tf::kind_name(e.k())) + " task " + std::to_string(int(e.task)) + " loc " +
         std::to_string(int(e.location)) + " arg0 " + std::to_string(e.arg0) + " peer " +
         std::to_string(int(e.peer)) + " flags " + std::to_string(e.flags);
}

struct Expect {
  tf::Kind kind;
  std::uint32_t task, location;
  std::uint64_t arg0;
  std::uint32_t peer;
  std::uint8_t flags;
};

// A graph with a known schedule on one worker: produce writes a, consume reads a, writes b.
struct TwoTasks {
  ordo::Graph g;
  ordo::Location<double> a = g.location<double>("a", 4);
  ordo::Location<double> b = g.location<double>("b", 4);
  TwoTasks() {
    g.task("produce", {ordo::write(a)}, [a = a](ordo::Context& ctx) { ctx.write(a)[0] += 1; });
    g.task("consume", {ordo::read(a), ordo::write(b)}, [a = a, b = b](ordo::Context& ctx) {
      ctx.write(b)[0] = ctx.read(a)[0];
    });
  }
};

// A wider graph: a pipeline of `n` stages over shared locations, so instances overlap on
// several workers.
struct Pipeline {
  ordo::Graph g;
  std::vector<ordo::Location<double>> locs;
  explicit Pipeline(int n) {
    for (int i = 0; i <= n; ++i) locs.push_back(g.location<double>("l" + std::to_string(i), 64));
    for (int i = 0; i < n; ++i) {
      auto in = locs[i], out = locs[i + 1];
      g.task("stage" + std::to_string(i), {ordo::read(in), ordo::write(out)},
             [in, out](ordo::Context& ctx) {
               auto s = ctx.read(in);
               auto d = ctx.write(out);
               for (std::size_t k = 0; k < d.size(); ++k) d[k] = d[k] * 0.5 + s[k] + 1;
             });
    }
  }
};

}  // namespace

TEST_CASE("a known graph on one worker gives exactly the expected events", "[trace]") {
  const std::string path = temp_path("exact");
  {
    TwoTasks t;
    ordo::Runtime rt({.workers = 1, .trace_path = path});
    rt.run(t.g, 2);
  }
  tf::Trace trace = tf::load({path});
  REQUIRE(trace.ranks.size() == 1);
  const tf::RankTrace& r = trace.ranks[0];
  CHECK(r.workers == 1);
  CHECK(r.version == tf::kFormatVersion);
  REQUIRE(r.tasks.size() == 2);
  CHECK(r.tasks[0].name == "produce");
  CHECK(r.tasks[1].name == "consume");
  REQUIRE(r.tasks[1].accesses.size() == 2);
  CHECK(r.tasks[1].accesses[0].location == 0);
  CHECK_FALSE(r.tasks[1].accesses[0].write);
  CHECK(r.tasks[1].accesses[1].write);
  REQUIRE(r.locations.size() == 2);
  CHECK(r.locations[0].name == "a");
  CHECK(r.locations[0].bytes == 4 * sizeof(double));

  using K = tf::Kind;
  constexpr std::uint32_t N = tf::kNone;
  constexpr std::uint32_t P = 0, C = 1, A = 0, B = 1;
  constexpr std::uint8_t prev = tf::kPrevIteration;
  // Iteration 0's first grants happen when the graph is built, before the run: not traced.
  const std::vector<Expect> want = {
      {K::task_begin, P, N, 0, N, 0}, {K::task_end, P, N, 0, N, 0},
      {K::grant, C, A, 0, P, 0},  // produce#0 releases a: consume#0's read
      {K::task_begin, C, N, 0, N, 0}, {K::task_end, C, N, 0, N, 0},
      {K::grant, P, A, 1, C, prev},  // consume#0 releases a: produce#1's write
      {K::grant, C, B, 1, C, prev},  // consume#0 releases b: consume#1's write
      {K::task_begin, P, N, 1, N, 0}, {K::task_end, P, N, 1, N, 0},
      {K::grant, C, A, 1, P, 0},
      {K::task_begin, C, N, 1, N, 0}, {K::task_end, C, N, 1, N, 0},
      {K::grant, P, A, 2, C, prev},  // granted for the next run already
      {K::grant, C, B, 2, C, prev},
  };
  std::vector<tf::Event> got = deterministic(r, 0);
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("event " << i << ": " << describe(got[i]));
    CHECK(got[i].kind == static_cast<std::uint8_t>(want[i].kind));
    CHECK(got[i].task == want[i].task);
    CHECK(got[i].location == want[i].location);
    CHECK(got[i].arg0 == want[i].arg0);
    if (want[i].kind == K::grant) {
      CHECK(got[i].peer == want[i].peer);
      CHECK(got[i].flags == want[i].flags);
    }
  }
  // Request times: iteration 0 at the run start; later ones at the previous instance's end.
  std::vector<tf::Event> control = deterministic(r, 1);
  REQUIRE(control.size() == 2);
  CHECK(control[0].k() == K::run_begin);
  CHECK(control[0].arg0 == 2);
  CHECK(control[1].k() == K::run_end);
  CHECK(control[1].arg0 == 2);
  CHECK(got[2].arg1 == control[0].time);           // consume#0 requested at the run start
  CHECK(got[5].arg1 == got[1].time);               // produce#1 requested when produce#0 ended
  CHECK(got[6].arg1 == got[4].time);               // consume#1 requested when consume#0 ended
  for (std::size_t i = 1; i < got.size(); ++i) CHECK(got[i - 1].time <= got[i].time);
  CHECK(control[0].time <= got.front().time);
  CHECK(got.back().time <= control[1].time);

  // Parks and unparks of the worker alternate.
  int parked = -1;
  for (const tf::Event& e : r.events) {
    if (e.k() == K::park) {
      CHECK(parked != 1);
      parked = 1;
    } else if (e.k() == K::unpark) {
      CHECK(parked != 0);
      parked = 0;
    }
  }
}

TEST_CASE("the summary's figures are those recomputed from the events", "[trace]") {
  const std::string path = temp_path("summary");
  const int stages = 4, iters = 25;
  std::vector<double> traced, plain;
  ::setenv("ORDO_TRACE_BUFFER", "8", 1);  // force flushes in the middle of the run
  {
    Pipeline p(stages);
    ordo::Runtime rt({.workers = 2, .trace_path = path});
    rt.run(p.g, iters);
    auto d = p.g.data(p.locs.back());
    traced.assign(d.begin(), d.end());
  }
  ::unsetenv("ORDO_TRACE_BUFFER");
  {
    Pipeline p(stages);
    ordo::Runtime rt({.workers = 2});
    rt.run(p.g, iters);
    auto d = p.g.data(p.locs.back());
    plain.assign(d.begin(), d.end());
  }
  CHECK(traced == plain);  // tracing does not change results

  tf::Trace t = tf::load({path});
  const tf::RankTrace& r = t.ranks[0];
  tf::Summary s = tf::summarize(t);

  // Recompute: instances per (task, iteration) from begin/end pairs, per worker.
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::pair<std::int64_t, std::int64_t>> inst;
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint16_t> where;
  std::map<std::uint32_t, std::int64_t> compute;
  std::vector<std::int64_t> busy(r.workers, 0);
  std::vector<std::uint64_t> count(r.workers, 0);
  std::map<std::uint32_t, std::uint64_t> grants;
  std::map<std::uint32_t, std::int64_t> loc_wait;
  // Per instance: the request (earliest arg1), the last grant and its location, and the grant
  // before the last.
  struct Granted {
    std::int64_t request = INT64_MAX, last = -1, before_last = -1;
    std::uint32_t location = 0;
  };
  std::map<std::pair<std::uint32_t, std::uint64_t>, Granted> granted;
  std::uint64_t flushes = 0;
  for (const tf::Event& e : r.events) {
    auto k = std::make_pair(e.task, e.arg0);
    if (e.k() == tf::Kind::task_begin) {
      inst[k].first = static_cast<std::int64_t>(e.time);
      where[k] = e.worker;
    } else if (e.k() == tf::Kind::task_end) {
      inst[k].second = static_cast<std::int64_t>(e.time);
    } else if (e.k() == tf::Kind::grant) {
      Granted& g = granted[k];
      const auto at = static_cast<std::int64_t>(e.time);
      g.request = std::min(g.request, static_cast<std::int64_t>(e.arg1));
      if (at >= g.last) {
        g.before_last = g.last;
        g.last = at;
        g.location = e.location;
      } else {
        g.before_last = std::max(g.before_last, at);
      }
    } else if (e.k() == tf::Kind::flush && e.worker < r.workers) {
      ++flushes;
    }
  }
  CHECK(flushes > 0);
  REQUIRE(inst.size() == std::size_t(stages * iters));  // nothing lost across flushes
  // A location's grants are those of instances that ran (the last ones may grant an instance
  // of the next step, which the iteration gate holds).
  for (const tf::Event& e : r.events)
    if (e.k() == tf::Kind::grant && inst.count({e.task, e.arg0})) ++grants[e.location];
  // Lock wait, by brute force: from when the instance could otherwise have run (requested,
  // every lock but the last granted) to its last grant, the pieces of time in which fewer
  // instances ran than there are workers, found by sweeping every instance over the interval.
  using Pieces = std::vector<std::pair<std::int64_t, std::int64_t>>;
  auto free_time = [&](std::int64_t a, std::int64_t b, Pieces& out) {
    std::vector<std::pair<std::int64_t, int>> edges{{a, 0}, {b, 0}};
    for (auto& [k, be] : inst)
      if (be.second > a && be.first < b) {
        edges.emplace_back(std::max(be.first, a), +1);
        edges.emplace_back(std::min(be.second, b), -1);
      }
    std::sort(edges.begin(), edges.end());
    int running = 0;
    for (std::size_t i = 0; i + 1 < edges.size(); ++i) {
      running += edges[i].second;
      if (running < int(r.workers) && edges[i + 1].first > edges[i].first)
        out.emplace_back(edges[i].first, edges[i + 1].first);
    }
  };
  // A task's or a location's lock wait is the time in which some instance waited: the length
  // of the union of their pieces.
  auto union_length = [](Pieces p) {
    std::sort(p.begin(), p.end());
    std::int64_t total = 0, reach = INT64_MIN;
    for (auto [a, b] : p) {
      if (a > reach) reach = a;
      if (b > reach) {
        total += b - reach;
        reach = b;
      }
    }
    return total;
  };
  std::map<std::uint32_t, Pieces> task_pieces, loc_pieces;
  for (auto& [k, be] : inst) {
    compute[k.first] += be.second - be.first;
    busy[where[k]] += be.second - be.first;
    ++count[where[k]];
    auto g = granted.find(k);
    if (g == granted.end()) continue;
    const std::int64_t from = std::max(g->second.request, g->second.before_last);
    Pieces mine;
    if (g->second.last > from) free_time(from, g->second.last, mine);
    task_pieces[k.first].insert(task_pieces[k.first].end(), mine.begin(), mine.end());
    auto& l = loc_pieces[g->second.location];
    l.insert(l.end(), mine.begin(), mine.end());
  }
  std::map<std::uint32_t, std::int64_t> wait;
  for (auto& [task, p] : task_pieces) wait[task] = union_length(p);
  for (auto& [loc, p] : loc_pieces) loc_wait[loc] = union_length(p);
  CHECK(s.iterations == std::uint64_t(iters));
  REQUIRE(s.tasks.size() == std::size_t(stages));
  for (int i = 0; i < stages; ++i) {
    INFO("task " << i);
    CHECK(s.tasks[i].name == "stage" + std::to_string(i));
    CHECK(s.tasks[i].instances == std::uint64_t(iters));
    CHECK(s.tasks[i].compute_ns == compute[i]);
    CHECK(s.tasks[i].wait_ns == wait[i]);
  }
  REQUIRE(s.workers.size() == r.workers);
  for (unsigned w = 0; w < r.workers; ++w) {
    CHECK(s.workers[w].busy_ns == busy[w]);
    CHECK(s.workers[w].instances == count[w]);
    CHECK(s.workers[w].busy_ns + s.workers[w].idle_ns <= s.workers[w].span_ns);
  }
  REQUIRE(s.locations.size() == std::size_t(stages + 1));
  for (int l = 0; l <= stages; ++l) {
    CHECK(s.locations[l].grants == grants[l]);
    CHECK(s.locations[l].wait_ns == loc_wait[l]);
  }
  // The critical path, checked against the events: it ends at the instance that ended last,
  // each instance's last grant was made by the release of the one before it, and its length is
  // its slices plus the waits between them.
  REQUIRE(s.critical_path.size() > 1);
  std::map<std::pair<std::uint32_t, std::uint64_t>, tf::Event> last_grant;
  for (const tf::Event& e : r.events)
    if (e.k() == tf::Kind::grant) last_grant[{e.task, e.arg0}] = e;  // time order: the last wins
  std::int64_t latest = 0;
  for (const auto& [k, be] : inst) latest = std::max(latest, be.second);
  CHECK(s.critical_path.back()->end + t.origin == latest);  // one rank: no clock offset
  std::int64_t slices = 0, waits = 0;
  for (std::size_t i = 0; i < s.critical_path.size(); ++i) {
    const tf::InstanceRec& in = *s.critical_path[i];
    CHECK(inst.at({in.task, in.iteration}) == std::make_pair(in.begin + t.origin, in.end + t.origin));
    slices += in.end - in.begin;
    if (i == 0) continue;
    const tf::InstanceRec& before = *s.critical_path[i - 1];
    waits += in.begin - before.end;
    const tf::Event& g = last_grant.at({in.task, in.iteration});
    CHECK(g.peer == before.task);
    CHECK(before.iteration + ((g.flags & tf::kPrevIteration) ? 1 : 0) == in.iteration);
  }
  CHECK(s.critical_compute_ns == slices);
  CHECK(s.critical_ns == slices + waits);
  CHECK(s.critical_messages == 0);
}

TEST_CASE("the Perfetto export parses and has the required fields", "[trace]") {
  const std::string path = temp_path("perfetto");
  {
    Pipeline p(3);
    ordo::Runtime rt({.workers = 2, .trace_path = path});
    rt.run(p.g, 10);
  }
  tf::Trace t = tf::load({path});
  tf::Summary s = tf::summarize(t);
  const std::string text = tf::export_perfetto(t, s).dump();
  nlohmann::json j = nlohmann::json::parse(text);  // what a viewer reads: the text
  REQUIRE(j.contains("traceEvents"));
  std::size_t tasks = 0;
  std::map<std::string, int> flow_s, flow_f;
  std::set<std::pair<int, int>> named_threads;
  for (const auto& e : j["traceEvents"]) {
    for (const char* field : {"ph", "ts", "pid", "tid", "name"}) {
      INFO(e.dump());
      REQUIRE(e.contains(field));
    }
    const std::string ph = e["ph"];
    if (ph == "X") {
      REQUIRE(e.contains("dur"));
      CHECK(e["dur"].get<double>() >= 0);
      if (e["cat"] == "task") ++tasks;
    } else if (ph == "s") {
      ++flow_s[e["id"].dump()];
    } else if (ph == "f") {
      ++flow_f[e["id"].dump()];
      CHECK(e["bp"] == "e");
    } else if (ph == "M" && e["name"] == "thread_name") {
      named_threads.insert({e["pid"].get<int>(), e["tid"].get<int>()});
    } else if (ph == "b" || ph == "e") {
      CHECK(e.contains("id"));
    }
  }
  CHECK(tasks == 30);
  CHECK_FALSE(flow_s.empty());
  CHECK(flow_s == flow_f);  // every flow has both ends, once
  for (unsigned w = 0; w < 2; ++w) CHECK(named_threads.count({0, int(w)}) == 1);
}

namespace {

// Writes a synthetic two-rank trace: rank 1's clock reads `skew` ns behind rank 0's; the
// header carries the offset that the transport's alignment would find.
void write_two_ranks(const std::string& base, std::int64_t skew, int messages,
                     std::uint64_t run_id = 7) {
  ordo::rt::Graph g;
  g.add_location("halo", sizeof(double), 128, typeid(double));
  ordo::rt::TaskDesc writer{"writer", {{0, ordo::rt::Mode::write, false, 0}}, {}};
  ordo::rt::TaskDesc reader{"reader", {{0, ordo::rt::Mode::read, false, 0}}, {}};
  g.add_task(std::move(writer));
  g.add_task(std::move(reader));
  rtt::Placement place{{0, 1}, {0}};  // writer and the halo's home on rank 0, reader on 1
  for (unsigned rank = 0; rank < 2; ++rank) {
    rtt::RecorderConfig c;
    c.path = rtt::Recorder::rank_path(base, rank, 2);
    c.workers = 1;
    c.rank = rank;
    c.ranks = 2;
    c.clock_offset_ns = rank == 1 ? skew : 0;
    c.run_id = run_id;
    std::string error;
    auto rec = rtt::Recorder::open(c, error);
    REQUIRE(rec);
    rec->begin_run(g, 1, messages, &place);
    const std::uint64_t t0 = 6'000'000;  // common clock
    for (int i = 0; i < messages; ++i) {
      const std::uint64_t at = t0 + std::uint64_t(i) * 100'000;
      auto ev = [&](rtt::Kind k, std::uint64_t common, std::uint32_t task, std::uint32_t peer,
                    std::uint64_t tag) {
        rtt::Event e;
        e.time = rank == 1 ? common - std::uint64_t(skew) : common;  // local clock
        e.kind = static_cast<std::uint8_t>(k);
        e.task = task;
        e.peer = peer;
        e.location = k == rtt::Kind::send || k == rtt::Kind::receive ? 0 : rtt::kNone;
        e.arg0 = k == rtt::Kind::send || k == rtt::Kind::receive ? 1024 : std::uint64_t(i);
        e.arg1 = tag;
        rec->append(0, e);
      };
      // A grant that a message brought (no releaser on this rank) of the halo.
      auto remote_grant = [&](std::uint64_t common, std::uint32_t task, std::uint64_t it) {
        rtt::Event e;
        e.time = rank == 1 ? common - std::uint64_t(skew) : common;
        e.kind = static_cast<std::uint8_t>(rtt::Kind::grant);
        e.task = task;
        e.location = 0;
        e.arg0 = it;
        rec->append(0, e);
      };
      if (rank == 0) {
        ev(rtt::Kind::task_begin, at, 0, rtt::kNone, 0);
        ev(rtt::Kind::task_end, at + 10'000, 0, rtt::kNone, 0);
        ev(rtt::Kind::send, at + 11'000, 0, 1, std::uint64_t(i));          // halo to rank 1
        ev(rtt::Kind::receive, at + 60'000, 0, 1, 1000 + std::uint64_t(i));  // ack from 1
        remote_grant(at + 60'100, 0, std::uint64_t(i) + 1);
      } else {
        ev(rtt::Kind::receive, at + 13'000, 1, 0, std::uint64_t(i));
        remote_grant(at + 13'100, 1, std::uint64_t(i));
        ev(rtt::Kind::task_begin, at + 14'000, 1, rtt::kNone, 0);
        ev(rtt::Kind::task_end, at + 40'000, 1, rtt::kNone, 0);
        ev(rtt::Kind::send, at + 41'000, 1, 0, 1000 + std::uint64_t(i));
      }
    }
    rec->end_run(messages);
  }
}

}  // namespace

TEST_CASE("after clock alignment every send of a multi-rank trace precedes its receive",
          "[trace]") {
  const std::string base = temp_path("ranks");
  const int messages = 5;
  const std::int64_t skew = 5'000'000;  // rank 1's clock is 5 ms behind
  write_two_ranks(base, skew, messages);
  REQUIRE(fs::exists(base + ".rank0"));
  REQUIRE(fs::exists(base + ".rank1"));

  tf::Trace t = tf::load({base});  // the base path finds both files
  REQUIRE(t.ranks.size() == 2);
  CHECK(t.ranks[1].clock_offset_ns == skew);
  auto pairs = tf::match_messages(t);
  REQUIRE(pairs.size() == std::size_t(2 * messages));
  for (const auto& m : pairs)
    CHECK(t.aligned(t.ranks[m.from], *m.send) < t.aligned(t.ranks[m.to], *m.receive));

  // Without the offsets, the skew puts receives before their sends: the check above can fail.
  tf::Trace raw = tf::load({base + ".rank1", base + ".rank0"}, false);
  int inverted = 0;
  for (const auto& m : tf::match_messages(raw))
    inverted += raw.aligned(raw.ranks[m.from], *m.send) >= raw.aligned(raw.ranks[m.to], *m.receive);
  CHECK(inverted == messages);
  CHECK(tf::summarize(raw).inverted_messages == std::uint64_t(messages));

  // The Perfetto flows of the messages also go forward in time.
  tf::Summary s = tf::summarize(t);
  nlohmann::json j = tf::export_perfetto(t, s);
  std::map<std::uint64_t, double> start;
  int forward = 0;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "s" && e["cat"] == "message") start[e["id"].get<std::uint64_t>()] = e["ts"];
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "f" && e["cat"] == "message") {
      CHECK(start.at(e["id"].get<std::uint64_t>()) < e["ts"].get<double>());
      ++forward;
    }
  CHECK(forward == 2 * messages);

  // Bytes per peer against the minimum: the reader on rank 1 needs the 1 KiB halo once per
  // iteration; the acks are extra.
  REQUIRE(s.iterations == std::uint64_t(messages));
  REQUIRE(s.peers.size() == 2);
  CHECK(s.peers[0].from == 0);
  CHECK(s.peers[0].to == 1);
  CHECK(s.peers[0].bytes == 1024u * messages);
  CHECK(s.peers[0].min_bytes == 1024u * messages);
  CHECK(s.peers[1].bytes == 1024u * messages);
  CHECK(s.peers[1].min_bytes == 0);
  CHECK(s.unmatched_messages == 0);
  CHECK(s.inverted_messages == 0);
  CHECK(s.locations.at(0).bytes == 2048u * messages);

  // The critical path crosses the ranks through the messages: reader#4 ended last; each
  // reader's grant came with the writer's halo, each writer's (from #1) with the reader's ack.
  REQUIRE(s.critical_path.size() == std::size_t(2 * messages));
  for (std::size_t i = 0; i < s.critical_path.size(); ++i) {
    INFO("path instance " << i);
    CHECK(s.critical_path[i]->rank == i % 2);
    CHECK(s.critical_path[i]->task == i % 2);
    CHECK(s.critical_path[i]->iteration == i / 2);
  }
  CHECK(s.critical_messages == std::uint64_t(2 * messages - 1));
  CHECK(s.critical_ns == (messages - 1) * 100'000 + 40'000);  // writer#0's begin to reader#4's end
  CHECK(s.critical_compute_ns == messages * (10'000 + 26'000));

  // A missing rank is named.
  CHECK_THROWS_WITH(tf::load({base + ".rank1"}), Catch::Contains("rank 0 of 2 is missing"));
}

namespace {

std::vector<char> slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
std::string spit(const std::vector<char>& bytes, const std::string& stem) {
  std::string p = temp_path(stem);
  std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return p;
}

}  // namespace

TEST_CASE("truncated, corrupt and newer files are refused with a clear message", "[trace]") {
  const std::string path = temp_path("good");
  {
    TwoTasks t;
    ordo::Runtime rt({.workers = 1, .trace_path = path});
    rt.run(t.g, 3);
  }
  const std::vector<char> good = slurp(path);
  REQUIRE_NOTHROW(tf::read_rank(path));
  REQUIRE(good.size() > 200);

  for (std::size_t cut : {std::size_t(10), std::size_t(64), std::size_t(70), good.size() / 2,
                          good.size() - 1}) {
    INFO("cut at " << cut);
    std::vector<char> b(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut));
    CHECK_THROWS_WITH(tf::read_rank(spit(b, "cut")), Catch::Contains("truncated"));
  }
  {
    std::vector<char> b = good;
    b[0] = 'X';
    CHECK_THROWS_WITH(tf::read_rank(spit(b, "magic")), Catch::Contains("not an ordo trace"));
  }
  {
    std::vector<char> b = good;
    b[8] = char(tf::kFormatVersion + 1);
    CHECK_THROWS_WITH(tf::read_rank(spit(b, "newer")),
                      Catch::Contains("version " + std::to_string(tf::kFormatVersion + 1) +
                                      " is newer than this ordo-trace reads"));
  }
  {
    // The first event record: find it after the graph record and break an event's kind.
    std::vector<char> b = good;
    std::uint64_t pos = sizeof(tf::FileHeader);
    bool done = false;
    while (pos + 16 <= b.size() && !done) {
      tf::RecordHeader rh;
      std::memcpy(&rh, b.data() + pos, sizeof rh);
      if (rh.type == 2 && rh.bytes >= 40) {
        b[pos + 16 + 38] = char(99);  // kind byte of the first event
        done = true;
      }
      pos += 16 + rh.bytes;
    }
    REQUIRE(done);
    CHECK_THROWS_WITH(tf::read_rank(spit(b, "kind")), Catch::Contains("corrupt event"));
  }
  {
    std::vector<char> b = good;
    b[64] = 9;  // first record's type
    CHECK_THROWS_WITH(tf::read_rank(spit(b, "type")), Catch::Contains("unknown type 9"));
  }
  {
    std::vector<char> b = good;
    b.push_back(0);
    CHECK_THROWS_WITH(tf::read_rank(spit(b, "tail")), Catch::Contains("after the end record"));
  }
  CHECK_THROWS_WITH(tf::load({temp_path("absent")}), Catch::Contains("no such trace file"));
}

TEST_CASE("the rank files of two different runs are refused, naming both files", "[trace]") {
  const std::string a = temp_path("run-a"), b = temp_path("run-b");
  write_two_ranks(a, 0, 2, 11);
  write_two_ranks(b, 0, 2, 12);
  REQUIRE_NOTHROW(tf::load({a}));
  REQUIRE_NOTHROW(tf::load({b + ".rank1", b + ".rank0"}));
  CHECK_THROWS_WITH(tf::load({a + ".rank0", b + ".rank1"}),
                    Catch::Contains(b + ".rank1 and " + a + ".rank0 are from different runs"));
  // A file of a run of another size: both names are in the message (the first one was once
  // printed empty, its trace already moved into the merged one).
  const std::string one = temp_path("one");
  {
    TwoTasks t;
    ordo::Runtime rt({.workers = 1, .trace_path = one});
    rt.run(t.g, 1);
  }
  CHECK_THROWS_WITH(tf::load({one, a + ".rank1"}),
                    Catch::Contains(a + ".rank1: belongs to a run of 2 ranks, " + one +
                                    " to one of 1"));
}

TEST_CASE("sizes in a header or graph record are checked against the bytes there", "[trace]") {
  const std::string base = temp_path("sizes");
  write_two_ranks(base, 0, 2);
  std::vector<char> bytes = slurp(base + ".rank1");
  // A header that claims ten million ranks: refused as a missing rank, before the merged trace
  // is sized by it.
  const std::uint32_t ranks = 10'000'000;
  std::memcpy(bytes.data() + offsetof(tf::FileHeader, ranks), &ranks, sizeof ranks);
  const std::string lying = spit(bytes, "ranks");
  CHECK_THROWS_WITH(tf::load({lying}), Catch::Contains("rank 0 of 10000000 is missing"));
  // A graph record that declares more tasks than its bytes can hold.
  std::vector<char> good = slurp(base + ".rank0");
  tf::RecordHeader rh;
  std::memcpy(&rh, good.data() + sizeof(tf::FileHeader), sizeof rh);
  REQUIRE(rh.type == 1);
  const std::uint32_t tasks = 0x40000000;
  std::memcpy(good.data() + sizeof(tf::FileHeader) + sizeof rh + 12, &tasks, sizeof tasks);
  std::span<const std::uint8_t> view(reinterpret_cast<const std::uint8_t*>(good.data()),
                                     good.size());
  CHECK_THROWS_WITH(tf::parse_rank(view, "buffer"),
                    Catch::Contains("buffer: corrupt graph record") &&
                        Catch::Contains("1073741824 tasks"));
}

TEST_CASE("a bad trace path is an ordo::Error that says what to do", "[trace]") {
  CHECK_THROWS_WITH(ordo::Runtime({.workers = 1, .trace_path = "/nonexistent-dir/x.trace"}),
                    Catch::Contains("cannot create trace file") && Catch::Contains("--trace"));
}

// Without the check, the temporary beside the path opens, the run records, and only the
// rename at the end fails: the whole run's trace lost, not the start refused.
TEST_CASE("a trace path that is a directory is refused before anything is recorded", "[trace]") {
  const std::string dir = temp_path("dir");
  fs::create_directories(dir);
  rtt::RecorderConfig c;
  c.path = dir;
  c.workers = 1;
  std::string error;
  CHECK(rtt::Recorder::open(c, error) == nullptr);
  CHECK_THAT(error, Catch::StartsWith("cannot create trace file '" + dir + "': it is a directory"));
  // Nothing was created beside it, and the directory is as it was.
  for (const auto& e : fs::directory_iterator(fs::path(dir).parent_path()))
    CHECK(e.path().filename().string().rfind(fs::path(dir).filename().string() + ".tmp", 0) ==
          std::string::npos);
  CHECK(fs::is_empty(dir));
}

TEST_CASE("ORDO_TRACE switches tracing on without code changes", "[trace]") {
  const std::string path = temp_path("env");
  ::setenv("ORDO_TRACE", path.c_str(), 1);
  {
    TwoTasks t;
    ordo::Runtime rt({.workers = 1});
    rt.run(t.g, 2);
  }
  ::unsetenv("ORDO_TRACE");
  tf::Trace t = tf::load({path});
  CHECK(tf::summarize(t).instances.size() == 4);
}

TEST_CASE("several Runtimes of one process under ORDO_TRACE each keep their own trace", "[trace]") {
  const std::string path = temp_path("several");
  ::setenv("ORDO_TRACE", path.c_str(), 1);
  {
    // Two at once, destroyed in the reverse order, and a third after them.
    TwoTasks one, two;
    ordo::Runtime first({.workers = 1});
    ordo::Runtime second({.workers = 1});
    first.run(one.g, 2);
    second.run(two.g, 3);
  }
  {
    TwoTasks three;
    ordo::Runtime third({.workers = 1});
    third.run(three.g, 1);
  }
  ::unsetenv("ORDO_TRACE");
  CHECK(tf::summarize(tf::load({path})).instances.size() == 4);
  CHECK(tf::summarize(tf::load({path + ".runtime2"})).instances.size() == 6);
  CHECK(tf::summarize(tf::load({path + ".runtime3"})).instances.size() == 2);
}

// The file appears at its path when the Runtime ends, whole (publish once: a file renamed into
// place could not be appended to without becoming partial again); until then it is written
// beside it and complete after every run.
TEST_CASE("several runs and graphs share one file, which appears whole when the runtime ends",
          "[trace]") {
  const std::string path = temp_path("runs");
  auto temporaries = [&path] {  // `path`.tmp-<nonce>
    std::vector<std::string> out;
    const std::string prefix = fs::path(path).filename().string() + ".tmp-";
    for (const auto& e : fs::directory_iterator(fs::path(path).parent_path()))
      if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path().string());
    return out;
  };
  ::setenv("ORDO_TRACE_BUFFER", "3", 1);  // flushes all the time, from every worker
  {
    ordo::Runtime rt({.workers = 3, .trace_path = path});
    ::unsetenv("ORDO_TRACE_BUFFER");
    Pipeline p(3);
    rt.run(p.g, 4);
    CHECK(!fs::exists(path));  // not yet: its temporary beside it is complete after each run
    const std::vector<std::string> written = temporaries();
    REQUIRE(written.size() == 1);
    CHECK(tf::summarize(tf::load({written[0]})).instances.size() == 12);
    TwoTasks two;
    ordo::Until until;
    until.done = [&](const ordo::Graph& g) { return g.data(two.b)[0] >= 3; };
    CHECK(rt.run_until(two.g, until).iterations == 3);
    rt.run(p.g, 2);
  }
  CHECK(temporaries().empty());  // renamed over the path
  tf::Trace t = tf::load({path});
  const tf::RankTrace& r = t.ranks[0];
  REQUIRE(r.tasks.size() == 5);  // the pipeline's 3, then the second graph's 2
  CHECK(r.tasks[0].name == "stage0");
  CHECK(r.tasks[3].name == "produce");
  CHECK(r.tasks[3].graph == 1);
  REQUIRE(r.locations.size() == 6);
  CHECK(r.locations[4].name == "a");
  CHECK(r.tasks[4].accesses[1].location == 5);  // consume writes b: global id 4 + 1
  std::map<std::uint32_t, std::set<std::uint64_t>> iterations;
  int runs = 0;
  for (const tf::Event& e : r.events) {
    if (e.k() == tf::Kind::task_begin) CHECK(iterations[e.task].insert(e.arg0).second);
    runs += e.k() == tf::Kind::run_end;
  }
  CHECK(runs == 3);
  for (std::uint32_t task = 0; task < 3; ++task) {
    CHECK(iterations[task] == std::set<std::uint64_t>{0, 1, 2, 3, 4, 5});
  }
  CHECK(iterations[3] == std::set<std::uint64_t>{0, 1, 2});
  CHECK(iterations[4] == std::set<std::uint64_t>{0, 1, 2});
  for (const tf::InstanceRec& in : tf::summarize(t).instances) CHECK(in.begin <= in.end);
}

TEST_CASE("the critical path goes back from the last instance through each one's last releaser",
          "[trace]") {
  // Synthetic: heavy and light read x together, then writer writes x; light releases last, so
  // the writer waited for light, not for heavy, although heavy computes longest.
  ordo::rt::Graph g;
  g.add_location("x", sizeof(double), 8, typeid(double));
  g.add_task({"heavy", {{0, ordo::rt::Mode::read, false, 0}}, {}});
  g.add_task({"light", {{0, ordo::rt::Mode::read, false, 0}}, {}});
  g.add_task({"writer", {{0, ordo::rt::Mode::write, false, 0}}, {}});
  const std::string path = temp_path("critical");
  {
    rtt::RecorderConfig c;
    c.path = path;
    c.workers = 2;
    std::string error;
    auto rec = rtt::Recorder::open(c, error);
    REQUIRE(rec);
    rec->begin_run(g, 7, 2);
    constexpr std::uint32_t H = 0, L = 1, W = 2;
    auto ev = [&](unsigned w, rtt::Kind k, std::uint64_t at, std::uint32_t task,
                  std::uint64_t it, std::uint32_t releaser = rtt::kNone, std::uint8_t flags = 0) {
      rtt::Event e;
      e.time = at;
      e.kind = static_cast<std::uint8_t>(k);
      e.task = task;
      e.arg0 = it;
      if (k == rtt::Kind::grant) {
        e.location = 0;
        e.peer = releaser;
        e.flags = flags;
      }
      rec->append(w, e);
    };
    for (std::uint64_t k = 0; k < 2; ++k) {
      const std::uint64_t t = 10'000 + k * 5'000;
      ev(0, rtt::Kind::task_begin, t, H, k);
      ev(0, rtt::Kind::task_end, t + 3'000, H, k);
      ev(1, rtt::Kind::task_begin, t + 3'500, L, k);
      ev(1, rtt::Kind::task_end, t + 4'000, L, k);
      ev(1, rtt::Kind::grant, t + 4'000, W, k, L);  // light's release grants the writer
      ev(1, rtt::Kind::task_begin, t + 4'100, W, k);
      ev(1, rtt::Kind::task_end, t + 4'600, W, k);
      ev(1, rtt::Kind::grant, t + 4'600, H, k + 1, W, tf::kPrevIteration);  // the read phase
      ev(1, rtt::Kind::grant, t + 4'600, L, k + 1, W, tf::kPrevIteration);
    }
    rec->end_run(2);
  }
  tf::Trace t = tf::load({path});
  tf::Summary s = tf::summarize(t);
  std::vector<std::pair<std::uint32_t, std::uint64_t>> path_got;
  for (auto* in : s.critical_path) path_got.emplace_back(in->task, in->iteration);
  // writer#1 ended last; light#1 released x last for it, writer#0 granted light#1, light#0
  // granted writer#0. light#0's read was granted before the run (not recorded): the path
  // starts there.
  const std::vector<std::pair<std::uint32_t, std::uint64_t>> want = {
      {1, 0}, {2, 0}, {1, 1}, {2, 1}};
  CHECK(path_got == want);
  CHECK(s.critical_ns == 19'600 - 13'500);  // light#0's begin to writer#1's end
  CHECK(s.critical_compute_ns == 4 * 500);
  CHECK(s.critical_messages == 0);
}

TEST_CASE("grants to a fiber task that is still running carry the next iteration", "[trace]") {
  // F releases x early and keeps running until D, the next holder, has run; D's release then
  // grants x to F's next instance while F's current one has not ended.
  const std::string path = temp_path("fiber");
  {
    ordo::Graph g;
    auto x = g.location<std::int64_t>("x", 1);
    auto seen = g.location<std::int64_t>("seen", 1);
    auto d_done = std::make_shared<std::atomic<std::uint64_t>>(0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    g.fiber_task("F", {ordo::write(x)}, [=](ordo::FiberContext& ctx) {
      const std::uint64_t k = ctx.iteration();
      ctx.acquire_write(x)[0] = static_cast<std::int64_t>(k);
      ctx.release(x);
      while (d_done->load() <= k && std::chrono::steady_clock::now() < deadline)
        std::this_thread::yield();
    });
    g.task("D", {ordo::read(x), ordo::write(seen)}, [=](ordo::Context& ctx) {
      ctx.write(seen)[0] += ctx.read(x)[0];
      d_done->fetch_add(1);
    });
    ordo::Runtime rt({.workers = 2, .trace_path = path});
    rt.run(g, 4);
    CHECK(g.data(seen)[0] == 0 + 1 + 2 + 3);
  }
  tf::Trace t = tf::load({path});
  int to_f = 0;
  for (const tf::Event& e : t.ranks[0].events) {
    if (e.k() != tf::Kind::grant) continue;
    const std::uint64_t rel = (e.flags & tf::kPrevIteration) ? e.arg0 - 1 : e.arg0;
    if (e.task == 0) {  // F, granted by D of the previous iteration
      ++to_f;
      CHECK(e.peer == 1);
      CHECK(e.flags == tf::kPrevIteration);
      CHECK(e.arg0 == rel + 1);
    } else if (e.location == 0) {  // D's read of x, granted by F of the same iteration
      CHECK(e.peer == 0);
      CHECK(e.flags == 0);
    } else {  // D's write of seen, granted by D's previous instance
      CHECK(e.peer == 1);
      CHECK(e.flags == tf::kPrevIteration);
    }
  }
  CHECK(to_f == 4);
  CHECK(tf::summarize(t).instances.size() == 8);
}

TEST_CASE("a fiber task's suspensions are its lock-wait, not its compute", "[trace]") {
  // One worker: F acquires y, which W (declared first, program order) writes; F's first
  // acquire must suspend until W has run. W spins long enough to make the wait visible.
  const std::string path = temp_path("suspend");
  {
    ordo::Graph g;
    auto y = g.location<double>("y", 1);
    g.task("W", {ordo::write(y)}, [=](ordo::Context& ctx) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
      while (std::chrono::steady_clock::now() < until) {
      }
      ctx.write(y)[0] += 1;
    });
    g.fiber_task("F", {ordo::read(y)}, [=](ordo::FiberContext& ctx) {
      (void)ctx.acquire_read(y)[0];
    });
    ordo::Runtime rt({.workers = 1, .trace_path = path});
    rt.run(g, 3);
  }
  tf::Trace t = tf::load({path});
  std::map<std::uint64_t, std::int64_t> suspended;  // per iteration of F
  std::map<std::uint64_t, std::int64_t> at;
  std::map<std::uint64_t, std::pair<std::int64_t, std::int64_t>> span;
  for (const tf::Event& e : t.ranks[0].events) {
    const auto time = static_cast<std::int64_t>(e.time);
    if (e.task != 1) continue;
    if (e.k() == tf::Kind::fiber_suspend) at[e.arg0] = time;
    if (e.k() == tf::Kind::fiber_resume) suspended[e.arg0] += time - at.at(e.arg0);
    if (e.k() == tf::Kind::task_begin) span[e.arg0].first = time;
    if (e.k() == tf::Kind::task_end) span[e.arg0].second = time;
  }
  REQUIRE_FALSE(suspended.empty());  // F did suspend
  std::int64_t wait = 0, compute = 0;
  for (auto& [k, se] : span) compute += se.second - se.first - suspended[k];
  for (auto& [k, w] : suspended) wait += w;
  tf::Summary s = tf::summarize(t);
  REQUIRE(s.tasks.size() == 2);
  const tf::TaskRow& f = s.tasks[0].name == "F" ? s.tasks[0] : s.tasks[1];
  CHECK(f.name == "F");
  CHECK(f.wait_ns == wait);
  CHECK(f.compute_ns == compute);
}

namespace {

// A synthetic one-rank trace of `workers` workers: `events` are appended to buffer 0 in order
// (times in ns). Graph: "a" writes L, "b" reads L and writes M; "ordo.helper" writes H.
std::string write_synthetic(unsigned workers, const std::vector<rtt::Event>& events) {
  ordo::rt::Graph g;
  g.add_location("L", sizeof(double), 1, typeid(double));
  g.add_location("M", sizeof(double), 1, typeid(double));
  g.add_location("ordo.H", sizeof(double), 1, typeid(double));
  g.add_task(ordo::rt::TaskDesc{"a", {{0, ordo::rt::Mode::write, false, 0}}, {}});
  g.add_task(ordo::rt::TaskDesc{"b", {{0, ordo::rt::Mode::read, false, 0}, {1, ordo::rt::Mode::write, false, 0}}, {}});
  g.add_task(ordo::rt::TaskDesc{"ordo.helper", {{2, ordo::rt::Mode::write, false, 0}}, {}});
  const std::string path = temp_path("synthetic");
  rtt::RecorderConfig c;
  c.path = path;
  c.workers = workers;
  std::string error;
  auto rec = rtt::Recorder::open(c, error);
  REQUIRE(rec);
  rec->begin_run(g, 1, 1);
  for (const rtt::Event& e : events) rec->append(e.worker, e);
  rec->end_run(1);
  rec.reset();
  // The recorder's own run_begin and run_end (on the caller's buffer, at the real clock's
  // times) become steals there, which the summary ignores: the test's events set the runs.
  std::vector<char> bytes = slurp(path);
  for (std::size_t pos = sizeof(rtt::FileHeader); pos + sizeof(rtt::RecordHeader) <= bytes.size();) {
    rtt::RecordHeader rh;
    std::memcpy(&rh, bytes.data() + pos, sizeof rh);
    if (rh.type == 2 && rh.arg == workers)
      for (std::size_t off = 0; off < rh.bytes; off += sizeof(rtt::Event)) {
        char& kind = bytes[pos + sizeof rh + off + offsetof(rtt::Event, kind)];
        if (kind == char(rtt::Kind::run_begin) || kind == char(rtt::Kind::run_end))
          kind = char(rtt::Kind::steal);
      }
    pos += sizeof rh + rh.bytes;
  }
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  return path;
}

rtt::Event ev(rtt::Kind k, std::uint64_t time, std::uint32_t task = rtt::kNone,
              std::uint32_t location = rtt::kNone, std::uint64_t arg1 = 0, std::uint16_t worker = 0) {
  rtt::Event e;
  e.time = time;
  e.kind = static_cast<std::uint8_t>(k);
  e.task = task;
  e.location = location;
  e.arg1 = arg1;
  e.worker = worker;
  return e;
}

rtt::Event iteration(rtt::Event e, std::uint64_t it) {
  e.arg0 = it;
  return e;
}

}  // namespace

TEST_CASE("lock-wait counts from when the instance could otherwise have run, naming the location",
          "[trace]") {
  using K = rtt::Kind;
  // "a" runs 1000-5000 on worker 0; "b" was requested at 1000, got M at 2000 and L (after "a"
  // released it) at 5000, then ran 5000-6000.
  auto events = [](std::uint16_t b_worker) {
    return std::vector<rtt::Event>{
        ev(K::run_begin, 500),
        ev(K::task_begin, 1000, 0, rtt::kNone, 0, 0),
        ev(K::grant, 2000, 1, 1, 1000, b_worker),
        ev(K::task_end, 5000, 0, rtt::kNone, 0, 0),
        ev(K::grant, 5000, 1, 0, 1000, b_worker),
        ev(K::task_begin, 5000, 1, rtt::kNone, 0, b_worker),
        ev(K::task_end, 6000, 1, rtt::kNone, 0, b_worker),
        ev(K::run_end, 6500),
    };
  };
  // One worker: while "a" ran it was busy, so "b" could not have run earlier: no lock-wait.
  {
    tf::Trace t = tf::load({write_synthetic(1, events(0))});
    tf::Summary s = tf::summarize(t);
    REQUIRE(s.tasks.size() == 2);
    CHECK(s.tasks[1].name == "b");
    CHECK(s.tasks[1].wait_ns == 0);
  }
  // Two workers: worker 1 was free from M's grant (2000; the request at 1000 is earlier) to
  // L's (5000): 3000 ns of lock-wait, held up by L.
  {
    tf::Trace t = tf::load({write_synthetic(2, events(1))});
    tf::Summary s = tf::summarize(t);
    REQUIRE(s.tasks.size() == 2);
    CHECK(s.tasks[1].wait_ns == 3000);
    CHECK(s.tasks[0].wait_ns == 0);
    REQUIRE(s.locations.size() == 3);
    CHECK(s.locations[0].name == "L");
    CHECK(s.locations[0].wait_ns == 3000);
    CHECK(s.locations[0].held_up == 1);
    CHECK(s.locations[1].wait_ns == 0);
    const tf::InstanceRec& b = s.instances[1];
    CHECK(b.blocker == 0);
    CHECK(b.otherwise - b.requested == 1000);  // M's grant, not the request
  }
}

TEST_CASE("the window is the user's runs: gaps between runs and helper graphs' runs are left out",
          "[trace]") {
  using K = rtt::Kind;
  // Run 1: 1000-3000, "a" busy 1000-3000; its release grants L to a#1 for the next run. A
  // gap. Run 2: 10000-12000, "a" busy 10000-11000. Run 3 (helper graph only): 20000-21000.
  rtt::Event next = iteration(ev(K::grant, 3000, 0, 0), 1);
  next.peer = 0;  // released by a#0
  next.flags = rtt::kPrevIteration;
  tf::Trace t = tf::load({write_synthetic(
      1, {ev(K::run_begin, 1000), ev(K::task_begin, 1000, 0), ev(K::task_end, 3000, 0), next,
          ev(K::run_end, 3000), ev(K::run_begin, 10000), iteration(ev(K::task_begin, 10000, 0), 1),
          iteration(ev(K::task_end, 11000, 0), 1), ev(K::run_end, 12000), ev(K::run_begin, 20000),
          ev(K::task_begin, 20000, 2), ev(K::task_end, 21000, 2), ev(K::run_end, 21000)})});
  tf::Summary s = tf::summarize(t);
  CHECK(s.span_ns == 4000);
  REQUIRE(s.workers.size() == 1);
  CHECK(s.workers[0].span_ns == 4000);
  CHECK(s.workers[0].busy_ns == 3000);
  CHECK(s.workers[0].utilisation() == Approx(0.75));
  // The helper's task is listed, marked, after the user's; it is not on the critical path.
  REQUIRE(s.tasks.size() == 2);
  CHECK(s.tasks[0].name == "a");
  CHECK_FALSE(s.tasks[0].internal);
  CHECK(s.tasks[1].name == "ordo.helper");
  CHECK(s.tasks[1].internal);
  CHECK(s.iterations == 2);
  for (const tf::InstanceRec* in : s.critical_path) CHECK_FALSE(in->internal);
  // The critical path runs through both runs: a#0 ended the first run, then the gap to the
  // second's start (10000), where a#1 began at once.
  REQUIRE(s.critical_path.size() == 2);
  CHECK(s.critical_path[0]->iteration == 0);
  CHECK(s.critical_path[1]->iteration == 1);
  CHECK(s.critical_ns == 10000);
  CHECK(s.critical_between_ns == 7000);
  CHECK(s.critical_worker_ns == 0);
  const std::string text = tf::render_text(s, t);
  CHECK_THAT(text, Catch::Contains("window 0.004 ms (the runs)"));
  CHECK_THAT(text, Catch::Contains("helper graphs' tasks"));
}

TEST_CASE("compare reports per task kind and location the change between two runs, by impact",
          "[trace]") {
  const std::string a = temp_path("cmp-a"), b = temp_path("cmp-b");
  {
    Pipeline p(3);
    ordo::Runtime rt({.workers = 2, .trace_path = a});
    rt.run(p.g, 10);
  }
  {
    Pipeline p(3);
    ordo::Runtime rt({.workers = 2, .trace_path = b});
    rt.run(p.g, 30);
  }
  const tf::Trace ta = tf::load({a}), tb = tf::load({b});
  const tf::Summary sa = tf::summarize(ta), sb = tf::summarize(tb);
  const tf::Comparison c = tf::compare(sa, ta, sb, tb);
  CHECK(c.window_a == sa.span_ns);
  CHECK(c.window_b == sb.span_ns);
  // Task names stage0..stage2 are three kinds; each row carries both summaries' figures.
  REQUIRE(c.kinds.size() == 3);
  for (const tf::CompareRow& row : c.kinds) {
    INFO(row.name);
    auto find = [&](const tf::Summary& s) {
      for (const tf::TaskRow& tr : s.tasks)
        if (tr.name == row.name) return tr;
      FAIL("no task " << row.name);
      return tf::TaskRow{};
    };
    const tf::TaskRow ra = find(sa), rb = find(sb);
    CHECK(row.instances_a == 10);
    CHECK(row.instances_b == 30);
    CHECK(row.compute_a == ra.compute_ns);
    CHECK(row.compute_b == rb.compute_ns);
    CHECK(row.wait_b - row.wait_a == rb.wait_ns - ra.wait_ns);
  }
  for (std::size_t i = 1; i < c.kinds.size(); ++i) CHECK(c.kinds[i - 1].impact() >= c.kinds[i].impact());
  REQUIRE(c.locations.size() == 4);
  for (std::size_t i = 1; i < c.locations.size(); ++i)
    CHECK(c.locations[i - 1].impact() >= c.locations[i].impact());
  // Critical-path shares of the kinds sum to 1 in each run.
  double share_a = 0, share_b = 0;
  for (const tf::CompareRow& row : c.kinds) {
    share_a += row.critical_a;
    share_b += row.critical_b;
  }
  CHECK(share_a == Approx(1.0));
  CHECK(share_b == Approx(1.0));
  // A trace against itself: no change anywhere.
  const tf::Comparison same = tf::compare(sa, ta, sa, ta);
  for (const tf::CompareRow& row : same.kinds) CHECK(row.impact() == 0);
  CHECK(tf::render_text(c, a, b).find("stage0") != std::string::npos);
  // 10 against 30 iterations: per iteration, and a verdict on the window per iteration.
  CHECK(c.per_iteration);
  CHECK_FALSE(c.different_graphs);
  const std::string text = tf::render_text(c, a, b);
  CHECK_THAT(text, Catch::Contains("every time below is per iteration"));
  const double wa = double(sa.span_ns) / 10, wb = double(sb.span_ns) / 30;
  CHECK_THAT(text, Catch::StartsWith(wb < wa ? "B was faster per iteration"
                                             : "A was faster per iteration"));
  CHECK_THAT(text, Catch::Contains(
                       fmt::format("{:.1f}% less", 100 * std::abs(wb - wa) / std::max(wa, wb))));
  CHECK(c.reasons.size() == 2);
  CHECK_FALSE(same.per_iteration);
  CHECK_THAT(tf::render_text(same, a, a), Catch::StartsWith("A and B took the same time"));
  // Another graph: warned about on the first lines.
  const std::string d = temp_path("cmp-d");
  {
    Pipeline p(4);
    ordo::Runtime rt({.workers = 2, .trace_path = d});
    rt.run(p.g, 10);
  }
  const tf::Trace td = tf::load({d});
  const tf::Comparison other = tf::compare(sa, ta, tf::summarize(td), td);
  CHECK(other.different_graphs);
  CHECK(other.tasks_a == 3);
  CHECK(other.tasks_b == 4);
  CHECK_FALSE(other.per_iteration);
  CHECK_THAT(tf::render_text(other, a, d),
             Catch::Contains("WARNING: A and B are traces of different graphs (3 tasks against 4"));
  CHECK(tf::kind_of("step[1,2]") == "step");
  CHECK(tf::kind_of("stage0") == "stage0");
}

// The runtime records a name as the program gave it; a Latin-1 one made every JSON output throw
// nlohmann's "invalid UTF-8 byte" at the user. Each byte that is not UTF-8 reads as \xNN.
TEST_CASE("task and location names that are not UTF-8 are escaped in every output", "[trace]") {
  const std::string path = temp_path("latin1");
  {
    ordo::Graph g;
    auto a = g.location<double>("caf\xe9", 4);
    g.task("\xe9t\xe9 \xc3\xa9", {ordo::write(a)},
           [a](ordo::Context& ctx) { ctx.write(a)[0] += 1; });
    ordo::Runtime rt({.workers = 1, .trace_path = path});
    rt.run(g, 2);
  }
  tf::Trace t = tf::load({path});
  bool task = false, location = false;
  for (const auto& r : t.ranks) {
    for (const auto& ti : r.tasks) task = task || ti.name == "\\xE9t\\xE9 \xc3\xa9";
    for (const auto& li : r.locations) location = location || li.name == "caf\\xE9";
  }
  CHECK(task);
  CHECK(location);
  tf::Summary s = tf::summarize(t);
  std::string perfetto, summary;
  REQUIRE_NOTHROW(perfetto = tf::export_perfetto(t, s).dump());
  REQUIRE_NOTHROW(summary = tf::render_json(s, t).dump());
  CHECK(perfetto.find("\\\\xE9t\\\\xE9") != std::string::npos);  // JSON escapes the backslash
  CHECK(nlohmann::json::parse(summary).dump().find("\\\\xE9") != std::string::npos);
  std::string html;
  REQUIRE_NOTHROW(html = tf::export_html(t, s));
  CHECK(html.find("\\\\xE9t\\\\xE9") != std::string::npos);
}

TEST_CASE("a trace is written only onto a regular file, which keeps its mode", "[trace]") {
  // A FIFO at the path is refused before the run, and is still a FIFO after it.
  const std::string fifo = temp_path("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  rtt::RecorderConfig c;
  c.path = fifo;
  c.workers = 1;
  std::string error;
  CHECK(rtt::Recorder::open(c, error) == nullptr);
  CHECK_THAT(error, Catch::Contains("it is a FIFO") && Catch::Contains("regular files"));
  struct stat st {};
  REQUIRE(::stat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  // A private file stays private when the trace replaces it.
  const std::string file = temp_path("private");
  { std::ofstream(file) << "old"; }
  REQUIRE(::chmod(file.c_str(), 0600) == 0);
  {
    TwoTasks two;
    ordo::Runtime rt({.workers = 1, .trace_path = file});
    rt.run(two.g, 1);
  }
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(fs::file_size(file) > 3);  // the trace, not the old bytes
}

TEST_CASE("ordo-trace refuses a FIFO, a directory or a device at once, saying what it is",
          "[trace]") {
  const std::string fifo = temp_path("in-fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(tf::load({fifo}),
                    Catch::Contains("it is a FIFO") && Catch::Contains("not a trace file"));
  // A per-rank name that is a FIFO: opened without blocking, refused.
  const std::string base = temp_path("in-base");
  REQUIRE(::mkfifo((base + ".rank0").c_str(), 0600) == 0);
  CHECK_THROWS_WITH(tf::read_rank(base + ".rank0"), Catch::Contains("it is a FIFO"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  const std::string dir = temp_path("in-dir");
  fs::create_directories(dir);
  CHECK_THROWS_WITH(tf::load({dir}), Catch::Contains("it is a directory"));
  CHECK_THROWS_WITH(tf::load({"/dev/zero"}), Catch::Contains("it is a character device"));
}
