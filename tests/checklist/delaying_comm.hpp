#pragma once
// A Comm decorator for fault injection in time: forwards everything to an inner Comm and
//  - before each send from this rank to a rank in `slow_peers`, sleeps `send_delay`
//    (a slow link: every exchange over it takes longer);
//  - after each all_reduce on this rank, when `slow_all_reduce`, sleeps `reduce_delay`
//    (a straggler: this rank finishes its collectives late).
// The sleeps inject the fault; they never order anything.
#include <chrono>
#include <memory>
#include <vector>

#include "zt/comm/comm.hpp"

namespace zt::testing {

struct Delays {
  std::vector<int> slow_peers;
  std::chrono::milliseconds send_delay{0};
  bool slow_all_reduce = false;
  std::chrono::milliseconds reduce_delay{0};
};

std::unique_ptr<comm::Comm> make_delaying_comm(std::unique_ptr<comm::Comm> inner, Delays delays);

}  // namespace zt::testing
