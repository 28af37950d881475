#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include <ordo/bench.hpp>
#include "api/checkpoint.hpp"
#include "api/errors.hpp"
#include "api/graph_impl.hpp"
#include "api/settings.hpp"
#include "runtime/clock_sync.hpp"
#include "runtime/comm_net.hpp"
#include "runtime/job_plane.hpp"
#include "runtime/storage.hpp"
#include "runtime/trace.hpp"
#include "scheduler/fiber.hpp"
#include "scheduler/pool.hpp"

namespace ordo {

namespace {

// The fiber stack pool: checked when the Runtime is built, so a bad size fails early. No stack
// is mapped until a fiber task runs.
std::unique_ptr<sched::StackPool> make_stacks(std::size_t size) {
  try {
    return std::make_unique<sched::StackPool>(size);
  } catch (const std::invalid_argument& e) {
    throw Error(std::string(e.what()) + " (RuntimeOptions::fiber_stack_size or ORDO_FIBER_STACK)");
  }
}

// The path this process's next Runtime traces to when asked for `base`: `base` for the
// first, `base.runtime<n>` for the n-th after it, so that no Runtime's trace replaces
// another's (the one destroyed last would otherwise win). Said on stderr when it happens.
std::string trace_base_for(const std::string& base) {
  static std::mutex mutex;
  static std::map<std::string, unsigned> uses;
  std::error_code ec;
  std::filesystem::path key = std::filesystem::absolute(base, ec);
  const std::lock_guard<std::mutex> lock(mutex);
  const unsigned n = ++uses[ec ? base : key.lexically_normal().string()];
  if (n == 1) return base;
  const std::string mine = base + ".runtime" + std::to_string(n);
  std::fprintf(stderr,
               "ordo: trace: an earlier Runtime of this process traces to '%s'; this one "
               "writes '%s'\n",
               base.c_str(), mine.c_str());
  return mine;
}

// The bootstrap the launcher's variables name (single process: rank 0 of 1).
std::unique_ptr<comm::Bootstrap> bootstrap(const detail::Settings& s) {
  try {
    return comm::Bootstrap::create(s.launch, s.startup_timeout);
  } catch (const comm::CommError& e) {
    throw Error(std::string("cannot connect to the other ranks: ") + e.what() +
                ". Start every rank the same way (ordorun -n N prog, mpirun, srun --mpi=pmix)");
  }
}

// The transport when this process is one rank of several (ordorun, mpirun, srun), else null;
// `boot` is then the net's, else it is left to the caller.
std::shared_ptr<rt::CommNet> connect_ranks(std::unique_ptr<comm::Bootstrap>& boot,
                                           const detail::Settings& s) {
  if (boot->size() <= 1) return nullptr;
  try {
    return std::make_shared<rt::CommNet>(std::move(boot), s.transport);
  } catch (const comm::CommError& e) {
    throw Error(std::string("cannot connect to the other ranks: ") + e.what() +
                ". Start every rank the same way (ordorun -n N prog, mpirun, srun --mpi=pmix)");
  }
}

// The workers' config: the settings', with this process's share of the host's cores from the
// bootstrap (without it every rank of a one-host job would bind its workers to the same first
// cores).
sched::PoolConfig workers_config(const detail::Settings& s, const comm::Bootstrap& boot) {
  sched::PoolConfig c = s.pool;
  c.share_index = static_cast<unsigned>(boot.local_rank());
  c.share_count = static_cast<unsigned>(boot.local_size());
  return c;
}

// What the start-up clock measurement found (rt::ClockSync), where it measured one.
void report_clock(const rt::CommNet& net, const detail::Settings& s) {
  const std::string report =
      rt::clock_report(net.clock_offset(), s.pool.verbose, !s.trace_path.empty());
  if (!report.empty()) std::fputs(report.c_str(), stderr);
}

}  // namespace

struct Runtime::Impl {
  explicit Impl(const RuntimeOptions& o) : Impl(detail::resolve(o)) {}
  explicit Impl(const detail::Settings& s) : Impl(s, bootstrap(s)) {}
  Impl(const detail::Settings& s, std::unique_ptr<comm::Bootstrap> boot)
      : settings(s),
        // Before the ranks connect: a rank 0 that refuses the directory then leaves no rank
        // waiting for it in a run.
        checkpoint_lock(s.checkpoint_dir.empty()
                            ? detail::CheckpointLock{}
                            : detail::prepare_checkpoint_dir(s.checkpoint_dir, boot->rank() == 0)),
        checkpoint_writer(
            s.checkpoint_dir.empty()
                ? nullptr
                : std::make_unique<detail::CheckpointWriter>(detail::CheckpointPolicy{
                      s.checkpoint_dir, detail::checkpoint_keep_setting(),
                      detail::checkpoint_copy_setting(), detail::checkpoint_keep_going_setting()})),
        stacks(make_stacks(s.fiber_stack_size)),
        pool_config(workers_config(s, *boot)),
        net(connect_ranks(boot, s)),
        lone_launch(std::move(boot)),
        pool(pool_config) {
    // Idle workers drive the transport (rt::CommNet): the net outlives the pool (members).
    if (net) pool.set_poller(net.get());
    if (checkpoint_writer) checkpoint_writer->set_copy_threads(pool.size());
    if (net) job = std::make_unique<rt::JobPlane>(*net);
    if (net) report_clock(*net, s);
    if (s.trace_path.empty()) return;
    rt::trace::RecorderConfig config;
    config.rank = net ? net->rank() : 0;
    config.ranks = net ? net->size() : 1;
    config.path =
        rt::trace::Recorder::rank_path(trace_base_for(s.trace_path), config.rank, config.ranks);
    config.workers = pool.size();
    config.buffer_events = s.trace_buffer_events;
    config.run_id = net ? net->job_id() : 0;
    std::string error;
    recorder = rt::trace::Recorder::open(config, error);
    if (!recorder)
      throw Error(error + "; give a writable path with --trace FILE or ORDO_TRACE, or unset "
                          "ORDO_TRACE to run without tracing");
    // Every rank's times on rank 0's steady clock: the epoch gives this rank's steady clock,
    // the offset measured by the transport at start-up (about 0 between ranks of one host)
    // takes it to rank 0's.
    if (net)
      recorder->set_clock_offset(static_cast<std::int64_t>(recorder->epoch_ns()) +
                                 net->clock_offset_ns());
    pool.set_observer(recorder.get());
  }
  // The words for a collective call on `g` in the ranks' run-start agreement: `call` (or what
  // the graph's first run stands for, a gather's) and the graph's number, its channel (the
  // one it has, or the one its first run gives it: every rank numbers graphs alike).
  std::string describe(const detail::GraphImpl& g, const std::string& call) const {
    if (!g.collective.empty() && !g.engine) return g.collective;
    return call + " on graph " + std::to_string(g.engine ? g.channel : next_channel);
  }
  // The run-start agreement across ranks (rt::JobPlane); nothing in one process. Throws
  // GraphMismatch on every rank, naming both calls, when the ranks' calls differ, and the
  // job's failure (a rank lost or gone) as the typed error.
  void agree(const std::string& call) {
    if (!job) return;
    std::optional<std::string> difference;
    try {
      difference = job->agree(call);
    } catch (const rt::RunError& e) {
      detail::throw_typed(e);
    }
    if (difference) throw GraphMismatch(*difference);
  }
  // A collective call's start, before its graph's engine exists: the agreement must come
  // first then, since building an engine already talks on the graph's own channel. True when
  // it was made here (the run then starts with a plain barrier, once the engine is built).
  bool agree_before_building(const detail::GraphImpl& g, const std::string& call) {
    if (g.engine) return false;
    agree(call);
    return true;
  }

  // Runs `body` on `engine` with tracing around it when it is on: the file is complete
  // (flushed, end record) when the run returns, also when a body threw. `call`: the run's
  // words for the agreement; null when it was made before the engine was built.
  template <class F>
  std::uint64_t traced(Graph& graph, rt::Engine& engine, std::uint64_t iterations,
                       const std::string* call, F&& body) {
    // Across ranks every run starts with the agreement (or, at a graph's first run, a
    // barrier), traced or not (so ranks that disagree on tracing cannot pair it with another
    // control round): once it returns, every rank's recorder is attached before any rank's
    // first GRANT of the run can reach it.
    auto start = [&] {
      if (call)
        agree(*call);
      else
        engine.barrier();
    };
    if (!recorder) {
      start();
      return body();
    }
    rt::trace::Placement place;  // where tasks run and locations live, for minimum bytes
    const rt::Graph& g = detail::impl_of(graph).graph;
    for (std::uint32_t l = 0; l < g.locations().size(); ++l)
      place.location_home.push_back(engine.home(l));
    for (std::uint32_t t = 0; t < g.task_count(); ++t)
      place.task_rank.push_back(engine.task_rank(t));
    recorder->begin_run(g, detail::impl_of(graph).serial, iterations, &place);
    // Attached for this run only: a graph may outlive this Runtime and its recorder.
    engine.set_trace(recorder.get());
    std::uint64_t done = 0;
    try {
      start();
      done = body();
    } catch (...) {
      engine.set_trace(nullptr);
      recorder->end_run(engine.iterations_done());
      throw;
    }
    engine.set_trace(nullptr);
    recorder->end_run(done);
    return done;
  }

  // The engine's pause that writes the checkpoints (none when they are off); a failed one
  // ends the run and is thrown by checked().
  std::optional<rt::Engine::Pause> checkpoints(Graph& graph, rt::Engine& engine,
                                               std::uint64_t iterations) {
    checkpoint_error.clear();
    if (!checkpoint_writer) return std::nullopt;
    const rt::Graph& g = detail::impl_of(graph).graph;
    const std::uint64_t at = g.first_iteration() + engine.iterations_done();
    const std::uint64_t every = settings.checkpoint_every;
    if (every > 0 && (at / every + 1) * every - at <= iterations)  // this run pauses
      checkpoint_writer->reserve_copy(engine, g);
    rt::Engine::Pause p;
    p.every = settings.checkpoint_every;
    p.at = [this, &graph, &engine](std::uint64_t iteration) {
      checkpoint_error =
          checkpoint_writer->at_pause(engine, detail::impl_of(graph).graph, iteration);
      return checkpoint_error.empty();
    };
    return p;
  }
  // Runs `run` (the engine's run with the pause above): a checkpoint still being written when
  // it returns is completed (every rank, collective), and abandoned when the run failed.
  template <class F>
  std::uint64_t checked(rt::Engine& engine, F&& run) {
    std::uint64_t iterations = 0;
    try {
      iterations = run();
    } catch (...) {
      if (checkpoint_writer) checkpoint_writer->abandon();
      throw;
    }
    if (checkpoint_error.empty() && checkpoint_writer)
      checkpoint_error = checkpoint_writer->finish(engine);
    if (!checkpoint_error.empty()) {
      checkpoint_writer->abandon();
      throw Error(checkpoint_error);
    }
    return iterations;
  }

  // ORDO_VERBOSE: how many ranks this one talked to (endpoints are made on first use, so its
  // control-plane tree and graph neighbours; docs/distributed.md), when it is done.
  ~Impl() {
    // This rank leaves the job now, also when a graph keeps the net longer: a rank that still
    // expects this one in a collective fails at once, naming it (rt::CommNet, "Leaving").
    if (net) net->leave();
    if (lone_launch) lone_launch->finished();
    if (net && settings.pool.verbose)
      std::fprintf(stderr,
                   "ordo: endpoints: this rank opened %zu, to %u other rank(s); it holds %zu "
                   "rank address(es)\n",
                   net->endpoint_count(), net->size() - 1, net->addresses_held());
  }

  detail::Settings settings;
  detail::CheckpointLock checkpoint_lock;
  // After the lock: its thread ends before the lock goes.
  std::unique_ptr<detail::CheckpointWriter> checkpoint_writer;
  std::string checkpoint_error;
  // Declared before the pool: destroyed after it, so the workers (fibers' stacks, the last
  // unparks recorded when the pool stops) still find them.
  std::unique_ptr<sched::StackPool> stacks;
  sched::PoolConfig pool_config;
  std::shared_ptr<rt::CommNet> net;  // null in a single-process job
  std::unique_ptr<rt::JobPlane> job;  // with `net`: the run-start agreement
  // A job of one rank under ordorun has no net, but keeps its bootstrap: its lifeline to the
  // launcher ends the rank when ordorun is killed, as it ends the ranks of a larger job.
  // Without it a busy rank of `ordorun -n 1` lived on as an orphan.
  std::unique_ptr<comm::Bootstrap> lone_launch;
  std::uint32_t next_channel = 0;    // graphs get channels in SPMD order (first runs)
  std::unique_ptr<rt::trace::Recorder> recorder;
  sched::Pool pool;
};

namespace {

// A collective call from a task body would wait for workers that include its own.
void refuse_in_body(const char* what) {
  if (sched::Pool::current_worker() >= 0)
    throw Error(std::string(what) +
                " called from inside a task body; a body cannot run a "
                "graph (it would wait for workers that include itself). Run graphs from "
                "outside any task");
}

// Holds a graph for one run: a Graph runs on one Runtime at a time (its engine's state is one
// run's), and a second run begun meanwhile, from another Runtime or thread, is refused before
// it touches the engine.
class RunClaim {
 public:
  explicit RunClaim(detail::GraphImpl& g) : g_(g) {
    // acquire: pairs with the release below, so this run sees what the previous one left.
    if (g.in_use.exchange(true, std::memory_order_acquire))
      throw Error(
          "this graph is running already (on another Runtime, or from another thread); "
          "a graph runs on one Runtime at a time: wait for that run to return, or give "
          "each Runtime a graph of its own");
  }
  ~RunClaim() { g_.in_use.store(false, std::memory_order_release); }
  RunClaim(const RunClaim&) = delete;
  RunClaim& operator=(const RunClaim&) = delete;

 private:
  detail::GraphImpl& g_;
};

rt::Engine& prepare_run(Graph& graph, const std::shared_ptr<rt::CommNet>& net,
                        std::uint32_t& next_channel, bool share_memory) {
  refuse_in_body("Runtime::run");
  detail::GraphImpl& g = detail::impl_of(graph);
  if (!g.engine && net) {
    g.prepare(net, next_channel++, share_memory);
  } else if (g.engine && g.net != std::static_pointer_cast<rt::Net>(net)) {
    throw Error("this graph ran on another Runtime spread over other ranks; run it on that one");
  }
  rt::Engine& engine = g.prepare();
  // Bad input, not a failure of the run: the same refusal on every rank, before anything ran.
  if (!engine.storage_error().empty()) throw Error(engine.storage_error());
  if (engine.broken())
    throw Error("this graph's previous run failed (a task body threw, or a rank failed), so its "
                "locations hold a partial iteration; build the graph anew to run again");
  return engine;
}

// Runs `run`, turning the engine's failures across ranks into the public types; a body's own
// exception passes as it was.
template <class F>
std::uint64_t failing_typed(F&& run) {
  try {
    return run();
  } catch (const rt::RunError& e) {
    detail::throw_typed(e);
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// The scheduler reports a bad ORDO_PUS as std::invalid_argument; the public face is Error.
Runtime::Runtime(RuntimeOptions options) try : impl_(std::make_unique<Impl>(options)) {
} catch (const std::invalid_argument& e) {
  throw Error(e.what());
}
Runtime::~Runtime() = default;

unsigned Runtime::workers() const { return impl_->pool.size(); }
unsigned Runtime::numa_nodes() const { return impl_->pool.nodes(); }
unsigned Runtime::rank() const { return impl_->net ? impl_->net->rank() : 0; }

void Runtime::check_memory_on_all_ranks(std::uint64_t bytes, const std::string& what) {
  if (!impl_->net) return ::ordo::check_memory_available(bytes, what);
  // Two rounds, as the first run's check of a graph's locations (runtime/engine_storage.cpp):
  // every rank's need, summed per host, then every rank's verdict, so all refuse alike. Each
  // round is a gather, whose graph check refuses ranks that are not all in it.
  std::vector<std::uint64_t> needs;
  std::vector<rt::StorageVerdict> verdicts;
  rt::StorageVerdict mine;
  try {
    needs = gather_values(bytes);
    mine.more = mine.total = mine.host_more = bytes;
    mine.available = rt::memory_available();
    for (unsigned p = 0; p < needs.size(); ++p)
      if (p != rank() && impl_->net->same_host(p)) mine.host_more += needs[p];
    verdicts = gather_values(mine);
  } catch (const Error& e) {
    throw Error("Runtime::check_memory_on_all_ranks (" + what +
                ") is collective: every rank must call it at the same point of the program; " +
                std::string(e.what()));
  }
  const std::string refusal = rt::memory_refusal(
      verdicts, what + " do not fit in memory: ", [](const rt::StorageVerdict& v) {
        return rt::format_bytes(v.more);
      });
  if (!refusal.empty()) throw Error(refusal);
}
unsigned Runtime::ranks() const { return impl_->net ? impl_->net->size() : 1; }
std::uint64_t bench::control_messages(const Runtime& runtime) {
  return runtime.impl_->net ? runtime.impl_->net->control_messages_sent() : 0;
}

bench::BytesSent bench::bytes_sent(const Graph& graph) {
  const detail::GraphImpl& g = detail::impl_of(graph);
  if (!g.engine) return {};
  return {g.engine->payload_bytes(false), g.engine->payload_bytes(true)};
}

RunStats Runtime::run(Graph& graph, std::uint64_t iterations) {
  if (iterations == 0)
    throw Error("zero iterations requested; ask Runtime::run for at least one iteration");
  refuse_in_body("Runtime::run");
  detail::GraphImpl& g = detail::impl_of(graph);
  RunClaim claim(g);
  const std::string call =
      impl_->describe(g, "Runtime::run for " + std::to_string(iterations) + " iteration(s)");
  const bool agreed = impl_->agree_before_building(g, call);
  rt::Engine& engine = prepare_run(graph, impl_->net, impl_->next_channel, impl_->settings.shared_memory);
  auto t0 = std::chrono::steady_clock::now();
  RunStats stats;
  const auto pause = impl_->checkpoints(graph, engine, iterations);
  stats.iterations = impl_->checked(engine, [&] {
    return failing_typed([&] {
      return impl_->traced(graph, engine, iterations, agreed ? nullptr : &call, [&] {
        return engine.run(impl_->pool, iterations, {}, 0, impl_->stacks.get(),
                          pause ? &*pause : nullptr);
      });
    });
  });
  stats.seconds = seconds_since(t0);
  return stats;
}

RunStats Runtime::run_until(Graph& graph, const Until& until) {
  if (!until.done) throw Error("Until::done is empty; give the stop condition as a callable");
  if (until.max_iterations == 0)
    throw Error("Until::max_iterations is 0; allow at least one iteration");
  if (until.check_every == 0)
    throw Error("Until::check_every is 0; check at least every iteration (1)");
  refuse_in_body("Runtime::run_until");
  detail::GraphImpl& g = detail::impl_of(graph);
  RunClaim claim(g);
  const std::string call =
      impl_->describe(g, "Runtime::run_until for at most " + std::to_string(until.max_iterations) +
                             " iteration(s), checked every " + std::to_string(until.check_every));
  const bool agreed = impl_->agree_before_building(g, call);
  rt::Engine& engine = prepare_run(graph, impl_->net, impl_->next_channel, impl_->settings.shared_memory);
  // A condition that lists its reads is tested in the dataflow (docs/convergence.md), where it
  // may read those reductions' values only.
  std::optional<rt::Engine::Decision> decision;
  std::vector<std::uint32_t> results;
  if (!until.reads.empty()) {
    decision.emplace();
    for (const Access& a : until.reads) {
      const std::uint32_t r = detail::condition_reduction(g, a);
      decision->reductions.push_back(r);
      results.push_back(g.graph.reductions()[r].result);
    }
    decision->test = [&](std::uint64_t) {
      const detail::ConditionScope scope{&g, &results};
      const detail::ConditionScope* outer = detail::tl_condition;
      detail::tl_condition = &scope;
      try {
        const bool stop = until.done(graph);
        detail::tl_condition = outer;
        return stop;
      } catch (...) {
        detail::tl_condition = outer;
        throw;
      }
    };
  }
  auto t0 = std::chrono::steady_clock::now();
  RunStats stats;
  const auto pause = impl_->checkpoints(graph, engine, until.max_iterations);
  stats.iterations = impl_->checked(engine, [&] {
    return failing_typed([&] {
      return impl_->traced(graph, engine, until.max_iterations, agreed ? nullptr : &call, [&] {
        if (decision)
          return engine.run(impl_->pool, until.max_iterations, {}, until.check_every,
                            impl_->stacks.get(), pause ? &*pause : nullptr, &*decision);
        return engine.run(
            impl_->pool, until.max_iterations, [&](std::uint64_t) { return until.done(graph); },
            until.check_every, impl_->stacks.get(), pause ? &*pause : nullptr);
      });
    });
  });
  stats.seconds = seconds_since(t0);
  return stats;
}

void Runtime::abort(const std::string& message, int status) {
  if (status < 1 || status > 125)
    throw Error("Runtime::abort: exit status " + std::to_string(status) +
                " is not in 1-125; "
                "give a status a shell reads as a failure");
  if (impl_->net) impl_->net->abort_job(message, status);
  const std::string text =
      "ordo: rank " + std::to_string(rank()) + " aborted the job: " + message + "\n";
  std::fflush(nullptr);
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
  std::_Exit(status);
}

std::uint64_t Runtime::restart(Graph& graph, const std::string& dir) {
  if (sched::Pool::current_worker() >= 0)
    throw Error("Runtime::restart called from inside a task body; restart from outside any task");
  detail::GraphImpl& g = detail::impl_of(graph);
  RunClaim claim(g);
  if (g.engine)
    throw Error("Runtime::restart: this graph has run already; restart a graph before its "
                "first run");
  if (dir.empty()) throw Error("Runtime::restart: the checkpoint directory is empty; name one");
  std::string error;
  auto check = [&g](const rt::Engine& engine, rt::Graph& graph) {
    for (const auto& c : g.restored_checks)
      if (std::string e = c(engine, graph); !e.empty()) return e;
    return std::string();
  };
  auto load = [&](rt::Engine& engine) {
    error = detail::load_checkpoint(engine, g.graph, dir, check);
    return error.empty();
  };
  // Before the engine is built, as at a first run; a graph the ranks built differently is
  // reported by the first run, as without a restart.
  impl_->agree(impl_->describe(g, "Runtime::restart from '" + dir + "'"));
  if (impl_->net)
    g.prepare(impl_->net, impl_->next_channel++, impl_->settings.shared_memory, load);
  else
    g.prepare(nullptr, 0, false, load);
  if (!error.empty()) throw Error("cannot restart: " + error);
  return g.graph.first_iteration();
}

}  // namespace ordo
