// OutputFile: an app's --output appears whole or not at all.
//
// A run may die at any moment (a killed rank, a full disk, a node that fails) and the file it
// was to replace may be the only copy of an earlier result. So no rank writes into `path`:
//   1. at construction, before any computation, every rank checks that a file can be created
//      beside `path` ("cannot write here" costs nothing then, and the run's time after);
//   2. write(): the ranks agree on a temporary name beside `path` (rank 0's random nonce), each
//      writes its segments into it (rank 0 the header too) and syncs it;
//   3. once every rank says it has, rank 0 renames the temporary over `path` and syncs the
//      directory; every rank learns the outcome.
// A rank that dies before step 3 leaves `path` as it was (and a `<path>.tmp-<nonce>` file
// beside it, which nothing reads); a rank that cannot write makes every rank throw, and rank 0
// removes the temporary. The rename is atomic on a POSIX file system; across hosts the
// directory must be on a file system all ranks share. Only a regular file is replaced, and it
// keeps its permission bits (runtime/regular_file.hpp).
#pragma once

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <ordo/ordo.hpp>

#include "npy.hpp"
#include "runtime/regular_file.hpp"

namespace ordo::app {

class OutputFile {
 public:
  // Throws ordo::Error when `path` is not a regular file (a directory, a device, a FIFO, a
  // socket) or no file can be created beside it.
  explicit OutputFile(std::string path) : path_(std::move(path)) {
    const std::size_t slash = path_.rfind('/');
    dir_ = slash == std::string::npos ? "." : slash == 0 ? "/" : path_.substr(0, slash);
    if (const std::string why = files::output_refusal(path_); !why.empty())
      throw Error("cannot write '" + path_ + "': " + why);
    const std::string probe = path_ + ".probe-" + std::to_string(::getpid());
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
      throw Error("cannot write '" + path_ + "' (" + std::strerror(errno) +
                  "): check the directory exists and is writable");
    ::close(fd);
    ::unlink(probe.c_str());
  }

  const std::string& path() const { return path_; }

  // Collective: every rank of `rt` calls it, with its own segments of the array of `shape`.
  // Returns once `path` holds the whole array; throws ordo::Error on every rank, `path`
  // untouched, when a rank could not write its part.
  void write(Runtime& rt, const std::vector<std::size_t>& shape, std::vector<NpySegment> segments) {
    const unsigned rank = rt.rank();
    std::uint64_t nonce = 0;
    if (rank == 0 && ::getrandom(&nonce, sizeof nonce, 0) != ssize_t(sizeof nonce))
      nonce = std::uint64_t(::getpid()) << 32 ^ std::uint64_t(::time(nullptr));
    nonce = rt.gather_values(nonce)[0];
    const std::string temp = fmt::format("{}.tmp-{:016x}", path_, nonce);
    std::string error;
    try {
      write_npy_part(temp, shape, rank == 0, std::move(segments));
    } catch (const Error& e) {
      error = e.what();
    }
    const std::vector<int> wrote = rt.gather_values(error.empty() ? 1 : 0);
    int renamed = 0;  // on rank 0: 1 renamed, 0 a rank could not write, -1 the rename failed
    std::string rename_error;
    if (rank == 0) {
      bool all = true;
      for (int w : wrote) all = all && w == 1;
      // Checked again now: what `path` names may have changed during the run.
      if (all) rename_error = files::output_refusal(path_);
      if (all && rename_error.empty() && !files::keep_mode(temp, path_))
        rename_error =
            std::string("cannot give it the mode of the file it replaces: ") + std::strerror(errno);
      if (all && rename_error.empty() && ::rename(temp.c_str(), path_.c_str()) == 0) {
        renamed = 1;
        sync_directory();
      } else {
        if (all) {
          renamed = -1;
          if (rename_error.empty()) rename_error = std::strerror(errno);
        }
        ::unlink(temp.c_str());
      }
    }
    renamed = rt.gather_values(renamed)[0];
    if (!error.empty()) throw Error(error);
    for (unsigned r = 0; r < wrote.size(); ++r)
      if (wrote[r] != 1)
        throw Error("rank " + std::to_string(r) + " could not write its part of --output '" + path_ +
                    "' (its message says why); the previous file, if any, is unchanged");
    if (renamed != 1)
      throw Error("cannot replace '" + path_ + "'" + (rename_error.empty() ? "" : " (" + rename_error + ")") +
                  "; the previous file, if any, is unchanged");
  }

 private:
  // The rename is durable once the directory's entry is on disk.
  void sync_directory() const {
    const int fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    ::fsync(fd);
    ::close(fd);
  }

  std::string path_, dir_;
};

}  // namespace ordo::app
