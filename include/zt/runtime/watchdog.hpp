#pragma once
// Watchdog: a deadline for a blocking step that zt's own poll loops cannot bound, e.g. a
// parallel HDF5 checkpoint write, whose MPI-IO and metadata collectives block inside MPI.
// When one rank fails inside such a call (disk full, read-only file system) the ranks can
// end up waiting in different collectives forever. While a Watchdog is alive, a thread
// watches; if the guarded scope has not ended within `limit`, it logs which operation was
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
#include <utility>

namespace zt::runtime {

// CallWatchdog: the same deadline for many short blocking calls (e.g. every blocking MPI
// collective of a benchmark loop), without a thread per call. One thread, started with
// the CallWatchdog, looks every `tick` at the call in progress; a call that overran its
// limit ends the job as Watchdog does. Arming and disarming cost a clock read and two
// uncontended mutex operations, so timed loops stay undisturbed.
//
//   runtime::CallWatchdog dog;
//   { auto guard = dog.arm(what, timeout); MPI_Allreduce(...); }
class CallWatchdog {
 public:
  explicit CallWatchdog(std::chrono::milliseconds tick = std::chrono::milliseconds(50));
  ~CallWatchdog();
  CallWatchdog(const CallWatchdog&) = delete;
  CallWatchdog& operator=(const CallWatchdog&) = delete;

  // Disarms on destruction. `what` must outlive the guard (it is read only when the
  // call overran).
  class Guard {
   public:
    explicit Guard(CallWatchdog* dog) : dog_(dog) {}
    ~Guard() { if (dog_) dog_->disarm(); }
    Guard(Guard&& o) noexcept : dog_(o.dog_) { o.dog_ = nullptr; }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    Guard& operator=(Guard&&) = delete;

   private:
    CallWatchdog* dog_;
  };
  [[nodiscard]] Guard arm(const std::string& what, std::chrono::milliseconds limit);

 private:
  void disarm();
  void watch();

  std::chrono::milliseconds tick_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  const std::string* what_ = nullptr;  // the armed call, or nullptr
  std::chrono::milliseconds limit_{0};
  std::chrono::steady_clock::time_point deadline_{};
  std::thread thread_;
};

// Watchdog: one guarded scope, a CallWatchdog of its own armed for its whole life (the
// deadline is checked every 50 ms, so the job ends within limit + 50 ms).
class Watchdog {
 public:
  Watchdog(std::string what, std::chrono::milliseconds limit)
      : what_(std::move(what)), dog_(), guard_(dog_.arm(what_, limit)) {}

 private:
  std::string what_;            // read by dog_ when the scope overran
  CallWatchdog dog_;
  CallWatchdog::Guard guard_;   // destroyed first: disarms before dog_ joins its thread
};

// Logs that `what` did not finish within `limit` (rank, host, a hint) and ends the job
// with MPI_Abort (std::_Exit(1) if that returns). For watchdog threads.
[[noreturn]] void end_stuck_job(const std::string& what, std::chrono::milliseconds limit);

}  // namespace zt::runtime
