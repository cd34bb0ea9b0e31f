#pragma once
// Liveness: who is still there when a collective does not finish. A side channel of
// point-to-point messages on a private duplicate of MPI_COMM_WORLD, so a rank whose
// operation timed out can name the rank(s) that died (kill -9) or stopped (SIGSTOP)
// instead of only saying that it waited too long.
//
//   - At start-up (collective, in Runtime's constructor) every rank learns every rank's
//     host name and pid.
//   - While a rank waits for an operation (the comm layer's poll loop), it calls serve():
//     probes that arrived are answered at once, answers that arrived are recorded.
//   - Half way to its timeout the waiting rank sends a probe to every other rank
//     (start_round); at the timeout, silent() lists those that have not answered: they
//     are dead, stopped, or stuck outside communication for that long.
//
// The process's Liveness is found through Liveness::current() (cached as an attribute of
// MPI_COMM_SELF, MPI's own per-process storage); nullptr when no Runtime made one (e.g. a
// test binary that calls MPI_Init itself).
#include <mpi.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace zt::runtime {

struct PeerInfo {
  std::string host;
  long pid = 0;
};

class Liveness {
 public:
  // Collective over `world` (every rank of MPI_COMM_WORLD): duplicates it, exchanges host
  // names and pids, posts the receives that serve() completes, and registers itself as the
  // process's current Liveness.
  explicit Liveness(MPI_Comm world);
  ~Liveness();  // local: cancels its receives, unregisters; never collective
  Liveness(const Liveness&) = delete;
  Liveness& operator=(const Liveness&) = delete;

  // The process's Liveness, or nullptr.
  static Liveness* current();

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(peers_.size()); }
  const PeerInfo& peer(int world_rank) const { return peers_[static_cast<size_t>(world_rank)]; }

  // Answers the probes that arrived and records the answers that arrived. Never blocks
  // (skips when another thread is serving). Thread-safe, as are the calls below.
  void serve();
  // Sends a probe to every other rank; returns the round number to pass to silent().
  int start_round();
  // World ranks probed in `round` that have not answered yet (serve() first).
  std::vector<int> silent(int round);
  // "world rank 1 (host node7, pid 4242), world rank 3 (...)".
  std::string describe(const std::vector<int>& ranks) const;
  // For a timeout message: which ranks have not answered the latest round, and for how
  // long it has been out; "" when no round was started.
  std::string verdict();

 private:
  void serve_locked();
  std::vector<int> silent_locked(int round);
  void send(int payload, int peer, int tag);
  void reap_sends();

  std::mutex mutex_;  // serve() may run on any thread that waits (MPI_THREAD_MULTIPLE)

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  std::vector<PeerInfo> peers_;
  std::vector<int> answered_;    // [size] last round each rank answered (0: none)
  int round_ = 0;
  int probe_in_ = 0;             // payload of the probe being received (the round)
  int answer_in_ = 0;            // payload of the answer being received (the round)
  MPI_Request probe_req_ = MPI_REQUEST_NULL;
  MPI_Request answer_req_ = MPI_REQUEST_NULL;
  std::chrono::steady_clock::time_point round_start_{};
  // Probes and answers in flight, with their payloads (kept until the send completes).
  struct Send {
    MPI_Request req = MPI_REQUEST_NULL;
    std::unique_ptr<int> payload;
  };
  std::vector<Send> sends_;
};

}  // namespace zt::runtime
