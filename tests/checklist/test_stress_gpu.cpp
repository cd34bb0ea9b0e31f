// The GPU stress on a real GPU (label gpu): the cuBLASLt bf16 burn and the HBM copy kernel
// (zt/kernels/cuda/stress.hpp) compute exactly what they should (every output of the last
// product equals the first, the samples equal the product in double; every copied word
// equals the pattern), and reach at least the FAIL fractions of the GPU's row of
// data/gpus.csv; measure_stress runs both on every visible GPU at once. Without a GPU the
// binary prints SKIPPED: and exits 77 (CTest: skipped).
#include <gtest/gtest.h>

#include <cstdio>

#include "zt/check/stress.hpp"
#include "zt/kernels/cuda/check.hpp"
#include "zt/kernels/cuda/stress.hpp"

namespace zc = zt::check;
namespace zk = zt::kernels::cuda;
namespace ze = zt::estimate;

namespace {

// The device's row of data/gpus.csv, or nullptr.
const ze::GpuSpec* row() {
  static const std::vector<ze::GpuSpec> table = ze::load_shipped_gpus();
  cudaDeviceProp prop{};
  ZT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device 0: %s\n", prop.name);
  return ze::gpu_for_device(table, prop.name);
}

}  // namespace

TEST(StressGpu, GemmBurnIsExactAndFast) {
  ZT_CUDA_CHECK(cudaSetDevice(0));
  const zk::GemmBurn b = zk::gemm_burn(2.0);
  std::printf("gemm burn: %.1f TFLOP/s (slowest window %.1f), %lld products of %lld^3 in %.2f s, %lld of %lld wrong\n",
              b.tflops, b.slowest_window_tflops, static_cast<long long>(b.calls), static_cast<long long>(b.n),
              b.seconds, static_cast<long long>(b.wrong), static_cast<long long>(b.checked));
  EXPECT_EQ(b.n, zk::kGemmBurnSize);
  EXPECT_EQ(b.checked, b.n * b.n + zk::kGemmSamples);
  EXPECT_EQ(b.wrong, 0);
  EXPECT_GT(b.calls, 0);
  EXPECT_GE(b.seconds, 1.5);
  EXPECT_GT(b.slowest_window_tflops, 0.0);
  EXPECT_LE(b.slowest_window_tflops, b.tflops * 1.05);
  if (const ze::GpuSpec* g = row(); g != nullptr && g->bf16_tflops > 0) {
    std::printf("%.2f of the %s peak %.0f TFLOP/s\n", b.tflops / g->bf16_tflops, g->name.c_str(), g->bf16_tflops);
    EXPECT_GE(b.tflops, zc::StressRules{}.gemm_fail_of_peak * g->bf16_tflops);
    EXPECT_LE(b.tflops, g->bf16_tflops * 1.05);  // above the peak: the timing is wrong
  }
}

TEST(StressGpu, HbmCopyIsExactAndFast) {
  ZT_CUDA_CHECK(cudaSetDevice(0));
  const zk::HbmBandwidth h = zk::hbm_bandwidth(0.5);
  std::printf("hbm: %.0f GB/s, %lld copies of %llu bytes in %.3f s, %lld words wrong\n", h.gbs,
              static_cast<long long>(h.passes), static_cast<unsigned long long>(h.bytes), h.seconds,
              static_cast<long long>(h.wrong));
  EXPECT_EQ(h.wrong, 0);
  EXPECT_GE(h.passes, 10);
  EXPECT_EQ(h.bytes % 16, 0u);
  EXPECT_GT(h.gbs, 0.0);
  if (const ze::GpuSpec* g = row(); g != nullptr && g->bandwidth_gb_s > 0) {
    std::printf("%.2f of the %s memory bandwidth %.0f GB/s\n", h.gbs / g->bandwidth_gb_s, g->name.c_str(),
                g->bandwidth_gb_s);
    EXPECT_GE(h.gbs, zc::StressRules{}.hbm_fail_of_table * g->bandwidth_gb_s);
    EXPECT_LE(h.gbs, g->bandwidth_gb_s * 1.05);
  }
}

// The counters are shown a wrong result: the test hook flips one bit of one output of the
// first product (the last must equal it everywhere) and of one copied word; each count is 1.
TEST(StressGpu, CountersSeeOneWrongElement) {
  ZT_CUDA_CHECK(cudaSetDevice(0));
  struct Reset {
    ~Reset() { zk::set_stress_fault_for_test(zk::StressFault::kNone); }
  } reset;
  zk::set_stress_fault_for_test(zk::StressFault::kGemm);
  const zk::GemmBurn b = zk::gemm_burn(0.0, 1024);
  EXPECT_EQ(b.checked, 1024 * 1024 + zk::kGemmSamples);
  EXPECT_EQ(b.wrong, 1);
  const zk::HbmBandwidth clean = zk::hbm_bandwidth(0.0, uint64_t{16} << 20);
  EXPECT_EQ(clean.wrong, 0);  // the GEMM's fault does not touch the copy
  zk::set_stress_fault_for_test(zk::StressFault::kHbm);
  EXPECT_EQ(zk::hbm_bandwidth(0.0, uint64_t{16} << 20).wrong, 1);
  EXPECT_EQ(zk::gemm_burn(0.0, 1024).wrong, 0);
}

TEST(StressGpu, MeasureStressOnEveryDevice) {
  // Every visible GPU at once, one thread each (what the only rank of a node does).
  std::vector<int> devices;
  for (int d = 0; d < zk::device_count(); ++d) devices.push_back(d);
  const std::vector<zc::StressSample> samples = zc::measure_stress(devices, 1.0);
  ASSERT_EQ(samples.size(), devices.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    const zc::StressSample& s = samples[i];
    std::printf("device %d (%s): %.1f TFLOP/s, %.0f GB/s\n", s.device, s.device_name.c_str(), s.gemm.tflops, s.hbm.gbs);
    EXPECT_EQ(s.device, devices[i]);
    EXPECT_FALSE(s.device_name.empty());
    EXPECT_EQ(s.skipped, "");
    EXPECT_EQ(s.gemm_error, "");
    EXPECT_EQ(s.hbm_error, "");
    EXPECT_TRUE(s.gemm_measured() && s.hbm_measured());
    EXPECT_GT(s.gemm.tflops, 0.0);
    EXPECT_GT(s.hbm.gbs, 0.0);
    EXPECT_EQ(s.gemm.wrong + s.hbm.wrong, 0);
  }
}

int main(int argc, char** argv) {
  if (zk::device_count() == 0) {
    std::printf("SKIPPED: no CUDA device visible (the GEMM burn and the HBM kernel need a GPU)\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
