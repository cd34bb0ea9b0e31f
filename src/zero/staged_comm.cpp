// Collectives on a space's buffers through pinned host staging buffers (memory.hpp,
// make_staged_comm): the path of a device space over the MPI backend (builds without
// NCCL, several ranks sharing one GPU), and of the host-staged space that tests it on a
// CPU. Each operation copies its send range into a staging buffer (to_host, ordered after
// the compute that wrote it), runs on the wrapped communicator with the same aliasing
// (in place stays in place), and wait() / a successful test() copies the receive range
// back (from_host) before the staging buffer returns to the pool.
#include <algorithm>
#include <cstring>
#include <vector>

#include "memory.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/offload/pinned_pool.hpp"

namespace zt::zero::detail {
namespace {

// The staging buffers come from the engine's one pinned pool (offload::PinnedPool,
// shared with the offload copies): reused, so after the first steps no operation
// allocates (the engine keeps a bounded number in flight). Pinned for a device space;
// plain for the host-staged test space, which has no device to pin for.
using StagePool = offload::PinnedPool;

// Where an operation's send and receive ranges sit in its staging buffer: overlapping
// ranges keep their offsets (in-place operations stay in place), disjoint ones are
// placed back to back.
struct Layout {
  size_t bytes = 0;
  size_t send_at = 0;
  size_t recv_at = 0;
};
Layout place(const void* send, size_t send_bytes, const void* recv, size_t recv_bytes) {
  Layout l;
  const auto s = reinterpret_cast<uintptr_t>(send);
  const auto r = reinterpret_cast<uintptr_t>(recv);
  if (send && recv && s < r + recv_bytes && r < s + send_bytes) {
    const uintptr_t lo = std::min(s, r);
    l.bytes = std::max(s + send_bytes, r + recv_bytes) - lo;
    l.send_at = s - lo;
    l.recv_at = r - lo;
  } else {
    l.bytes = send_bytes + recv_bytes;
    l.send_at = 0;
    l.recv_at = send_bytes;
  }
  return l;
}

class StagedRequest final : public comm::Request {
 public:
  StagedRequest(comm::Handle inner, std::shared_ptr<StagePool> pool, int slot, Space& space,
                void* out, const uint8_t* staged, size_t out_bytes)
      : inner_(std::move(inner)), pool_(std::move(pool)), slot_(slot), space_(space),
        out_(out), staged_(staged), out_bytes_(out_bytes) {}
  ~StagedRequest() override {
    // Never waited on (an error unwinds): the wrapped handle's own destructor deals with
    // the operation; the staging buffer must not be reused while it may still run.
    if (slot_ >= 0 && done_) pool_->release(slot_);
  }
  void wait() override {
    if (done_) return;
    inner_->wait();
    finish();
  }
  bool test() override {
    if (done_) return true;
    if (!inner_->test()) return false;
    finish();
    return true;
  }

 private:
  void finish() {
    if (out_bytes_) space_.from_host(out_, staged_, out_bytes_);
    done_ = true;
  }
  comm::Handle inner_;
  std::shared_ptr<StagePool> pool_;
  int slot_;
  Space& space_;
  void* out_;
  const uint8_t* staged_;
  size_t out_bytes_;
  bool done_ = false;
};

class StagedComm final : public comm::Comm {
 public:
  StagedComm(comm::Comm& inner, std::unique_ptr<comm::Comm> owned, Space& space,
             std::shared_ptr<StagePool> pool)
      : owned_(std::move(owned)), inner_(inner), space_(space), pool_(std::move(pool)) {
    set_timeout(inner_.timeout());
  }

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string_view backend() const override { return inner_.backend(); }
  // What it takes is the space's buffers: device memory, or the host-staged space's host
  // memory that the engine treats as a device's (so it also takes the device path for its
  // host values: Groups::host()).
  comm::Memory memory() const override { return comm::Memory::kDevice; }

  comm::Handle iall_reduce(const void* send, void* recv, size_t count, DType dtype,
                           comm::ReduceOp op) override {
    const size_t b = count * dtype_size(dtype);
    return run(send, b, recv, b, [&](const void* s, void* r) {
      return inner_.iall_reduce(s, r, count, dtype, op);
    });
  }
  comm::Handle iall_gather(const void* send, void* recv, size_t count, DType dtype) override {
    const size_t b = count * dtype_size(dtype);
    return run(send, b, recv, b * static_cast<size_t>(size()),
               [&](const void* s, void* r) { return inner_.iall_gather(s, r, count, dtype); });
  }
  comm::Handle ireduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                               comm::ReduceOp op) override {
    const size_t b = count * dtype_size(dtype);
    return run(send, b * static_cast<size_t>(size()), recv, b,
               [&](const void* s, void* r) {
                 return inner_.ireduce_scatter(s, r, count, dtype, op);
               });
  }
  comm::Handle ibroadcast(void* buf, size_t count, DType dtype, int root) override {
    const size_t b = count * dtype_size(dtype);
    return run(buf, b, buf, b, [&](const void*, void* r) {
      return inner_.ibroadcast(r, count, dtype, root);
    });
  }
  comm::Handle isend(const void* buf, size_t count, DType dtype, int peer) override {
    const size_t b = count * dtype_size(dtype);
    return run(buf, b, nullptr, 0, [&](const void* s, void*) {
      return inner_.isend(s, count, dtype, peer);
    });
  }
  comm::Handle irecv(void* buf, size_t count, DType dtype, int peer) override {
    const size_t b = count * dtype_size(dtype);
    return run(nullptr, 0, buf, b, [&](const void*, void* r) {
      return inner_.irecv(r, count, dtype, peer);
    });
  }
  void barrier() override { inner_.barrier(); }
  std::unique_ptr<comm::Comm> split(int color, int key) override {
    std::unique_ptr<comm::Comm> c = inner_.split(color, key);
    if (!c) return nullptr;  // a negative colour: this rank is in no sub-communicator
    comm::Comm& ref = *c;
    return std::make_unique<StagedComm>(ref, std::move(c), space_, pool_);
  }
  void synchronize() override { inner_.synchronize(); }

 private:
  // Stages one operation: send range in, start it on the staging buffer, receive range
  // out at its completion. The byte counters take the wrapped call's own figures.
  template <class Start>
  comm::Handle run(const void* send, size_t send_bytes, void* recv, size_t recv_bytes,
                   Start&& start) {
    const Layout l = place(send, send_bytes, recv, recv_bytes);
    const int slot = pool_->acquire(l.bytes, "a collective staged through host memory");
    uint8_t* stage = pool_->data(slot);
    if (send_bytes) space_.to_host(stage + l.send_at, send, send_bytes);
    const comm::Counters before = inner_.counters();
    comm::Handle h = start(send ? stage + l.send_at : nullptr, recv ? stage + l.recv_at : nullptr);
    const comm::Counters& after = inner_.counters();
    for (int i = 0; i < comm::kOpCount; ++i) {
      counters_.bytes[i] += after.bytes[i] - before.bytes[i];
      counters_.calls[i] += after.calls[i] - before.calls[i];
    }
    return std::make_unique<StagedRequest>(std::move(h), pool_, slot, space_, recv,
                                           stage + l.recv_at, recv_bytes);
  }

  std::unique_ptr<comm::Comm> owned_;
  comm::Comm& inner_;
  Space& space_;
  std::shared_ptr<StagePool> pool_;
};

}  // namespace

std::unique_ptr<comm::Comm> make_staged_comm(comm::Comm& inner, Space& space,
                                             std::shared_ptr<offload::PinnedPool> pool) {
  return std::make_unique<StagedComm>(inner, nullptr, space, std::move(pool));
}

comm::Comm* staged(Space& space, const std::shared_ptr<offload::PinnedPool>& pool, comm::Comm* c,
                   std::unique_ptr<comm::Comm>& keep) {
  if (c == nullptr || !space.stages(*c)) return c;
  keep = make_staged_comm(*c, space, pool);
  return keep.get();
}

}  // namespace zt::zero::detail
