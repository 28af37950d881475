#include "trace_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string_view>

#include "runtime/regular_file.hpp"

namespace ordo::tracefile {

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::task_begin: return "task_begin";
    case Kind::task_end: return "task_end";
    case Kind::grant: return "grant";
    case Kind::steal: return "steal";
    case Kind::park: return "park";
    case Kind::unpark: return "unpark";
    case Kind::fiber_suspend: return "fiber_suspend";
    case Kind::fiber_resume: return "fiber_resume";
    case Kind::send: return "send";
    case Kind::receive: return "receive";
    case Kind::flush: return "flush";
    case Kind::run_begin: return "run_begin";
    case Kind::run_end: return "run_end";
  }
  return "?";
}

namespace {

// Bounds-checked reader over one graph record's payload.
// `s` with every byte that is not part of a well-formed UTF-8 character (RFC 3629: no overlong
// form, no surrogate, nothing past U+10FFFF) written as the four characters \xNN.
std::string escape_non_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::size_t len = b < 0x80           ? 1
                      : (b >> 5) == 0x6  ? 2
                      : (b >> 4) == 0xe  ? 3
                      : (b >> 3) == 0x1e ? 4
                                         : 0;
    bool ok = len != 0 && i + len <= s.size();
    std::uint32_t cp = len == 1 ? b : len == 2 ? b & 0x1f : len == 3 ? b & 0x0f : b & 0x07;
    for (std::size_t k = 1; ok && k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      ok = (c & 0xc0) == 0x80;
      cp = (cp << 6) | (c & 0x3f);
    }
    static constexpr std::uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (ok && (cp < least[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))) ok = false;
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
      continue;
    }
    static constexpr char hex[] = "0123456789ABCDEF";
    out += "\\x";
    out += hex[b >> 4];
    out += hex[b & 0xf];
    ++i;
  }
  return out;
}

struct Cursor {
  const std::uint8_t* p;
  const std::uint8_t* end;
  const std::string& path;
  std::uint64_t where;  // file offset of the record, for messages

  std::size_t left() const { return static_cast<std::size_t>(end - p); }

  void need(std::size_t n) const {
    if (static_cast<std::size_t>(end - p) < n)
      throw TraceError(path + ": corrupt graph record at byte " + std::to_string(where) +
                       ": its tables run past the record's end");
  }
  // The next fixed-size integer (little-endian, as the recorder on a little-endian host wrote it).
  template <class T>
  T number() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, p, sizeof(T));
    p += sizeof(T);
    return v;
  }
  std::uint32_t u32() { return number<std::uint32_t>(); }
  std::uint64_t u64() { return number<std::uint64_t>(); }
  std::uint8_t u8() { return number<std::uint8_t>(); }
  // A name, as UTF-8: the runtime writes a task's or location's name as the program gave it,
  // in whatever encoding (Latin-1, say), and every output (JSON, HTML) needs UTF-8.
  std::string str() {
    std::uint32_t n = u32();
    need(n);
    std::string s = escape_non_utf8(std::string_view(reinterpret_cast<const char*>(p), n));
    p += n;
    return s;
  }
};

void read_graph(RankTrace& r, std::span<const std::uint8_t> payload, std::uint64_t where) {
  Cursor c{payload.data(), payload.data() + payload.size(), r.path, where};
  auto corrupt = [&](const std::string& what) {
    return TraceError(r.path + ": corrupt graph record at byte " + std::to_string(where) + ": " +
                      what);
  };
  std::uint32_t graph = c.u32();
  std::uint32_t task_base = c.u32();
  std::uint32_t location_base = c.u32();
  std::uint32_t ntasks = c.u32();
  std::uint32_t nlocs = c.u32();
  if (task_base != r.tasks.size() || location_base != r.locations.size())
    throw corrupt("its ids do not follow the previous graph's");
  // Each location takes at least 16 bytes of the record and each task 12: a count the bytes
  // cannot hold is refused before anything is allocated for it.
  if (std::uint64_t(nlocs) * 16 + std::uint64_t(ntasks) * 12 > c.left())
    throw corrupt("it declares " + std::to_string(ntasks) + " tasks and " + std::to_string(nlocs) +
                  " locations, more than its " + std::to_string(payload.size()) + " bytes hold");
  for (std::uint32_t l = 0; l < nlocs; ++l) {
    LocationInfo li;
    li.graph = graph;
    li.bytes = c.u64();
    li.home = c.u32();
    li.name = c.str();
    if (li.home >= r.ranks) throw corrupt("location '" + li.name + "' has home rank out of range");
    r.locations.push_back(std::move(li));
  }
  for (std::uint32_t t = 0; t < ntasks; ++t) {
    TaskInfo ti;
    ti.graph = graph;
    ti.rank = c.u32();
    ti.name = c.str();
    std::uint32_t n = c.u32();
    if (n > nlocs || std::uint64_t(n) * 5 > c.left())
      throw corrupt("task '" + ti.name + "' has more accesses than locations or bytes");
    ti.accesses.reserve(n);
    for (std::uint32_t a = 0; a < n; ++a) {
      std::uint32_t loc = c.u32();
      std::uint8_t mode = c.u8();
      if (loc >= nlocs || mode > 1)
        throw corrupt("task '" + ti.name + "' has an access to a location that does not exist");
      ti.accesses.push_back({loc + location_base, mode == 1});
    }
    if (ti.rank >= r.ranks) throw corrupt("task '" + ti.name + "' runs on a rank out of range");
    r.tasks.push_back(std::move(ti));
  }
  if (c.p != c.end) throw corrupt("bytes left over after its tables");
}

void check_event(const RankTrace& r, const Event& e, std::uint64_t where) {
  auto bad = [&](const std::string& what) {
    return TraceError(r.path + ": corrupt event at byte " + std::to_string(where) + ": " + what);
  };
  if (e.kind == 0 || e.kind > kMaxKind) throw bad("unknown kind " + std::to_string(e.kind));
  if (e.time > std::uint64_t(1) << 62)
    throw bad("time " + std::to_string(e.time) + " ns is more than a century after the epoch");
  if (e.worker > r.workers)
    throw bad("worker " + std::to_string(e.worker) + " out of range (the file has " +
              std::to_string(r.workers) + " workers)");
  bool has_task = false, has_location = false;
  switch (e.k()) {
    case Kind::task_begin:
    case Kind::task_end: has_task = true; break;
    case Kind::grant:
    case Kind::fiber_suspend:
    case Kind::fiber_resume: has_task = has_location = true; break;
    case Kind::send:
    case Kind::receive:
      if (e.peer >= r.ranks) throw bad("peer rank " + std::to_string(e.peer) + " out of range");
      break;
    default: break;
  }
  if ((has_task || e.task != kNone) && e.task >= r.tasks.size())
    throw bad("task id " + std::to_string(e.task) + " is not in the file's task table");
  if ((has_location || e.location != kNone) && e.location >= r.locations.size())
    throw bad("location id " + std::to_string(e.location) + " is not in the file's location table");
  if ((e.k() == Kind::grant || e.k() == Kind::flush) && e.arg1 > std::uint64_t(1) << 62)
    throw bad("time " + std::to_string(e.arg1) + " ns is more than a century");
  if (e.k() == Kind::grant && e.peer != kNone && e.peer >= r.tasks.size())
    throw bad("releasing task id " + std::to_string(e.peer) + " is not in the task table");
}

}  // namespace

RankTrace parse_rank(std::span<const std::uint8_t> data, const std::string& path) {
  RankTrace r;
  r.path = path;
  const std::uint64_t size = data.size();
  FileHeader h;
  const bool magic =
      size > 0 && std::memcmp(data.data(), rt::trace::kMagic, std::min<std::uint64_t>(size, 8)) == 0;
  if (!magic || size == 0)
    throw TraceError(path + ": not an ordo trace file (no ORDOTRC magic at its start)");
  if (size < 12)
    throw TraceError(path + ": truncated: " + std::to_string(size) +
                     " bytes, shorter than the header (was the run killed before the trace was "
                     "written?)");
  std::memcpy(&h.version, data.data() + 8, 4);
  if (h.version > kFormatVersion)
    throw TraceError(path + ": trace format version " + std::to_string(h.version) +
                     " is newer than this ordo-trace reads (up to " +
                     std::to_string(kFormatVersion) +
                     "); use the ordo-trace of the ordo that wrote it");
  if (h.version < kOldestVersion)
    throw TraceError(path + ": corrupt header: format version " + std::to_string(h.version));
  if (size < sizeof h)
    throw TraceError(path + ": truncated: " + std::to_string(size) +
                     " bytes, shorter than the " + std::to_string(sizeof h) + "-byte header");
  std::memcpy(&h, data.data(), sizeof h);
  if (h.header_size != sizeof h || h.event_size != sizeof(Event))
    throw TraceError(path + ": corrupt header: header size " + std::to_string(h.header_size) +
                     ", event size " + std::to_string(h.event_size) + " (expected " +
                     std::to_string(sizeof h) + ", " + std::to_string(sizeof(Event)) + ")");
  // Event times are added to the offset as signed 64-bit nanoseconds; a century either way is
  // far beyond any real clock and keeps every sum in range.
  constexpr std::int64_t kCentury = 100ll * 365 * 24 * 3600 * 1'000'000'000ll;
  if (h.clock_offset_ns > kCentury || h.clock_offset_ns < -kCentury)
    throw TraceError(path + ": corrupt header: clock offset " + std::to_string(h.clock_offset_ns) +
                     " ns is more than a century");
  if (h.ranks == 0 || h.rank >= h.ranks || h.workers == 0 || h.workers > 65535)
    throw TraceError(path + ": corrupt header: rank " + std::to_string(h.rank) + " of " +
                     std::to_string(h.ranks) + ", " + std::to_string(h.workers) + " workers");
  r.version = h.version;
  r.rank = h.rank;
  r.ranks = h.ranks;
  r.workers = h.workers;
  r.clock_offset_ns = h.clock_offset_ns;
  r.epoch_ns = h.epoch_ns;
  r.run_id = h.version >= 2 ? h.run_id : 0;

  std::uint64_t pos = sizeof h;
  bool ended = false;
  while (pos < size) {
    if (size - pos < sizeof(RecordHeader))
      throw TraceError(path + ": truncated at byte " + std::to_string(pos) +
                       ": a record header needs 16 bytes, " + std::to_string(size - pos) +
                       " are left (was the run killed before the trace was closed?)");
    RecordHeader rh;
    std::memcpy(&rh, data.data() + pos, sizeof rh);
    const std::uint64_t body = pos + sizeof rh;
    if (rh.bytes > size - body)
      throw TraceError(path + ": truncated at byte " + std::to_string(pos) + ": a record of " +
                       std::to_string(rh.bytes) + " bytes, only " + std::to_string(size - body) +
                       " are left (was the run killed before the trace was closed?)");
    switch (rh.type) {
      case 1: read_graph(r, data.subspan(body, rh.bytes), pos); break;
      case 2: {
        if (rh.bytes % sizeof(Event) != 0)
          throw TraceError(path + ": corrupt event record at byte " + std::to_string(pos) +
                           ": its size is not a multiple of " + std::to_string(sizeof(Event)));
        if (rh.arg > r.workers)
          throw TraceError(path + ": corrupt event record at byte " + std::to_string(pos) +
                           ": buffer " + std::to_string(rh.arg) + " out of range");
        r.events.reserve(r.events.size() + rh.bytes / sizeof(Event));
        for (std::uint64_t off = 0; off < rh.bytes; off += sizeof(Event)) {
          Event e;
          std::memcpy(&e, data.data() + body + off, sizeof e);
          check_event(r, e, body + off);
          r.events.push_back(e);
        }
        break;
      }
      case 3: {
        std::uint64_t total = 0;
        if (rh.bytes != 8)
          throw TraceError(path + ": corrupt end record at byte " + std::to_string(pos));
        std::memcpy(&total, data.data() + body, 8);
        if (total != r.events.size())
          throw TraceError(path + ": corrupt: the end record counts " + std::to_string(total) +
                           " events, the file holds " + std::to_string(r.events.size()));
        ended = true;
        break;
      }
      default:
        throw TraceError(path + ": corrupt record at byte " + std::to_string(pos) +
                         ": unknown type " + std::to_string(rh.type));
    }
    pos = body + rh.bytes;
    if (ended) break;
  }
  if (!ended)
    throw TraceError(path + ": truncated: no end record after byte " + std::to_string(pos) +
                     " (was the run killed before the trace was closed?)");
  if (pos != size)
    throw TraceError(path + ": corrupt: " + std::to_string(size - pos) +
                     " bytes after the end record");
  std::stable_sort(r.events.begin(), r.events.end(),
                   [](const Event& a, const Event& b) { return a.time < b.time; });
  return r;
}

RankTrace read_rank(const std::string& path) {
  // Checked before a byte is read, without blocking: a FIFO would wait for a writer for ever,
  // /dev/zero would be read without end (runtime/regular_file.hpp).
  std::string kind;
  const int fd = ordo::files::open_regular(path, kind);
  if (fd < 0 && !kind.empty()) throw TraceError(path + ": " + kind + "; give a trace file");
  if (fd < 0) throw TraceError(path + ": cannot open: " + std::strerror(errno));
  std::vector<std::uint8_t> data;
  std::uint8_t buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      throw TraceError(path + ": cannot read: " + std::strerror(e));
    }
    if (n == 0) break;
    data.insert(data.end(), buf, buf + n);
  }
  ::close(fd);
  return parse_rank(data, path);
}

Trace load(const std::vector<std::string>& inputs, bool align) {
  namespace fs = std::filesystem;
  if (inputs.empty()) throw TraceError("no trace file given");
  std::vector<std::string> files;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (fs::is_regular_file(in, ec)) {
      files.push_back(in);
      continue;
    }
    std::size_t before = files.size();
    for (unsigned r = 0;; ++r) {
      std::string p = in + ".rank" + std::to_string(r);
      if (!fs::is_regular_file(p, ec)) break;
      files.push_back(p);
    }
    struct stat st {};
    if (files.size() == before && ::stat(in.c_str(), &st) == 0)
      throw TraceError(in + ": it is " + ordo::files::kind_of(st.st_mode) +
                       ", not a trace file; give a trace file or the base path of a "
                       "multi-rank trace");
    if (files.size() == before)
      throw TraceError(in + ": no such trace file, and no per-rank files " + in + ".rank0, " +
                       in + ".rank1, ...");
  }
  Trace t;
  std::vector<RankTrace> got;
  for (const std::string& f : files) got.push_back(read_rank(f));
  // The first file names the run; every other must be of the same one. Its path is kept
  // apart, since the files move into the trace below.
  const std::string first = got.front().path;
  const std::uint32_t ranks = got.front().ranks;
  const std::uint64_t run_id = got.front().run_id;
  for (const RankTrace& r : got) {
    if (r.ranks != ranks)
      throw TraceError(r.path + ": belongs to a run of " + std::to_string(r.ranks) + " ranks, " +
                       first + " to one of " + std::to_string(ranks) +
                       "; give the files of one run");
    if (r.run_id != run_id)
      throw TraceError(r.path + " and " + first + " are from different runs (run ids " +
                       std::to_string(r.run_id) + " and " + std::to_string(run_id) +
                       "); give the files of one run");
  }
  // The header's rank count sizes what follows: it is checked against the files given before
  // anything is allocated for it (a lying header must not cost gigabytes).
  if (ranks > got.size()) {
    std::vector<std::uint32_t> given;
    for (const RankTrace& r : got) given.push_back(r.rank);
    std::sort(given.begin(), given.end());
    std::uint32_t missing = 0;
    for (std::uint32_t g : given)
      if (g == missing) ++missing;
    throw TraceError("the trace of rank " + std::to_string(missing) + " of " +
                     std::to_string(ranks) + " is missing (" + std::to_string(got.size()) +
                     " file(s) given, " + first + " says the run had " + std::to_string(ranks) +
                     " ranks); give every rank's file (or the base path)");
  }
  t.ranks.resize(ranks);
  std::vector<bool> seen(ranks, false);
  for (RankTrace& r : got) {
    if (seen[r.rank])
      throw TraceError(r.path + ": rank " + std::to_string(r.rank) + " is given twice");
    seen[r.rank] = true;
    if (!align) r.clock_offset_ns = 0;
    t.ranks[r.rank] = std::move(r);
  }
  std::int64_t origin = std::numeric_limits<std::int64_t>::max();
  for (const RankTrace& r : t.ranks)
    if (!r.events.empty())
      origin = std::min(origin, static_cast<std::int64_t>(r.events.front().time) + r.clock_offset_ns);
  t.origin = origin == std::numeric_limits<std::int64_t>::max() ? 0 : origin;
  return t;
}

}  // namespace ordo::tracefile
