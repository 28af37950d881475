#include "api/checkpoint.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <new>
#include <optional>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <ordo/checkpoint.hpp>
#include <ordo/ordo.hpp>
#include "runtime/control_plane.hpp"
#include "runtime/regular_file.hpp"

namespace ordo::detail {

namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'O', 'R', 'D', 'O', 'C', 'K', 'P', 'T'};
// Format 2 names every location in the parts (format 1 held location indices and one part per
// rank of the same rank count).
constexpr std::uint32_t kVersion = 2;
constexpr std::string_view kManifestHead = "ordo checkpoint 2";
constexpr std::string_view kManifestOlder = "ordo checkpoint 1";
constexpr std::size_t kMaxManifestBytes = 4096;

// A part's header; integers in the host's byte order (a checkpoint is read back by the same
// program on the same kind of machine).
struct PartHeader {
  char magic[8];
  std::uint32_t version;
  std::uint32_t rank;
  std::uint32_t ranks;
  std::uint32_t reserved;
  std::uint64_t graph;
  std::uint64_t iteration;
  std::uint64_t records;
};
// After the header, one entry per location the part holds, then their names one after the
// other, then their bytes in the entries' order: a rank reads the tables of every part and then
// only the bytes of the locations it holds now, whatever the rank count that wrote them.
struct TableEntry {
  std::uint64_t offset;  // of the location's bytes in the file
  std::uint64_t bytes;
  std::uint32_t name_bytes;
  std::uint32_t reserved;
};

std::string errno_text() { return std::strerror(errno); }

std::string hex(std::uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

std::string checkpoint_name(std::uint64_t iteration) {
  char b[32];
  std::snprintf(b, sizeof b, "ckpt-%020llu", static_cast<unsigned long long>(iteration));
  return b;
}

// The iteration a directory entry "ckpt-<digits>" names, or nullopt for anything else.
std::optional<std::uint64_t> checkpoint_iteration(const std::string& name) {
  if (name.size() != 25 || name.compare(0, 5, "ckpt-") != 0) return std::nullopt;
  std::uint64_t v = 0;
  for (std::size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    if (v > (~std::uint64_t{0} - 9) / 10) return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(name[i] - '0');
  }
  return v;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // close() reports write-back errors of some file systems: checked for written files.
  bool close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

bool write_all(int fd, const void* p, std::size_t n) {
  auto b = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, b, std::min<std::size_t>(n, std::size_t{1} << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    b += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool pwrite_all(int fd, const char* b, std::uint64_t n, std::uint64_t at) {
  while (n > 0) {
    const ssize_t w =
        ::pwrite(fd, b, std::min<std::uint64_t>(n, std::uint64_t{1} << 30), static_cast<off_t>(at));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    b += w;
    at += static_cast<std::uint64_t>(w);
    n -= static_cast<std::uint64_t>(w);
  }
  return true;
}

bool read_all(int fd, void* p, std::size_t n, std::uint64_t at) {
  auto b = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::pread(fd, b, std::min<std::size_t>(n, std::size_t{1} << 30),
                              static_cast<off_t>(at));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    b += r;
    at += static_cast<std::uint64_t>(r);
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

bool sync_dir(const fs::path& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY));
  return fd.get() >= 0 && ::fsync(fd.get()) == 0;
}

// The test hook (ORDO_CHECKPOINT_TEST_KILL): this process dies here when it names this stage,
// iteration and rank, as a crash at that moment would kill it.
void test_stage(const char* stage, std::uint64_t iteration, unsigned rank) {
  static const std::optional<CheckpointTestKill> kill = checkpoint_test_kill_setting();
  if (!kill || kill->stage != stage || kill->iteration != iteration || kill->rank != rank) return;
  std::fprintf(stderr, "ordo: test hook: rank %u killed at stage '%s' of checkpoint %llu\n", rank,
               stage, static_cast<unsigned long long>(iteration));
  ::raise(SIGKILL);
}

// Where a file's writing is, for test_stage: null, or the iteration and rank it belongs to.
struct Stages {
  std::uint64_t iteration;
  unsigned rank;
};

// Writes `path` atomically: `fill(fd)` writes a temporary file beside it, which is synced and
// renamed over `path`, and the directory synced. "" or the error.
// With `direct` the file is opened with O_DIRECT where the file system allows it (not tmpfs).
template <class Fill>
std::string write_atomically(const fs::path& path, Fill&& fill, const Stages* stages = nullptr,
                             bool direct = false) {
  const fs::path tmp = path.string() + ".tmp";
  if (const std::string why = files::output_refusal(path.string()); !why.empty())
    return "cannot write " + path.string() + ": " + why;
  constexpr int kFlags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  int opened = ::open(tmp.c_str(), kFlags | (direct ? O_DIRECT : 0), 0644);
  if (opened < 0 && direct && errno == EINVAL) opened = ::open(tmp.c_str(), kFlags, 0644);
  Fd fd(opened);
  if (fd.get() < 0) return "cannot create " + tmp.string() + ": " + errno_text();
  if (!files::keep_mode(tmp.string(), path.string()))
    return "cannot give " + tmp.string() + " the mode of " + path.string() + ": " + errno_text();
  bool ok = fill(fd.get());
  if (ok && stages) test_stage("fsync", stages->iteration, stages->rank);
  if (!ok || ::fsync(fd.get()) != 0 || !fd.close()) {
    const std::string e = "cannot write " + tmp.string() + ": " + errno_text();
    ::unlink(tmp.c_str());
    return e;
  }
  if (stages) test_stage("rename", stages->iteration, stages->rank);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string e = "cannot rename " + tmp.string() + ": " + errno_text();
    ::unlink(tmp.c_str());
    return e;
  }
  if (!sync_dir(path.parent_path())) return "cannot sync " + path.parent_path().string() + ": " + errno_text();
  return "";
}

bool is_home(const rt::Engine& engine, std::uint32_t location) {
  return engine.home(location) == engine.rank();
}

// A reduction's copy on one rank (runtime/reduction.hpp): the reduced value of the last
// iteration, declared per rank of the job. Not saved: a restart fills it from the result.
bool is_rank_copy(const rt::Graph& graph, std::uint32_t location) {
  const auto part = graph.reduction_part(location);
  return part && part->role == rt::ReductionRole::copy;
}

// A location a layer derives from others (Graph::set_derived: the stencil layer's exports),
// declared by rank count. Not saved: the layer rebuilds it from the restored locations.
bool is_derived(const rt::Graph& graph, std::uint32_t location) {
  return graph.locations()[location].derived;
}

// What a checkpoint leaves out of its parts: what a restart fills from the rest.
bool is_left_out(const rt::Graph& graph, std::uint32_t location) {
  return is_rank_copy(graph, location) || is_derived(graph, location);
}

// What a checkpoint is of, independent of the rank count: every location but the per-rank
// copies and the derived ones (name, element size, count) and every task but the copies' and
// the derived ones (name, and each access's mode, position and location by name, but the
// accesses to derived locations; a copy stands for its reduction). FNV-1a, 64 bits.
std::uint64_t checkpoint_fingerprint(const rt::Graph& graph) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  auto add = [&h](const void* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      h ^= static_cast<const unsigned char*>(p)[i];
      h *= 0x100000001b3ull;
    }
  };
  auto add_u64 = [&add](std::uint64_t v) { add(&v, sizeof v); };
  auto add_name = [&](const std::string& name) {
    add_u64(name.size());
    add(name.data(), name.size());
  };
  const auto& locs = graph.locations();
  for (std::uint32_t l = 0; l < locs.size(); ++l) {
    if (is_left_out(graph, l)) continue;
    add_name(locs[l].name);
    add_u64(locs[l].elem_size);
    add_u64(locs[l].count);
  }
  for (std::uint32_t t = 0; t < graph.task_count(); ++t) {
    const auto accesses = graph.accesses(t);
    if (graph.derived_task(t) ||
        std::any_of(accesses.begin(), accesses.end(), [&](const rt::AccessDesc& a) {
          return a.mode != rt::Mode::read && is_rank_copy(graph, a.location);
        }))
      continue;
    add_name(graph.task_name(t));
    for (const rt::AccessDesc& a : accesses) {
      if (is_derived(graph, a.location)) continue;
      add_u64(static_cast<std::uint64_t>(a.mode));
      add_u64(a.has_position ? static_cast<std::uint64_t>(a.position) : ~std::uint64_t{0});
      const auto part = graph.reduction_part(a.location);
      add_name(part && part->role == rt::ReductionRole::copy
                   ? graph.reductions()[part->reduction].name
                   : locs[a.location].name);
    }
  }
  return h;
}

// The locations this rank writes into its part: its home locations but the per-rank copies
// and the derived ones.
bool saved_here(const rt::Engine& engine, const rt::Graph& graph, std::uint32_t location) {
  return is_home(engine, location) && !is_left_out(graph, location);
}

// What one rank's part holds: its header, table and names, and where each saved location's
// bytes are (the locations themselves, or their copy).
struct PartImage {
  PartHeader header{};
  std::vector<TableEntry> table;
  std::string names;
  std::vector<const char*> bytes;  // per table entry
  std::uint64_t total = 0;         // bytes of the locations
  // The whole file as it is written (a copy's), zero-padded to a multiple of kDirectAlign;
  // null where the bytes are written from the locations themselves.
  const char* file = nullptr;
  std::uint64_t file_bytes = 0;
  std::uint64_t prefix() const {
    return sizeof header + table.size() * sizeof(TableEntry) + names.size();
  }
};

// The alignment of O_DIRECT transfers that every common file system accepts (a page).
constexpr std::uint64_t kDirectAlign = 4096;

std::uint64_t round_up(std::uint64_t n, std::uint64_t to) { return (n + to - 1) / to * to; }

// The copied part's image at offset 0, in two halves (the test hook's "write" stage between).
// Opened with O_DIRECT, the padded image goes from the copy to the device without a second
// copy into the page cache and its write-back, which on a core the workers need cost as much
// as the copy; the file is then cut to its size. A file system that refuses the alignment
// gets the same bytes through the page cache.
bool write_image(int fd, const PartImage& p) {
  const int flags = ::fcntl(fd, F_GETFL);
  const bool direct = flags >= 0 && (flags & O_DIRECT) != 0;
  const std::uint64_t len = direct ? round_up(p.file_bytes, kDirectAlign) : p.file_bytes;
  const std::uint64_t half = len / 2 / kDirectAlign * kDirectAlign;
  bool ok = pwrite_all(fd, p.file, half, 0);
  if (ok) test_stage("write", p.header.iteration, p.header.rank);
  ok = ok && pwrite_all(fd, p.file + half, len - half, half);
  if (!ok && direct && errno == EINVAL)
    return ::fcntl(fd, F_SETFL, flags & ~O_DIRECT) == 0 && write_image(fd, p);
  return ok && (!direct || ::ftruncate(fd, static_cast<off_t>(p.file_bytes)) == 0);
}

PartImage part_image(const rt::Engine& engine, const rt::Graph& graph, std::uint64_t fingerprint,
                     std::uint64_t iteration) {
  const auto& locs = graph.locations();
  PartImage p;
  PartHeader& h = p.header;
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.rank = engine.rank();
  h.ranks = engine.ranks();
  h.graph = fingerprint;
  h.iteration = iteration;
  std::vector<std::uint32_t> saved;
  std::uint64_t names = 0;
  for (std::uint32_t l = 0; l < locs.size(); ++l)
    if (saved_here(engine, graph, l)) saved.push_back(l), names += locs[l].name.size();
  h.records = saved.size();
  p.table.resize(saved.size());
  std::uint64_t at = sizeof h + saved.size() * sizeof(TableEntry) + names;
  p.names.reserve(names);
  for (std::size_t i = 0; i < saved.size(); ++i) {
    const rt::LocationDesc& d = locs[saved[i]];
    p.table[i] = {at, graph.bytes_of(saved[i]), static_cast<std::uint32_t>(d.name.size()), 0};
    at += p.table[i].bytes;
    p.total += p.table[i].bytes;
    p.names += d.name;
    p.bytes.push_back(reinterpret_cast<const char*>(graph.data(saved[i])));
  }
  return p;
}

fs::path part_path(const fs::path& sub, unsigned rank) {
  return sub / ("rank-" + std::to_string(rank) + ".part");
}

std::string write_part(const PartImage& p, const fs::path& sub) {
  const Stages stages{p.header.iteration, p.header.rank};
  if (p.file)
    return write_atomically(
        part_path(sub, p.header.rank), [&](int fd) { return write_image(fd, p); }, &stages, true);
  return write_atomically(
      part_path(sub, p.header.rank),
      [&](int fd) {
        if (!write_all(fd, &p.header, sizeof p.header) ||
            !write_all(fd, p.table.data(), p.table.size() * sizeof(TableEntry)) ||
            !write_all(fd, p.names.data(), p.names.size()))
          return false;
        for (std::size_t i = 0; i < p.table.size(); ++i) {
          if (i == p.table.size() / 2) test_stage("write", p.header.iteration, p.header.rank);
          if (!write_all(fd, p.bytes[i], p.table[i].bytes)) return false;
        }
        return true;
      },
      &stages);
}

// Whether rank `w`'s part of the checkpoint `h` describes is in `sub`: renamed there, hence on
// disk (a part is renamed only once synced), and of this checkpoint (its header's).
bool part_present(const fs::path& sub, unsigned w, const PartHeader& h) {
  std::string why;
  const int raw = files::open_regular(part_path(sub, w).string(), why);
  if (raw < 0) return false;
  Fd fd(raw);
  PartHeader got{};
  return read_all(fd.get(), &got, sizeof got, 0) && std::memcmp(got.magic, kMagic, 8) == 0 &&
         got.version == kVersion && got.rank == w && got.ranks == h.ranks && got.graph == h.graph &&
         got.iteration == h.iteration;
}

// The first non-empty entry of `all`, as "rank R: what", or "".
std::string first_error(const std::optional<std::vector<std::string>>& all) {
  if (!all) return "a rank failed";  // the run's own failure says which
  for (std::size_t r = 0; r < all->size(); ++r)
    if (!(*all)[r].empty()) return "rank " + std::to_string(r) + ": " + (*all)[r];
  return "";
}

// Opens a file of a checkpoint for reading, refusing anything but a regular file without
// blocking on it (runtime/regular_file.hpp). -1 with errno, or with `why` set for a file of
// another kind.
int open_regular(const fs::path& path, std::string& why) {
  const int fd = files::open_regular(path.string(), why);
  if (fd < 0 && !why.empty()) why = path.string() + ": " + why;
  return fd;
}

// The manifest at `path`, or the reason it is unusable.
std::optional<Manifest> read_manifest(const fs::path& path, std::string& why) {
  std::string kind;
  Fd fd(open_regular(path, kind));
  if (fd.get() < 0) {
    why = !kind.empty()      ? "its manifest: " + kind
          : errno == ENOENT ? "its manifest is missing (a rank stopped before every part was written)"
                            : "cannot open its manifest: " + errno_text();
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || st.st_size <= 0 ||
      static_cast<std::uint64_t>(st.st_size) > kMaxManifestBytes) {
    why = "its manifest is empty or larger than " + std::to_string(kMaxManifestBytes) + " bytes";
    return std::nullopt;
  }
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  if (!read_all(fd.get(), text.data(), text.size(), 0)) {
    why = "cannot read its manifest: " + errno_text();
    return std::nullopt;
  }
  std::string bad;
  auto m = parse_manifest(text, bad);
  if (!m) why = "its manifest is not an ordo checkpoint manifest: " + bad;
  return m;
}

// A decimal number without sign or leading zero (0 itself allowed) up to `max`.
std::optional<std::uint64_t> parse_decimal(std::string_view s, std::uint64_t max) {
  if (s.empty() || s.size() > 20 || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (v > (max - digit) / 10) return std::nullopt;
    v = v * 10 + digit;
  }
  return v;
}

// What this rank needs from a checkpoint: each location it holds now (by index), and
// whether it has been read; a reduction's per-rank copy is filled from its result's record.
struct Wanted {
  std::vector<bool> seen;                             // by location, over every part
  std::vector<std::vector<std::uint32_t>> copies_of;  // by location: copies filled from it
};

// Reads the table of the part `file` of the checkpoint `m` (written by rank `writer`) and,
// of the locations it names, the bytes of those this rank holds now, into them.
std::string read_part(const rt::Engine& engine, rt::Graph& graph, const fs::path& file,
                      unsigned writer, const Manifest& m, Wanted& wanted) {
  std::string kind;
  Fd fd(open_regular(file, kind));
  if (fd.get() < 0)
    return !kind.empty()     ? kind
           : errno == ENOENT ? file.string() + " is missing (rank " + std::to_string(writer) +
                                   "'s part of the checkpoint)"
                             : "cannot open " + file.string() + ": " + errno_text();
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return "cannot stat " + file.string() + ": " + errno_text();
  const auto size = static_cast<std::uint64_t>(st.st_size);
  const std::string where = file.string() + " ";
  PartHeader h{};
  if (size < sizeof h || !read_all(fd.get(), &h, sizeof h, 0))
    return where + "is truncated (" + std::to_string(size) + " bytes, shorter than its header)";
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0)
    return where + "is not an ordo checkpoint part";
  if (h.version != kVersion)
    return where + "is of checkpoint format " + std::to_string(h.version) +
           "; this ordo reads format " + std::to_string(kVersion);
  if (h.rank != writer || h.ranks != m.ranks || h.graph != m.graph || h.iteration != m.iteration)
    return where + "belongs to another checkpoint (rank " + std::to_string(h.rank) + " of " +
           std::to_string(h.ranks) + ", iteration " + std::to_string(h.iteration) + ")";
  const auto& locs = graph.locations();
  // Sizes from the file are checked against the file before anything is read or allocated.
  if (h.records > (size - sizeof h) / sizeof(TableEntry))
    return where + "claims " + std::to_string(h.records) + " locations, more than its " +
           std::to_string(size) + " bytes can describe";
  if (h.records > locs.size())
    return where + "holds " + std::to_string(h.records) + " locations; this graph has " +
           std::to_string(locs.size());
  std::vector<TableEntry> table(h.records);
  if (!read_all(fd.get(), table.data(), table.size() * sizeof(TableEntry), sizeof h))
    return "cannot read " + file.string() + ": " + errno_text();
  std::uint64_t at = sizeof h + table.size() * sizeof(TableEntry), names = 0;
  for (const TableEntry& e : table) {
    if (e.name_bytes > size - at - names) return where + "is truncated in its names of locations";
    names += e.name_bytes;
  }
  std::string blob(names, '\0');
  if (!read_all(fd.get(), blob.data(), blob.size(), at))
    return "cannot read " + file.string() + ": " + errno_text();
  at += names;
  std::uint64_t name_at = 0;
  for (std::uint64_t i = 0; i < table.size(); ++i) {
    const TableEntry& e = table[i];
    const std::string_view name(blob.data() + name_at, e.name_bytes);
    name_at += e.name_bytes;
    if (e.offset != at)
      return where + "is not laid out as ordo writes it (location record " + std::to_string(i) +
             " at byte " + std::to_string(e.offset) + ", expected " + std::to_string(at) + ")";
    const std::int64_t found = graph.find_location(name);
    if (found < 0 || is_left_out(graph, static_cast<std::uint32_t>(found)))
      return where + "holds location '" + std::string(name) + "', which this graph lacks";
    const auto l = static_cast<std::uint32_t>(found);
    if (wanted.seen[l]) return where + "holds location '" + std::string(name) + "' a second time";
    wanted.seen[l] = true;
    if (e.bytes != graph.bytes_of(l))
      return where + "holds " + std::to_string(e.bytes) + " bytes for location '" + locs[l].name +
             "', which has " + std::to_string(graph.bytes_of(l));
    if (e.bytes > size - at) return where + "is truncated in location '" + std::string(name) + "'";
    at += e.bytes;
    if (is_home(engine, l) && !read_all(fd.get(), graph.data(l), e.bytes, e.offset))
      return "cannot read " + file.string() + ": " + errno_text();
    for (std::uint32_t copy : wanted.copies_of[l])
      if (!read_all(fd.get(), graph.data(copy), e.bytes, e.offset))
        return "cannot read " + file.string() + ": " + errno_text();
  }
  if (at != size)
    return where + "has " + std::to_string(size - at) + " bytes after its last location";
  return "";
}

// Fills this rank's locations from every part of the checkpoint `m` in `sub`: each part's
// table, then only the bytes of what this rank holds. "" or what is wrong.
std::string read_parts(const rt::Engine& engine, rt::Graph& graph, const fs::path& sub,
                       const Manifest& m) {
  const auto& locs = graph.locations();
  Wanted wanted;
  wanted.seen.assign(locs.size(), false);
  wanted.copies_of.resize(locs.size());
  for (std::uint32_t l = 0; l < locs.size(); ++l)
    if (is_home(engine, l) && is_rank_copy(graph, l))
      wanted.copies_of[graph.reductions()[graph.reduction_part(l)->reduction].result].push_back(l);
  for (unsigned w = 0; w < m.ranks; ++w)
    if (std::string e =
            read_part(engine, graph, sub / ("rank-" + std::to_string(w) + ".part"), w, m, wanted);
        !e.empty())
      return e;
  for (std::uint32_t l = 0; l < locs.size(); ++l)
    if (!wanted.seen[l] && !is_left_out(graph, l))
      return "no part holds location '" + locs[l].name + "'";
  return "";
}

// The newest complete checkpoint in `dir`: its directory and manifest, or the reason there is
// none.
std::optional<std::pair<fs::path, Manifest>> newest_complete(const fs::path& dir, std::string& why,
                                                             bool* older = nullptr) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    why = "'" + dir.string() + "' is not a directory of checkpoints";
    return std::nullopt;
  }
  std::vector<std::uint64_t> found;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (auto k = checkpoint_iteration(it->path().filename().string())) found.push_back(*k);
  if (ec) {
    why = "cannot list '" + dir.string() + "': " + ec.message();
    return std::nullopt;
  }
  if (found.empty()) {
    why = "'" + dir.string() + "' holds no checkpoint (no ckpt-<iteration> directory)";
    return std::nullopt;
  }
  std::sort(found.rbegin(), found.rend());
  std::string reasons;
  std::size_t listed = 0;  // a directory of a million entries must not make a message of them all
  for (std::uint64_t k : found) {
    const fs::path sub = dir / checkpoint_name(k);
    std::string incomplete;
    if (auto m = read_manifest(sub / "manifest", incomplete)) {
      if (m->iteration != k) {
        incomplete = "its manifest names iteration " + std::to_string(m->iteration);
      } else if (m->version != kVersion) {
        // Not passed over for an older one: those are older still.
        why = "the checkpoint of iteration " + std::to_string(k) + " in '" + dir.string() +
              "' was written by an older ordo (checkpoint format " + std::to_string(m->version) +
              "; this ordo reads format " + std::to_string(kVersion) +
              "): run from the start, or finish the run with the ordo that wrote it";
        if (older) *older = true;
        return std::nullopt;
      } else {
        return std::make_pair(sub, *m);
      }
    }
    if (++listed <= 3)
      reasons += (reasons.empty() ? "" : "; ") + std::string("iteration ") + std::to_string(k) +
                 ": " + incomplete;
  }
  if (listed > 3) reasons += "; and " + std::to_string(listed - 3) + " more";
  why = "'" + dir.string() + "' holds only incomplete checkpoints (" + reasons +
        "); restart from a directory with a complete one, or run from the start";
  return std::nullopt;
}

// Keeps the newest `keep` complete checkpoints up to `newest` (complete now) and removes the
// older ones, complete or not: only now that a newer one is complete.
void remove_older(const fs::path& dir, std::uint64_t newest, unsigned keep) {
  std::vector<std::uint64_t> older;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (auto k = checkpoint_iteration(it->path().filename().string()); k && *k < newest)
      older.push_back(*k);
  std::sort(older.rbegin(), older.rend());
  unsigned kept = 1;  // the newest
  for (std::uint64_t k : older) {
    const fs::path sub = dir / checkpoint_name(k);
    std::string why;
    const auto m = read_manifest(sub / "manifest", why);
    if (kept < keep && m && m->iteration == k && m->version == kVersion) {
      ++kept;
      continue;
    }
    // The manifest first: a removal cut short leaves an incomplete checkpoint, never one that
    // claims parts it lacks. A leftover is harmless: the newest complete one is read.
    std::error_code ignored;
    fs::remove(sub / "manifest", ignored);
    test_stage("remove", newest, 0);
    fs::remove_all(sub, ignored);
  }
}

}  // namespace

std::string format_manifest(const Manifest& m) {
  return "ordo checkpoint " + std::to_string(m.version) + "\ngraph " + hex(m.graph) +
         "\niteration " + std::to_string(m.iteration) + "\nranks " + std::to_string(m.ranks) + "\n";
}

std::optional<Manifest> parse_manifest(std::string_view text, std::string& why) {
  // Line by line, each ending in '\n', in write_checkpoint's order.
  auto next_line = [&text](std::string_view& line) {
    const std::size_t nl = text.find('\n');
    if (nl == std::string_view::npos) return false;
    line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    return true;
  };
  auto value_of = [](std::string_view line, std::string_view key) -> std::optional<std::string_view> {
    if (line.size() <= key.size() + 1 || line.substr(0, key.size()) != key || line[key.size()] != ' ')
      return std::nullopt;
    return line.substr(key.size() + 1);
  };
  std::string_view line;
  Manifest m;
  if (!next_line(line) || (line != kManifestHead && line != kManifestOlder)) {
    why = "its first line is not '" + std::string(kManifestHead) + "'";
    return std::nullopt;
  }
  if (line == kManifestOlder) m.version = 1;
  std::optional<std::string_view> v;
  if (!next_line(line) || !(v = value_of(line, "graph")) || v->size() != 16 ||
      v->find_first_not_of("0123456789abcdef") != std::string_view::npos) {
    why = "its second line is not 'graph' and 16 hexadecimal digits";
    return std::nullopt;
  }
  for (char c : *v) m.graph = m.graph << 4 | static_cast<std::uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
  std::optional<std::uint64_t> n;
  if (!next_line(line) || !(v = value_of(line, "iteration")) ||
      !(n = parse_decimal(*v, ~std::uint64_t{0}))) {
    why = "its third line is not 'iteration' and a decimal number";
    return std::nullopt;
  }
  m.iteration = *n;
  if (!next_line(line) || !(v = value_of(line, "ranks")) ||
      !(n = parse_decimal(*v, ~std::uint32_t{0})) || *n == 0) {
    why = "its fourth line is not 'ranks' and a number of ranks (1 to 2^32 - 1)";
    return std::nullopt;
  }
  m.ranks = static_cast<unsigned>(*n);
  if (!text.empty()) {
    why = "it has " + std::to_string(text.size()) + " bytes after its fourth line";
    return std::nullopt;
  }
  return m;
}

CheckpointLock::~CheckpointLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

CheckpointLock::CheckpointLock(CheckpointLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}

CheckpointLock& CheckpointLock::operator=(CheckpointLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

CheckpointLock prepare_checkpoint_dir(const std::string& dir, bool lock) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || ::access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error("checkpoint directory '" + dir + "' cannot be written" +
                (ec ? ": " + ec.message() : std::string()) +
                " (RuntimeOptions::checkpoint_dir or ORDO_CHECKPOINT_DIR); give a writable "
                "directory");
  CheckpointLock held;
  if (!lock) return held;
  // flock, not a file's existence: the kernel drops it when the job dies, so a killed job
  // leaves no stale lock for its restart.
  const std::string path = (fs::path(dir) / "lock").string();
  held.fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  struct stat st {};
  if (held.fd_ < 0 || ::fstat(held.fd_, &st) != 0 || !S_ISREG(st.st_mode))
    throw Error("checkpoint directory '" + dir + "': cannot open its lock file " + path + ": " +
                (held.fd_ < 0 ? errno_text() : std::string("not a regular file")) +
                "; give a directory this job can write");
  if (::flock(held.fd_, LOCK_EX | LOCK_NB) != 0)
    throw Error(errno == EWOULDBLOCK
                    ? "checkpoint directory '" + dir + "' is in use by another job (it holds " +
                          path + "); give each job a directory of its own"
                    : "checkpoint directory '" + dir + "': cannot lock " + path + ": " +
                          errno_text());
  return held;
}

struct CheckpointWriter::Pending {
  PartImage image;
  fs::path dir, sub;
  unsigned keep = 2;
  std::mutex mu;
  std::condition_variable cv;
  bool part_done = false;  // this rank's part is written (or failed: part_error)
  std::string part_error;
  bool all_parts = false;  // rank 0, told at the completion: every rank's part is on disk
  bool cancel = false;     // rank 0: stop waiting, write no manifest
  // Rank 0 looks for the others' parts in the directory (else it waits to be told): only
  // where no part of a killed job can be there (removed at the pause, with the copy).
  bool look = false;
  std::string manifest_error;
  std::thread thread;

  std::uint64_t iteration() const { return image.header.iteration; }
  void set_part(std::string error) {
    std::lock_guard lock(mu);
    part_error = std::move(error);
    part_done = true;
    cv.notify_all();
  }
  void wait_part() {
    std::unique_lock lock(mu);
    cv.wait(lock, [this] { return part_done; });
  }
  void tell(bool complete) {
    {
      std::lock_guard lock(mu);
      (complete ? all_parts : cancel) = true;
    }
    cv.notify_all();
    if (thread.joinable()) thread.join();
  }

  // The thread: this rank's part; on rank 0 then, once every rank's part is on disk (seen in
  // the directory, or told at the completion), the manifest and the removal of older ones.
  void write() {
    set_part(write_part(image, sub));
    if (image.header.rank != 0 || !part_error.empty()) return;
    const unsigned ranks = image.header.ranks;
    std::vector<bool> seen(ranks, false);
    seen[0] = true;
    auto wait = std::chrono::milliseconds(1);
    for (;;) {
      {
        std::unique_lock lock(mu);
        if (cancel) return;
        if (all_parts) break;
      }
      bool all = look;
      for (unsigned w = 1; w < ranks && all; ++w)
        all = all && (seen[w] || (seen[w] = part_present(sub, w, image.header)));
      if (all) break;
      std::unique_lock lock(mu);
      cv.wait_for(lock, wait, [this] { return cancel || all_parts; });
      wait = std::min(wait * 2, std::chrono::milliseconds(50));
    }
    manifest_error = write_manifest(dir, sub, image.header, keep);
  }

  // Rank 0, every part on disk: the manifest (the checkpoint counts from its rename), then the
  // older checkpoints beyond `keep` go.
  static std::string write_manifest(const fs::path& dir, const fs::path& sub, const PartHeader& h,
                                    unsigned keep) {
    test_stage("manifest", h.iteration, 0);
    const std::string text = format_manifest({h.graph, h.iteration, h.ranks});
    std::string e = write_atomically(
        sub / "manifest", [&](int fd) { return write_all(fd, text.data(), text.size()); });
    if (e.empty()) remove_older(dir, h.iteration, keep);
    return e;
  }
};

CheckpointWriter::CheckpointWriter(CheckpointPolicy policy) : policy_(std::move(policy)) {}

CheckpointWriter::Mapping::~Mapping() { ::munmap(at, bytes); }

// Anonymous pages, page-aligned as O_DIRECT wants; `fault_in` touches them all now. Not
// huge pages: their first faults can wait for the kernel to compact memory (1.4 s against
// 0.18 s for 512 MiB here). Null when there is no memory.
std::unique_ptr<CheckpointWriter::Mapping> CheckpointWriter::map_copy(std::uint64_t bytes,
                                                                      bool fault_in) {
  void* at = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (at == MAP_FAILED) return nullptr;
  std::unique_ptr<Mapping> m(new Mapping{at, bytes});
  if (fault_in && ::madvise(at, bytes, MADV_POPULATE_WRITE) != 0)
    for (std::uint64_t i = 0; i < bytes; i += kDirectAlign) static_cast<char*>(at)[i] = 0;
  return m;
}

void CheckpointWriter::reserve_copy(const rt::Engine& engine, const rt::Graph& graph) {
  if (!policy_.copy || copy_refused_ || reserving_.joinable()) return;
  const PartImage image = part_image(engine, graph, 0, 0);
  const std::uint64_t room = round_up(image.prefix() + image.total, kDirectAlign);
  if (copy_ && copy_->bytes >= room) return;
  reserving_ = std::thread([this, room] { reserved_ = map_copy(room, true); });
}

CheckpointWriter::~CheckpointWriter() {
  abandon();
  if (reserving_.joinable()) reserving_.join();
}

void CheckpointWriter::abandon() {
  if (!pending_) return;
  pending_->tell(false);
  pending_.reset();
}

namespace {
constexpr const char* kRankFailed = "a rank failed while the checkpoints were written";
}  // namespace

bool CheckpointWriter::collect(rt::Engine& engine, Completion& c,
                               std::optional<std::uint64_t> next) {
  if (pending_) {
    pending_->wait_part();
    const auto parts = engine.gather(pending_->part_error);
    if (!parts) {
      abandon();
      return false;
    }
    c.failed = first_error(parts);
    c.iteration = pending_->iteration();
    pending_->tell(c.failed.empty());
  }
  // Rank 0 alone touches the directories now: no thread writes, and no rank writes before the
  // next round. A failed checkpoint goes (on a full disk it holds the room the next one needs),
  // so does what a killed job left of the next one (its parts must not count as this job's).
  if (engine.rank() == 0) {
    std::error_code ignored;
    if (pending_ && c.failed.empty()) c.mine = pending_->manifest_error;
    if (pending_ && !(c.failed.empty() && c.mine.empty())) fs::remove_all(pending_->sub, ignored);
    if (next) fs::remove_all(fs::path(policy_.dir) / checkpoint_name(*next), ignored);
  }
  pending_.reset();
  return true;
}

std::string CheckpointWriter::verdict(const rt::Engine& engine, Completion& c,
                                      const std::vector<std::string>& manifests) {
  if (!c.iteration) return "";
  if (c.failed.empty())
    for (std::size_t r = 0; r < manifests.size() && c.failed.empty(); ++r)
      if (!manifests[r].empty()) c.failed = "rank " + std::to_string(r) + ": " + manifests[r];
  if (c.failed.empty()) return "";
  const std::string failed = "the checkpoint of iteration " + std::to_string(*c.iteration) +
                             " in '" + policy_.dir + "' failed: " + c.failed;
  if (!policy_.keep_going) return failed;
  if (engine.rank() == 0)
    std::fprintf(stderr,
                 "ordo: warning: %s; the run goes on (ORDO_CHECKPOINT_ON_FAILURE=continue), "
                 "the previous checkpoint is kept\n",
                 failed.c_str());
  return "";
}

std::string CheckpointWriter::complete_pending(rt::Engine& engine) {
  if (!pending_) return "";
  Completion c;
  if (!collect(engine, c, std::nullopt)) return kRankFailed;
  const auto manifests = engine.gather(c.mine);
  if (!manifests) return kRankFailed;
  return verdict(engine, c, *manifests);
}

std::unique_ptr<CheckpointWriter::Pending> CheckpointWriter::prepare(const rt::Engine& engine,
                                                                     const rt::Graph& graph,
                                                                     std::uint64_t iteration,
                                                                     bool& copied) {
  auto p = std::make_unique<Pending>();
  p->dir = policy_.dir;
  p->sub = fs::path(policy_.dir) / checkpoint_name(iteration);
  p->keep = policy_.keep;
  p->look = policy_.copy;
  p->image = part_image(engine, graph, checkpoint_fingerprint(graph), iteration);
  copied = false;
  if (!policy_.copy) return p;
  PartImage& image = p->image;
  const std::uint64_t prefix = image.prefix();
  const std::uint64_t room = round_up(prefix + image.total, kDirectAlign);
  if (reserving_.joinable()) reserving_.join();
  if (reserved_ && reserved_->bytes >= room && (!copy_ || copy_->bytes < room))
    copy_ = std::move(reserved_);
  reserved_.reset();
  if (!copy_ || copy_->bytes < room) {
    copy_.reset();
    copy_ = map_copy(room, false);
    if (!copy_ && !copy_refused_)
      std::fprintf(stderr,
                   "ordo: warning: rank %u has no memory for a copy of its checkpoint (%llu "
                   "bytes): written with the run stopped, as with ORDO_CHECKPOINT_COPY=0\n",
                   engine.rank(), static_cast<unsigned long long>(p->image.total));
    copy_refused_ = copy_refused_ || !copy_;
  }
  if (!copy_) return p;
  // The locations' bytes now, at the iteration boundary; the thread writes the copy. The
  // workers are idle in the pause: their cores share the copy, in slices of about equal bytes.
  char* const file = static_cast<char*>(copy_->at);
  std::memcpy(file, &image.header, sizeof image.header);
  std::memcpy(file + sizeof image.header, image.table.data(),
              image.table.size() * sizeof(TableEntry));
  std::memcpy(file + prefix - image.names.size(), image.names.data(), image.names.size());
  std::memset(file + prefix + image.total, 0, room - prefix - image.total);
  image.file = file;
  image.file_bytes = prefix + image.total;
  char* const copy = file + prefix;
  std::vector<const char*> from = image.bytes;
  std::vector<std::uint64_t> at(from.size() + 1, 0);
  for (std::size_t i = 0; i < from.size(); ++i) {
    at[i + 1] = at[i] + image.table[i].bytes;
    image.bytes[i] = copy + at[i];
  }
  const unsigned slices = static_cast<unsigned>(
      std::clamp<std::uint64_t>(p->image.total >> 24, 1, std::max(1u, copy_threads_)));
  auto copy_slice = [&](unsigned s) {
    const std::uint64_t lo = p->image.total * s / slices, hi = p->image.total * (s + 1) / slices;
    for (std::size_t i = 0; i < from.size(); ++i) {
      const std::uint64_t b = std::max(lo, at[i]), e = std::min(hi, at[i + 1]);
      if (s == 0 && i == from.size() / 2) test_stage("copy", iteration, engine.rank());
      if (b < e) std::memcpy(copy + b, from[i] + (b - at[i]), e - b);
    }
  };
  std::vector<std::thread> helpers;
  for (unsigned s = 1; s < slices; ++s) helpers.emplace_back(copy_slice, s);
  copy_slice(0);
  for (auto& t : helpers) t.join();
  copied = true;
  return p;
}

void CheckpointWriter::start(std::unique_ptr<Pending> p) {
  std::error_code ec;
  fs::create_directories(p->sub, ec);
  if (ec) {
    p->set_part("cannot create " + p->sub.string() + ": " + ec.message());
  } else {
    Pending& raw = *p;
    p->thread = std::thread([&raw] { raw.write(); });
  }
  pending_ = std::move(p);
}

std::string CheckpointWriter::at_pause(rt::Engine& engine, const rt::Graph& graph,
                                       std::uint64_t iteration) {
  const std::string stopped = "; the run stopped after iteration " + std::to_string(iteration) +
                              " (the previous checkpoint is kept)";
  bool copied = false;
  if (!policy_.copy) {
    // Every part written, then the manifest, with the run stopped (a stale part of a killed
    // job is overwritten before the manifest is written).
    start(prepare(engine, graph, iteration, copied));
    std::string e = complete_pending(engine);
    return e.empty() ? e : e + stopped;
  }
  Completion c;
  if (!collect(engine, c, iteration)) return kRankFailed;
  auto p = prepare(engine, graph, iteration, copied);
  // The copy precedes the round: no rank runs on (and, sharing memory with this one, writes
  // its locations) before every rank has its copy.
  const auto round = engine.gather((copied ? "c" : "u") + c.mine);
  if (!round) return kRankFailed;
  std::vector<std::string> manifests;
  bool all_copied = true;
  for (const std::string& r : *round) {
    all_copied = all_copied && r[0] == 'c';
    manifests.push_back(r.substr(1));
  }
  if (std::string e = verdict(engine, c, manifests); !e.empty()) return e + stopped;
  start(std::move(p));
  if (all_copied) return "";
  // A rank without its copy writes from its locations: every rank stays in the pause until
  // the checkpoint is complete.
  std::string e = complete_pending(engine);
  return e.empty() ? e : e + stopped;
}

std::string CheckpointWriter::finish(rt::Engine& engine) {
  std::string e = complete_pending(engine);
  return e.empty() ? e : e + " (the previous checkpoint is kept)";
}

bool has_checkpoint_to_resume(const std::string& dir) {
  std::string why;
  bool older = false;
  return newest_complete(dir, why, &older).has_value() || older;
}

std::string load_checkpoint(rt::Engine& engine, rt::Graph& graph, const std::string& dir,
                            const RestoredCheck& check) {
  std::string mine;
  std::uint64_t iteration = 0;
  if (auto found = newest_complete(dir, mine)) {
    const auto& [sub, m] = *found;
    iteration = m.iteration;
    const std::uint64_t fingerprint = checkpoint_fingerprint(graph);
    const std::string which = "the checkpoint of iteration " + std::to_string(m.iteration) +
                              " in '" + dir + "'";
    if (m.graph != fingerprint && m.ranks != engine.ranks())
      // A program may declare locations or tasks by rank count without marking them derived.
      mine = which + " was written by " + std::to_string(m.ranks) + " rank(s), and this job's " +
             std::to_string(engine.ranks()) + " rank(s) build another graph (fingerprint " +
             hex(fingerprint) + ", the checkpoint's " + hex(m.graph) +
             "): a graph whose locations or tasks depend on the rank count (unless marked "
             "derived, Graph::set_derived) restarts only on as many ranks, and another "
             "program, other arguments or another version of ordo build another graph on any; "
             "restart on " +
             std::to_string(m.ranks) + " rank(s), or run from the start";
    else if (m.graph != fingerprint)
      mine = which + " belongs to another graph (fingerprint " + hex(m.graph) +
             ", this graph's " + hex(fingerprint) +
             "): another program, other arguments, or another version of ordo wrote it (a "
             "version may change the size of a layer's locations); restart with the program, "
             "arguments and ordo that wrote it, or run from the start without restarting "
             "(docs/checkpoint.md)";
    else if (std::string e = read_parts(engine, graph, sub, m); !e.empty())
      mine = which + " is incomplete: " + e;
    else if (std::string e = check ? check(engine, graph) : std::string(); !e.empty())
      mine = which + " is corrupt: " + e;
  }
  // Every rank must resume from the same iteration (a directory that is not shared, or was
  // changed meanwhile, could show the ranks different checkpoints).
  mine += '\n' + std::to_string(iteration);
  const auto all = engine.gather(mine);
  if (!all) return "a rank failed while loading the checkpoint";
  for (std::size_t r = 0; r < all->size(); ++r) {
    const std::string& s = (*all)[r];
    const std::size_t nl = s.rfind('\n');
    if (nl != 0) return (all->size() > 1 ? "rank " + std::to_string(r) + ": " : "") + s.substr(0, nl);
    const std::string& first = (*all)[0];
    if (s.substr(nl + 1) != first.substr(first.rfind('\n') + 1))
      return "ranks 0 and " + std::to_string(r) + " found different newest checkpoints in '" +
             dir + "'; give every rank the same (shared) directory";
  }
  graph.set_first_iteration(iteration);
  return "";
}

}  // namespace ordo::detail

namespace ordo {

std::uint64_t resume(Runtime& runtime, Graph& graph, const std::string& dir) {
  const unsigned attempt = detail::relaunch_setting();
  if (attempt == 0 || dir.empty()) return 0;
  if (!detail::has_checkpoint_to_resume(dir)) {
    if (runtime.rank() == 0)
      std::fprintf(stderr,
                   "ordo: relaunch %u: no complete checkpoint in '%s' yet; running from "
                   "the start on %u rank(s)\n",
                   attempt, dir.c_str(), runtime.ranks());
    return 0;
  }
  const std::uint64_t k = runtime.restart(graph, dir);
  if (runtime.rank() == 0)
    std::fprintf(stderr,
                 "ordo: relaunch %u: resumed after iteration %llu from the checkpoint in "
                 "'%s', on %u rank(s)\n",
                 attempt, static_cast<unsigned long long>(k), dir.c_str(), runtime.ranks());
  return k;
}

}  // namespace ordo
