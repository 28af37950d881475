// StarPU's side of ordo-bench-tasks (StarPU 1.3, CPU workers only). Data are registered as
// StarPU variables and every task names its handles with access modes, so StarPU's sequential
// consistency derives the dependencies from the submission order, as ordo's program order does.
//   independent  N tasks without handles; the counter's address travels in cl_arg.
//   chain        one handle x; N tasks with STARPU_RW on x; the task index travels in cl_arg.
//   stencil1d    T handles (tiles); K x T tasks submitted in program order with STARPU_R on
//                tiles i-1 and i+1 and STARPU_RW on tile i (one codelet per shape: left end,
//                middle, right end).
// Timed: registering the data, creating and submitting the tasks, starpu_task_wait_for_all
// and unregistering the data. starpu_init (worker threads) is untimed. The submitting (main)
// thread is not a StarPU worker: with `threads` workers StarPU has one more thread busy while
// tasks are submitted.
#include <sched.h>
#include <starpu.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "bench.hpp"

namespace ordo::bench {

namespace {

// safety: cl_arg carries either a pointer or an integer that fits in one (uintptr_t).
void independent_body(void**, void* arg) { ++*static_cast<std::uint64_t*>(arg); }

void chain_body(void** buffers, void* arg) {
  auto* x = reinterpret_cast<std::uint64_t*>(STARPU_VARIABLE_GET_PTR(buffers[0]));
  *x = chain_step(*x, reinterpret_cast<std::uintptr_t>(arg));
}

std::uint64_t& tile_at(void** buffers, int j) {
  return *reinterpret_cast<std::uint64_t*>(STARPU_VARIABLE_GET_PTR(buffers[j]));
}
void stencil_only(void** b, void*) { tile_at(b, 0) = stencil_step(0, tile_at(b, 0), 0); }
void stencil_left(void** b, void*) {  // buffers: self (RW), right (R)
  tile_at(b, 0) = stencil_step(0, tile_at(b, 0), tile_at(b, 1));
}
void stencil_middle(void** b, void*) {  // buffers: left (R), self (RW), right (R)
  tile_at(b, 1) = stencil_step(tile_at(b, 0), tile_at(b, 1), tile_at(b, 2));
}
void stencil_right(void** b, void*) {  // buffers: left (R), self (RW)
  tile_at(b, 1) = stencil_step(tile_at(b, 0), tile_at(b, 1), 0);
}

starpu_codelet codelet(const char* name, starpu_cpu_func_t fn,
                       std::initializer_list<starpu_data_access_mode> modes) {
  starpu_codelet cl{};
  cl.where = STARPU_CPU;
  cl.cpu_funcs[0] = fn;
  cl.nbuffers = static_cast<int>(modes.size());
  int j = 0;
  for (auto m : modes) cl.modes[j++] = m;
  cl.name = name;
  return cl;
}

void check_ret(int ret, const char* what) {
  if (ret != 0)
    throw std::runtime_error(std::string("StarPU: ") + what + " failed (" + std::to_string(ret) +
                             ")");
}

class StarpuSystem final : public System {
 public:
  explicit StarpuSystem(unsigned threads) {
    // StarPU's workers inherit the caller's policy and spin without yielding; under a
    // real-time policy with no core left for the submitting thread neither side ever runs
    // the other (`chrt -f 10` with 2 workers on 2 cores hung for good), so skip instead.
    const int policy = sched_getscheduler(0);
    if ((policy == SCHED_FIFO || policy == SCHED_RR) &&
        threads >= std::thread::hardware_concurrency())
      throw std::runtime_error(
          "StarPU's " + std::to_string(threads) + " spinning workers and the submitting "
          "thread under a real-time policy (chrt) need more than the " +
          std::to_string(std::thread::hardware_concurrency()) +
          " hardware threads, or the run never ends: measure StarPU at that thread count "
          "without chrt, or with fewer --threads");
    setenv("STARPU_SILENT", "1", 0);  // no banner; a user's own setting wins
    starpu_conf conf;
    starpu_conf_init(&conf);
    conf.precedence_over_environment_variables = 1;  // STARPU_NCPU must not change `threads`
    conf.ncpus = static_cast<int>(threads);
    conf.ncuda = 0;
    conf.nopencl = 0;
    conf.nmic = 0;
    conf.nmpi_ms = 0;
    int ret = starpu_init(&conf);
    if (ret != 0)
      throw std::runtime_error("starpu_init failed (" + std::to_string(ret) +
                               "); StarPU found no usable CPU worker");
  }
  ~StarpuSystem() override { starpu_shutdown(); }
  StarpuSystem(const StarpuSystem&) = delete;
  StarpuSystem& operator=(const StarpuSystem&) = delete;

 private:

  static void submit(starpu_codelet* cl, void* arg, std::initializer_list<starpu_data_handle_t> h) {
    starpu_task* task = starpu_task_create();  // destroyed by StarPU once it has run
    task->cl = cl;
    task->cl_arg = arg;
    int j = 0;
    for (auto handle : h) task->handles[j++] = handle;
    check_ret(starpu_task_submit(task), "starpu_task_submit");
  }

  double independent(const Sizes& s) override {
    std::vector<std::uint64_t> counters(s.independent, 0);
    auto t0 = Clock::now();
    for (std::uint64_t i = 0; i < s.independent; ++i) submit(&cl_independent_, &counters[i], {});
    check_ret(starpu_task_wait_for_all(), "starpu_task_wait_for_all");
    double secs = since(t0);
    check_independent("starpu", counters);
    return secs;
  }

  double chain(const Sizes& s, const Expected& e) override {
    std::uint64_t x = 0;
    auto t0 = Clock::now();
    starpu_data_handle_t h;
    starpu_variable_data_register(&h, STARPU_MAIN_RAM, reinterpret_cast<std::uintptr_t>(&x),
                                  sizeof x);
    for (std::uint64_t i = 0; i < s.chain; ++i)
      submit(&cl_chain_, reinterpret_cast<void*>(static_cast<std::uintptr_t>(i)), {h});
    check_ret(starpu_task_wait_for_all(), "starpu_task_wait_for_all");
    starpu_data_unregister(h);  // brings x back to main memory
    double secs = since(t0);
    check_chain("starpu", x, e);
    return secs;
  }

  double stencil(const Sizes& s, const Expected& e) override {
    std::vector<Tile> tiles(s.tiles);
    const std::uint32_t n = s.tiles;
    std::vector<starpu_data_handle_t> h(n);
    auto t0 = Clock::now();
    for (std::uint32_t i = 0; i < n; ++i)
      starpu_variable_data_register(&h[i], STARPU_MAIN_RAM,
                                    reinterpret_cast<std::uintptr_t>(&tiles[i].v),
                                    sizeof tiles[i].v);
    for (std::uint32_t k = 0; k < s.iterations; ++k)
      for (std::uint32_t i = 0; i < n; ++i) {
        if (n == 1)
          submit(&cl_only_, nullptr, {h[i]});
        else if (i == 0)
          submit(&cl_left_, nullptr, {h[i], h[i + 1]});
        else if (i + 1 == n)
          submit(&cl_right_, nullptr, {h[i - 1], h[i]});
        else
          submit(&cl_middle_, nullptr, {h[i - 1], h[i], h[i + 1]});
      }
    check_ret(starpu_task_wait_for_all(), "starpu_task_wait_for_all");
    for (auto handle : h) starpu_data_unregister(handle);
    double secs = since(t0);
    std::vector<std::uint64_t> result(n);
    for (std::uint32_t i = 0; i < n; ++i) result[i] = tiles[i].v;
    check_stencil("starpu", result, e);
    return secs;
  }

  starpu_codelet cl_independent_ = codelet("independent", independent_body, {});
  starpu_codelet cl_chain_ = codelet("chain", chain_body, {STARPU_RW});
  starpu_codelet cl_only_ = codelet("stencil_only", stencil_only, {STARPU_RW});
  starpu_codelet cl_left_ = codelet("stencil_left", stencil_left, {STARPU_RW, STARPU_R});
  starpu_codelet cl_middle_ =
      codelet("stencil_middle", stencil_middle, {STARPU_R, STARPU_RW, STARPU_R});
  starpu_codelet cl_right_ = codelet("stencil_right", stencil_right, {STARPU_R, STARPU_RW});
};

}  // namespace

std::unique_ptr<System> make_starpu(unsigned threads) {
  return std::make_unique<StarpuSystem>(threads);
}

}  // namespace ordo::bench
