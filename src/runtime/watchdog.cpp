// Watchdog (see watchdog.hpp): ends the job when a guarded blocking step overruns.
#include "zt/runtime/watchdog.hpp"

#include <mpi.h>

#include <cstdlib>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::runtime {

Watchdog::Watchdog(std::string what, std::chrono::milliseconds limit)
    : what_(std::move(what)), limit_(limit), thread_([this] { watch(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (cv_.wait_for(lock, limit_, [this] { return done_; })) return;
  log::error(strf("%s did not finish within %lld ms on rank %d (host %s): stuck in a blocking "
                  "collective; ending the job\n  HINT: a rank failed inside it (disk full, "
                  "read-only or hung file system?) or died; check the other ranks' messages. "
                  "If it is legitimately slow, raise comm.timeout",
                  what_.c_str(), static_cast<long long>(limit_.count()), process_rank(),
                  process_host().c_str()));
  MPI_Abort(MPI_COMM_WORLD, static_cast<int>(ExitCode::kFailed));
  std::_Exit(static_cast<int>(ExitCode::kFailed));
}

}  // namespace zt::runtime
