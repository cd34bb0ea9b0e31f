#pragma once
// Test decorators of comm::Comm. ForwardingComm passes every call to an inner Comm; a
// fault-injecting decorator derives from it and overrides only the calls it changes
// (tests/checklist/delaying_comm.cpp, corrupting_comm.cpp). DoneRequest is the handle of
// an operation the decorator already waited for.
#include <memory>
#include <string_view>

#include "zt/comm/comm.hpp"

namespace zt::testing {

class DoneRequest final : public comm::Request {
 public:
  void wait() override {}
  bool test() override { return true; }
};

class ForwardingComm : public comm::Comm {
 public:
  explicit ForwardingComm(std::unique_ptr<comm::Comm> inner) : inner_(std::move(inner)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string_view backend() const override { return inner_->backend(); }
  comm::Memory memory() const override { return inner_->memory(); }

  comm::Handle iall_reduce(const void* send, void* recv, size_t count, DType dtype,
                           comm::ReduceOp op) override {
    return inner_->iall_reduce(send, recv, count, dtype, op);
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
    return inner_->isend(buf, count, dtype, peer);
  }
  comm::Handle irecv(void* buf, size_t count, DType dtype, int peer) override {
    return inner_->irecv(buf, count, dtype, peer);
  }
  comm::Handle iall_to_all(const void* send, std::span<const size_t> send_counts,
                           std::span<const size_t> send_offsets, void* recv,
                           std::span<const size_t> recv_counts,
                           std::span<const size_t> recv_offsets, DType dtype) override {
    return inner_->iall_to_all(send, send_counts, send_offsets, recv, recv_counts, recv_offsets,
                               dtype);
  }
  void barrier() override { inner_->barrier(); }
  std::unique_ptr<comm::Comm> split(int color, int key) override {
    return inner_->split(color, key);
  }
  void synchronize() override { inner_->synchronize(); }

 protected:
  comm::Comm& inner() { return *inner_; }

 private:
  std::unique_ptr<comm::Comm> inner_;
};

}  // namespace zt::testing
