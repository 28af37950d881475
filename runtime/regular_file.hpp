// Outputs and inputs are regular files, whoever writes or reads them.
//
// Every output of ordo (an app's --output, a trace, a checkpoint's files, ordo-trace's -o) is
// written to a temporary beside its path and renamed over it, so that it appears whole or not
// at all. A rename replaces whatever the name held: over a device node, a FIFO or a socket
// (`--output /dev/null`, run as root) it would destroy that node. So such a path is refused,
// with a message, before anything is written and again just before the rename; ordo never
// writes through it either. An existing regular file's permission bits are kept: the temporary
// takes them before it takes the file's place, so a private result (mode 600) stays private.
// A symbolic link is followed for the check, and the rename replaces the link itself.
//
// Every input (an app's --input, a checkpoint's files, a trace given to ordo-trace) is opened
// with O_NONBLOCK and checked with fstat before a byte is read: opening a FIFO for reading
// would otherwise wait for a writer for ever, and a device would be read without end.
//
// Header-only, with standard and POSIX includes only: the runtime, libordo, the apps' common
// code and ordo-trace (which links nothing of ordo) share it.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace ordo::files {

// "a FIFO", "a directory", ...: what a file of `mode` is, for messages.
inline const char* kind_of(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Why an output may not be written at `path`, or "" when it may: nothing is there yet, or a
// regular file (directly or through symbolic links) that the output is to replace.
inline std::string output_refusal(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode))
    return "";  // absent: the write says why if it fails
  return std::string("it is ") + kind_of(st.st_mode) +
         "; ordo writes outputs only to regular files, which it replaces whole: give a file name";
}

// Gives `temporary` (an output's, not yet renamed) the permission bits of the regular file at
// `path` it is to replace, exactly (chmod ignores the umask). Nothing to keep is success; false
// with errno set when chmod fails.
inline bool keep_mode(const std::string& temporary, const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return true;
  return ::chmod(temporary.c_str(), st.st_mode & 07777) == 0;
}

// Opens `path` for reading when it is a regular file (directly or through symbolic links),
// without ever blocking on one that is not. Returns a blocking, close-on-exec descriptor; or
// -1 with errno set by open(), `why` empty; or -1 with `why` saying what the path is instead
// ("it is a FIFO, not a regular file").
inline int open_regular(const std::string& path, std::string& why) {
  why.clear();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  struct stat st {};
  if (fd < 0) {
    // A socket cannot be opened at all (ENXIO), a device may not be: say what it is instead.
    const int e = errno;
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      why = std::string("it is ") + kind_of(st.st_mode) + ", not a regular file";
    errno = e;
    return -1;
  }
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int e = errno;
    why = std::string("it is ") + kind_of(st.st_mode) + ", not a regular file";
    ::close(fd);
    errno = e;
    return -1;
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

}  // namespace ordo::files
