// The sanitizer build compiles the GEMM kernels without ASan and checks their operands at
// entry instead (src/kernels/cpu/addressable.hpp): a short or freed operand must still
// fail, naming the kernel and the operand. Built with ZT_SANITIZE only.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "zt/kernels/linear.hpp"

namespace zt::kernels::cpu {
namespace {

constexpr int64_t N = 8, in = 16, out = 12;

TEST(AddressableDeathTest, LinearForwardShortInput) {
  std::vector<float> y(N * out), W(out * in);
  auto x = std::make_unique<float[]>(N * in - 1);  // one element short
  EXPECT_DEATH(linear_forward(y.data(), x.get(), W.data(), N, in, out),
               "linear_forward: operand x");
}

TEST(AddressableDeathTest, LinearBackwardShortWeightGradient) {
  std::vector<float> dx(N * in), dy(N * out), x(N * in), W(out * in);
  auto dW = std::make_unique<float[]>(out * in - 1);
  EXPECT_DEATH(linear_backward(dx.data(), dW.get(), dy.data(), x.data(), W.data(), N, in, out,
                               false),
               "linear_backward: operand dW");
}

TEST(AddressableDeathTest, BiasForwardFreedOutput) {
  std::vector<float> b(out);
  float* y = new float[N * out];
  delete[] y;
  EXPECT_DEATH(bias_forward(y, b.data(), N, out), "bias_forward: operand y");
}

// The whole extents pass: nothing is reported for operands of the exact size.
TEST(Addressable, ExactOperandsRun) {
  std::vector<float> y(N * out), x(N * in, 1.0f), W(out * in, 0.5f);
  linear_forward(y.data(), x.data(), W.data(), N, in, out);
  EXPECT_FLOAT_EQ(y[0], 0.5f * in);
}

}  // namespace
}  // namespace zt::kernels::cpu
