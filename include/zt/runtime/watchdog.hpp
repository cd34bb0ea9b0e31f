#pragma once
// Watchdog: a deadline for a blocking step that zt's own poll loops cannot bound, e.g. a
// parallel HDF5 checkpoint write, whose MPI-IO and metadata collectives block inside MPI.
// When one rank fails inside such a call (disk full, read-only file system) the ranks can
// end up waiting in different collectives forever. While a Watchdog is alive, a thread
// waits; if the guarded scope has not ended within `limit`, it logs which operation was
// stuck (rank, host, limit) and ends the whole job with MPI_Abort, so no rank hangs.
//
//   { runtime::Watchdog guard("writing checkpoint step-7.h5", timeout); save(...); }
//
// (MPI_Abort from the watchdog thread is outside MPI_THREAD_FUNNELED's promise; Open MPI
// and MPICH both implement it as "kill the job", which is all that is asked of it. If it
// returned, the process exits with code 1.)
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace zt::runtime {

class Watchdog {
 public:
  Watchdog(std::string what, std::chrono::milliseconds limit);
  ~Watchdog();  // disarms and joins
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  void watch();

  std::string what_;
  std::chrono::milliseconds limit_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace zt::runtime
