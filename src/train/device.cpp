// train.device / train.precision / train.share_gpu / comm.backend (device.hpp).
#include "zt/train/device.hpp"

#include <algorithm>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::train {

std::string DeviceChoice::describe(const std::string& nccl_version) const {
  std::string d = cuda ? strf("cuda:%d%s", gpu, shared ? " (shared by ranks: train.share_gpu)" : "")
                       : std::string("cpu");
  return strf("device %s, precision %s, comm %s (%s)", d.c_str(), precision.c_str(),
              backend.c_str(),
              nccl_version.empty() ? "NCCL not built in" : ("NCCL " + nccl_version).c_str());
}

DeviceChoice choose_device(const std::string& device, const std::string& precision,
                           bool share_gpu, const std::string& backend, const DeviceFacts& f) {
  DeviceChoice c;
  c.precision = precision;
  if (device == "cuda") {
    if (!f.cuda_built)
      throw InputError("train.device = cuda, but this zt was built without CUDA",
                       "rebuild with -DZT_CUDA=ON on a machine with nvcc, or set train.device = "
                       "cpu (or auto)");
    if (f.visible_gpus == 0)
      throw InputError(strf("train.device = cuda, but rank %d on %s sees no CUDA device",
                            f.world_rank, f.host.c_str()),
                       "check nvidia-smi and CUDA_VISIBLE_DEVICES on that host, or set "
                       "train.device = cpu (or auto)");
    c.cuda = true;
  } else if (device == "auto") {
    c.cuda = f.cuda_built && f.visible_gpus > 0;
  } else if (device != "cpu") {
    throw InputError("train.device = " + device + " is not a device",
                     "use auto, cpu or cuda");
  }

  if (precision != "fp32" && precision != "bf16-mixed" && precision != "bf16-true")
    throw InputError("train.precision = " + precision + " is not a precision",
                     "use fp32, bf16-mixed or bf16-true (LitGPT's names)");
  if (!c.cuda && precision != "fp32")
    throw InputError("train.precision = " + precision + " on the CPU (train.device = " + device +
                         "): the CPU trains in fp32 only",
                     "set train.precision = fp32, or train on a GPU (train.device = cuda)");

  if (c.cuda) {
    const auto me = std::find(f.host_ranks.begin(), f.host_ranks.end(), f.world_rank);
    ZT_CHECK(me != f.host_ranks.end(), "this rank is not among its host's ranks",
             "a bug in the caller: host_ranks must hold world_rank");
    const int index = static_cast<int>(me - f.host_ranks.begin());
    const int on_host = static_cast<int>(f.host_ranks.size());
    c.gpu = index % f.visible_gpus;
    c.shared = on_host > f.visible_gpus;
    if (c.shared && !share_gpu)
      throw InputError(
          strf("train.device = cuda: ranks %d and %d on %s would share GPU 0 (%d ranks on the "
               "host, %d GPU%s visible)",
               f.host_ranks[0], f.host_ranks[static_cast<size_t>(f.visible_gpus)], f.host.c_str(),
               on_host, f.visible_gpus, f.visible_gpus == 1 ? "" : "s"),
          "launch one rank per GPU, or set train.share_gpu = true (tests: the ranks take turns "
          "on the GPU)");
  }

  // NCCL refuses two ranks of one communicator on one GPU: shared GPUs go over MPI.
  if (backend == "auto") {
    c.backend = c.cuda && f.nccl_built && !c.shared ? "nccl" : "mpi";
  } else if (backend == "nccl") {
    if (!c.cuda)
      throw InputError("comm.backend = nccl, but this rank trains on the CPU (train.device = " +
                           device + ")",
                       "NCCL moves device memory: set train.device = cuda, or comm.backend = mpi "
                       "(or auto)");
    if (!f.nccl_built)
      throw InputError("comm.backend = nccl, but this zt was built without NCCL",
                       "set comm.backend = mpi (device buffers are staged through pinned host "
                       "memory), or rebuild with NCCL");
    if (c.shared)
      throw InputError("comm.backend = nccl with ranks sharing a GPU (train.share_gpu): NCCL "
                       "refuses two ranks of one communicator on one GPU",
                       "set comm.backend = mpi (or auto) to share GPUs, or launch one rank per GPU");
    c.backend = "nccl";
  } else if (backend == "mpi") {
    c.backend = "mpi";
  } else {
    throw InputError("comm.backend = " + backend + " is not a backend", "use auto, nccl or mpi");
  }
  return c;
}

}  // namespace zt::train
