// EventLoop: ordorun's one thread waits here for whatever comes first — a readable or writable
// descriptor (signals through a self-pipe, the store's sockets, the ranks' output pipes) or a
// due timer (stopping deadlines, the store's authentication deadlines).
//
// A poll(2) reactor with nothing else in it. Handlers run on the loop's thread and may watch,
// unwatch, change events and add or cancel timers, also for other descriptors: a descriptor
// unwatched (or unwatched and watched again under the same number, after a close and a new
// open) during a turn does not get that turn's stale events.
#pragma once

#include <poll.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>

namespace ordorun {

class EventLoop {
 public:
  using Clock = std::chrono::steady_clock;
  using FdHandler = std::function<void(short revents)>;
  using TimerId = std::uint64_t;

  // Calls on_ready(revents) whenever fd has one of `events` (POLLHUP and POLLERR always count).
  // One handler per descriptor: watching a watched one replaces its handler.
  void watch(int fd, short events, FdHandler on_ready);
  // Changes what fd is polled for; 0 keeps the handler but stops polling fd (a back-off).
  void set_events(int fd, short events);
  void unwatch(int fd);
  bool is_watched(int fd) const { return fds_.count(fd) != 0; }

  // Runs fn once, on the first turn at or after `when`.
  TimerId at(Clock::time_point when, std::function<void()> fn);
  void cancel(TimerId id);

  // Waits until a watched descriptor is ready or the earliest timer is due, then runs the
  // handlers of what is ready and of every due timer. Waits forever when there is neither
  // (only a signal through the self-pipe can then wake the loop).
  void run_once();

 private:
  struct Watch {
    short events;
    std::uint64_t serial;  // tells a re-watched descriptor from the one polled
    FdHandler on_ready;
  };
  struct Timer {
    Clock::time_point when;
    std::function<void()> fn;
  };
  std::map<int, Watch> fds_;
  std::map<TimerId, Timer> timers_;
  std::uint64_t next_serial_ = 0;
  TimerId next_timer_ = 1;
};

}  // namespace ordorun
