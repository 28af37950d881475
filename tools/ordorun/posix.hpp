// Small POSIX helpers shared by ordorun's parts: an owning file descriptor, whole writes to a
// (possibly non-blocking) descriptor, and the wording of a wait status.
#pragma once

#include <string>
#include <utility>

namespace ordorun {

// Owns one file descriptor; closes it on destruction or reset.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool is_open() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

void set_nonblocking(int fd);

// Writes all of [p, p+n) to fd, waiting (poll) while a non-blocking fd is full. Gives up
// silently when the reader is gone: ordorun's own output has nowhere else to go.
void write_all(int fd, const char* p, std::size_t n);

// "ordorun: <msg>\n" on stderr.
void say(const std::string& msg);

// "was killed by signal 9 (Killed)" or "exited with status 3".
std::string describe_status(int status);

// The shell's convention: the exit status, or 128 + the signal that ended the process.
int exit_code_of(int status);

// strerror(errno) as a std::string, for messages.
std::string errno_text(int err);

}  // namespace ordorun
