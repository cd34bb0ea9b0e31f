// DelayingComm: see delaying_comm.hpp.
#include "delaying_comm.hpp"

#include <algorithm>
#include <thread>

namespace zt::testing {
namespace {

// A request that is already complete.
class Done final : public comm::Request {
 public:
  void wait() override {}
  bool test() override { return true; }
};

class DelayingComm final : public comm::Comm {
 public:
  DelayingComm(std::unique_ptr<comm::Comm> inner, Delays delays)
      : inner_(std::move(inner)), delays_(std::move(delays)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string_view backend() const override { return inner_->backend(); }
  comm::Memory memory() const override { return inner_->memory(); }

  comm::Handle iall_reduce(const void* send, void* recv, size_t count, DType dtype,
                           comm::ReduceOp op) override {
    comm::Handle h = inner_->iall_reduce(send, recv, count, dtype, op);
    if (!delays_.slow_all_reduce) return h;
    h->wait();
    std::this_thread::sleep_for(delays_.reduce_delay);
    return std::make_unique<Done>();
  }
  comm::Handle iall_gather(const void* send, void* recv, size_t count, DType dtype) override {
    return inner_->iall_gather(send, recv, count, dtype);
  }
  comm::Handle ireduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                               comm::ReduceOp op) override {
    return inner_->ireduce_scatter(send, recv, count, dtype, op);
  }
  comm::Handle ibroadcast(void* buf, size_t count, DType dtype, int root) override {
    return inner_->ibroadcast(buf, count, dtype, root);
  }
  comm::Handle isend(const void* buf, size_t count, DType dtype, int peer) override {
    const auto& slow = delays_.slow_peers;
    if (std::find(slow.begin(), slow.end(), peer) != slow.end())
      std::this_thread::sleep_for(delays_.send_delay);
    return inner_->isend(buf, count, dtype, peer);
  }
  comm::Handle irecv(void* buf, size_t count, DType dtype, int peer) override {
    return inner_->irecv(buf, count, dtype, peer);
  }
  void barrier() override { inner_->barrier(); }
  std::unique_ptr<comm::Comm> split(int color, int key) override { return inner_->split(color, key); }
  void synchronize() override { inner_->synchronize(); }

 private:
  std::unique_ptr<comm::Comm> inner_;
  Delays delays_;
};

}  // namespace

std::unique_ptr<comm::Comm> make_delaying_comm(std::unique_ptr<comm::Comm> inner, Delays delays) {
  return std::make_unique<DelayingComm>(std::move(inner), std::move(delays));
}

}  // namespace zt::testing
