// The polled device wait, the registry of in-flight operations and of the communicators a
// failure aborts, and the end of the job without unwinding (see zt/comm/device_wait.hpp).
#include "zt/comm/device_wait.hpp"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "describe.hpp"
#include "zt/core/log.hpp"
#include "zt/core/poll.hpp"
#include "zt/runtime/liveness.hpp"
#include "mpi_types.hpp"

namespace zt::comm {
namespace {

using Clock = std::chrono::steady_clock;

struct Entry {
  InFlight op;
  Clock::time_point launched;
  std::thread::id owner;  // the thread that registered it: the only one that tests it
};

// One registry per process. Recursive: a request's test() may unregister it (or others)
// while a wait walks the list.
struct Registry {
  std::recursive_mutex mu;
  uint64_t next = 1;
  std::map<uint64_t, Entry> ops;
  std::map<uint64_t, std::function<void()>> aborts;
  bool aborted = false;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: used until the process ends
  return *r;
}

}  // namespace

uint64_t register_in_flight(InFlight op) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  const uint64_t id = r.next++;
  r.ops.emplace(id, Entry{std::move(op), Clock::now(), std::this_thread::get_id()});
  return id;
}

void unregister_in_flight(uint64_t id) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.ops.erase(id);
}

size_t in_flight_count() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  return r.ops.size();
}

uint64_t register_abort(std::function<void()> abort) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  const uint64_t id = r.next++;
  r.aborts.emplace(id, std::move(abort));
  return id;
}

void unregister_abort(uint64_t id) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.aborts.erase(id);
}

void abort_all_communicators() noexcept {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.aborted = true;
  std::map<uint64_t, std::function<void()>> all;
  all.swap(r.aborts);  // each once, even if an abort re-enters
  for (auto& [id, abort] : all) {
    try {
      abort();
    } catch (const std::exception& e) {
      log::warn(std::string("aborting a communicator: ") + e.what());
    }
  }
}

bool communicators_aborted() noexcept {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  return r.aborted;
}

void end_job(const Error& e) noexcept {
  // As src/apps/main.cpp's fail(): the message, its hint, then MPI_Abort over every rank.
  log::error(e.message() + (e.hint().empty() ? "" : "\n  HINT: " + e.hint()));
  const int code = static_cast<int>(e.exit_code());
  if (detail::mpi_is_live()) MPI_Abort(MPI_COMM_WORLD, code);
  _exit(code);
}

void wait_ready(const std::function<bool()>& ready, std::string_view what) {
  Registry& r = registry();
  const Clock::time_point start = Clock::now();
  runtime::Liveness* live = nullptr;
  bool probed = false;
  PollOptions o;
  // Between polls: every in-flight operation tested, the first past its deadline (or
  // failed) ends the job; past 64 polls the liveness channel served and, half way to the
  // earliest deadline, every rank probed.
  o.between = [&](int64_t polls) {
    std::chrono::milliseconds shortest = std::chrono::milliseconds::max();
    {
      std::lock_guard lock(r.mu);
      std::vector<uint64_t> ids;
      for (const auto& [id, e] : r.ops) ids.push_back(id);
      for (uint64_t id : ids) {
        auto it = r.ops.find(id);
        if (it == r.ops.end()) continue;  // unregistered by an earlier test()
        // A request is not thread-safe: a wait on another thread (none in zt today) leaves
        // it to its owner's waits.
        if (it->second.owner != std::this_thread::get_id()) continue;
        const InFlight op = it->second.op;
        if (op.launched && !op.launched()) continue;
        const Clock::time_point from = std::max(it->second.launched, start);
        bool done = false;
        try {
          done = op.test();
        } catch (const Error& e) {
          abort_all_communicators();
          end_job(Error(e.message() + strf(" (seen while %.*s)", static_cast<int>(what.size()),
                                           what.data()),
                        e.hint(), e.exit_code()));
        }
        if (done) {
          r.ops.erase(id);
          continue;
        }
        if (Clock::now() - from > op.timeout) {
          abort_all_communicators();
          end_job(detail::timeout_error(
              op.backend, op.what, op.rank, op.size, op.timeout,
              strf("the host was %.*s; every communicator of this rank was aborted",
                   static_cast<int>(what.size()), what.data())));
        }
        shortest = std::min(shortest, op.timeout);
      }
    }
    if (polls < 64) return;
    if (polls == 64) live = runtime::Liveness::current();
    if (live) {
      live->serve();
      if (!probed && shortest != std::chrono::milliseconds::max() &&
          Clock::now() - start > shortest / 2) {
        live->start_round();
        probed = true;
      }
    }
  };
  poll_until(ready, what, o);  // yields between polls past the 64th
}

void wait_in_flight(std::string_view what) {
  wait_ready([] { return in_flight_count() == 0; }, what);
}

}  // namespace zt::comm
