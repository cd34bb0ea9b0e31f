#pragma once
// The stages of `zt check` beyond the collective sweep (docs/checklist.md): all-reduce
// within each node, the pair matrix between nodes, the straggler loop, host<->device
// copies, the write bandwidth of a directory, and the fabric (libfabric, NCCL's network,
// GPU-NIC affinity). Each run_* is collective over `bench` and `control` (a host-memory
// Comm over the same ranks) and returns the same result on every rank; the analyse/find
// functions are pure and tested on their own.
#include <mpi.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "zt/check/nccl_log.hpp"
#include "zt/check/report.hpp"
#include "zt/comm/comm.hpp"

namespace zt::check {

// Node leaders: [node] the lowest world rank of that node, from the gathered RankInfo.
std::vector<int> node_leaders(const std::vector<RankInfo>& ranks);

// Leaders of each pair of nodes exchange `bytes` both ways at once (sendrecv), `iters`
// times after one warm-up, one pair at a time; a leader's time is its fastest exchange
// (a slow link slows every exchange, a busy host only some), the pair's time the slower
// leader's; gbs = bytes / time (per direction).
// Fewer than two nodes: ran = false.
// With `rounds`, disjoint pairs run at once, in the rounds of pair_rounds (n-1 or n
// rounds instead of n(n-1)/2 steps; for large clusters, on a non-blocking fabric).
PairMatrix run_pairs(comm::Comm& bench, comm::Comm& control, const std::vector<RankInfo>& ranks,
                     uint64_t bytes, int iters, bool rounds = false, double slow_fraction = 0.5);

// Every pair (a < b) of `n` nodes exactly once, in rounds where no node appears twice
// (the circle method): n-1 rounds for even n, n rounds for odd n (one node rests).
std::vector<std::vector<std::pair<int, int>>> pair_rounds(int n);
// From m.gbs: the slowest pair; each node's best pair; reference = median of those;
// slow nodes = best pair below m.slow_fraction (0.5) x the reference (needs >= 3 nodes to
// tell which end of a pair is slow).
void analyse_pairs(PairMatrix& m);

// Each rank's mean time of `iters` rounds of: control barrier, all_reduce of `bytes`
// (float sum) on bench, synchronize. Ranks above factor * median are stragglers.
Stragglers run_stragglers(comm::Comm& bench, comm::Comm& control, uint64_t bytes, int iters,
                          double factor);
// Median (mean of the middle two for an even count) and the ranks above factor * median.
void find_stragglers(Stragglers& s);

// all_reduce of `bytes` on each node's communicator (bench split by node); busbw per node.
IntraNode run_intra_node(comm::Comm& bench, comm::Comm& control, const std::vector<RankInfo>& ranks,
                         uint64_t bytes, int iters, int warmup);

// Pinned host<->device copies of `bytes` on `device` (CUDA builds); else "skipped: no GPU".
CopyBandwidth measure_copy_bandwidth(int device, uint64_t bytes, int iters);

// Writes `bytes` to a new file in `dir` with O_DIRECT (buffered + fsync where O_DIRECT is
// refused), then removes it. `tag` makes the file name unique per node.
IoBandwidth measure_io_write(const std::string& dir, uint64_t bytes, const std::string& tag);

// libfabric providers (fi_getinfo) and /sys/class/infiniband of this host.
FabricFacts local_fabric_facts();

// GPU-NIC NUMA affinity from hwloc: NICs with their NUMA node, and for each GPU PCI bus id
// ("0000:1b:00.0") whether an RDMA NIC shares its NUMA node. Fills nics, affinity,
// affinity_status of `fabric`. No bus ids: "skipped: no GPU" (NICs still listed).
void hwloc_affinity(const std::vector<std::string>& gpu_bus_ids, NodeFabric& fabric);

// What this rank's NCCL probe found (nccl_probe.cpp): run before any other NCCL comm of
// the process exists, because NCCL reads NCCL_DEBUG once.
struct NcclProbe {
  bool probed = false;
  std::string note;           // "skipped: no GPU" / "skipped: not built with CUDA"
  NcclNetworkInfo info;
  std::string log_file;
};
// Collective over `control` (and an NCCL comm it creates and destroys over `world`):
// sets NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET, NCCL_DEBUG_FILE=<log_dir>/nccl-
// probe.<host>.<pid>.log, runs one small all_reduce, and parses this process's file.
NcclProbe probe_nccl_network(MPI_Comm world, comm::Comm& control, int device,
                             const std::string& log_dir);

// Per node: facts and NCCL judgement from the leader, affinity from hwloc on the leader
// with the GPUs of the node's ranks. Collective over `control`.
std::vector<NodeFabric> collect_fabric(comm::Comm& control, const std::vector<RankInfo>& ranks,
                                       const NcclProbe& probe);

// Every rank's string, in rank order (collective over `control`).
std::vector<std::string> gather_strings(comm::Comm& control, const std::string& mine);

}  // namespace zt::check
