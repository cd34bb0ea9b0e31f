// CorruptingComm: see corrupting_comm.hpp.
#include "corrupting_comm.hpp"

#include "support/forwarding_comm.hpp"
#include "zt/core/error.hpp"

namespace zt::testing {
namespace {

class CorruptingComm final : public ForwardingComm {
 public:
  CorruptingComm(std::unique_ptr<comm::Comm> inner, int bad_rank)
      : ForwardingComm(std::move(inner)), bad_rank_(bad_rank) {}

  comm::Handle iall_reduce(const void* send, void* recv, size_t count, DType dtype,
                           comm::ReduceOp op) override {
    inner().iall_reduce(send, recv, count, dtype, op)->wait();
    ZT_CHECK(dtype == DType::kF32, "CorruptingComm corrupts float results only", "");
    if (rank() == bad_rank_ && count > 0) static_cast<float*>(recv)[0] += 1.0f;
    return std::make_unique<DoneRequest>();
  }

  comm::Handle iall_to_all(const void* send, std::span<const size_t> send_counts,
                           std::span<const size_t> send_offsets, void* recv,
                           std::span<const size_t> recv_counts,
                           std::span<const size_t> recv_offsets, DType dtype) override {
    inner().iall_to_all(send, send_counts, send_offsets, recv, recv_counts, recv_offsets, dtype)->wait();
    ZT_CHECK(dtype == DType::kF32, "CorruptingComm corrupts float results only", "");
    const size_t last = recv_counts.size() - 1;
    if (rank() == bad_rank_ && recv_counts[last] > 0)
      static_cast<float*>(recv)[recv_offsets[last]] += 1.0f;
    return std::make_unique<DoneRequest>();
  }

 private:
  int bad_rank_;
};

}  // namespace

std::unique_ptr<comm::Comm> make_corrupting_comm(std::unique_ptr<comm::Comm> inner, int bad_rank) {
  return std::make_unique<CorruptingComm>(std::move(inner), bad_rank);
}

}  // namespace zt::testing
