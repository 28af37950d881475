// Tracing: the recorder writes exactly the expected events for a known graph, the tool's
// figures match what this test recomputes from the decoded events, the Perfetto export is
// well-formed, multi-rank merges respect clock offsets, and bad files are refused clearly.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include <cstdio>
#include <cstdlib>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <ordo/ordo.hpp>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <unistd.h>
#include <vector>

#include "analysis.hpp"
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
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::pair<std::int64_t, std::int64_t>> inst_wait;
  std::uint64_t flushes = 0;
  for (const tf::Event& e : r.events) {
    auto k = std::make_pair(e.task, e.arg0);
    if (e.k() == tf::Kind::task_begin) {
      inst[k].first = static_cast<std::int64_t>(e.time);
      where[k] = e.worker;
    } else if (e.k() == tf::Kind::task_end) {
      inst[k].second = static_cast<std::int64_t>(e.time);
    } else if (e.k() == tf::Kind::grant) {
      auto& w = inst_wait.try_emplace(k, static_cast<std::int64_t>(e.arg1), 0).first->second;
      w.second = std::max(w.second, static_cast<std::int64_t>(e.time));
    } else if (e.k() == tf::Kind::flush && e.worker < r.workers) {
      ++flushes;
    }
  }
  CHECK(flushes > 0);
  REQUIRE(inst.size() == std::size_t(stages * iters));  // nothing lost across flushes
  // A location's grants are those of instances that ran (the last ones may grant an instance
  // of the next step, which the iteration gate holds).
  for (const tf::Event& e : r.events)
    if (e.k() == tf::Kind::grant && inst.count({e.task, e.arg0})) {
      ++grants[e.location];
      loc_wait[e.location] += static_cast<std::int64_t>(e.time - e.arg1);
    }
  std::map<std::uint32_t, std::int64_t> wait;
  for (auto& [k, be] : inst) {
    compute[k.first] += be.second - be.first;
    busy[where[k]] += be.second - be.first;
    ++count[where[k]];
    auto w = inst_wait.find(k);
    if (w != inst_wait.end()) wait[k.first] += w->second.second - w->second.first;
  }
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
  // The critical path is a chain: each instance begins after its predecessor ends.
  REQUIRE_FALSE(s.critical_path.empty());
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < s.critical_path.size(); ++i) {
    sum += s.critical_path[i]->end - s.critical_path[i]->begin;
    if (i) CHECK(s.critical_path[i - 1]->end <= s.critical_path[i]->begin);
  }
  CHECK(sum == s.critical_ns);
  // A pipeline's chain covers at least one instance of every stage.
  std::set<std::uint32_t> on_path;
  for (auto* in : s.critical_path) on_path.insert(in->task);
  CHECK(on_path.size() == std::size_t(stages));
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
      if (rank == 0) {
        ev(rtt::Kind::task_begin, at, 0, rtt::kNone, 0);
        ev(rtt::Kind::task_end, at + 10'000, 0, rtt::kNone, 0);
        ev(rtt::Kind::send, at + 11'000, 0, 1, std::uint64_t(i));          // halo to rank 1
        ev(rtt::Kind::receive, at + 60'000, 0, 1, 1000 + std::uint64_t(i));  // ack from 1
      } else {
        ev(rtt::Kind::receive, at + 13'000, 1, 0, std::uint64_t(i));
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

TEST_CASE("several runs and graphs share one file, which is complete after every run",
          "[trace]") {
  const std::string path = temp_path("runs");
  ::setenv("ORDO_TRACE_BUFFER", "3", 1);  // flushes all the time, from every worker
  {
    ordo::Runtime rt({.workers = 3, .trace_path = path});
    ::unsetenv("ORDO_TRACE_BUFFER");
    Pipeline p(3);
    rt.run(p.g, 4);
    CHECK(tf::summarize(tf::load({path})).instances.size() == 12);  // readable mid-life
    TwoTasks two;
    ordo::Until until;
    until.done = [&](const ordo::Graph& g) { return g.data(two.b)[0] >= 3; };
    CHECK(rt.run_until(two.g, until).iterations == 3);
    rt.run(p.g, 2);
  }
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

TEST_CASE("the critical path follows every holder of the previous phase, not only the last "
          "releaser",
          "[trace]") {
  // Synthetic: heavy and light read x together, then writer writes x; light releases last
  // but heavy computes longest. heavy#1 -> writer#1 must be on the path.
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
  // Iteration 0's read phase was granted before the run (not recorded): light#0 -> writer#0
  // is all that is known there. From iteration 1 on, the whole phase counts.
  const std::vector<std::pair<std::uint32_t, std::uint64_t>> want = {
      {1, 0}, {2, 0}, {0, 1}, {2, 1}};
  CHECK(path_got == want);
  CHECK(s.critical_ns == 500 + 500 + 3'000 + 500);
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
