#include "runtime/trace.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "runtime/regular_file.hpp"

namespace ordo::rt::trace {

namespace {

std::uint64_t steady_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

void put_u32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void put_u64(std::vector<std::uint8_t>& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void put_str(std::vector<std::uint8_t>& out, const std::string& s) {
  put_u32(out, static_cast<std::uint32_t>(s.size()));
  out.insert(out.end(), s.begin(), s.end());
}

// Spin flag of one buffer. acquire pairs with the release in unlock, so the next holder sees
// the previous holder's writes to the buffer.
void lock(std::atomic<bool>& busy) {
  while (busy.exchange(true, std::memory_order_acquire))
    while (busy.load(std::memory_order_relaxed)) std::this_thread::yield();
}
void unlock(std::atomic<bool>& busy) { busy.store(false, std::memory_order_release); }

}  // namespace

std::string Recorder::rank_path(const std::string& base, unsigned rank, unsigned ranks) {
  if (ranks <= 1) return base;
  return base + ".rank" + std::to_string(rank);
}

std::unique_ptr<Recorder> Recorder::open(const RecorderConfig& config, std::string& error) {
  if (config.buffer_events < 2) {
    error = "trace buffer of " + std::to_string(config.buffer_events) +
            " events is too small; use at least 2";
    return nullptr;
  }
  if (const std::string why = files::output_refusal(config.path); !why.empty()) {
    error = "cannot create trace file '" + config.path + "': " + why;
    return nullptr;
  }
  // Beside the path (the rename must not cross file systems), under a name no other process
  // picks: O_EXCL, and a random nonce.
  std::string temporary;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 8; ++attempt) {
    std::uint64_t nonce = 0;
    if (::getrandom(&nonce, sizeof nonce, 0) != static_cast<ssize_t>(sizeof nonce))
      nonce = (std::uint64_t(::getpid()) << 32) ^ steady_ns() ^ std::uint64_t(attempt);
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(nonce));
    temporary = config.path + ".tmp-" + hex;
    fd = ::open(temporary.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) break;
  }
  std::FILE* f = fd < 0 ? nullptr : ::fdopen(fd, "w+b");
  if (!f) {
    error = "cannot create trace file '" + config.path + "' (its temporary '" + temporary +
            "'): " + std::strerror(errno);
    if (fd >= 0) {
      ::close(fd);
      ::unlink(temporary.c_str());
    }
    return nullptr;
  }
  std::unique_ptr<Recorder> rec(new Recorder(config, f, temporary));
  rec->write_header();
  if (std::ferror(f)) {
    error = "cannot write trace file '" + config.path + "' (its temporary '" + temporary + "')";
    std::fclose(rec->file_);
    rec->file_ = nullptr;  // nothing to publish
    ::unlink(temporary.c_str());
    return nullptr;
  }
  return rec;
}

Recorder::Recorder(const RecorderConfig& config, std::FILE* file, std::string temporary)
    : file_(file),
      path_(config.path),
      temporary_(std::move(temporary)),
      workers_(config.workers),
      rank_(config.rank),
      ranks_(config.ranks),
      capacity_(config.buffer_events),
      epoch_ns_(steady_ns()),
      clock_offset_ns_(config.clock_offset_ns),
      run_id_(config.run_id),
      buffers_(new Buffer[config.workers + 1]) {
  for (unsigned i = 0; i <= workers_; ++i) buffers_[i].events.reset(new Event[capacity_]);
}

Recorder::~Recorder() {
  if (!file_) return;  // open() failed
  flush_all();
  std::lock_guard lock(file_mu_);
  write_end();
  write_header();
  publish();
}

void Recorder::publish() {
  std::string why;
  if (std::fflush(file_) != 0 || std::ferror(file_))
    why = std::string("a write failed: ") + std::strerror(errno);
  else if (::fsync(::fileno(file_)) != 0)
    why = std::string("fsync: ") + std::strerror(errno);
  if (std::fclose(file_) != 0 && why.empty()) why = std::string("close: ") + std::strerror(errno);
  file_ = nullptr;
  // Checked again now: what the path names may have changed during the run.
  if (why.empty()) why = files::output_refusal(path_);
  if (why.empty() && !files::keep_mode(temporary_, path_))
    why = std::string("chmod: ") + std::strerror(errno);
  if (why.empty() && ::rename(temporary_.c_str(), path_.c_str()) != 0)
    why = std::string("rename: ") + std::strerror(errno);
  if (!why.empty()) {
    ::unlink(temporary_.c_str());
    std::fprintf(stderr, "ordo: the trace was not written to '%s' (%s); the previous file, if any, "
                 "is unchanged\n", path_.c_str(), why.c_str());
    return;
  }
  // The rename is durable once the directory's entry is on disk.
  const std::size_t slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path_.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void Recorder::write_header() {
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof h.magic);
  h.version = kFormatVersion;
  h.header_size = sizeof(FileHeader);
  h.event_size = sizeof(Event);
  h.rank = rank_;
  h.ranks = ranks_;
  h.workers = workers_;
  h.clock_offset_ns = clock_offset_ns_;
  h.epoch_ns = epoch_ns_;
  h.run_id = run_id_;
  long pos = std::ftell(file_);
  std::fseek(file_, 0, SEEK_SET);
  std::fwrite(&h, sizeof h, 1, file_);
  if (pos > 0) std::fseek(file_, pos, SEEK_SET);
  std::fflush(file_);
}

void Recorder::write_record(Record type, std::uint32_t arg, const void* data,
                            std::uint64_t bytes) {
  if (end_offset_ >= 0) {  // write over the end record; a new one follows at end_run
    std::fseek(file_, end_offset_, SEEK_SET);
    end_offset_ = -1;
  }
  RecordHeader rh{static_cast<std::uint32_t>(type), arg, bytes};
  std::fwrite(&rh, sizeof rh, 1, file_);
  if (bytes) std::fwrite(data, 1, bytes, file_);
}

void Recorder::write_end() {
  std::uint64_t total = events_written_;
  long here = end_offset_ >= 0 ? end_offset_ : std::ftell(file_);
  write_record(Record::end, 0, &total, sizeof total);
  end_offset_ = here;
  std::fflush(file_);
}

void Recorder::begin_run(const Graph& graph, std::uint64_t serial, std::uint64_t iterations,
                         const Placement* placement) {
  std::size_t g = 0;
  {
    std::lock_guard lock(file_mu_);
    while (g < graph_serials_.size() && graph_serials_[g] != serial) ++g;
    if (g == graph_serials_.size()) {
      const auto& locs = graph.locations();
      const std::uint32_t ntasks = graph.task_count();
      graph_serials_.push_back(serial);
      graph_task_base_.push_back(next_task_base_);
      graph_location_base_.push_back(next_location_base_);
      std::vector<std::uint8_t> out;
      put_u32(out, static_cast<std::uint32_t>(g));
      put_u32(out, next_task_base_);
      put_u32(out, next_location_base_);
      put_u32(out, ntasks);
      put_u32(out, static_cast<std::uint32_t>(locs.size()));
      for (std::size_t l = 0; l < locs.size(); ++l) {
        put_u64(out, locs[l].elem_size * locs[l].count);
        put_u32(out, placement && l < placement->location_home.size()
                         ? placement->location_home[l]
                         : 0);
        put_str(out, locs[l].name);
      }
      for (std::uint32_t t = 0; t < ntasks; ++t) {
        put_u32(out, placement && t < placement->task_rank.size() ? placement->task_rank[t] : 0);
        put_str(out, graph.task_name(t));
        const auto accesses = graph.accesses(t);
        put_u32(out, static_cast<std::uint32_t>(accesses.size()));
        for (const AccessDesc& a : accesses) {
          put_u32(out, a.location);
          out.push_back(a.mode == Mode::write ? 1 : 0);
        }
      }
      write_record(Record::graph, static_cast<std::uint32_t>(g), out.data(), out.size());
      next_task_base_ += ntasks;
      next_location_base_ += static_cast<std::uint32_t>(locs.size());
    }
  }
  task_base_ = graph_task_base_[g];
  location_base_ = graph_location_base_[g];
  Event e;
  e.time = now();
  e.kind = static_cast<std::uint8_t>(Kind::run_begin);
  e.arg0 = iterations;
  // Iteration 0 (or the first of this run) was requested when the run started.
  requested_.reset(new std::atomic<std::uint64_t>[graph.task_count()]);
  for (std::size_t t = 0; t < graph.task_count(); ++t)
    requested_[t].store(e.time, std::memory_order_relaxed);
  append(control(), e);
}

void Recorder::end_run(std::uint64_t iterations_run) {
  Event e;
  e.time = now();
  e.kind = static_cast<std::uint8_t>(Kind::run_end);
  e.arg0 = iterations_run;
  append(control(), e);
  std::uint64_t t0 = now();
  std::uint64_t bytes = flush_all();
  {
    std::lock_guard lock(file_mu_);
    write_end();
    write_header();
  }
  // The end-of-run flush itself, shown on the caller's row (written by the next flush).
  Event f;
  f.time = t0;
  f.kind = static_cast<std::uint8_t>(Kind::flush);
  f.arg0 = bytes;
  f.arg1 = now() - t0;
  append(control(), f);
}

void Recorder::append(unsigned buffer, Event e) {
  Buffer& b = buffers_[buffer];
  e.worker = static_cast<std::uint16_t>(buffer);
  lock(b.busy);
  b.events[b.count++] = e;
  if (b.count == capacity_) {
    std::uint64_t start, duration;
    std::uint64_t bytes = write_buffer(buffer, b, start, duration);
    Event f;
    f.time = start;
    f.kind = static_cast<std::uint8_t>(Kind::flush);
    f.worker = static_cast<std::uint16_t>(buffer);
    f.arg0 = bytes;
    f.arg1 = duration;
    b.events[b.count++] = f;
  }
  unlock(b.busy);
}

std::uint64_t Recorder::write_buffer(unsigned index, Buffer& b, std::uint64_t& start,
                                     std::uint64_t& duration) {
  start = now();
  std::uint64_t bytes = b.count * sizeof(Event);
  {
    std::lock_guard lock(file_mu_);
    write_record(Record::events, index, b.events.get(), bytes);
    events_written_ += b.count;
  }
  b.count = 0;
  duration = now() - start;
  return bytes + sizeof(RecordHeader);
}

std::uint64_t Recorder::flush_all() {
  std::uint64_t bytes = 0;
  for (unsigned i = 0; i <= workers_; ++i) {
    Buffer& b = buffers_[i];
    lock(b.busy);
    if (b.count) {
      std::uint64_t start, duration;
      bytes += write_buffer(i, b, start, duration);
    }
    unlock(b.busy);
  }
  return bytes;
}

void Recorder::fiber_event(Kind kind, unsigned worker, std::uint32_t task, std::uint32_t location,
                           std::uint64_t iteration) {
  Event e;
  e.time = now();
  e.kind = static_cast<std::uint8_t>(kind);
  e.task = task + task_base_;
  e.location = location + location_base_;
  e.arg0 = iteration;
  append(worker, e);
}

void Recorder::message(Kind kind, unsigned worker, std::uint32_t peer, std::uint32_t location,
                       std::uint32_t task, std::uint64_t bytes, std::uint64_t tag) {
  Event e;
  e.time = now();
  e.kind = static_cast<std::uint8_t>(kind);
  e.peer = peer;
  e.location = location == kNone ? kNone : location + location_base_;
  e.task = task == kNone ? kNone : task + task_base_;
  e.arg0 = bytes;
  e.arg1 = tag;
  append(worker, e);
}

void Recorder::simple(Kind kind, unsigned worker, std::uint32_t peer) {
  Event e;
  e.time = now();
  e.kind = static_cast<std::uint8_t>(kind);
  e.peer = peer;
  append(worker, e);
}

}  // namespace ordo::rt::trace
