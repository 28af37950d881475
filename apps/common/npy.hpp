// A small reader and writer for NumPy .npy files holding float64 grids: version 1.0 header,
// dtype '<f8' (little-endian double), C order. Anything else is refused with an ordo::Error
// that names the file and what to do (np.save(path, a.astype('<f8')) writes what we read).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include <ordo/ordo.hpp>

namespace ordo::app {

struct NpyArray {
  std::vector<std::size_t> shape;
  std::vector<double> data;
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
  if (::close(fd) != 0) throw fail("close");
}

inline NpyArray read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open '" + path + "': no such file or not readable");
  auto bad = [&](const std::string& why) {
    return Error("'" + path + "' is not a usable .npy file: " + why +
                 " (write it with numpy.save(path, a.astype('<f8')))");
  };
  char head[10];
  if (!in.read(head, 10) || std::string(head, 6) != "\x93NUMPY") throw bad("no .npy magic");
  if (head[6] != 1 || head[7] != 0)
    throw bad("header version " + std::to_string(int(head[6])) + "." +
              std::to_string(int(head[7])) + "; only version 1.0 is read");
  const std::size_t hlen = static_cast<unsigned char>(head[8]) |
                           static_cast<std::size_t>(static_cast<unsigned char>(head[9])) << 8;
  std::string dict(hlen, '\0');
  if (!in.read(dict.data(), static_cast<std::streamsize>(hlen))) throw bad("truncated header");
  auto field = [&](const std::string& key) -> std::string {
    std::size_t k = dict.find("'" + key + "'");
    if (k == std::string::npos) throw bad("header has no '" + key + "'");
    std::size_t c = dict.find(':', k);
    if (c == std::string::npos) throw bad("corrupt header");
    std::size_t b = dict.find_first_not_of(' ', c + 1);
    if (b == std::string::npos) throw bad("corrupt header");
    std::size_t e = dict[b] == '(' ? dict.find(')', b) + 1 : dict.find_first_of(",}", b);
    if (e == std::string::npos || e == 0) throw bad("corrupt header");
    return dict.substr(b, e - b);
  };
  std::string descr = field("descr");
  if (descr != "'<f8'")
    throw bad("dtype " + descr + "; ordo reads float64 little-endian ('<f8') only");
  if (field("fortran_order") != "False") throw bad("Fortran order; ordo reads C order only");
  std::string shape_text = field("shape");
  NpyArray a;
  std::size_t count = 1;
  for (std::size_t i = 1; i < shape_text.size();) {
    std::size_t j = shape_text.find_first_of(",)", i);
    if (j == std::string::npos) throw bad("corrupt shape " + shape_text);
    std::string part = shape_text.substr(i, j - i);
    part.erase(0, part.find_first_not_of(' '));
    part.erase(part.find_last_not_of(' ') + 1);
    if (!part.empty()) {
      for (char ch : part)
        if (ch < '0' || ch > '9') throw bad("corrupt shape " + shape_text);
      a.shape.push_back(std::stoull(part));
      count *= a.shape.back();
    }
    i = j + 1;
  }
  if (a.shape.empty()) throw bad("a scalar; give a grid");
  a.data.resize(count);
  if (!in.read(reinterpret_cast<char*>(a.data.data()),  // safety: bytes into doubles
               static_cast<std::streamsize>(count * sizeof(double))))
    throw bad("truncated data: the shape needs " + std::to_string(count * sizeof(double)) +
              " bytes");
  if (in.peek() != std::char_traits<char>::eof())
    throw bad("trailing bytes after the data of shape " + shape_text);
  return a;
}

}  // namespace ordo::app
