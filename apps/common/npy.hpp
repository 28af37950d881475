// A small reader and writer for NumPy .npy files holding float64 grids: version 1.0 header,
// dtype '<f8' (little-endian double), C order. Anything else is refused with an ordo::Error
// that names the file and what to do (np.save(path, a.astype('<f8')) writes what we read).
//
// A file is input from outside: its header is checked against the file's real size before
// anything is allocated (parse_npy_header), so a header that claims more than the file holds,
// or a shape whose element count overflows, costs nothing. Outputs are written atomically by
// the caller (output_file.hpp); write_npy and write_npy_part write the bytes.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <ordo/ordo.hpp>

#include "runtime/regular_file.hpp"

namespace ordo::app {

struct NpyArray {
  std::vector<std::size_t> shape;
  std::vector<double> data;
};

// What a checked header says: the extents, their product, and where the data starts. The data
// is exactly count * 8 bytes from data_offset to the end of the file.
struct NpyHeader {
  std::vector<std::size_t> shape;
  std::size_t count = 0;
  std::size_t data_offset = 0;
};

// The header of a float64 C-order .npy of `shape`: magic, version 1.0, length, and the dict
// padded with spaces and a '\n' to a multiple of 64 bytes. The data follows it.
inline std::string npy_header(const std::vector<std::size_t>& shape) {
  static_assert(std::endian::native == std::endian::little, ".npy '<f8' is little-endian");
  std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i) dict += std::to_string(shape[i]) + ", ";
  if (shape.size() > 1) dict.resize(dict.size() - 2);  // "(a, b)"; one extent keeps "(a,)"
  else if (shape.size() == 1) dict.resize(dict.size() - 1);
  dict += "), }";
  // Magic (6) + version (2) + length (2) + dict + padding + '\n' is a multiple of 64.
  std::size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  const auto hlen = static_cast<std::uint16_t>(dict.size());
  const char head[10] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0,
                         static_cast<char>(hlen & 0xff), static_cast<char>(hlen >> 8)};
  return std::string(head, 10) + dict;
}

inline void write_npy(const std::string& path, const std::vector<std::size_t>& shape,
                      const std::vector<double>& data) {
  const std::string header = npy_header(shape);
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error("cannot write '" + path + "': check the directory exists and is writable");
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(data.data()),  // safety: doubles written as bytes
            static_cast<std::streamsize>(data.size() * sizeof(double)));
  if (!out) throw Error("writing '" + path + "' failed (disk full?)");
}

// A run of consecutive elements of a .npy's data: `values` go to element `at` (C order over
// the whole shape) onwards.
struct NpySegment {
  std::size_t at = 0;
  std::span<const double> values;
};

// One writer's part of a .npy that several processes write together, each its own elements,
// with no gather (the apps across ranks, docs/distributed.md). Every writer opens the file
// without truncating it and sets its size to exactly header + data, so the writers need no
// order among themselves: a size set twice is the same size, an extension only adds zeros past
// the end (never over bytes a writer has put), and a shrink only drops a stale file's tail.
// The writers' segments, with the header from the one that has `header` set, must cover the
// data exactly once; when all have returned the file is complete and bit-identical to
// write_npy of the whole array. Segments adjacent in the file are merged into one pwrite.
inline void write_npy_part(const std::string& path, const std::vector<std::size_t>& shape,
                           bool header, std::vector<NpySegment> segments) {
  const std::string head = npy_header(shape);
  std::size_t count = 1;
  for (std::size_t s : shape) count *= s;
  auto fail = [&](const char* what) {
    return Error("cannot write '" + path + "' (" + what + ": " + std::strerror(errno) +
                 "): check the directory exists, is writable and has space");
  };
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) throw fail("open");
  auto put = [&](const char* bytes, std::size_t n, std::size_t offset) {
    while (n > 0) {
      const ssize_t w = ::pwrite(fd, bytes, n, static_cast<off_t>(offset));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        const int e = errno;
        ::close(fd);
        errno = e;
        throw fail("pwrite");
      }
      bytes += w;
      n -= static_cast<std::size_t>(w);
      offset += static_cast<std::size_t>(w);
    }
  };
  if (::ftruncate(fd, static_cast<off_t>(head.size() + count * sizeof(double))) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    throw fail("ftruncate");
  }
  if (header) put(head.data(), head.size(), 0);
  std::sort(segments.begin(), segments.end(),
            [](const NpySegment& a, const NpySegment& b) { return a.at < b.at; });
  for (std::size_t i = 0; i < segments.size();) {
    // Merge runs that are contiguous both in the file and in memory.
    const NpySegment& s = segments[i];
    std::size_t len = s.values.size(), j = i + 1;
    while (j < segments.size() && segments[j].at == s.at + len &&
           segments[j].values.data() == s.values.data() + len)
      len += segments[j++].values.size();
    if (s.at + len > count) {
      ::close(fd);
      throw Error("write_npy_part: segment beyond the array's " + std::to_string(count) +
                  " elements (a bug in the caller)");
    }
    put(reinterpret_cast<const char*>(s.values.data()),  // safety: doubles written as bytes
        len * sizeof(double), head.size() + s.at * sizeof(double));
    i = j;
  }
  // The caller renames the file into place only once every writer has synced (output_file.hpp).
  if (::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    throw fail("fsync");
  }
  if (::close(fd) != 0) throw fail("close");
}

// Checks the header at the front of `bytes` (the first bytes of a file of `file_size` bytes;
// at most the first 65545 are ever needed) and returns what it says. Throws ordo::Error naming
// `path` when it is not a float64 C-order version-1.0 .npy whose data fills the rest of the
// file exactly. Allocates nothing that the header's numbers decide.
inline NpyHeader parse_npy_header(std::string_view bytes, std::uint64_t file_size, const std::string& path) {
  auto bad = [&](const std::string& why) {
    return Error("'" + path + "' is not a usable .npy file: " + why +
                 " (write it with numpy.save(path, a.astype('<f8')))");
  };
  if (bytes.size() < 10 || bytes.substr(0, 6) != "\x93NUMPY") throw bad("no .npy magic");
  if (bytes[6] != 1 || bytes[7] != 0)
    throw bad("header version " + std::to_string(int(static_cast<unsigned char>(bytes[6]))) + "." +
              std::to_string(int(static_cast<unsigned char>(bytes[7]))) + "; only version 1.0 is read");
  const std::size_t hlen = static_cast<unsigned char>(bytes[8]) |
                           static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8;
  if (bytes.size() < 10 + hlen || file_size < 10 + hlen) throw bad("truncated header");
  const std::string_view dict = bytes.substr(10, hlen);
  // numpy reads the dict with ast.literal_eval, where a key given twice takes its last value,
  // and ordo's lookup below its first: a header that says two things is refused, whichever.
  {
    std::vector<std::string_view> keys;
    int depth = 0;
    for (std::size_t i = 0; i < dict.size(); ++i) {
      const char ch = dict[i];
      if (ch == '(' || ch == '[') ++depth;
      if (ch == ')' || ch == ']') --depth;
      if (ch != '\'' && ch != '"') continue;
      const std::size_t end = dict.find(ch, i + 1);
      if (end == std::string_view::npos) throw bad("corrupt header (an unclosed quote)");
      const std::size_t after = dict.find_first_not_of(' ', end + 1);
      if (depth == 0 && after != std::string_view::npos && dict[after] == ':') {
        const std::string_view key = dict.substr(i + 1, end - i - 1);
        if (std::find(keys.begin(), keys.end(), key) != keys.end())
          throw bad("header gives '" + std::string(key) + "' twice");
        keys.push_back(key);
      }
      i = end;
    }
  }
  // The value of 'key' in the dict: a quoted string, a word, or a parenthesised tuple.
  auto field = [&](std::string_view key) -> std::string_view {
    const std::string quoted = "'" + std::string(key) + "'";
    const std::size_t k = dict.find(quoted);
    if (k == std::string_view::npos) throw bad("header has no '" + std::string(key) + "'");
    std::size_t b = dict.find_first_not_of(' ', k + quoted.size());
    if (b == std::string_view::npos || dict[b] != ':') throw bad("corrupt header");
    b = dict.find_first_not_of(' ', b + 1);
    if (b == std::string_view::npos) throw bad("corrupt header");
    std::size_t e = std::string_view::npos;
    if (dict[b] == '(') {
      e = dict.find(')', b);
      if (e != std::string_view::npos) ++e;
    } else if (dict[b] == '\'') {
      e = dict.find('\'', b + 1);
      if (e != std::string_view::npos) ++e;
    } else {
      e = dict.find_first_of(",}", b);
    }
    if (e == std::string_view::npos) throw bad("corrupt header");
    return dict.substr(b, e - b);
  };
  const std::string_view descr = field("descr");
  if (descr != "'<f8'")
    throw bad("dtype " + std::string(descr) + "; ordo reads float64 little-endian ('<f8') only");
  if (field("fortran_order") != "False") throw bad("Fortran order; ordo reads C order only");
  const std::string_view shape_text = field("shape");
  NpyHeader h;
  h.data_offset = 10 + hlen;
  h.count = 1;
  constexpr std::size_t most = std::numeric_limits<std::size_t>::max() / sizeof(double);
  for (std::size_t i = 1; i < shape_text.size();) {
    const std::size_t j = shape_text.find_first_of(",)", i);
    if (j == std::string_view::npos) throw bad("corrupt shape " + std::string(shape_text));
    std::string_view part = shape_text.substr(i, j - i);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    if (!part.empty()) {
      std::size_t extent = 0;
      for (char ch : part) {
        if (ch < '0' || ch > '9') throw bad("corrupt shape " + std::string(shape_text));
        if (extent > (most - std::size_t(ch - '0')) / 10)
          throw bad("shape " + std::string(shape_text) + " is larger than any file");
        extent = extent * 10 + std::size_t(ch - '0');
      }
      if (extent != 0 && h.count > most / extent)
        throw bad("shape " + std::string(shape_text) + " is larger than any file");
      h.count *= extent;
      h.shape.push_back(extent);
    } else if (j + 1 < shape_text.size()) {
      throw bad("corrupt shape " + std::string(shape_text));  // "(,3)" or "(3,,4)"
    }
    i = j + 1;
  }
  if (h.shape.empty()) throw bad("a scalar; give a grid");
  if (h.shape.size() > 32) throw bad("shape " + std::string(shape_text) + " has more than 32 dimensions");
  const std::uint64_t want = std::uint64_t(h.count) * sizeof(double);
  const std::uint64_t have = file_size - h.data_offset;
  if (have < want)
    throw bad("truncated data: the shape " + std::string(shape_text) + " needs " + std::to_string(want) +
              " bytes after the header, the file has " + std::to_string(have));
  if (have > want) throw bad("trailing bytes after the data of shape " + std::string(shape_text));
  return h;
}

namespace detail {

// Reads up to n bytes at offset; returns how many (fewer only at the end of the file).
inline std::size_t pread_full(int fd, char* p, std::size_t n, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < n) {
    const ssize_t k = ::pread(fd, p + done, n - done, static_cast<off_t>(offset + done));
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return done;
    if (k == 0) break;
    done += std::size_t(k);
  }
  return done;
}

}  // namespace detail

// An open .npy file whose header has been checked. read() fills a range of its elements, for
// callers that read only their part of the grid.
class NpyFile {
 public:
  explicit NpyFile(const std::string& path) : path_(path) {
    // Checked before a byte is read, without blocking: a FIFO would wait for a writer for ever.
    std::string kind;
    fd_ = files::open_regular(path, kind);
    if (fd_ < 0 && !kind.empty())
      throw Error("'" + path + "' cannot be read: " + kind + "; give a .npy file");
    if (fd_ < 0)
      throw Error("cannot open '" + path + "' (" + std::strerror(errno) +
                  "); give a readable .npy file");
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      ::close(fd_);
      throw Error("cannot read '" + path + "' (" + std::strerror(errno) + ")");
    }
    std::string head(10 + 65535, '\0');
    head.resize(detail::pread_full(fd_, head.data(), head.size(), 0));
    try {
      header_ = parse_npy_header(head, std::uint64_t(st.st_size), path);
    } catch (...) {
      ::close(fd_);
      throw;
    }
  }
  ~NpyFile() { ::close(fd_); }
  NpyFile(const NpyFile&) = delete;
  NpyFile& operator=(const NpyFile&) = delete;

  const NpyHeader& header() const { return header_; }

  // Reads elements [first, first + out.size()) (C order over the whole shape) into out.
  void read(std::size_t first, std::span<double> out) const {
    if (first > header_.count || out.size() > header_.count - first)
      throw Error("NpyFile::read: elements beyond the array's " + std::to_string(header_.count) +
                  " (a bug in the caller)");
    const std::size_t bytes = out.size() * sizeof(double);
    if (detail::pread_full(fd_, reinterpret_cast<char*>(out.data()),  // safety: bytes into doubles
                           bytes, header_.data_offset + first * sizeof(double)) != bytes)
      throw Error("'" + path_ + "' could not be read (" + std::strerror(errno) + ")");
  }

 private:
  std::string path_;
  int fd_ = -1;
  NpyHeader header_;
};

inline NpyArray read_npy(const std::string& path) {
  NpyFile f(path);
  NpyArray a;
  a.shape = f.header().shape;
  a.data.resize(f.header().count);
  f.read(0, a.data);
  return a;
}

}  // namespace ordo::app
