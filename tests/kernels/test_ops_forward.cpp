// Forward kernels against the naive references in reference.hpp (double), and the
// kernels' input checks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "gradcheck.hpp"
#include "reference.hpp"
#include "zt/core/error.hpp"
#include "zt/kernels/cpu.hpp"

namespace zt::kernels::cpu {
namespace {

using testing::randn;
namespace ref = testing::ref;

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

TEST(KernelForward, EmbeddingCopiesRows) {
  const int64_t N = 5, V = 4, C = 3;
  auto W = randn(V * C, 1);
  std::vector<int32_t> tok = {3, 0, 3, 1, 2};
  std::vector<double> out(N * C);
  embedding_forward(out.data(), tok.data(), W.data(), N, V, C);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) EXPECT_EQ(out[n * C + c], W[tok[n] * C + c]);
}

TEST(KernelForward, EmbeddingRejectsOutOfRangeToken) {
  std::vector<double> W(8), out(2);
  std::vector<int32_t> tok = {1, 4};
  EXPECT_THROW(embedding_forward(out.data(), tok.data(), W.data(), 2, 4, 2), InputError);
}

TEST(KernelForward, RmsnormMatchesReference) {
  const int64_t N = 4, C = 16;
  auto x = randn(N * C, 2), w = randn(C, 3, 0.3, 1.0);
  std::vector<double> y(N * C), rstd(N);
  rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5);
  EXPECT_LT(max_abs_diff(y, ref::rmsnorm(x, w.data(), N, C, 1e-5)), 1e-14);
}

TEST(KernelForward, LinearMatchesReference) {
  const int64_t N = 7, in = 9, out = 5;
  auto x = randn(N * in, 4), W = randn(out * in, 5);
  std::vector<double> y(N * out);
  linear_forward(y.data(), x.data(), W.data(), N, in, out);
  EXPECT_LT(max_abs_diff(y, ref::linear(x, W.data(), N, in, out)), 1e-13);
}

TEST(KernelForward, RopeMatchesComplexRotation) {
  const int64_t B = 2, T = 9, nh = 3, D = 8;
  auto x = randn(B * T * nh * D, 6);
  std::vector<double> cs(T * D / 2), sn(T * D / 2);
  rope_table(cs.data(), sn.data(), T, D, 10000.0);
  auto y = x;
  rope_forward(y.data(), cs.data(), sn.data(), B, T, nh, D);
  EXPECT_LT(max_abs_diff(y, ref::rope(x, B, T, nh, D, 10000.0)), 1e-13);
  // position 0 is the identity
  for (int64_t i = 0; i < nh * D; ++i) EXPECT_EQ(y[i], x[i]);
}

TEST(KernelForward, RopeKnownValue) {
  // D = 2, theta irrelevant for i = 0: angle = p. Position 1 rotates (1, 0) to (cos 1, sin 1).
  std::vector<double> x = {1, 0, 1, 0};  // [B=1, T=2, nh=1, D=2]
  std::vector<double> cs(2), sn(2);
  rope_table(cs.data(), sn.data(), 2, 2, 10000.0);
  rope_forward(x.data(), cs.data(), sn.data(), 1, 2, 1, 2);
  EXPECT_DOUBLE_EQ(x[0], 1.0);
  EXPECT_DOUBLE_EQ(x[1], 0.0);
  EXPECT_NEAR(x[2], std::cos(1.0), 1e-15);
  EXPECT_NEAR(x[3], std::sin(1.0), 1e-15);
}

struct AttnShape {
  int64_t B, T, H, G, D;
};

class AttentionForward : public ::testing::TestWithParam<AttnShape> {};

TEST_P(AttentionForward, MatchesReference) {
  const auto [B, T, H, G, D] = GetParam();
  auto q = randn(B * T * H * D, 7), k = randn(B * T * G * D, 8), v = randn(B * T * G * D, 9);
  std::vector<double> out(q.size()), probs(B * H * T * T);
  attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), B, T, H, G, D);
  EXPECT_LT(max_abs_diff(out, ref::attention(q, k, v, B, T, H, G, D)), 1e-13);
  // rows of P sum to 1 and are zero above the diagonal
  for (int64_t bh = 0; bh < B * H; ++bh) {
    for (int64_t t = 0; t < T; ++t) {
      double s = 0;
      for (int64_t j = 0; j < T; ++j) {
        const double p = probs[(bh * T + t) * T + j];
        if (j > t) {
          EXPECT_EQ(p, 0.0);
        }
        s += p;
      }
      EXPECT_NEAR(s, 1.0, 1e-14);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionForward,
                         ::testing::Values(AttnShape{2, 7, 4, 2, 4},   // GQA
                                           AttnShape{1, 5, 3, 3, 6},   // MHA
                                           AttnShape{3, 6, 4, 1, 2},   // MQA
                                           AttnShape{1, 1, 2, 1, 4})); // one token

// Packed examples: two rows of 3 + 4 + 2 and 5 + 4 tokens. Positions restart at each
// example; the reference masks by example id (no positions), so it checks the mask rule
// itself.
struct Packed {
  int64_t B = 2, T = 9;
  std::vector<int32_t> pos = {0, 1, 2, 0, 1, 2, 3, 0, 1, /**/ 0, 1, 2, 3, 4, 0, 1, 2, 3};
  std::vector<int> seg = {0, 0, 0, 1, 1, 1, 1, 2, 2, /**/ 0, 0, 0, 0, 0, 1, 1, 1, 1};
};

TEST(KernelForward, RopeWithPositionsMatchesComplexRotation) {
  const Packed pk;
  const int64_t nh = 2, D = 8;
  auto x = randn(pk.B * pk.T * nh * D, 16);
  std::vector<double> cs(pk.T * D / 2), sn(pk.T * D / 2);
  rope_table(cs.data(), sn.data(), pk.T, D, 10000.0);
  auto y = x;
  rope_forward(y.data(), cs.data(), sn.data(), pk.B, pk.T, nh, D, pk.pos.data());
  EXPECT_LT(max_abs_diff(y, ref::rope(x, pk.B, pk.T, nh, D, 10000.0, pk.pos)), 1e-13);
}

TEST(KernelForward, AttentionWithPositionsStaysInsideEachExample) {
  const Packed pk;
  const int64_t H = 4, G = 2, D = 4, B = pk.B, T = pk.T;
  auto q = randn(B * T * H * D, 17), k = randn(B * T * G * D, 18), v = randn(B * T * G * D, 19);
  std::vector<double> out(q.size()), probs(B * H * T * T);
  attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), B, T, H, G, D,
                    pk.pos.data());
  EXPECT_LT(max_abs_diff(out, ref::attention(q, k, v, B, T, H, G, D, pk.seg)), 1e-13);
  // and it differs from plain causal attention (the mask does something)
  EXPECT_GT(max_abs_diff(out, ref::attention(q, k, v, B, T, H, G, D)), 1e-3);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t s = 0; s < T; ++s)
          if (s > t || pk.seg[b * T + s] != pk.seg[b * T + t]) {
            EXPECT_EQ(probs[((b * H + h) * T + t) * T + s], 0.0);
          }
}

// Sliding window (Mistral): query t sees keys t - w < s <= t, alone and inside packed
// examples; the decode path (KV cache, one query at a time) gives the same rows.
TEST(KernelForward, AttentionSlidingWindowMatchesReference) {
  const Packed pk;
  const int64_t H = 4, G = 2, D = 4, B = pk.B, T = pk.T;
  auto q = randn(B * T * H * D, 31), k = randn(B * T * G * D, 32), v = randn(B * T * G * D, 33);
  for (const int64_t w : {int64_t{1}, int64_t{3}, int64_t{5}, T, T + 4}) {
    SCOPED_TRACE("window " + std::to_string(w));
    std::vector<double> out(q.size()), probs(B * H * T * T);
    attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), B, T, H, G, D,
                      nullptr, w);
    EXPECT_LT(max_abs_diff(out, ref::attention(q, k, v, B, T, H, G, D, {}, w)), 1e-13);
    const double full = max_abs_diff(out, ref::attention(q, k, v, B, T, H, G, D));
    if (w < T) {
      EXPECT_GT(full, 1e-3);  // the window does something
    } else {
      EXPECT_LT(full, 1e-13);  // and nothing once it covers the sequence
    }
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < T; ++t)
          for (int64_t s = 0; s < T; ++s)
            if (s > t || t - s >= w) {
              EXPECT_EQ(probs[((b * H + h) * T + t) * T + s], 0.0);
            }
    attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), B, T, H, G, D,
                      pk.pos.data(), w);
    EXPECT_LT(max_abs_diff(out, ref::attention(q, k, v, B, T, H, G, D, pk.seg, w)), 1e-13);
    // decode: batch 0 as one sequence, 4 positions at first, then one at a time
    std::vector<double> dec(T * H * D), scores(H * T);
    const std::vector<double> want = ref::attention(q, k, v, 1, T, H, G, D, {}, w);
    attention_decode(dec.data(), scores.data(), q.data(), k.data(), v.data(), 4, 0, H, G, D, w);
    for (int64_t t = 4; t < T; ++t)
      attention_decode(dec.data() + t * H * D, scores.data(), q.data() + t * H * D, k.data(),
                       v.data(), 1, t, H, G, D, w);
    double d = 0;
    for (size_t i = 0; i < dec.size(); ++i) d = std::max(d, std::abs(dec[i] - want[i]));
    EXPECT_LT(d, 1e-13);
  }
}

TEST(KernelForward, FirstPositionAttendsOnlyToItself) {
  const int64_t B = 1, T = 3, H = 1, G = 1, D = 2;
  auto q = randn(T * D, 10), k = randn(T * D, 11), v = randn(T * D, 12);
  std::vector<double> out(T * D), probs(T * T);
  attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), B, T, H, G, D);
  EXPECT_DOUBLE_EQ(out[0], v[0]);
  EXPECT_DOUBLE_EQ(out[1], v[1]);
}

TEST(KernelForward, SwigluMatchesReference) {
  auto g = randn(50, 13, 3.0), u = randn(50, 14);
  std::vector<double> h(50);
  swiglu_forward(h.data(), g.data(), u.data(), 50);
  EXPECT_LT(max_abs_diff(h, ref::swiglu(g, u)), 1e-15);
}

TEST(KernelForward, CrossEntropyMatchesReferenceAndIgnoresNegativeTargets) {
  const int64_t N = 6, V = 11;
  auto logits = randn(N * V, 15, 4.0);
  std::vector<int32_t> tg = {3, -1, 0, 10, -100, 5};
  const auto r = cross_entropy<double>(nullptr, logits.data(), tg.data(), N, V, 1.0);
  EXPECT_EQ(r.count, 4);
  EXPECT_NEAR(r.loss_sum, ref::cross_entropy_sum(logits, tg, N, V), 1e-12);
}

TEST(KernelForward, CrossEntropyIsStableForHugeLogits) {
  std::vector<double> logits = {1000.0, 0.0, -1000.0};
  std::vector<int32_t> tg = {1};
  const auto r = cross_entropy<double>(nullptr, logits.data(), tg.data(), 1, 3, 1.0);
  EXPECT_NEAR(r.loss_sum, 1000.0, 1e-9);
  std::vector<float> lf = {1000.f, 0.f, -1000.f};
  const auto rf = cross_entropy<float>(lf.data(), lf.data(), tg.data(), 1, 3, 1.0);
  EXPECT_NEAR(rf.loss_sum, 1000.0, 1e-3);
  EXPECT_FLOAT_EQ(lf[0], 1.f);   // softmax ~ (1, 0, 0)
  EXPECT_FLOAT_EQ(lf[1], -1.f);  // minus the one-hot
}

// A row whose first logits are -inf (a masked vocabulary): finite loss and gradients, the
// -inf columns with zero probability. Reference: log-sum-exp over the finite logits, in
// long double, written here.
TEST(KernelForward, CrossEntropyLeadingMinusInfinity) {
  const int64_t V = 7;
  std::vector<double> logits = {-INFINITY, -INFINITY, -INFINITY, 0.5, -1.25, 2.0, 0.0};
  std::vector<int32_t> tg = {5};
  long double z = 0;
  for (int64_t j = 3; j < V; ++j) z += std::exp(static_cast<long double>(logits[j]));
  const double want = static_cast<double>(std::log(z) - 2.0L);
  std::vector<double> d(V);
  const auto r = cross_entropy<double>(d.data(), logits.data(), tg.data(), 1, V, 1.0);
  EXPECT_NEAR(r.loss_sum, want, 1e-14);
  // A -inf logit has probability 0. The bound is double's softmax error, 2 ulp of the
  // largest probability (<= 1): a vectorised exp may return a denormal for exp(-inf)
  // (3.98e-309 from glibc's AVX2 exp on an AMD EPYC), not an exact 0.
  for (int64_t j = 0; j < 3; ++j) EXPECT_NEAR(d[j], 0.0, 2 * std::numeric_limits<double>::epsilon()) << j;
  for (int64_t j = 3; j < V; ++j) {
    const double p = static_cast<double>(std::exp(static_cast<long double>(logits[j])) / z);
    EXPECT_NEAR(d[j], p - (j == 5 ? 1.0 : 0.0), 1e-14) << j;
  }
  std::vector<float> lf(logits.begin(), logits.end());
  const auto rf = cross_entropy<float>(lf.data(), lf.data(), tg.data(), 1, V, 1.0);
  EXPECT_NEAR(rf.loss_sum, want, 1e-6);
  for (float v : lf) EXPECT_TRUE(std::isfinite(v));
}

TEST(KernelForward, CrossEntropyRejectsTargetOutsideVocab) {
  std::vector<double> logits(6);
  std::vector<int32_t> tg = {0, 3};
  EXPECT_THROW(cross_entropy<double>(nullptr, logits.data(), tg.data(), 2, 3, 1.0), InputError);
}

TEST(KernelForward, ResidualAdds) {
  auto a = randn(10, 16), b = randn(10, 17);
  std::vector<double> out(10);
  residual_forward(out.data(), a.data(), b.data(), 10);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(out[i], a[i] + b[i]);
}

}  // namespace
}  // namespace zt::kernels::cpu
