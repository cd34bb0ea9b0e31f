#pragma once
// The one polled wait of the host (docs/reliability.md "Faults"): ready() asked
// until it says true, never a blocking call, so a watch between the polls or a bound can
// end a wait on work that never finishes (a hung GPU, a collective of a dead peer).
// comm::wait_ready (every device wait of a job: in-flight collectives against
// comm.timeout, the liveness channel) and the GPU stress of `zt check` (a bound of its
// own) are built on it. It keeps no state: any number of threads may wait at once (the
// stress waits from several threads; comm's watch is its own caller's business).
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace zt {

struct PollOptions {
  // Called after every poll that found the work not ready (polls: their count so far,
  // from 0); may throw, or end the job.
  std::function<void(int64_t polls)> between;
  // When > 0, a wait longer than this throws zt::Error "WHAT did not finish within N s"
  // with limit_hint.
  std::chrono::milliseconds limit{0};
  std::string limit_hint;
  // After the first 64 polls (spun), each waits this long; 0: std::this_thread::yield.
  std::chrono::microseconds pause{0};
};

// Polls ready() until it returns true (see above). Exceptions of ready() and between()
// propagate.
void poll_until(const std::function<bool()>& ready, std::string_view what, const PollOptions& o = {});

}  // namespace zt
