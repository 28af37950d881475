#include "api/checkpoint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>
#include <vector>

#include "runtime/control_plane.hpp"
#include <ordo/ordo.hpp>

namespace ordo::detail {

namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'O', 'R', 'D', 'O', 'C', 'K', 'P', 'T'};
constexpr std::uint32_t kVersion = 1;
constexpr const char* kManifestHead = "ordo checkpoint 1";
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
struct RecordHeader {
  std::uint32_t location;
  std::uint32_t reserved;
  std::uint64_t bytes;
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

// Writes `path` atomically: `fill(fd)` writes a temporary file beside it, which is synced and
// renamed over `path`, and the directory synced. "" or the error.
template <class Fill>
std::string write_atomically(const fs::path& path, Fill&& fill) {
  const fs::path tmp = path.string() + ".tmp";
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return "cannot create " + tmp.string() + ": " + errno_text();
  if (!fill(fd.get()) || ::fsync(fd.get()) != 0 || !fd.close()) {
    const std::string e = "cannot write " + tmp.string() + ": " + errno_text();
    ::unlink(tmp.c_str());
    return e;
  }
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

std::string write_part(const rt::Engine& engine, const rt::Graph& graph, const fs::path& sub,
                       std::uint64_t fingerprint, std::uint64_t iteration) {
  const auto& locs = graph.locations();
  PartHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.rank = engine.rank();
  h.ranks = engine.ranks();
  h.graph = fingerprint;
  h.iteration = iteration;
  for (std::uint32_t l = 0; l < locs.size(); ++l)
    if (is_home(engine, l)) ++h.records;
  return write_atomically(sub / ("rank-" + std::to_string(engine.rank()) + ".part"), [&](int fd) {
    if (!write_all(fd, &h, sizeof h)) return false;
    for (std::uint32_t l = 0; l < locs.size(); ++l) {
      if (!is_home(engine, l)) continue;
      const RecordHeader r{l, 0, locs[l].elem_size * locs[l].count};
      if (!write_all(fd, &r, sizeof r) || !write_all(fd, graph.data(l), r.bytes)) return false;
    }
    return true;
  });
}

// The first non-empty entry of `all`, as "rank R: what", or "".
std::string first_error(const std::optional<std::vector<std::string>>& all) {
  if (!all) return "a rank failed";  // the run's own failure says which
  for (std::size_t r = 0; r < all->size(); ++r)
    if (!(*all)[r].empty()) return "rank " + std::to_string(r) + ": " + (*all)[r];
  return "";
}

// Opens a file of a checkpoint for reading, refusing anything but a regular file: a FIFO put
// in its place would block open() (O_NONBLOCK) or read() for ever, a device would be read
// without end. -1 with errno, or with `why` set for a file of another kind.
int open_regular(const fs::path& path, std::string& why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = path.string() + " is not a regular file";
    ::close(fd);
    return -1;
  }
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

// Reads this rank's part of the checkpoint `m` from `file` into the graph's home locations.
std::string read_part(const rt::Engine& engine, rt::Graph& graph, const fs::path& file,
                      const Manifest& m) {
  std::string kind;
  Fd fd(open_regular(file, kind));
  if (fd.get() < 0)
    return !kind.empty()      ? kind
           : errno == ENOENT ? file.string() + " is missing (this rank's part of the checkpoint)"
                             : "cannot open " + file.string() + ": " + errno_text();
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return "cannot stat " + file.string() + ": " + errno_text();
  const auto size = static_cast<std::uint64_t>(st.st_size);
  const std::string where = file.string() + " ";
  PartHeader h{};
  if (size < sizeof h || !read_all(fd.get(), &h, sizeof h, 0))
    return where + "is truncated (" + std::to_string(size) + " bytes, shorter than its header)";
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.version != kVersion)
    return where + "is not an ordo checkpoint part (version 1)";
  if (h.rank != engine.rank() || h.ranks != m.ranks || h.graph != m.graph ||
      h.iteration != m.iteration)
    return where + "belongs to another checkpoint (rank " + std::to_string(h.rank) + " of " +
           std::to_string(h.ranks) + ", iteration " + std::to_string(h.iteration) + ")";
  const auto& locs = graph.locations();
  std::uint64_t homes = 0;
  for (std::uint32_t l = 0; l < locs.size(); ++l)
    if (is_home(engine, l)) ++homes;
  if (h.records != homes)
    return where + "holds " + std::to_string(h.records) + " locations; this rank's home has " +
           std::to_string(homes);
  std::vector<bool> seen(locs.size(), false);
  std::uint64_t at = sizeof h;
  for (std::uint64_t i = 0; i < h.records; ++i) {
    RecordHeader r{};
    if (size - at < sizeof r || !read_all(fd.get(), &r, sizeof r, at))
      return where + "is truncated at location record " + std::to_string(i);
    at += sizeof r;
    if (r.location >= locs.size() || !is_home(engine, r.location) || seen[r.location])
      return where + "names location #" + std::to_string(r.location) +
             ", which is not one of this rank's home locations (or twice)";
    seen[r.location] = true;
    const rt::LocationDesc& d = locs[r.location];
    if (r.bytes != d.elem_size * d.count)
      return where + "holds " + std::to_string(r.bytes) + " bytes for location '" + d.name +
             "', which has " + std::to_string(d.elem_size * d.count);
    if (size - at < r.bytes) return where + "is truncated in location '" + d.name + "'";
    if (!read_all(fd.get(), graph.data(r.location), r.bytes, at))
      return "cannot read " + file.string() + ": " + errno_text();
    at += r.bytes;
  }
  if (at != size)
    return where + "has " + std::to_string(size - at) + " bytes after its last location";
  return "";
}

// The newest complete checkpoint in `dir`: its directory and manifest, or the reason there is
// none.
std::optional<std::pair<fs::path, Manifest>> newest_complete(const fs::path& dir,
                                                             std::string& why) {
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

}  // namespace

std::string format_manifest(const Manifest& m) {
  return std::string(kManifestHead) + "\ngraph " + hex(m.graph) + "\niteration " +
         std::to_string(m.iteration) + "\nranks " + std::to_string(m.ranks) + "\n";
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
  if (!next_line(line) || line != kManifestHead) {
    why = "its first line is not '" + std::string(kManifestHead) + "'";
    return std::nullopt;
  }
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

void prepare_checkpoint_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || ::access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error("checkpoint directory '" + dir + "' cannot be written" +
                (ec ? ": " + ec.message() : std::string()) +
                " (RuntimeOptions::checkpoint_dir or ORDO_CHECKPOINT_DIR); give a writable "
                "directory");
}

std::string write_checkpoint(rt::Engine& engine, const rt::Graph& graph, const std::string& dir,
                             std::uint64_t iteration) {
  const std::uint64_t fingerprint = rt::graph_fingerprint(graph);
  const fs::path sub = fs::path(dir) / checkpoint_name(iteration);
  std::error_code ec;
  fs::create_directories(sub, ec);
  std::string mine = ec ? "cannot create " + sub.string() + ": " + ec.message()
                        : write_part(engine, graph, sub, fingerprint, iteration);
  // Every part is on disk before the manifest exists: the checkpoint counts from its rename.
  if (std::string e = first_error(engine.gather(mine)); !e.empty()) return e;
  mine.clear();
  if (engine.rank() == 0) {
    const std::string text = format_manifest({fingerprint, iteration, engine.ranks()});
    mine = write_atomically(sub / "manifest",
                            [&](int fd) { return write_all(fd, text.data(), text.size()); });
    if (mine.empty()) {
      // Older checkpoints go only now that a newer one is complete.
      for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const auto k = checkpoint_iteration(it->path().filename().string());
        std::error_code ignored;  // a leftover is harmless: the newest complete one is read
        if (k && *k < iteration) fs::remove_all(it->path(), ignored);
      }
    }
  }
  return first_error(engine.gather(mine));
}

std::string load_checkpoint(rt::Engine& engine, rt::Graph& graph, const std::string& dir,
                            const RestoredCheck& check) {
  std::string mine;
  std::uint64_t iteration = 0;
  if (auto found = newest_complete(dir, mine)) {
    const auto& [sub, m] = *found;
    iteration = m.iteration;
    const std::uint64_t fingerprint = rt::graph_fingerprint(graph);
    const std::string which = "the checkpoint of iteration " + std::to_string(m.iteration) +
                              " in '" + dir + "'";
    if (m.ranks != engine.ranks())
      mine = which + " was written by " + std::to_string(m.ranks) + " rank(s), and this job has " +
             std::to_string(engine.ranks()) + "; restart on " + std::to_string(m.ranks) +
             " rank(s)";
    else if (m.graph != fingerprint)
      mine = which + " belongs to another graph (fingerprint " + hex(m.graph) +
             ", this graph's " + hex(fingerprint) +
             "): another program, other arguments, or another version of ordo wrote it (a "
             "version may change the size of a layer's locations); restart with the program, "
             "arguments and ordo that wrote it, or run from the start without restarting "
             "(docs/checkpoint.md)";
    else if (std::string e = read_part(engine, graph, sub / ("rank-" + std::to_string(engine.rank()) + ".part"), m); !e.empty())
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
