// cuBLASLt linear layer (y = x W^T and its backward) against the CPU reference in double
// on the same rounded inputs: fp32 (no TF32: 1e-5), bf16 with fp32 and bf16 weight
// gradients (1e-2); the scaled forms (alpha, beta) at LoRA's shapes; and the plan cache
// reusing plans for repeated shapes.
#include <gtest/gtest.h>

#include "cuda_test_util.hpp"
#include "zt/kernels/cpu.hpp"
#include "zt/kernels/cuda/gemm.hpp"

namespace zt::kernels::cuda::testing {
namespace {

class GemmTest : public GpuTest {
 protected:
  template <class T, class G>
  void check_linear(int64_t N, int64_t in, int64_t out) {
    const double tol = tolerance<T>();
    const std::string tag = strf_shape<T, G>(N, in, out);
    Gemm gemm;
    Vec x = randn(N * in), W = randn(out * in, 0.2), R = randn(N * out);
    auto dx_in = to_device<T>(x);
    auto dW = to_device<T>(W);
    auto dR = to_device<T>(R);
    auto dy = poisoned<T>(N * out);
    linear_forward<T>(gemm, dy.data(), dx_in.data(), dW.data(), N, in, out);
    Vec y(N * out);
    cpu::linear_forward<double>(y.data(), x.data(), W.data(), N, in, out);
    expect_close(to_host(dy), y, tol, "linear y " + tag);

    Vec dx0 = randn(N * in), dW0 = randn(out * in);
    auto ddx = to_device<T>(dx0);
    auto ddW = to_device<G>(dW0);
    linear_backward<T, G>(gemm, ddx.data(), ddW.data(), dR.data(), dx_in.data(), dW.data(), N,
                          in, out, /*accumulate_dx=*/true);
    Vec rdx = dx0, rdW = dW0;
    cpu::linear_backward<double>(rdx.data(), rdW.data(), R.data(), x.data(), W.data(), N, in,
                                 out, true);
    expect_close(to_host(ddx), rdx, tol, "linear dx (accumulated) " + tag);
    expect_close(to_host(ddW), rdW, std::is_same_v<G, float> && std::is_same_v<T, float> ? kTolF32 : kTolBF16,
                 "linear dW (accumulated) " + tag);

    auto ddx2 = poisoned<T>(N * in);
    linear_backward<T, G>(gemm, ddx2.data(), nullptr, dR.data(), dx_in.data(), dW.data(), N, in,
                          out, /*accumulate_dx=*/false);
    Vec wdx(N * in);
    cpu::linear_backward<double>(wdx.data(), nullptr, R.data(), x.data(), W.data(), N, in, out,
                                 false);
    expect_close(to_host(ddx2), wdx, tol, "linear dx (written) " + tag);
  }

  // The scaled forms (LoRA's products): y = alpha x W^T + beta y, dx = alpha dy W + beta dx.
  template <class T>
  void check_scaled(int64_t N, int64_t in, int64_t out, float alpha, float beta) {
    const double tol = tolerance<T>();
    const std::string tag = strf_shape<T, T>(N, in, out) + " alpha " + std::to_string(alpha) +
                            " beta " + std::to_string(beta);
    Gemm gemm;
    Vec x = randn(N * in), W = randn(out * in, 0.2), y0 = randn(N * out), R = randn(N * out),
        dx0 = randn(N * in);
    auto dxin = to_device<T>(x);
    auto dW = to_device<T>(W);
    auto dy = to_device<T>(y0);
    auto dR = to_device<T>(R);
    auto ddx = to_device<T>(dx0);
    linear_forward_scaled<T>(gemm, dy.data(), dxin.data(), dW.data(), N, in, out, alpha, beta);
    linear_dx_scaled<T>(gemm, ddx.data(), dR.data(), dW.data(), N, in, out, alpha, beta);
    Vec y(N * out), dx(N * in);
    cpu::linear_forward<double>(y.data(), x.data(), W.data(), N, in, out);
    cpu::linear_backward<double>(dx.data(), nullptr, R.data(), x.data(), W.data(), N, in, out,
                                 false);
    for (size_t i = 0; i < y.size(); ++i) y[i] = alpha * y[i] + beta * y0[i];
    for (size_t i = 0; i < dx.size(); ++i) dx[i] = alpha * dx[i] + beta * dx0[i];
    expect_close(to_host(dy), y, tol, "linear y scaled " + tag);
    expect_close(to_host(ddx), dx, tol, "linear dx scaled " + tag);
  }

  template <class T, class G>
  static std::string strf_shape(int64_t N, int64_t in, int64_t out) {
    return std::string(type_name<T>()) + "/grad " + type_name<G>() + " N" + std::to_string(N) +
           " in" + std::to_string(in) + " out" + std::to_string(out);
  }
};

TEST_F(GemmTest, Fp32) { check_linear<float, float>(70, 96, 136); }
TEST_F(GemmTest, Fp32OddShapes) { check_linear<float, float>(33, 45, 29); }
TEST_F(GemmTest, Bf16MixedFp32WeightGrad) { check_linear<bf16_t, float>(70, 96, 136); }
TEST_F(GemmTest, Bf16TrueBf16WeightGrad) { check_linear<bf16_t, bf16_t>(64, 128, 256); }
TEST_F(GemmTest, LongReduction) { check_linear<float, float>(1024, 64, 32); }  // dW sums 1024 rows

// LoRA's shapes: rank 8 and 4 as the inner or outer dimension (bf16 leading dimensions of
// 16 and 8 bytes), the adapter scale as alpha, accumulation as beta.
TEST_F(GemmTest, ScaledFormsAtAdapterShapes) {
  for (int64_t r : {8, 4}) {
    check_scaled<float>(64, 128, r, 2.0f, 0.0f);  // u = s x A^T
    check_scaled<float>(64, r, 256, 1.0f, 1.0f);  // y += u B^T; du = s dy B
    check_scaled<bf16_t>(64, 128, r, 2.0f, 0.0f);
    check_scaled<bf16_t>(64, r, 256, 1.0f, 1.0f);
    check_scaled<bf16_t>(64, r, 256, 0.5f, 0.0f);
  }
}

TEST_F(GemmTest, PlansAreCachedPerShape) {
  Gemm gemm;
  const int64_t N = 16, in = 32, out = 48;
  Vec x = randn(N * in), W = randn(out * in);
  auto dx = to_device<float>(x);
  auto dW = to_device<float>(W);
  DeviceBuffer<float> y(N * out);
  linear_forward<float>(gemm, y.data(), dx.data(), dW.data(), N, in, out);
  EXPECT_EQ(gemm.cached_plans(), 1u);
  for (int i = 0; i < 5; ++i) linear_forward<float>(gemm, y.data(), dx.data(), dW.data(), N, in, out);
  EXPECT_EQ(gemm.cached_plans(), 1u);  // same shape: no new descriptor or heuristic query
  linear_forward<float>(gemm, y.data(), dx.data(), dW.data(), N / 2, in, out);
  EXPECT_EQ(gemm.cached_plans(), 2u);
}

}  // namespace
}  // namespace zt::kernels::cuda::testing
