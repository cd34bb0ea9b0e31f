// The engine's private communicators and the phased collectives over all ranks (see
// groups.hpp).
#include "groups.hpp"

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::zero::detail {
namespace {

// Byte address of element `elements` of a buffer of dtype.
uint8_t* at(void* base, size_t elements, DType dtype) {
  return static_cast<uint8_t*>(base) + elements * dtype_size(dtype);
}

}  // namespace

void wait_all(Handles& handles) {
  for (comm::Handle& h : handles) h->wait();
  handles.clear();
}

Groups::Groups(comm::Comm& world, comm::Comm* node, comm::Comm* cross, int hpz,
               comm::Comm* control) {
  if ((node == nullptr) != (cross == nullptr))
    throw InputError("the ZeRO engine got a node communicator without a cross one (or the "
                     "reverse)",
                     "pass both the runtime's node() and cross() communicators, or neither");
  size_ = world.size();
  rank_ = world.rank();
  // Private copies: the engine's traffic is counted apart from the caller's, and its
  // operations can never be matched with the caller's.
  world_comm_ = world.split(0, rank_);
  if (world.memory() != comm::Memory::kHost) {
    if (control == nullptr || control->memory() != comm::Memory::kHost ||
        control->size() != size_)
      throw Error("the ZeRO engine's world takes device memory but no host-memory control "
                  "communicator over the same ranks was given",
                  "pass the MPI world communicator as the engine's `control` (zt train does)");
    host_comm_ = control->split(0, rank_);
  }
  if (node) {
    local_ = node->rank();
    local_size_ = node->size();
    node_index_ = cross->rank();  // ranks of the cross communicator are one per node
    nodes_ = cross->size();
    // Every node must hold the same number of ranks (the shard layout assumes it).
    int sizes[2] = {local_size_, -local_size_};
    host().all_reduce(sizes, sizes, 2, DType::kI32, comm::ReduceOp::kMax);
    if (sizes[0] != -sizes[1] || local_size_ * nodes_ != size_)
      throw InputError(strf("nodes hold between %d and %d ranks (%d nodes, %d ranks); the ZeRO "
                            "engine needs the same number of ranks on every node",
                            -sizes[1], sizes[0], nodes_, size_),
                       "launch the same number of ranks per node, or simulate nodes with "
                       "--ranks-per-node");
    node_comm_ = node->split(0, local_);
    cross_comm_ = cross->split(0, node_index_);
  } else {
    local_ = rank_;
    local_size_ = size_;
  }
  hierarchical_ = node != nullptr && local_size_ > 1 && nodes_ > 1;
  ZT_CHECK(hpz >= 1 && local_size_ % hpz == 0,
           strf("hpZ group of %d over %d ranks per node", hpz, local_size_),
           "EngineOptions::validate rejects this first");
  if (hpz > 1) {
    comm::Comm& parent = node_comm_ ? *node_comm_ : *world_comm_;
    hpz_comm_ = parent.split(local_ / hpz, local_);
  }
}

Traffic Groups::traffic() const {
  Traffic t;
  const comm::Comm* comms[kGroupCount] = {world_comm_.get(), node_comm_.get(), cross_comm_.get(),
                                          hpz_comm_.get()};
  for (int g = 0; g < kGroupCount; ++g)
    if (comms[g]) t.groups[g] = comms[g]->counters();
  if (host_comm_) {  // world's small host-value collectives, as on a host-memory world
    comm::Counters& w = t.groups[static_cast<int>(Group::kWorld)];
    for (int op = 0; op < comm::kOpCount; ++op) {
      w.bytes[op] += host_comm_->counters().bytes[op];
      w.calls[op] += host_comm_->counters().calls[op];
    }
  }
  t.world_spans_nodes = nodes_ > 1;
  return t;
}

void Groups::start_gather(int phase, const void* shard, void* full, size_t count, DType dtype,
                          Handles& out) {
  if (!hierarchical_) {
    out.push_back(world_comm_->iall_gather(shard, full, count, dtype));
    return;
  }
  uint8_t* block = at(full, static_cast<size_t>(local_ * nodes_) * count, dtype);
  const size_t block_count = static_cast<size_t>(nodes_) * count;
  if (phase == 0)  // the parts of the ranks with my local rank, one per node
    out.push_back(cross_comm_->iall_gather(shard, block, count, dtype));
  else  // every local rank's block, within the node (in place)
    out.push_back(node_comm_->iall_gather(block, full, block_count, dtype));
}

void Groups::start_reduce_scatter(int phase, void* full, size_t count, DType dtype,
                                  Handles& out) {
  const int p = partition_index();
  if (!hierarchical_) {
    out.push_back(world_comm_->ireduce_scatter(full, at(full, p * count, dtype), count, dtype,
                                               comm::ReduceOp::kSum));
    return;
  }
  uint8_t* block = at(full, static_cast<size_t>(local_ * nodes_) * count, dtype);
  const size_t block_count = static_cast<size_t>(nodes_) * count;
  if (phase == 0)  // node sums of my block
    out.push_back(node_comm_->ireduce_scatter(full, block, block_count, dtype,
                                              comm::ReduceOp::kSum));
  else  // world sums of my part, across nodes
    out.push_back(cross_comm_->ireduce_scatter(block, at(full, p * count, dtype), count, dtype,
                                               comm::ReduceOp::kSum));
}

void Groups::start_all_reduce(int phase, void* full, size_t count, DType dtype, Handles& out) {
  if (!hierarchical_) {
    out.push_back(world_comm_->iall_reduce(full, full, static_cast<size_t>(size_) * count, dtype,
                                           comm::ReduceOp::kSum));
    return;
  }
  uint8_t* block = at(full, static_cast<size_t>(local_ * nodes_) * count, dtype);
  const size_t block_count = static_cast<size_t>(nodes_) * count;
  if (phase == 0)
    out.push_back(node_comm_->ireduce_scatter(full, block, block_count, dtype,
                                              comm::ReduceOp::kSum));
  else if (phase == 1)
    out.push_back(cross_comm_->iall_reduce(block, block, block_count, dtype, comm::ReduceOp::kSum));
  else
    out.push_back(node_comm_->iall_gather(block, full, block_count, dtype));
}

int Groups::all_to_all_peers(int level) const {
  if (!hierarchical_) return size_;
  return level == 0 ? local_size_ : nodes_;
}

int Groups::all_to_all_me(int level) const {
  if (!hierarchical_) return rank_;
  return level == 0 ? local_ : node_index_;
}

void Groups::start_all_to_all(int level, const uint8_t* send, uint8_t* recv, size_t chunk_bytes,
                              Handles& out) {
  comm::Comm& c = !hierarchical_ ? *world_comm_ : level == 0 ? *node_comm_ : *cross_comm_;
  all_to_all(c, send, recv, chunk_bytes, out);
}

void Groups::all_to_all(comm::Comm& c, const uint8_t* send, uint8_t* recv, size_t chunk_bytes,
                        Handles& out) {
  const int me = c.rank();
  // Receives first, then sends, in peer order from me + 1 (a ring order, so no peer is
  // everyone's first partner). NCCL launches the queue as one group.
  for (int s = 1; s < c.size(); ++s) {
    const int peer = (me - s + c.size()) % c.size();
    out.push_back(c.irecv(recv + static_cast<size_t>(peer) * chunk_bytes, chunk_bytes,
                          DType::kU8, peer));
  }
  for (int s = 1; s < c.size(); ++s) {
    const int peer = (me + s) % c.size();
    out.push_back(c.isend(send + static_cast<size_t>(peer) * chunk_bytes, chunk_bytes,
                          DType::kU8, peer));
  }
}

void Groups::order_after(void* stream) {
  if (stream == nullptr) return;
  for (auto* c : {&world_comm_, &node_comm_, &cross_comm_, &hpz_comm_})
    if (*c) (*c)->order_after(stream);
}

}  // namespace zt::zero::detail
