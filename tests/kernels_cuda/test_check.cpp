// Checked calls and helpers that need no device: the error messages of ZT_CUDA_CHECK and
// ZT_CUBLAS_CHECK (call, CUDA's error name, device, host, file:line, HINT), the precision
// modes, and DeviceBuffer (on a device).
#include <gtest/gtest.h>

#include "cuda_test_util.hpp"
#include "support/expect_error.hpp"
#include "zt/core/error.hpp"
#include "zt/kernels/cuda/precision.hpp"

namespace zt::kernels::cuda::testing {
namespace {

std::string what_of(void (*f)()) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CudaCheck, FailedCallNamesCallDeviceHostAndHint) {
  const std::string w = what_of([] { ZT_CUDA_CHECK(cudaSetDevice(1 << 20)); });
  std::printf("%s\n", w.c_str());
  EXPECT_NE(w.find("cudaSetDevice(1 << 20) failed"), std::string::npos) << w;
  EXPECT_NE(w.find("device "), std::string::npos) << w;
  EXPECT_NE(w.find("host " + process_host()), std::string::npos) << w;
  EXPECT_NE(w.find("test_check.cpp"), std::string::npos) << w;
  EXPECT_NE(w.find("HINT:"), std::string::npos) << w;
  cudaGetLastError();
}

TEST(CudaCheck, CublasStatusIsNamed) {
  const std::string w = what_of([] { ZT_CUBLAS_CHECK(CUBLAS_STATUS_NOT_SUPPORTED); });
  std::printf("%s\n", w.c_str());
  EXPECT_NE(w.find("CUBLAS_STATUS_NOT_SUPPORTED failed"), std::string::npos) << w;
  // cuBLASLt's own text for the status (cublasLtGetStatusString, dlopened: cublaslt_loader.cpp)
  EXPECT_NE(w.find("failed: the requested functionality is not supported"), std::string::npos) << w;
  EXPECT_NE(w.find("host "), std::string::npos) << w;
  EXPECT_NE(w.find("HINT:"), std::string::npos) << w;
}

TEST(Precision, LitGptNames) {
  for (auto p : {Precision::kFp32, Precision::kBf16Mixed, Precision::kBf16True})
    EXPECT_EQ(parse_precision(precision_name(p)), p);
  EXPECT_EQ(parse_precision("bf16-mixed"), Precision::kBf16Mixed);
  EXPECT_TRUE(has_fp32_master(Precision::kBf16Mixed));
  EXPECT_FALSE(has_fp32_master(Precision::kBf16True));
  EXPECT_TRUE(fp32_gradients(Precision::kBf16Mixed));
  EXPECT_FALSE(fp32_gradients(Precision::kBf16True));
  EXPECT_FALSE(computes_in_bf16(Precision::kFp32));
  zt::testing::expect_input_error([] { parse_precision("fp16"); },
                                  {"train.precision", "fp16", "bf16-mixed"});
}

class DeviceBufferTest : public GpuTest {};

TEST_F(DeviceBufferTest, RoundTripMoveAndBounds) {
  std::vector<int32_t> h{1, -2, 3, -4, 5};
  DeviceBuffer<int32_t> a(h.size());
  a.upload(h);
  DeviceBuffer<int32_t> b = std::move(a);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(b.to_host(), h);
  const std::vector<int32_t> too_many(6, 0);
  EXPECT_THROW(b.upload(too_many), Error);
  DeviceBuffer<int32_t> empty;
  EXPECT_TRUE(empty.to_host().empty());
}

// Out of GPU memory: 1 TiB cannot be allocated on any current GPU; the message names
// what and how much, the device's free memory, and `zt estimate`.
TEST_F(DeviceBufferTest, OutOfMemoryNamesSizeFreeMemoryAndEstimate) {
  std::string w;
  try {
    DeviceBuffer<float> huge(size_t{1} << 38, "the test's 1 TiB buffer");
  } catch (const Error& e) {
    w = e.what();
  }
  std::printf("%s\n", w.c_str());
  EXPECT_NE(w.find("out of GPU memory"), std::string::npos) << w;
  EXPECT_NE(w.find("1024.000 GiB for the test's 1 TiB buffer"), std::string::npos) << w;
  EXPECT_NE(w.find("GiB free of"), std::string::npos) << w;
  EXPECT_NE(w.find("zt estimate"), std::string::npos) << w;
  // The context stays usable.
  DeviceBuffer<float> small(16);
  EXPECT_EQ(small.size(), 16u);
}

}  // namespace
}  // namespace zt::kernels::cuda::testing
