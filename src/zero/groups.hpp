#pragma once
// The engine's private communicators (world, node, cross, hpz) and the collectives over
// all ranks built from them (private to zt_zero).
//
// With more than one node of K > 1 ranks ("hierarchical"), a collective over all ranks
// runs as phases on the node and cross communicators, so every byte is counted on the
// communicator whose links it really crosses:
//
//   all_gather      cross all_gather (count)      -> node all_gather (nodes * count)
//   reduce_scatter  node reduce_scatter (nodes*count) -> cross reduce_scatter (count)
//   all_reduce      node reduce_scatter -> cross all_reduce -> node all_gather
//
// For this the partition index of a rank is p = local_rank * nodes + node: the parts a
// node-local rank l gathers over the cross communicator, [l * nodes, (l + 1) * nodes),
// are contiguous, and the node phase then completes the buffer in place. The bytes per
// rank add up to exactly those of the flat ring collective: (n-1) * count per
// gather/reduce-scatter, 2 (n-1) * count per all-reduce. Otherwise (one node, one rank
// per node, or no node communicators) every collective is one call on world and p is
// the world rank.
//
// A phase is started with start_*(phase, ...), which appends its handles; the caller
// waits for them before starting the next phase. Phases are started in the same order
// on every rank (the engine's schedule is deterministic).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "zt/comm/comm.hpp"
#include "zt/zero/stats.hpp"

namespace zt::zero::detail {

using Handles = std::vector<comm::Handle>;

class Groups {
 public:
  // Collective over world. node and cross: both or neither. hpz: the secondary group
  // size in effect (1: none); it must divide the ranks per node. control: a host-memory
  // communicator over the same ranks, for the small host values (the norm, flags, these
  // checks) when world takes device memory (NCCL, or a device space's staged MPI);
  // unused when world takes host memory.
  Groups(comm::Comm& world, comm::Comm* node, comm::Comm* cross, int hpz,
         comm::Comm* control = nullptr);

  int size() const { return size_; }            // n
  int rank() const { return rank_; }            // world rank
  int local() const { return local_; }          // l, rank within the node
  int local_size() const { return local_size_; }  // K
  int node_index() const { return node_index_; }  // index of this rank's node
  int nodes() const { return nodes_; }           // number of nodes
  bool hierarchical() const { return hierarchical_; }
  int partition_index() const { return hierarchical_ ? local_ * nodes_ + node_index_ : rank_; }
  int hpz_size() const { return hpz_comm_ ? hpz_comm_->size() : 1; }
  int hpz_index() const { return hpz_comm_ ? hpz_comm_->rank() : 0; }

  comm::Comm& world() { return *world_comm_; }
  // Collectives on host values over all ranks: world when it takes host memory, else a
  // private copy of `control` (its bytes count as world's in traffic()).
  comm::Comm& host() { return host_comm_ ? *host_comm_ : *world_comm_; }
  comm::Comm& hpz() { return *hpz_comm_; }  // only when hpz_size() > 1
  // world takes the engine space's memory (NCCL, or a staging wrapper), not host values.
  bool world_takes_space_memory() const { return host_comm_ != nullptr; }

  Traffic traffic() const;

  // Every collective of the private communicators (world, node, cross, hpz; not host)
  // launched from now on waits, on the device, for the work queued on `stream` before
  // its launch (comm::Comm::order_after; null: nothing to do, host memory).
  void order_after(void* stream);

  // Buffers hold n parts of `count` elements of dtype, in partition order.
  int gather_phases() const { return hierarchical_ ? 2 : 1; }
  // All parts into full; this rank's part comes from `shard` (which may be its place
  // in full).
  void start_gather(int phase, const void* shard, void* full, size_t count, DType dtype,
                    Handles& out);

  int reduce_scatter_phases() const { return hierarchical_ ? 2 : 1; }
  // In place: afterwards part p of full holds the sum over ranks of part p (the other
  // parts hold intermediate values).
  void start_reduce_scatter(int phase, void* full, size_t count, DType dtype, Handles& out);

  int all_reduce_phases() const { return hierarchical_ ? 3 : 1; }
  // In place: the sum over ranks of every part.
  void start_all_reduce(int phase, void* full, size_t count, DType dtype, Handles& out);

  // qgZ's all-to-all. Level 0 exchanges between the ranks of a node when hierarchical,
  // else between all ranks; level 1 (hierarchical only) between the ranks of the cross
  // communicator. Chunk i of send goes to peer i, chunk i of recv arrives from peer i
  // (peer = rank in that communicator); this rank's own chunk is not moved.
  int all_to_all_levels() const { return hierarchical_ ? 2 : 1; }
  int all_to_all_peers(int level) const;  // communicator size at that level
  int all_to_all_me(int level) const;     // this rank's index at that level
  void start_all_to_all(int level, const uint8_t* send, uint8_t* recv, size_t chunk_bytes,
                        Handles& out);

 private:
  static void all_to_all(comm::Comm& c, const uint8_t* send, uint8_t* recv, size_t chunk_bytes,
                         Handles& out);
  std::unique_ptr<comm::Comm> world_comm_, node_comm_, cross_comm_, hpz_comm_;
  std::unique_ptr<comm::Comm> host_comm_;  // null: world takes host memory
  int size_ = 1, rank_ = 0, local_ = 0, local_size_ = 1, node_index_ = 0, nodes_ = 1;
  bool hierarchical_ = false;
};

// Waits for and clears every handle.
void wait_all(Handles& handles);

}  // namespace zt::zero::detail
