// Matrix Market (coordinate) and edge-list readers. A file is a stranger's: sizes it states are
// checked against its length before anything is sized by them, and every entry against the
// header, so a lying header costs a message, not memory.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include <ordo/sparse.hpp>

namespace ordo::sparse {

namespace {

constexpr std::size_t kMaxLine = 1024;
// The shortest entry lines: "1 1\n" (pattern) and "1 1 1\n".
constexpr std::uint64_t kMinPatternLine = 4, kMinValueLine = 6;
constexpr Index kMaxRows = Index{1} << 40;

class Lines {
 public:
  Lines(std::FILE* f, std::string name) : f_(f), name_(std::move(name)) {}
  // The next line without its newline; false at the end of the file.
  bool next(std::string_view& line) {
    if (std::fgets(buf_, sizeof buf_, f_) == nullptr) {
      if (std::ferror(f_)) throw Error(name_ + ": cannot read (" + std::strerror(errno) + ")");
      return false;
    }
    ++number_;
    std::size_t n = std::strlen(buf_);
    if (n > 0 && buf_[n - 1] == '\n') {
      --n;
    } else if (!std::feof(f_)) {
      throw Error(where() + "the line is longer than " + std::to_string(kMaxLine - 2) +
                  " bytes; this is not a Matrix Market or edge-list file");
    }
    if (n > 0 && buf_[n - 1] == '\r') --n;
    line = std::string_view(buf_, n);
    return true;
  }
  std::string where() const { return name_ + ":" + std::to_string(number_) + ": "; }
  const std::string& name() const { return name_; }

 private:
  std::FILE* f_;
  std::string name_;
  char buf_[kMaxLine];
  std::uint64_t number_ = 0;
};

// Splits on blanks; at most `max` fields (more: an error).
std::size_t fields(std::string_view line, std::string_view* out, std::size_t max) {
  std::size_t n = 0, i = 0;
  while (true) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i == line.size()) return n;
    std::size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    if (n == max) return max + 1;
    out[n++] = line.substr(i, j - i);
    i = j;
  }
}

std::uint64_t integer(std::string_view s, const Lines& at, const char* what) {
  std::uint64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size())
    throw Error(at.where() + what + " '" + std::string(s) + "' is not a non-negative integer");
  return v;
}

double real(std::string_view s, const Lines& at) {
  double v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v))
    throw Error(at.where() + "value '" + std::string(s) + "' is not a finite number");
  return v;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool comment_or_blank(std::string_view line, char a, char b) {
  std::size_t i = 0;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  return i == line.size() || line[i] == a || line[i] == b;
}

void check_entries_fit(std::uint64_t entries, std::uint64_t file_bytes, std::uint64_t min_line,
                       const std::string& name, const char* what) {
  if (entries > file_bytes / min_line)
    throw Error(name + ": the header says " + std::to_string(entries) + " " + what +
                ", more than a file of " + std::to_string(file_bytes) + " bytes can hold (" +
                std::to_string(min_line) + " bytes each at least); the header is wrong");
}

}  // namespace

std::pair<std::FILE*, std::uint64_t> open_input(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw Error("cannot open '" + path + "' (" + std::strerror(errno) + "): give an existing file");
  if (!S_ISREG(st.st_mode)) throw Error("'" + path + "' is not a regular file; give a file");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw Error("cannot open '" + path + "' (" + std::strerror(errno) + ")");
  return {f, std::uint64_t(st.st_size)};
}

MatrixMarketHeader read_matrix_market_header(std::FILE* f, std::uint64_t file_bytes,
                                             const std::string& name) {
  Lines lines(f, name);
  std::string_view line;
  if (!lines.next(line)) throw Error(name + ": the file is empty; give a Matrix Market file");
  std::string_view w[6];
  if (fields(line, w, 5) != 5 || lower(w[0]) != "%%matrixmarket" || lower(w[1]) != "matrix")
    throw Error(lines.where() +
                "expected '%%MatrixMarket matrix coordinate real general' (or "
                "integer, pattern; symmetric): this is not a Matrix Market file");
  MatrixMarketHeader h;
  if (lower(w[2]) != "coordinate")
    throw Error(lines.where() + "'" + std::string(w[2]) +
                "' format: only sparse 'coordinate' "
                "files are read");
  const std::string field = lower(w[3]), symmetry = lower(w[4]);
  if (field == "pattern")
    h.pattern = true;
  else if (field != "real" && field != "integer" && field != "double")
    throw Error(lines.where() + "'" + std::string(w[3]) +
                "' entries: give real, integer or pattern");
  if (symmetry == "symmetric")
    h.symmetric = true;
  else if (symmetry != "general")
    throw Error(lines.where() + "'" + std::string(w[4]) + "' symmetry: give general or symmetric");
  while (true) {
    if (!lines.next(line))
      throw Error(name + ": no size line ('rows cols entries') after the banner");
    if (!comment_or_blank(line, '%', '%')) break;
  }
  if (fields(line, w, 3) != 3)
    throw Error(lines.where() + "expected the size line 'rows cols entries'");
  h.rows = integer(w[0], lines, "rows");
  h.cols = integer(w[1], lines, "cols");
  h.entries = integer(w[2], lines, "entries");
  if (h.rows == 0 || h.rows != h.cols)
    throw Error(lines.where() + "the matrix is " + std::to_string(h.rows) + " x " +
                std::to_string(h.cols) + "; give a square matrix with at least one row");
  if (h.rows > kMaxRows)
    throw Error(lines.where() + std::to_string(h.rows) + " rows is more than 2^40");
  check_entries_fit(h.entries, file_bytes, h.pattern ? kMinPatternLine : kMinValueLine, name,
                    "entries");
  // Every row holds an entry (an empty row makes the matrix singular), so the row count is
  // bounded by the entries, which the file's length bounds.
  if (h.rows > h.entries)
    throw Error(lines.where() + "the header says " + std::to_string(h.rows) + " rows but " +
                std::to_string(h.entries) +
                " entries: some row would be empty (a singular "
                "matrix), or the header is wrong");
  return h;
}

std::vector<Rows> read_matrix_market_rows(std::FILE* f, std::uint64_t file_bytes,
                                          const std::string& name, const MatrixMarketHeader& h,
                                          const Partition& partition, const std::vector<bool>& held,
                                          bool require_symmetric) {
  (void)file_bytes;
  if (partition.size() != h.rows)
    throw Error(name + ": a partition of " + std::to_string(partition.size()) +
                " indices for a matrix of " + std::to_string(h.rows) + " rows");
  std::rewind(f);
  Lines lines(f, name);
  std::string_view line, w[4];
  // Skip the banner, comments and the size line.
  for (int size_seen = 0; size_seen < 2;) {
    if (!lines.next(line)) throw Error(name + ": the file ended before its entries");
    if (size_seen == 0) {
      size_seen = 1;
      continue;
    }
    if (!comment_or_blank(line, '%', '%')) size_seen = 2;
  }
  struct Entry {
    Index row, col;
    double val;
    bool operator<(const Entry& o) const { return row != o.row ? row < o.row : col < o.col; }
  };
  const std::uint32_t parts = partition.parts();
  std::vector<std::vector<Entry>> mine(parts), mirror(parts);
  const bool check_transpose = require_symmetric && !h.symmetric;
  std::uint64_t count = 0;
  const std::size_t want_fields = h.pattern ? 2 : 3;
  while (lines.next(line)) {
    if (comment_or_blank(line, '%', '%')) continue;
    if (fields(line, w, want_fields) != want_fields)
      throw Error(lines.where() + "expected an entry 'row col" + (h.pattern ? "'" : " value'"));
    if (++count > h.entries)
      throw Error(lines.where() + "more entries than the header's " + std::to_string(h.entries) +
                  "; the header is wrong");
    const Index i = integer(w[0], lines, "row"), j = integer(w[1], lines, "column");
    if (i == 0 || j == 0 || i > h.rows || j > h.cols)
      throw Error(lines.where() + "entry (" + std::string(w[0]) + ", " + std::string(w[1]) +
                  ") lies outside the " + std::to_string(h.rows) + " x " + std::to_string(h.cols) +
                  " matrix (indices count from 1)");
    const double v = h.pattern ? 1.0 : real(w[2], lines);
    if (h.symmetric && j > i)
      throw Error(lines.where() + "entry (" + std::to_string(i) + ", " + std::to_string(j) +
                  ") lies above the diagonal of a symmetric file, which stores the lower "
                  "triangle only");
    const Entry e{i - 1, j - 1, v};
    const std::uint32_t pr = partition.owner(e.row);
    if (held[pr]) mine[pr].push_back(e);
    if (h.symmetric && i != j) {
      const std::uint32_t pc = partition.owner(e.col);
      if (held[pc]) mine[pc].push_back(Entry{e.col, e.row, v});
    }
    if (check_transpose) {
      const std::uint32_t pc = partition.owner(e.col);
      if (held[pc]) mirror[pc].push_back(Entry{e.col, e.row, v});
    }
  }
  if (count != h.entries)
    throw Error(name + ": the header says " + std::to_string(h.entries) +
                " entries, the file holds " + std::to_string(count) +
                "; the file is truncated or the header is wrong");
  std::vector<Rows> out(parts);
  for (std::uint32_t p = 0; p < parts; ++p) {
    if (!held[p]) continue;
    auto& es = mine[p];
    std::sort(es.begin(), es.end());
    for (std::size_t k = 1; k < es.size(); ++k)
      if (es[k].row == es[k - 1].row && es[k].col == es[k - 1].col)
        throw Error(name + ": entry (" + std::to_string(es[k].row + 1) + ", " +
                    std::to_string(es[k].col + 1) + ") is given twice" +
                    (h.symmetric ? " (a symmetric file's entry counts for its mirror too)" : "") +
                    "; give each entry once");
    if (check_transpose) {
      auto& ms = mirror[p];
      std::sort(ms.begin(), ms.end());
      std::size_t a = 0, b = 0;
      while (a < es.size() || b < ms.size()) {
        if (a < es.size() && b < ms.size() && es[a].row == ms[b].row && es[a].col == ms[b].col) {
          if (std::memcmp(&es[a].val, &ms[b].val, sizeof(double)) != 0)
            throw Error(name + ": the matrix is not symmetric: entry (" +
                        std::to_string(es[a].row + 1) + ", " + std::to_string(es[a].col + 1) +
                        ") differs from its mirror; CG needs a symmetric matrix");
          ++a;
          ++b;
          continue;
        }
        const Entry& e = (b == ms.size() || (a < es.size() && es[a] < ms[b])) ? es[a] : ms[b];
        throw Error(name + ": the matrix is not symmetric: entry (" + std::to_string(e.col + 1) +
                    ", " + std::to_string(e.row + 1) + ") has no mirror (" +
                    std::to_string(e.row + 1) + ", " + std::to_string(e.col + 1) +
                    "); CG needs a symmetric matrix");
      }
      ms = {};
    }
    Rows& r = out[p];
    r.first = partition.begin(p);
    r.start.reserve(partition.count(p) + 1);
    r.col.reserve(es.size());
    r.val.reserve(es.size());
    std::size_t k = 0;
    for (Index row = partition.begin(p); row < partition.end(p); ++row) {
      const std::size_t before = k;
      for (; k < es.size() && es[k].row == row; ++k) {
        r.col.push_back(es[k].col);
        r.val.push_back(es[k].val);
      }
      if (k == before)
        throw Error(name + ": row " + std::to_string(row + 1) +
                    " has no entry (a singular "
                    "matrix); give every row at least its diagonal");
      r.start.push_back(r.col.size());
    }
    es = {};
  }
  return out;
}

EdgeListHeader read_edge_list_header(std::FILE* f, std::uint64_t file_bytes,
                                     const std::string& name) {
  Lines lines(f, name);
  std::string_view line, w[3];
  while (true) {
    if (!lines.next(line))
      throw Error(name + ": no header line 'vertices edges'; give an edge list");
    if (!comment_or_blank(line, '#', '%')) break;
  }
  if (fields(line, w, 2) != 2) throw Error(lines.where() + "expected the header 'vertices edges'");
  EdgeListHeader h;
  h.vertices = integer(w[0], lines, "vertices");
  h.edges = integer(w[1], lines, "edges");
  if (h.vertices == 0 || h.vertices > kMaxRows)
    throw Error(lines.where() + std::to_string(h.vertices) + " vertices: give 1 to 2^40");
  check_entries_fit(h.edges, file_bytes, 4, name, "edges");
  return h;
}

void read_edge_list(std::FILE* f, std::uint64_t file_bytes, const std::string& name,
                    const EdgeListHeader& h, const std::function<void(Edge)>& each) {
  (void)file_bytes;
  std::rewind(f);
  Lines lines(f, name);
  std::string_view line, w[3];
  bool header = false;
  std::uint64_t count = 0;
  while (lines.next(line)) {
    if (comment_or_blank(line, '#', '%')) continue;
    if (!header) {
      header = true;
      continue;
    }
    if (fields(line, w, 2) != 2) throw Error(lines.where() + "expected an edge 'from to'");
    if (++count > h.edges)
      throw Error(lines.where() + "more edges than the header's " + std::to_string(h.edges) +
                  "; the header is wrong");
    const Edge e{integer(w[0], lines, "vertex"), integer(w[1], lines, "vertex")};
    if (e.from >= h.vertices || e.to >= h.vertices)
      throw Error(lines.where() + "edge " + std::to_string(e.from) + " -> " + std::to_string(e.to) +
                  " names a vertex past the header's " + std::to_string(h.vertices) +
                  " (ids count from 0)");
    each(e);
  }
  if (count != h.edges)
    throw Error(name + ": the header says " + std::to_string(h.edges) + " edges, the file holds " +
                std::to_string(count) + "; the file is truncated or the header is wrong");
}

}  // namespace ordo::sparse
