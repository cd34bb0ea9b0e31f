#pragma once
// Shared by the backends: what an operation was, the wait loop with its deadline, and the
// error a rank raises when an operation does not finish within the communicator's timeout.
#include <chrono>
#include <span>
#include <thread>
#include <string>
#include <string_view>

#include "zt/comm/comm.hpp"
#include "zt/core/error.hpp"
#include "zt/runtime/liveness.hpp"

namespace zt::comm::detail {

// "all_reduce (sum) of 1000 x float (4000 bytes)"; `peer` is the root of a broadcast
// or the peer of a send/recv, ignored otherwise; `op` is used for reductions only.
std::string describe(Op what, size_t count, DType dtype, ReduceOp op = ReduceOp::kSum,
                     int peer = -1);

// Throws zt::InputError unless each of the four spans has one entry per rank (n).
void check_all_to_all(std::span<const size_t> send_counts, std::span<const size_t> send_offsets,
                      std::span<const size_t> recv_counts, std::span<const size_t> recv_offsets,
                      int n);
// The elements rank `me` sends to the other ranks (the all_to_all's counted volume).
size_t all_to_all_sent(std::span<const size_t> send_counts, int me);

// The zt::Error for an operation that timed out: names the backend, the operation,
// the communicator's rank and size, the host, the timeout, the ranks that did not answer
// the liveness probe of the wait (runtime::Liveness, when the process has one) with their
// hosts, and hints what to do.
Error timeout_error(std::string_view backend, const std::string& what, int rank, int size,
                    std::chrono::milliseconds timeout, std::string_view extra_hint = {});
[[noreturn]] void throw_timeout(std::string_view backend, const std::string& what, int rank,
                                int size, std::chrono::milliseconds timeout,
                                std::string_view extra_hint = {});

// Polls done() until it returns true. Past `timeout` calls on_timeout(), which must throw
// (the backend marks the request failed, aborts what it must, then throw_timeout). After
// the first polls it yields the core (hosts often run more ranks than cores) and serves
// the process's liveness channel: it answers other ranks' probes, and half way to the
// timeout probes every rank, so that a timeout can name the ranks that are gone.
template <class Done, class OnTimeout>
void poll_until(Done&& done, std::chrono::milliseconds timeout, OnTimeout&& on_timeout) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  runtime::Liveness* live = nullptr;
  bool probed = false;
  for (long polls = 0;; ++polls) {
    if (done()) return;
    const Clock::duration waited = Clock::now() - start;
    if (waited > timeout) on_timeout();
    if (polls < 64) continue;
    if (polls == 64) live = runtime::Liveness::current();
    if (live) {
      live->serve();
      if (!probed && waited > timeout / 2) {
        live->start_round();
        probed = true;
      }
    }
    std::this_thread::yield();
  }
}

}  // namespace zt::comm::detail
