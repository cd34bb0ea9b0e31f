// GPU causal GQA attention (flash-style, forward + backward) against the CPU reference
// kernels in double on the same rounded inputs: every supported head dim, GQA / MHA /
// MQA groupings, sequence lengths that are not tile multiples, fp32 and bf16; the saved
// log-sum-exp against a direct computation.
#include <gtest/gtest.h>
#include <omp.h>

#include "cuda_test_util.hpp"
#include "zt/core/error.hpp"
#include "zt/kernels/cpu.hpp"
#include "zt/kernels/cuda/attention.hpp"

namespace zt::kernels::cuda::testing {
namespace {

struct Shape {
  int64_t B, Tn, H, G, D;
};

class AttentionTest : public GpuTest {
 protected:
  template <class T>
  void check(const Shape& s, bool accumulate) {
    const auto [B, Tn, H, G, D] = s;
    const double tol = tolerance<T>();
    const std::string tag = std::string(type_name<T>()) + " B" + std::to_string(B) + " T" +
                            std::to_string(Tn) + " H" + std::to_string(H) + " G" +
                            std::to_string(G) + " D" + std::to_string(D) +
                            (accumulate ? " acc" : " write");
    Vec q = randn(B * Tn * H * D), k = randn(B * Tn * G * D), v = randn(B * Tn * G * D);
    Vec R = randn(B * Tn * H * D);
    auto dq_in = to_device<T>(q);
    auto dk_in = to_device<T>(k);
    auto dv_in = to_device<T>(v);
    auto dR = to_device<T>(R);
    auto dout = poisoned<T>(B * Tn * H * D);
    auto dlse = poisoned<float>(B * H * Tn);
    attention_forward<T>(dout.data(), dlse.data(), dq_in.data(), dk_in.data(), dv_in.data(), B,
                         Tn, H, G, D);

    Vec out(B * Tn * H * D), probs(B * H * Tn * Tn);
    cpu::attention_forward<double>(out.data(), probs.data(), q.data(), k.data(), v.data(), B, Tn,
                                   H, G, D);
    expect_close(to_host(dout), out, tol, "attention out " + tag);
    expect_close(to_host(dlse), direct_lse(q, k, s), kTolF32 * (std::is_same_v<T, float> ? 1 : 10),
                 "attention lse " + tag);

    Vec dq0 = randn(q.size()), dk0 = randn(k.size()), dv0 = randn(v.size());
    auto ddq = accumulate ? to_device<T>(dq0) : poisoned<T>(q.size());
    auto ddk = accumulate ? to_device<T>(dk0) : poisoned<T>(k.size());
    auto ddv = accumulate ? to_device<T>(dv0) : poisoned<T>(v.size());
    auto delta = poisoned<float>(B * H * Tn);
    attention_backward<T>(ddq.data(), ddk.data(), ddv.data(), delta.data(), dR.data(),
                          dout.data(), dq_in.data(), dk_in.data(), dv_in.data(), dlse.data(), B,
                          Tn, H, G, D, accumulate);
    Vec rdq = accumulate ? dq0 : Vec(q.size(), 0.0);
    Vec rdk = accumulate ? dk0 : Vec(k.size(), 0.0);
    Vec rdv = accumulate ? dv0 : Vec(v.size(), 0.0);
    Vec scratch(cpu::attention_backward_scratch(Tn, omp_get_max_threads()));
    cpu::attention_backward<double>(rdq.data(), rdk.data(), rdv.data(), scratch.data(), R.data(),
                                    q.data(), k.data(), v.data(), probs.data(), B, Tn, H, G, D,
                                    true);
    expect_close(to_host(ddq), rdq, tol, "attention dq " + tag);
    expect_close(to_host(ddk), rdk, tol, "attention dk " + tag);
    expect_close(to_host(ddv), rdv, tol, "attention dv " + tag);
  }

  // lse[b, h, t] = log sum_{s <= t} exp(q_t . k_s / sqrt(D)), summed directly.
  static Vec direct_lse(const Vec& q, const Vec& k, const Shape& s) {
    const auto [B, Tn, H, G, D] = s;
    Vec lse(B * H * Tn);
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < Tn; ++t) {
          const int64_t g = h / (H / G);
          std::vector<double> sc(t + 1);
          double mx = -INFINITY;
          for (int64_t u = 0; u <= t; ++u) {
            double d = 0;
            for (int64_t i = 0; i < D; ++i)
              d += q[((b * Tn + t) * H + h) * D + i] * k[((b * Tn + u) * G + g) * D + i];
            sc[u] = d * scale;
            mx = std::max(mx, sc[u]);
          }
          double sum = 0;
          for (double x : sc) sum += std::exp(x - mx);
          lse[(b * H + h) * Tn + t] = mx + std::log(sum);
        }
    return lse;
  }
};

TEST_F(AttentionTest, Fp32EveryHeadDim) {
  for (int64_t D : {16, 32, 64, 128}) check<float>({2, 77, 4, 2, D}, true);
}
TEST_F(AttentionTest, Bf16EveryHeadDim) {
  for (int64_t D : {16, 32, 64, 128}) check<bf16_t>({2, 77, 4, 2, D}, true);
}
TEST_F(AttentionTest, GroupingsAndWriteMode) {
  check<float>({1, 130, 4, 4, 32}, false);  // MHA, written gradients
  check<float>({2, 65, 6, 1, 64}, false);   // MQA: six query heads on one kv head
  check<bf16_t>({1, 200, 8, 2, 128}, false);
}
TEST_F(AttentionTest, ShortSequences) {
  check<float>({3, 1, 2, 1, 16}, true);  // one position: softmax over a single key
  check<float>({1, 5, 2, 2, 64}, true);
}

TEST(AttentionShapes, UnsupportedHeadDimIsAnInputError) {
  EXPECT_FALSE(attention_head_dim_supported(48));
  EXPECT_TRUE(attention_head_dim_supported(128));
  try {
    attention_forward<float>(nullptr, nullptr, nullptr, nullptr, nullptr, 1, 8, 2, 1, 48);
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("head dim 48"), std::string::npos) << w;
    EXPECT_NE(w.find("HINT"), std::string::npos) << w;
  }
}

}  // namespace
}  // namespace zt::kernels::cuda::testing
