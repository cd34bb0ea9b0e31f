// CallWatchdog and Watchdog (see watchdog.hpp): end the job when a guarded blocking step
// overruns.
#include "zt/runtime/watchdog.hpp"

#include <mpi.h>

#include <cstdlib>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::runtime {

CallWatchdog::CallWatchdog(std::chrono::milliseconds tick)
    : tick_(tick), thread_([this] { watch(); }) {}

CallWatchdog::~CallWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

CallWatchdog::Guard CallWatchdog::arm(const std::string& what, std::chrono::milliseconds limit) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  what_ = &what;
  limit_ = limit;
  deadline_ = now + limit;
  return Guard(this);
}

void CallWatchdog::disarm() {
  std::lock_guard<std::mutex> lock(mutex_);
  what_ = nullptr;
}

void CallWatchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!cv_.wait_for(lock, tick_, [this] { return stop_; }))
    if (what_ != nullptr && std::chrono::steady_clock::now() > deadline_)
      end_stuck_job(*what_, limit_);
}

void end_stuck_job(const std::string& what, std::chrono::milliseconds limit) {
  log::error(strf("%s did not finish within %lld ms on rank %d (host %s): stuck in a blocking "
                  "collective; ending the job\n  HINT: another rank died, stopped or failed inside it "
                  "(for a checkpoint: disk full, read-only or hung file system?); check the "
                  "other ranks' messages. "
                  "If it is legitimately slow, raise comm.timeout (zt train) or --timeout (zt check)",
                  what.c_str(), static_cast<long long>(limit.count()), process_rank(),
                  process_host().c_str()));
  MPI_Abort(MPI_COMM_WORLD, static_cast<int>(ExitCode::kFailed));
  std::_Exit(static_cast<int>(ExitCode::kFailed));
}

}  // namespace zt::runtime
