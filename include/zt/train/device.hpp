#pragma once
// Where `zt train` computes and how its ranks talk: train.device, train.precision,
// train.share_gpu and comm.backend resolved against what this rank sees (docs/training.md,
// "Device, precision, backend"). A pure function of the keys and the facts, so every rank
// of a host decides alike and the rules are tested without a GPU.
#include <string>
#include <vector>

#include "zt/train/config.hpp"

namespace zt::train {

// What one rank sees.
struct DeviceFacts {
  bool cuda_built = false;       // this zt has the CUDA backend
  bool nccl_built = false;       // ... and NCCL (comm::nccl_available())
  int visible_gpus = 0;          // CUDA devices this process sees
  std::vector<int> host_ranks;   // world ranks on this physical host, ascending
  int world_rank = 0;            // this rank (one of host_ranks)
  std::string host;              // this host's name
  std::string nccl_version;      // "2.27.3", or "" without NCCL
};

struct DeviceChoice {
  bool cuda = false;          // train on a GPU
  int gpu = -1;               // CUDA device index of this rank (cuda only)
  bool shared = false;        // several ranks of this host on one GPU (train.share_gpu)
  std::string precision;      // fp32 | bf16-mixed | bf16-true
  std::string backend;        // mpi | nccl
  // The banner line: "device cuda:0 (2 ranks per GPU), precision fp32, comm nccl
  // (NCCL 2.27.3)" or "device cpu, precision fp32, comm mpi (NCCL not built in)".
  std::string describe(const std::string& nccl_version) const;
};

// train.device = auto: cuda when built with CUDA and the rank sees a GPU, else cpu.
// On cuda the rank's index among host_ranks picks the GPU (modulo the visible ones); more
// ranks than GPUs on a host is an InputError naming two ranks that would share one,
// unless share_gpu. The CPU takes precision fp32 only; comm.backend = auto is nccl on
// cuda (when built in and no GPU is shared: NCCL refuses that), mpi otherwise. Every refusal is an InputError naming its key.
DeviceChoice choose_device(const std::string& device, const std::string& precision,
                           bool share_gpu, const std::string& backend, const DeviceFacts& facts);

}  // namespace zt::train
