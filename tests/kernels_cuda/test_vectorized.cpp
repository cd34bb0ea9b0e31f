// The packed (128-bit) walks of the element-wise kernels against the CPU reference in
// double: sizes that are not multiples of the 8-element pack (the scalar tail), rows whose
// width is not a multiple of 8 (scalar rows), and pointers one element past an aligned
// address (the scalar fallback), for SwiGLU, residual + RMSNorm, RoPE, cross-entropy,
// AdamW and the casts. fp32 and bf16. The aligned, multiple-of-8 cases are also those of
// test_pointwise.cpp / test_loss_optim.cpp.
#include <gtest/gtest.h>

#include "cuda_test_util.hpp"
#include "zt/core/log.hpp"
#include "zt/kernels/cpu.hpp"
#include "zt/kernels/cuda/adamw.hpp"
#include "zt/kernels/cuda/convert.hpp"
#include "zt/kernels/cuda/cross_entropy.hpp"
#include "zt/kernels/cuda/rmsnorm.hpp"
#include "zt/kernels/cuda/rope.hpp"
#include "zt/kernels/cuda/swiglu.hpp"

namespace zt::kernels::cuda::testing {
namespace {

template <class T>
class Packed : public GpuTest {};
using Types = ::testing::Types<float, bf16_t>;
TYPED_TEST_SUITE(Packed, Types);

std::string tag(const char* what, const char* type, int64_t size, size_t off) {
  return strf("%s %s n%lld off%zu", what, type, static_cast<long long>(size), off);
}

TYPED_TEST(Packed, SwigluTailsAndOffsets) {
  using T = TypeParam;
  for (int64_t n : {1, 7, 9, 4099})
    for (size_t off : {0, 1}) {
      Vec g = this->randn(n, 3.0), u = this->randn(n), R = this->randn(n);
      auto dg = to_device_at<T>(g, off), du = to_device_at<T>(u, off), dR = to_device_at<T>(R, off);
      auto dh = poisoned<T>(n + off);
      swiglu_forward<T>(at(dh, off), at(dg, off), at(du, off), n);
      Vec h(n);
      cpu::swiglu_forward<double>(h.data(), g.data(), u.data(), n);
      expect_close(from(to_host(dh), off), h, tolerance<T>(), tag("swiglu h", type_name<T>(), n, off));
      auto ddg = poisoned<T>(n + off), ddu = poisoned<T>(n + off);
      swiglu_backward<T>(at(ddg, off), at(ddu, off), at(dR, off), at(dg, off), at(du, off), n,
                         false);
      Vec rdg(n), rdu(n);
      cpu::swiglu_backward<double>(rdg.data(), rdu.data(), R.data(), g.data(), u.data(), n, false);
      expect_close(from(to_host(ddg), off), rdg, tolerance<T>(), tag("swiglu dg", type_name<T>(), n, off));
      expect_close(from(to_host(ddu), off), rdu, tolerance<T>(), tag("swiglu du", type_name<T>(), n, off));
    }
}

TYPED_TEST(Packed, RmsnormOddRowsAndOffsets) {
  using T = TypeParam;
  const int64_t N = 5;
  const double eps = 1e-5;
  for (int64_t C : {100, 64})  // open-llama-3b's head dim is not a multiple of 8; 64 is
    for (size_t off : {0, 1}) {
      Vec x = this->randn(N * C), res = this->randn(N * C), w = this->randn(C, 0.3, 1.0);
      auto dx = to_device_at<T>(x, off), dres = to_device_at<T>(res, off);
      auto dw = to_device_at<T>(w, off);
      auto dy = poisoned<T>(N * C + off), dsum = poisoned<T>(N * C + off);
      DeviceBuffer<float> drstd(N);
      residual_rmsnorm_forward<T>(at(dy, off), drstd.data(), at(dsum, off), at(dx, off),
                                  at(dres, off), at(dw, off), N, C, eps);
      Vec s(N * C), y(N * C), rstd(N);
      for (int64_t i = 0; i < N * C; ++i) s[i] = round_to<T>(x[i] + res[i]);
      cpu::rmsnorm_forward<double>(y.data(), rstd.data(), s.data(), w.data(), N, C, eps);
      expect_close(from(to_host(dsum), off), s, tolerance<T>(), tag("rmsnorm sum", type_name<T>(), C, off));
      expect_close(from(to_host(dy), off), y, tolerance<T>(), tag("rmsnorm y", type_name<T>(), C, off));

      Vec R = this->randn(N * C), dx0 = this->randn(N * C);
      auto dR = to_device_at<T>(R, off), ddx = to_device_at<T>(dx0, off);
      rmsnorm_backward<T, float>(at(ddx, off), nullptr, at(dR, off), at(dsum, off), at(dw, off),
                                 drstd.data(), N, C, /*accumulate_dx=*/true);
      Vec ref = dx0;
      cpu::rmsnorm_backward<double>(ref.data(), nullptr, R.data(), s.data(), w.data(),
                                    rstd.data(), N, C, true);
      expect_close(from(to_host(ddx), off), ref, tolerance<T>(), tag("rmsnorm dx", type_name<T>(), C, off));
    }
}

TYPED_TEST(Packed, RopeHeadDimsAndOffsets) {
  using T = TypeParam;
  const int64_t B = 2, Tn = 9, nh = 3;
  for (int64_t D : {100, 32, 128})
    for (size_t off : {0, 1}) {
      const int64_t half = D / 2;
      std::vector<float> cosf(Tn * half), sinf(Tn * half);
      cpu::rope_table<float>(cosf.data(), sinf.data(), Tn, D, 10000.0);
      DeviceBuffer<float> dcos(cosf.size()), dsin(sinf.size());
      dcos.upload(cosf);
      dsin.upload(sinf);
      const Vec cosd(cosf.begin(), cosf.end()), sind(sinf.begin(), sinf.end());
      Vec x = this->randn(B * Tn * nh * D);
      auto dx = to_device_at<T>(x, off);
      rope_forward<T>(at(dx, off), dcos.data(), dsin.data(), B, Tn, nh, D);
      cpu::rope_forward<double>(x.data(), cosd.data(), sind.data(), B, Tn, nh, D);
      expect_close(from(to_host(dx), off), x, tolerance<T>(), tag("rope", type_name<T>(), D, off));
    }
}

TYPED_TEST(Packed, CrossEntropyOddVocabAndOffsets) {
  using T = TypeParam;
  const int64_t N = 7;
  for (int64_t V : {1001, 1000})
    for (size_t off : {0, 1}) {
      Vec logits = this->randn(N * V, 3.0);
      std::vector<int32_t> tg(N);
      for (auto& t : tg) t = this->randint(0, static_cast<int32_t>(V) - 1);
      tg[N - 1] = static_cast<int32_t>(V) - 1;  // the last column: in the tail when V % 8 != 0
      const double scale = 1.0 / static_cast<double>(N);
      auto dl = to_device_at<T>(logits, off);
      auto dtg = to_device_i32(tg);
      auto dd = poisoned<T>(N * V + off);
      auto row_loss = poisoned<float>(N);
      DeviceBuffer<CrossEntropyTotals> totals(1);
      cross_entropy<T>(at(dd, off), at(dl, off), dtg.data(), N, V, scale, row_loss.data(),
                       totals.data());
      Vec ref_d(N * V);
      const auto ref = cpu::cross_entropy<double>(ref_d.data(), logits.data(), tg.data(), N, V, scale);
      expect_close(from(to_host(dd), off), ref_d, tolerance<T>(), tag("cross_entropy dlogits", type_name<T>(), V, off));
      const CrossEntropyTotals got = totals.to_host()[0];
      EXPECT_EQ(got.count, N);
      EXPECT_NEAR(got.loss_sum, ref.loss_sum, 1e-4 * std::abs(ref.loss_sum) + 1e-4);
    }
}

TYPED_TEST(Packed, AdamwAndCastsTailsAndOffsets) {
  using G = TypeParam;
  const double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
  for (int64_t n : {13, 1003})
    for (size_t off : {0, 1}) {
      Vec p = this->randn(n), g = this->randn(n, 0.1), m(n, 0.0), v(n, 0.0);
      auto dp = to_device_at<float>(p, off), dg = to_device_at<G>(g, off);
      auto dm = to_device_at<float>(m, off), dv = to_device_at<float>(v, off);
      auto dcopy = poisoned<bf16_t>(n + off);
      adamw_step<float, G>(at(dp, off), at(dg, off), at(dm, off), at(dv, off), at(dcopy, off), n,
                           lr, b1, b2, eps, wd, 1);
      cpu::adamw_step<double>(p.data(), g.data(), m.data(), v.data(), n, lr, b1, b2, eps, wd, 1);
      expect_close(from(to_host(dp), off), p, kTolF32, tag("adamw param", type_name<G>(), n, off));
      expect_close(from(to_host(dm), off), m, kTolF32, tag("adamw m", type_name<G>(), n, off));
      expect_close(from(to_host(dv), off), v, kTolF32, tag("adamw v", type_name<G>(), n, off));
      Vec pc = p;
      round_all<bf16_t>(pc);
      expect_close(from(to_host(dcopy), off), pc, kTolBF16, tag("adamw bf16 copy", type_name<G>(), n, off));

      // casts: f32 -> bf16 bit exact, then acc += 0.5 x
      Vec x = this->randn(n, 10.0), acc = this->randn(n);
      auto dx = to_device_at<float>(x, off), dacc = to_device_at<float>(acc, off);
      auto db = poisoned<bf16_t>(n + off);
      convert<float, bf16_t>(at(db, off), at(dx, off), n);
      Vec xb = x;
      round_all<bf16_t>(xb);
      expect_close(from(to_host(db), off), xb, 1e-300, tag("convert f32->bf16", "bf16", n, off));
      add_scaled<bf16_t>(at(dacc, off), at(db, off), n, 0.5f);
      for (int64_t i = 0; i < n; ++i) acc[i] += 0.5 * xb[i];
      expect_close(from(to_host(dacc), off), acc, kTolF32, tag("add_scaled", "bf16", n, off));
    }
}

}  // namespace
}  // namespace zt::kernels::cuda::testing
