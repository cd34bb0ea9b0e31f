// The one polled wait of the host (see zt/core/poll.hpp).
#include "zt/core/poll.hpp"

#include <thread>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt {

void poll_until(const std::function<bool()>& ready, std::string_view what, const PollOptions& o) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  for (int64_t polls = 0;; ++polls) {
    if (ready()) return;
    if (o.between) o.between(polls);
    if (o.limit.count() > 0 && Clock::now() - start > o.limit)
      throw Error(strf("%.*s did not finish within %.3g s", static_cast<int>(what.size()), what.data(),
                       std::chrono::duration<double>(o.limit).count()),
                  o.limit_hint);
    if (polls < 64) continue;
    if (o.pause.count() > 0)
      std::this_thread::sleep_for(o.pause);
    else
      std::this_thread::yield();
  }
}

}  // namespace zt
