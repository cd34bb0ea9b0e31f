// train.device / train.precision / train.share_gpu / comm.backend (zt/train/device.hpp):
// the choice for every kind of rank, from facts alone, so the GPU rules are tested on a
// CPU: auto, one GPU per rank, shared GPUs, CPU-only precision, NCCL only on a GPU.
#include <gtest/gtest.h>

#include "support/expect_error.hpp"
#include "zt/train/device.hpp"

namespace {

using zt::testing::expect_input_error;
using zt::train::choose_device;
using zt::train::DeviceChoice;
using zt::train::DeviceFacts;

// Rank `rank` of the world ranks `host` on host "n1", with `gpus` GPUs in a CUDA build.
DeviceFacts gpu_host(int gpus, std::vector<int> host, int rank) {
  DeviceFacts f;
  f.cuda_built = f.nccl_built = true;
  f.visible_gpus = gpus;
  f.host_ranks = std::move(host);
  f.world_rank = rank;
  f.host = "n1";
  f.nccl_version = "2.27.3";
  return f;
}
DeviceFacts cpu_build() {
  DeviceFacts f;
  f.host_ranks = {0};
  f.host = "n1";
  return f;
}

TEST(Device, AutoIsCpuWithoutCudaOrGpu) {
  const DeviceChoice c = choose_device("auto", "fp32", false, "auto", cpu_build());
  EXPECT_FALSE(c.cuda);
  EXPECT_EQ(c.backend, "mpi");
  EXPECT_EQ(c.describe(""), "device cpu, precision fp32, comm mpi (NCCL not built in)");
  EXPECT_FALSE(choose_device("auto", "fp32", false, "auto", gpu_host(0, {0, 1}, 1)).cuda);
}

TEST(Device, AutoIsCudaWithOneGpuPerRankPickedByLocalIndex) {
  // World ranks 4..7 on this host, 4 GPUs: the index on the host picks the GPU.
  for (int r = 4; r < 8; ++r) {
    const DeviceChoice c = choose_device("auto", "fp32", false, "auto", gpu_host(4, {4, 5, 6, 7}, r));
    EXPECT_TRUE(c.cuda);
    EXPECT_EQ(c.gpu, r - 4);
    EXPECT_FALSE(c.shared);
    EXPECT_EQ(c.backend, "nccl");
  }
  EXPECT_EQ(choose_device("cuda", "bf16-mixed", false, "auto", gpu_host(1, {0}, 0)).describe("2.27.3"),
            "device cuda:0, precision bf16-mixed, comm nccl (NCCL 2.27.3)");
  EXPECT_EQ(choose_device("cuda", "fp32", false, "mpi", gpu_host(1, {0}, 0)).backend, "mpi");
}

TEST(Device, TwoRanksOnOneGpuNamesBothUnlessShared) {
  expect_input_error([] { choose_device("auto", "fp32", false, "auto", gpu_host(2, {0, 1, 2, 3}, 3)); },
                     {"ranks 0 and 2 on n1 would share GPU 0", "4 ranks on the host, 2 GPUs",
                      "train.share_gpu = true"});
  const DeviceChoice c = choose_device("cuda", "fp32", true, "auto", gpu_host(1, {0, 1, 2, 3}, 2));
  EXPECT_TRUE(c.shared);
  EXPECT_EQ(c.gpu, 0);
  EXPECT_EQ(c.backend, "mpi");  // NCCL refuses shared GPUs
  expect_input_error([] { choose_device("cuda", "fp32", true, "nccl", gpu_host(1, {0, 1}, 0)); },
                     {"comm.backend = nccl with ranks sharing a GPU", "comm.backend = mpi"});
}

TEST(Device, RefusalsNameTheirKey) {
  expect_input_error([] { choose_device("cuda", "fp32", false, "auto", cpu_build()); },
                     {"train.device = cuda, but this zt was built without CUDA"});
  expect_input_error([] { choose_device("cuda", "fp32", false, "auto", gpu_host(0, {0}, 0)); },
                     {"train.device = cuda, but rank 0 on n1 sees no CUDA device"});
  for (const char* p : {"bf16-mixed", "bf16-true"})
    expect_input_error([&] { choose_device("auto", p, false, "auto", cpu_build()); },
                       {std::string("train.precision = ") + p + " on the CPU", "fp32 only"});
  expect_input_error([] { choose_device("cpu", "fp32", false, "nccl", gpu_host(1, {0}, 0)); },
                     {"comm.backend = nccl, but this rank trains on the CPU"});
  expect_input_error([] { choose_device("auto", "fp32", false, "nccl", cpu_build()); },
                     {"comm.backend = nccl"});
}

}  // namespace
