// GPU fused cross-entropy, AdamW (fp32, bf16-mixed, bf16-true), gradient norm and the
// int8 quantization of qwZ / qgZ against the CPU references (the quantization bit for
// bit against src/zero/quantize.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "cuda_test_util.hpp"
#include "zt/kernels/cpu.hpp"
#include "zt/kernels/cuda/adamw.hpp"
#include "zt/kernels/cuda/convert.hpp"
#include "zt/kernels/cuda/cross_entropy.hpp"
#include "zt/kernels/cuda/grad_norm.hpp"
#include "zt/kernels/cuda/quantize.hpp"
#include "zt/zero/quantize.hpp"

namespace zt::kernels::cuda::testing {
namespace {

template <class T>
class LossOptim : public GpuTest {};
using Types = ::testing::Types<float, bf16_t>;
TYPED_TEST_SUITE(LossOptim, Types);

TYPED_TEST(LossOptim, CrossEntropyFusedInPlace) {
  using T = TypeParam;
  const double tol = tolerance<T>();
  const int64_t N = 45, V = 1000;
  Vec logits = this->randn(N * V, 3.0);
  std::vector<int32_t> tg(N);
  for (auto& t : tg) t = this->randint(0, static_cast<int32_t>(V) - 1);
  tg[3] = -1;  // ignored
  tg[17] = -100;
  int64_t count = 0;
  for (int32_t t : tg) count += t >= 0;
  const double scale = 0.5 / static_cast<double>(count);
  auto dl = to_device<T>(logits);
  auto dtg = to_device_i32(tg);
  auto row_loss = poisoned<float>(N);
  DeviceBuffer<CrossEntropyTotals> totals(1);

  Vec ref_d(N * V);
  const auto ref = cpu::cross_entropy<double>(ref_d.data(), logits.data(), tg.data(), N, V, scale);

  // out of place first, then in place over the logits (the model's use)
  auto dd = poisoned<T>(N * V);
  cross_entropy<T>(dd.data(), dl.data(), dtg.data(), N, V, scale, row_loss.data(), totals.data());
  expect_close(to_host(dd), ref_d, tol, std::string("cross_entropy dlogits ") + type_name<T>());
  cross_entropy<T>(dl.data(), dl.data(), dtg.data(), N, V, scale, row_loss.data(), totals.data());
  expect_close(to_host(dl), ref_d, tol,
               std::string("cross_entropy dlogits in place ") + type_name<T>());
  const CrossEntropyTotals got = totals.to_host()[0];
  std::printf("loss_sum gpu %.9f cpu %.9f\n", got.loss_sum, ref.loss_sum);
  EXPECT_LT(std::abs(got.loss_sum - ref.loss_sum) / ref.loss_sum, kTolF32);
  EXPECT_EQ(got.count, ref.count);
  EXPECT_EQ(got.bad_row, -1);

  // a target >= V: reported (first row), ignored, its dlogits zero
  tg[8] = static_cast<int32_t>(V) + 1;
  tg[30] = static_cast<int32_t>(V);
  auto dtg_bad = to_device_i32(tg);
  auto dl2 = to_device<T>(logits);
  cross_entropy<T>(dl2.data(), dl2.data(), dtg_bad.data(), N, V, scale, row_loss.data(),
                   totals.data());
  const CrossEntropyTotals bad = totals.to_host()[0];
  EXPECT_EQ(bad.bad_row, 8);
  EXPECT_EQ(bad.count, ref.count - 2);
  const Vec d2 = to_host(dl2);
  for (int64_t j = 0; j < V; ++j) ASSERT_EQ(d2[8 * V + j], 0.0);

  // loss only (no dlogits): the logits stay as they were
  auto dl3 = to_device<T>(logits);
  cross_entropy<T>(nullptr, dl3.data(), dtg.data(), N, V, scale, row_loss.data(), totals.data());
  EXPECT_LT(std::abs(totals.to_host()[0].loss_sum - ref.loss_sum) / ref.loss_sum, kTolF32);
  expect_close(to_host(dl3), logits, 1e-12, "cross_entropy loss only leaves logits");
  // no rows at all
  cross_entropy<T>(nullptr, dl3.data(), dtg.data(), 0, V, scale, row_loss.data(), totals.data());
  EXPECT_EQ(totals.to_host()[0].count, 0);
}

// Rows whose first logits are -inf (a masked vocabulary): each thread's online max starts
// at -inf, and exp(-inf - -inf) was NaN. Against the CPU kernel in double (max first,
// then exp(x - max): exp(-inf) = 0), which the CPU test checks against log-sum-exp.
TYPED_TEST(LossOptim, CrossEntropyLeadingMinusInfinity) {
  using T = TypeParam;
  const int64_t N = 5, V = 1000;
  Vec logits = this->randn(N * V, 2.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < 300 * (n + 1) / N; ++j) logits[n * V + j] = -INFINITY;
  const std::vector<int32_t> tg = {400, 500, 600, 700, 999};
  const double scale = 1.0 / N;
  Vec ref_d(N * V);
  const auto ref = cpu::cross_entropy<double>(ref_d.data(), logits.data(), tg.data(), N, V, scale);
  ASSERT_TRUE(std::isfinite(ref.loss_sum));
  auto dl = to_device<T>(logits);
  auto dtg = to_device_i32(tg);
  auto row_loss = poisoned<float>(N);
  DeviceBuffer<CrossEntropyTotals> totals(1);
  cross_entropy<T>(dl.data(), dl.data(), dtg.data(), N, V, scale, row_loss.data(), totals.data());
  const CrossEntropyTotals got = totals.to_host()[0];
  std::printf("-inf rows: loss_sum gpu %.9f cpu %.9f\n", got.loss_sum, ref.loss_sum);
  ASSERT_TRUE(std::isfinite(got.loss_sum));
  EXPECT_LT(std::abs(got.loss_sum - ref.loss_sum) / ref.loss_sum, kTolF32);
  expect_close(to_host(dl), ref_d, tolerance<T>(),
               std::string("cross_entropy dlogits, -inf rows ") + type_name<T>());
}

// AdamW steps against the CPU reference in double, re-rounding the parameters to the
// stored type after each step as the GPU does.
template <class P, class G>
void check_adamw(GpuTest& t, Vec p, Vec g_all, const char* mode, bool bf16_copy) {
  const int64_t n = static_cast<int64_t>(p.size());
  const double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
  Vec m(n, 0.0), v(n, 0.0);
  auto dp = to_device<P>(p);
  DeviceBuffer<float> dm(n), dv(n);
  dm.upload(std::vector<float>(n, 0.0f));
  dv.upload(std::vector<float>(n, 0.0f));
  auto dcopy = poisoned<bf16_t>(bf16_copy ? n : 0);
  for (int64_t step = 1; step <= 3; ++step) {
    Vec g(g_all.begin() + (step - 1) * n, g_all.begin() + step * n);
    auto dg = to_device<G>(g);
    adamw_step<P, G>(dp.data(), dg.data(), dm.data(), dv.data(),
                     bf16_copy ? dcopy.data() : nullptr, n, lr, b1, b2, eps, wd, step);
    cpu::adamw_step<double>(p.data(), g.data(), m.data(), v.data(), n, lr, b1, b2, eps, wd, step);
    round_all<P>(p);
    round_all<float>(m);
    round_all<float>(v);
  }
  const double tol = std::is_same_v<P, float> ? kTolF32 : kTolBF16;
  expect_close(to_host(dp), p, tol, std::string("adamw param ") + mode);
  expect_close(to_host(dm), m, kTolF32, std::string("adamw m ") + mode);
  expect_close(to_host(dv), v, kTolF32, std::string("adamw v ") + mode);
  if (bf16_copy) {
    Vec pc = p;
    round_all<bf16_t>(pc);
    expect_close(to_host(dcopy), pc, kTolBF16, std::string("adamw bf16 copy ") + mode);
  }
  (void)t;
}

class Optim : public GpuTest {};

TEST_F(Optim, AdamwPrecisionModes) {
  const int64_t n = 5003;
  check_adamw<float, float>(*this, randn(n), randn(3 * n, 0.1), "fp32", false);
  check_adamw<float, float>(*this, randn(n), randn(3 * n, 0.1), "bf16-mixed", true);
  check_adamw<bf16_t, bf16_t>(*this, randn(n), randn(3 * n, 0.1), "bf16-true", false);
}

TEST_F(Optim, SumSquaresAndScale) {
  const int64_t n1 = 123457, n2 = 999;
  Vec a = randn(n1), b = randn(n2, 3.0);
  auto da = to_device<float>(a);
  auto db = to_device<bf16_t>(b);
  DeviceBuffer<double> total(1), partial(kSumSquaresBlocks);
  sum_squares<float>(total.data(), da.data(), n1, partial.data(), /*accumulate=*/false);
  sum_squares<bf16_t>(total.data(), db.data(), n2, partial.data(), /*accumulate=*/true);
  double ref = 0;
  for (double x : a) ref += x * x;
  for (double x : b) ref += x * x;
  const double got = total.to_host()[0];
  std::printf("sum of squares gpu %.12e cpu %.12e\n", got, ref);
  EXPECT_LT(std::abs(got - ref) / ref, 1e-12);
  // deterministic: the same bits again
  sum_squares<float>(total.data(), da.data(), n1, partial.data(), false);
  sum_squares<bf16_t>(total.data(), db.data(), n2, partial.data(), true);
  EXPECT_EQ(total.to_host()[0], got);

  scale_inplace<float>(da.data(), n1, 0.25f);
  Vec sa = a;
  for (auto& x : sa) x *= 0.25;
  expect_close(to_host(da), sa, 1e-12, "scale_inplace f32");
}

TEST_F(Optim, QuantizeMatchesZeroBitForBit) {
  for (const auto& [n, block] : {std::pair<size_t, size_t>{3 * 4096, 256}, {1002, 3}, {512, 512}}) {
    Vec x = randn(n);
    for (size_t i = 0; i < block && i < n; ++i) x[i] = 0.0;  // an all-zero first block
    if (block >= 8 && n >= 2 * block) {
      // a block with amax = 127 (inv = 1) and exact halves: round half to even
      const double halves[] = {127.0, 0.5, 1.5, 2.5, -0.5, -2.5, 126.5, -127.0};
      for (size_t i = 0; i < 8; ++i) x[block + i] = halves[i];
      for (size_t i = 8; i < block; ++i) x[block + i] = 0.25;
    }
    auto dx = to_device<float>(x);
    std::vector<float> xf(x.begin(), x.end());
    const size_t bytes = zero::packed_bytes(n, block);
    std::vector<uint8_t> ref(bytes);
    zero::quantize_pack(xf.data(), n, block, ref.data());
    DeviceBuffer<uint8_t> dq(bytes);
    dq.fill_bytes(0xAB);
    quantize_pack(dx.data(), n, block, dq.data());
    ZT_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<uint8_t> got = dq.to_host();
    size_t diff = 0;
    for (size_t i = 0; i < bytes; ++i) diff += got[i] != ref[i];
    std::printf("quantize n %zu block %zu: %zu of %zu bytes differ\n", n, block, diff, bytes);
    EXPECT_EQ(diff, 0u);

    std::vector<float> deq(n), acc(n);
    zero::dequantize(ref.data(), n, block, deq.data());
    for (size_t i = 0; i < n; ++i) acc[i] = xf[i];
    zero::dequantize_add(ref.data(), n, block, acc.data());
    DeviceBuffer<float> ddeq(n);
    dequantize(dq.data(), n, block, ddeq.data());
    dequantize_add(dq.data(), n, block, dx.data());
    const std::vector<float> gd = ddeq.to_host(), ga = dx.to_host();
    EXPECT_EQ(std::memcmp(gd.data(), deq.data(), n * sizeof(float)), 0) << "dequantize";
    EXPECT_EQ(std::memcmp(ga.data(), acc.data(), n * sizeof(float)), 0) << "dequantize_add";
  }
}

TEST_F(Optim, ConvertAndAddScaled) {
  const int64_t n = 70001;
  Vec x = randn(n, 10.0);
  auto dx = to_device<float>(x);
  auto db = poisoned<bf16_t>(n);
  convert<float, bf16_t>(db.data(), dx.data(), n);  // round to nearest even, as zt::bf16
  Vec xb = x;
  round_all<bf16_t>(xb);
  expect_close(to_host(db), xb, 1e-300, "convert f32 -> bf16 (bit exact)");
  auto dback = poisoned<float>(n);
  convert<bf16_t, float>(dback.data(), db.data(), n);
  expect_close(to_host(dback), xb, 1e-300, "convert bf16 -> f32 (exact)");

  Vec acc = randn(n);
  auto dacc = to_device<float>(acc);
  add_scaled<bf16_t>(dacc.data(), db.data(), n, 0.5f);
  add_scaled<float>(dacc.data(), dx.data(), n, -2.0f);
  for (int64_t i = 0; i < n; ++i) acc[i] += 0.5 * xb[i] - 2.0 * x[i];
  expect_close(to_host(dacc), acc, kTolF32, "add_scaled");
}

TEST(QuantizeShapes, PartialBlockIsAnError) {
  EXPECT_THROW(quantize_pack(nullptr, 10, 3, nullptr), Error);
  EXPECT_THROW(dequantize(nullptr, 10, 4, nullptr), Error);
}

}  // namespace
}  // namespace zt::kernels::cuda::testing
