#pragma once
// The process runtime: MPI initialisation, topology, and device binding.
//
// Topology comes from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED): the ranks that share
// memory form a node. With ranks_per_node = K > 0 the ranks of each physical node are
// further grouped into simulated nodes of K consecutive ranks, so hierarchical code
// (hpZ, intra/inter-node collectives) runs and is tested on one host.
#include <mpi.h>

#include <memory>
#include <string>

#include "zt/runtime/agree.hpp"
#include "zt/runtime/liveness.hpp"

namespace zt::runtime {

struct Topology {
  int world_rank = 0;
  int world_size = 1;
  int node = 0;        // index of this rank's node (simulated when ranks_per_node > 0)
  int node_count = 1;
  int local_rank = 0;  // rank within the node
  int local_size = 1;
  bool simulated = false;  // nodes come from --ranks-per-node
  std::string host;        // this rank's hostname
};

struct Options {
  int ranks_per_node = 0;  // 0: nodes are physical hosts; K: simulate nodes of K ranks
  // Ask for MPI_THREAD_MULTIPLE instead of FUNNELED (ckpt.async: a background thread
  // writes checkpoints with MPI-IO while the main thread trains).
  bool thread_multiple = false;
  // What every rank must hold alike (the resolved configuration, the command's options),
  // compared right after MPI starts, before any collective that depends on it
  // (runtime::require_same; issue 36, class 2): a mismatch is exit 2 on every rank.
  Settings same_on_every_rank;
  std::string same_what = "the configuration key";
  std::string same_hint = "launch every rank with the same configuration (one command line for all)";
};

class Runtime {
 public:
  // Initialises MPI (MPI_THREAD_FUNNELED) unless it already is; derives the topology;
  // binds the CUDA device (local rank modulo visible devices) when one exists; starts the
  // liveness channel (runtime::Liveness: host names and pids of every rank).
  explicit Runtime(const Options& options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const Topology& topology() const { return topo_; }
  MPI_Comm world() const { return world_; }  // a duplicate of MPI_COMM_WORLD
  MPI_Comm node() const { return node_; }    // ranks of this node, ordered by world rank
  MPI_Comm cross() const { return cross_; }  // ranks with this local rank, one per node
  int device() const { return device_; }     // CUDA device index; -1: this rank runs on CPU
  int visible_devices() const { return visible_devices_; }

  // The MPI library's own version string (MPI_Get_library_version), first line.
  static std::string mpi_library_version();

  // Ends every rank of the job now (MPI_Abort on world). For failures that only some
  // ranks see, where waiting for the others would hang.
  [[noreturn]] void abort(int exit_code) const;

 private:
  Topology topo_;
  MPI_Comm world_ = MPI_COMM_NULL;
  MPI_Comm node_ = MPI_COMM_NULL;
  MPI_Comm cross_ = MPI_COMM_NULL;
  int device_ = -1;
  int visible_devices_ = 0;
  bool owns_mpi_ = false;
  // The probe channel that lets a timed-out collective name the ranks that are gone.
  std::unique_ptr<Liveness> liveness_;
};

// Number of CUDA devices this process sees; 0 in a CPU-only build or with no driver.
int cuda_device_count();
// Makes `device` current for this thread (no-op in a CPU-only build).
void cuda_set_device(int device);

}  // namespace zt::runtime
