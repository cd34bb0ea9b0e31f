// GPU embedding, fused residual + RMSNorm, the per-head RMSNorm, RoPE, SwiGLU and the linear
// bias against the CPU reference kernels run in double on the same (rounded) inputs. fp32
// and bf16.
#include <gtest/gtest.h>

#include <climits>

#include "cuda_test_util.hpp"
#include "zt/kernels/cpu.hpp"
#include "zt/kernels/cuda/bias.hpp"
#include "zt/kernels/cuda/embedding.hpp"
#include "zt/kernels/cuda/head_rmsnorm.hpp"
#include "zt/kernels/cuda/rmsnorm.hpp"
#include "zt/kernels/cuda/rope.hpp"
#include "zt/kernels/cuda/swiglu.hpp"

namespace zt::kernels::cuda::testing {
namespace {

template <class T>
class Pointwise : public GpuTest {};
using Types = ::testing::Types<float, bf16_t>;
TYPED_TEST_SUITE(Pointwise, Types);

TYPED_TEST(Pointwise, EmbeddingForwardBackward) {
  using T = TypeParam;
  const int64_t N = 77, V = 300, C = 96;
  Vec W = this->randn(V * C);
  std::vector<int32_t> tok(N);
  for (auto& t : tok) t = this->randint(0, 40);  // few ids: rows repeat, backward adds
  auto dW = to_device<T>(W);
  auto dtok = to_device_i32(tok);
  auto dout = poisoned<T>(N * C);
  DeviceBuffer<int32_t> bad(1);
  const std::vector<int32_t> none{INT_MAX};
  bad.upload(none);
  embedding_forward<T>(dout.data(), dtok.data(), dW.data(), N, V, C, bad.data());
  Vec ref(N * C);
  cpu::embedding_forward<double>(ref.data(), tok.data(), W.data(), N, V, C);
  expect_close(to_host(dout), ref, 1e-12, std::string("embedding out ") + type_name<T>());
  EXPECT_EQ(bad.to_host()[0], INT_MAX);

  // backward: dweight (fp32) += scatter of dout
  Vec G0 = this->randn(V * C), R = this->randn(N * C);
  auto dG = to_device<float>(G0);
  auto dR = to_device<T>(R);
  embedding_backward<T, float>(dG.data(), dR.data(), dtok.data(), N, C);
  cpu::embedding_backward<double>(G0.data(), R.data(), tok.data(), N, C);
  expect_close(to_host(dG), G0, kTolF32, std::string("embedding dweight ") + type_name<T>());

  // an id outside [0, V) is reported (first position) and its row is zero
  tok[5] = static_cast<int32_t>(V) + 3;
  tok[9] = -1;
  auto dtok_bad = to_device_i32(tok);
  embedding_forward<T>(dout.data(), dtok_bad.data(), dW.data(), N, V, C, bad.data());
  EXPECT_EQ(bad.to_host()[0], 5);
  const Vec got = to_host(dout);
  for (int64_t c = 0; c < C; ++c) EXPECT_EQ(got[9 * C + c], 0.0);
}

TYPED_TEST(Pointwise, ResidualRmsnormForwardBackward) {
  using T = TypeParam;
  const double tol = tolerance<T>();
  const int64_t N = 37, C = 320;
  const double eps = 1e-5;
  Vec x = this->randn(N * C), res = this->randn(N * C), w = this->randn(C, 0.3, 1.0);
  auto dx_in = to_device<T>(x);
  auto dres = to_device<T>(res);
  auto dw = to_device<T>(w);
  auto dy = poisoned<T>(N * C);
  auto dsum = poisoned<T>(N * C);
  auto drstd = poisoned<float>(N);
  residual_rmsnorm_forward<T>(dy.data(), drstd.data(), dsum.data(), dx_in.data(), dres.data(),
                              dw.data(), N, C, eps);
  // reference: the sum rounded to T, then the CPU norm in double
  Vec s(N * C);
  for (int64_t i = 0; i < N * C; ++i) s[i] = round_to<T>(x[i] + res[i]);
  Vec y(N * C), rstd(N);
  cpu::rmsnorm_forward<double>(y.data(), rstd.data(), s.data(), w.data(), N, C, eps);
  expect_close(to_host(dsum), s, tol, std::string("residual sum ") + type_name<T>());
  expect_close(to_host(dy), y, tol, std::string("rmsnorm y ") + type_name<T>());
  expect_close(to_host(drstd), rstd, kTolF32, std::string("rmsnorm rstd ") + type_name<T>());

  // without a residual, in place over a copy of the sum
  auto dy2 = poisoned<T>(N * C);
  residual_rmsnorm_forward<T>(dy2.data(), nullptr, nullptr, dsum.data(), nullptr, dw.data(), N,
                              C, eps);
  expect_close(to_host(dy2), y, tol, std::string("rmsnorm y, no residual ") + type_name<T>());

  // backward, accumulating onto a gradient already in dx (the residual stream's) and dw
  Vec R = this->randn(N * C), dx0 = this->randn(N * C), dw0 = this->randn(C);
  auto dR = to_device<T>(R);
  auto ddx = to_device<T>(dx0);
  auto ddw = to_device<float>(dw0);
  rmsnorm_backward<T, float>(ddx.data(), ddw.data(), dR.data(), dsum.data(), dw.data(),
                             drstd.data(), N, C, /*accumulate_dx=*/true);
  Vec ref_dx = dx0, ref_dw = dw0;
  cpu::rmsnorm_backward<double>(ref_dx.data(), ref_dw.data(), R.data(), s.data(), w.data(),
                                rstd.data(), N, C, true);
  expect_close(to_host(ddx), ref_dx, tol, std::string("rmsnorm dx (accumulated) ") + type_name<T>());
  expect_close(to_host(ddw), ref_dw, std::is_same_v<T, float> ? kTolF32 : kTolBF16,
               std::string("rmsnorm dw (fp32 grad) ") + type_name<T>());

  // write mode
  auto ddx2 = poisoned<T>(N * C);
  rmsnorm_backward<T, float>(ddx2.data(), nullptr, dR.data(), dsum.data(), dw.data(),
                             drstd.data(), N, C, /*accumulate_dx=*/false);
  Vec ref_dx2(N * C);
  cpu::rmsnorm_backward<double>(ref_dx2.data(), nullptr, R.data(), s.data(), w.data(),
                                rstd.data(), N, C, false);
  expect_close(to_host(ddx2), ref_dx2, tol, std::string("rmsnorm dx (written) ") + type_name<T>());
}

// RoPE tables [Tn, D/2]: fp32 on the device (as the models upload them) and the same
// values in double for the CPU reference.
struct RopeTables {
  DeviceBuffer<float> dcos, dsin;
  Vec cosd, sind;
  RopeTables(int64_t Tn, int64_t D) {
    std::vector<float> c(Tn * D / 2), s(Tn * D / 2);
    cpu::rope_table<float>(c.data(), s.data(), Tn, D, 10000.0);
    dcos = DeviceBuffer<float>(c.size());
    dsin = DeviceBuffer<float>(s.size());
    dcos.upload(c);
    dsin.upload(s);
    cosd.assign(c.begin(), c.end());
    sind.assign(s.begin(), s.end());
  }
};

TYPED_TEST(Pointwise, RopeForwardBackward) {
  using T = TypeParam;
  const double tol = tolerance<T>();
  const int64_t B = 2, Tn = 50, nh = 3, D = 64;
  RopeTables tab(Tn, D);
  DeviceBuffer<float>& dcos = tab.dcos;
  DeviceBuffer<float>& dsin = tab.dsin;
  const Vec& cosd = tab.cosd;
  const Vec& sind = tab.sind;

  Vec x = this->randn(B * Tn * nh * D);
  auto dxb = to_device<T>(x);
  rope_forward<T>(dxb.data(), dcos.data(), dsin.data(), B, Tn, nh, D);
  Vec y = x;
  cpu::rope_forward<double>(y.data(), cosd.data(), sind.data(), B, Tn, nh, D);
  expect_close(to_host(dxb), y, tol, std::string("rope forward ") + type_name<T>());

  Vec g = this->randn(B * Tn * nh * D);
  auto dg = to_device<T>(g);
  rope_backward<T>(dg.data(), dcos.data(), dsin.data(), B, Tn, nh, D);
  cpu::rope_backward<double>(g.data(), cosd.data(), sind.data(), B, Tn, nh, D);
  expect_close(to_host(dg), g, tol, std::string("rope backward ") + type_name<T>());
}

// Per-token positions (packed examples restarting at 0): the GPU rotation by pos[b, t]
// equals the CPU kernel's with the same positions.
TYPED_TEST(Pointwise, RopeWithPositions) {
  using T = TypeParam;
  const double tol = tolerance<T>();
  const int64_t B = 2, Tn = 50, nh = 3, D = 64;
  RopeTables tab(Tn, D);
  DeviceBuffer<float>& dcos = tab.dcos;
  DeviceBuffer<float>& dsin = tab.dsin;
  const Vec& cosd = tab.cosd;
  const Vec& sind = tab.sind;
  std::vector<int32_t> pos;
  for (int64_t i = 0; i < B * Tn; ++i) pos.push_back(static_cast<int32_t>(i % Tn % 17));
  auto dpos = to_device_i32(pos);
  Vec x = this->randn(B * Tn * nh * D);
  auto dxb = to_device<T>(x);
  rope_forward<T>(dxb.data(), dcos.data(), dsin.data(), B, Tn, nh, D, nullptr, dpos.data());
  cpu::rope_forward<double>(x.data(), cosd.data(), sind.data(), B, Tn, nh, D, pos.data());
  expect_close(to_host(dxb), x, tol, std::string("rope forward, positions ") + type_name<T>());
  Vec g = this->randn(B * Tn * nh * D);
  auto dg = to_device<T>(g);
  rope_backward<T>(dg.data(), dcos.data(), dsin.data(), B, Tn, nh, D, nullptr, dpos.data());
  cpu::rope_backward<double>(g.data(), cosd.data(), sind.data(), B, Tn, nh, D, pos.data());
  expect_close(to_host(dg), g, tol, std::string("rope backward, positions ") + type_name<T>());
}

TYPED_TEST(Pointwise, SwigluForwardBackward) {
  using T = TypeParam;
  const double tol = tolerance<T>();
  const int64_t n = 10007;
  Vec g = this->randn(n, 3.0), u = this->randn(n), R = this->randn(n);
  auto dgate = to_device<T>(g);
  auto dup = to_device<T>(u);
  auto dR = to_device<T>(R);
  auto dh = poisoned<T>(n);
  swiglu_forward<T>(dh.data(), dgate.data(), dup.data(), n);
  Vec h(n);
  cpu::swiglu_forward<double>(h.data(), g.data(), u.data(), n);
  expect_close(to_host(dh), h, tol, std::string("swiglu h ") + type_name<T>());

  Vec dg0 = this->randn(n), du0 = this->randn(n);
  auto ddg = to_device<T>(dg0);
  auto ddu = to_device<T>(du0);
  swiglu_backward<T>(ddg.data(), ddu.data(), dR.data(), dgate.data(), dup.data(), n, true);
  Vec rdg = dg0, rdu = du0;
  cpu::swiglu_backward<double>(rdg.data(), rdu.data(), R.data(), g.data(), u.data(), n, true);
  expect_close(to_host(ddg), rdg, tol, std::string("swiglu dg (accumulated) ") + type_name<T>());
  expect_close(to_host(ddu), rdu, tol, std::string("swiglu du (accumulated) ") + type_name<T>());

  // write mode, in place over the gate and up buffers (the model's use)
  swiglu_backward<T>(dgate.data(), dup.data(), dR.data(), dgate.data(), dup.data(), n, false);
  Vec wdg(n), wdu(n);
  cpu::swiglu_backward<double>(wdg.data(), wdu.data(), R.data(), g.data(), u.data(), n, false);
  expect_close(to_host(dgate), wdg, tol, std::string("swiglu dg (written, in place) ") + type_name<T>());
  expect_close(to_host(dup), wdu, tol, std::string("swiglu du (written, in place) ") + type_name<T>());
}

// The linear bias (Qwen2's q/k/v biases): y += b, then db (fp32) += the column sums of
// the updated y; `off` elements into the buffers (1: misaligned, the scalar path), and
// out % 8 != 0 (the scalar path too); 1000 rows: many rows per thread of the column sums.
TYPED_TEST(Pointwise, BiasForwardBackward) {
  using T = TypeParam;
  const auto one = [&](int64_t N, int64_t out, size_t off) {
    Vec y = this->randn(static_cast<size_t>(N * out));  // [N, out]
    Vec b = this->randn(static_cast<size_t>(out));      // [out]
    Vec db = this->randn(static_cast<size_t>(out));     // [out], accumulated into
    DeviceBuffer<T> dy = to_device_at<T>(y, off), d_b = to_device_at<T>(b, off);
    DeviceBuffer<float> ddb = to_device<float>(db);
    bias_forward<T>(at(dy, off), at(d_b, off), N, out);
    bias_backward<T, float>(ddb.data(), at(dy, off), N, out);
    cpu::bias_forward<double>(y.data(), b.data(), N, out);
    const std::string tag = std::string("bias ") + type_name<T>() + " " + std::to_string(N) + "x" +
                            std::to_string(out) + " offset " + std::to_string(off);
    expect_close(from(to_host(dy), off), y, tolerance<T>(), tag + " forward");
    round_all<T>(y);  // the GPU summed y + b rounded to T
    cpu::bias_backward<double>(db.data(), y.data(), N, out);
    expect_close(to_host(ddb), db, kTolF32, tag + " backward");
  };
  for (int64_t out : {int64_t{64}, int64_t{24}, int64_t{20}, int64_t{1}})
    for (size_t off : {size_t{0}, size_t{1}}) one(37, out, off);
  one(1000, 48, 0);
}

// The per-head RMSNorm (Qwen3's q/k norm): rows of D (128, 32, and 24, 100: not multiples
// of 32 lanes), in place (y over x), then the backward: dx written, dw (fp32) accumulated
// from 64 row chunks; 3001 rows: chunks of 47 rows, the last one short; 5 rows: chunks of
// 1 row, most of them empty.
TYPED_TEST(Pointwise, HeadRmsnormForwardBackward) {
  using T = TypeParam;
  const double tol = tolerance<T>(), eps = 1e-6;
  for (const int64_t rows : {int64_t{3001}, int64_t{5}})
    for (const int64_t D : {int64_t{128}, int64_t{32}, int64_t{24}, int64_t{100}}) {
      const std::string tag = std::string("head rmsnorm ") + type_name<T>() + " " +
                              std::to_string(rows) + "x" + std::to_string(D);
      Vec x = this->randn(static_cast<size_t>(rows * D));  // [rows, D]
      Vec w = this->randn(static_cast<size_t>(D), 0.1, 1.0);  // [D]
      auto dx_in = to_device<T>(x);
      auto dw = to_device<T>(w);
      auto dy = to_device<T>(x);  // y written over a copy of x (in place)
      auto drstd = poisoned<float>(static_cast<size_t>(rows));
      head_rmsnorm_forward<T>(dy.data(), drstd.data(), dy.data(), dw.data(), rows, D, eps);
      Vec y(x.size()), rstd(static_cast<size_t>(rows));
      cpu::rmsnorm_forward<double>(y.data(), rstd.data(), x.data(), w.data(), rows, D, eps);
      expect_close(to_host(dy), y, tol, tag + " y");
      expect_close(to_host(drstd), rstd, kTolF32, tag + " rstd");

      Vec R = this->randn(x.size()), dw0 = this->randn(static_cast<size_t>(D));
      auto dR = to_device<T>(R);
      auto ddx = poisoned<T>(x.size());
      auto ddw = to_device<float>(dw0);
      DeviceBuffer<float> partial(static_cast<size_t>(kHeadNormChunks * D));
      head_rmsnorm_backward<T, float>(ddx.data(), ddw.data(), dR.data(), dx_in.data(), dw.data(),
                                      drstd.data(), rows, D, partial.data());
      Vec ref_dx(x.size()), ref_dw = dw0;
      cpu::rmsnorm_backward<double>(ref_dx.data(), ref_dw.data(), R.data(), x.data(), w.data(),
                                    rstd.data(), rows, D, /*accumulate_dx=*/false);
      expect_close(to_host(ddx), ref_dx, tol, tag + " dx (written)");
      expect_close(to_host(ddw), ref_dw, std::is_same_v<T, float> ? kTolF32 : kTolBF16,
                   tag + " dw (accumulated)");
    }
}

}  // namespace
}  // namespace zt::kernels::cuda::testing
