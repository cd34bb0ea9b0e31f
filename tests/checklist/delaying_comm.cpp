// DelayingComm: see delaying_comm.hpp.
#include "delaying_comm.hpp"

#include <algorithm>
#include <thread>

#include "support/forwarding_comm.hpp"

namespace zt::testing {
namespace {

class DelayingComm final : public ForwardingComm {
 public:
  DelayingComm(std::unique_ptr<comm::Comm> inner, Delays delays)
      : ForwardingComm(std::move(inner)), delays_(std::move(delays)) {}

  comm::Handle iall_reduce(const void* send, void* recv, size_t count, DType dtype,
                           comm::ReduceOp op) override {
    comm::Handle h = inner().iall_reduce(send, recv, count, dtype, op);
    if (!delays_.slow_all_reduce) return h;
    h->wait();
    std::this_thread::sleep_for(delays_.reduce_delay);
    return std::make_unique<DoneRequest>();
  }
  comm::Handle isend(const void* buf, size_t count, DType dtype, int peer) override {
    const auto& slow = delays_.slow_peers;
    if (std::find(slow.begin(), slow.end(), peer) != slow.end())
      std::this_thread::sleep_for(delays_.send_delay);
    return inner().isend(buf, count, dtype, peer);
  }

 private:
  Delays delays_;
};

}  // namespace

std::unique_ptr<comm::Comm> make_delaying_comm(std::unique_ptr<comm::Comm> inner, Delays delays) {
  return std::make_unique<DelayingComm>(std::move(inner), std::move(delays));
}

}  // namespace zt::testing
