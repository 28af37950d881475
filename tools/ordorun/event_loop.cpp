#include "event_loop.hpp"

#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ordorun {

void EventLoop::watch(int fd, short events, FdHandler on_ready) {
  fds_[fd] = Watch{events, next_serial_++, std::move(on_ready)};
}

void EventLoop::set_events(int fd, short events) {
  if (auto it = fds_.find(fd); it != fds_.end()) it->second.events = events;
}

void EventLoop::unwatch(int fd) { fds_.erase(fd); }

EventLoop::TimerId EventLoop::at(Clock::time_point when, std::function<void()> fn) {
  const TimerId id = next_timer_++;
  timers_.emplace(id, Timer{when, std::move(fn)});
  return id;
}

void EventLoop::cancel(TimerId id) { timers_.erase(id); }

void EventLoop::run_once() {
  std::vector<pollfd> polled;
  std::vector<std::uint64_t> serials;
  for (const auto& [fd, w] : fds_) {
    if (w.events == 0) continue;
    polled.push_back({fd, w.events, 0});
    serials.push_back(w.serial);
  }
  std::optional<Clock::time_point> next;
  for (const auto& [id, t] : timers_)
    if (!next || t.when < *next) next = t.when;
  int timeout_ms = -1;
  if (next) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now()).count();
    timeout_ms = left < 0 ? 0 : left > 1'000'000 ? 1'000'000 : int(left);
  }
  const int rc = ::poll(polled.data(), polled.size(), timeout_ms);
  if (rc < 0 && errno != EINTR) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
  for (std::size_t i = 0; rc > 0 && i < polled.size(); ++i) {
    if (polled[i].revents == 0) continue;
    auto it = fds_.find(polled[i].fd);
    if (it == fds_.end() || it->second.serial != serials[i]) continue;  // unwatched this turn
    // A copy: the handler may unwatch its own descriptor, which destroys the original.
    FdHandler h = it->second.on_ready;
    h(polled[i].revents);
  }
  const auto now = Clock::now();
  std::vector<TimerId> due;
  for (const auto& [id, t] : timers_)
    if (t.when <= now) due.push_back(id);
  for (TimerId id : due) {
    auto it = timers_.find(id);
    if (it == timers_.end()) continue;  // cancelled by an earlier handler of this turn
    auto fn = std::move(it->second.fn);
    timers_.erase(it);
    fn();
  }
}

}  // namespace ordorun
