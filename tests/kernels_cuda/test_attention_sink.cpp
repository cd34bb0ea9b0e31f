// Attention sinks (gpt-oss), attention logit soft-capping (Gemma 2's) and partial rotary
// RoPE on the GPU against the CPU kernels in double on the same rounded inputs: zt's
// attention kernel and the dispatching launchers (which must run zt's kernel for sinks and
// the soft-cap) with sinks, soft-caps, GQA / MQA, sliding windows and packed examples, head
// dims up to 256 (Gemma 3's), fp32 and bf16: out, lse (with the sink), dq, dk, dv and
// dsink; the RoPE kernels with rotary_dim < D and yarn's scaled tables, both the packed
// and the scalar kernel.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>

#include "cuda_test_util.hpp"
#include "zt/kernels/cpu.hpp"
#include "zt/kernels/cuda/attention.hpp"
#include "zt/kernels/cuda/rope.hpp"

namespace zt::kernels::cuda::testing {
namespace {

enum class Via { kZt, kAuto };

class SinkAttentionTest : public GpuTest {
 protected:
  template <class T>
  void check(int64_t B, int64_t Tn, int64_t H, int64_t G, int64_t D, int64_t window,
             bool packed, Via via, bool accumulate, bool with_sink = true, double cap = 0.0) {
    std::vector<int32_t> pos;  // examples of 1..61 tokens
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0, left = 0, p = 0; t < Tn; ++t, ++p, --left) {
        if (left == 0) {
          left = randint(1, 61);
          p = 0;
        }
        pos.push_back(static_cast<int32_t>(p));
      }
    const double tol = tolerance<T>();
    const std::string tag = std::string(via == Via::kZt ? "zt" : "dispatched") + " sink " +
                            type_name<T>() + " T" + std::to_string(Tn) + " H" +
                            std::to_string(H) + " G" + std::to_string(G) + " D" +
                            std::to_string(D) + " window " + std::to_string(window) +
                            (packed ? " packed" : "") + (accumulate ? " acc" : " write") +
                            (with_sink ? "" : " no sink") +
                            (cap > 0 ? " softcap " + std::to_string(cap) : "");
    Vec q = randn(B * Tn * H * D), k = randn(B * Tn * G * D), v = randn(B * Tn * G * D);
    Vec R = randn(B * Tn * H * D), sink = randn(H, 2.0);
    auto dq_in = to_device<T>(q), dk_in = to_device<T>(k), dv_in = to_device<T>(v);
    auto dR = to_device<T>(R), dsink_in = to_device<T>(sink);
    auto dpos = to_device_i32(pos);
    const int32_t* dp = packed ? dpos.data() : nullptr;
    const int32_t* hp = packed ? pos.data() : nullptr;
    auto dout = poisoned<T>(B * Tn * H * D);
    auto dlse = poisoned<float>(B * H * Tn);
    Vec dq0 = randn(q.size()), dk0 = randn(k.size()), dv0 = randn(v.size()), ds0 = randn(H);
    auto ddq = accumulate ? to_device<T>(dq0) : poisoned<T>(q.size());
    auto ddk = accumulate ? to_device<T>(dk0) : poisoned<T>(k.size());
    auto ddv = accumulate ? to_device<T>(dv0) : poisoned<T>(v.size());
    auto dds = accumulate ? to_device<float>(ds0) : poisoned<float>(H);
    auto delta = poisoned<float>(B * H * Tn);
    auto fwd = via == Via::kZt ? attention_forward_zt<T> : attention_forward<T>;
    auto bwd = via == Via::kZt ? attention_backward_zt<T> : attention_backward<T>;
    const T* dsk = with_sink ? dsink_in.data() : nullptr;
    fwd(dout.data(), dlse.data(), dq_in.data(), dk_in.data(), dv_in.data(), B, Tn, H, G, D,
        nullptr, dp, window, dsk, cap);
    bwd(ddq.data(), ddk.data(), ddv.data(), delta.data(), dR.data(), dout.data(), dq_in.data(),
        dk_in.data(), dv_in.data(), dlse.data(), B, Tn, H, G, D, accumulate, nullptr, dp, window,
        dsk, with_sink ? dds.data() : nullptr, cap);

    Vec out(B * Tn * H * D), probs(B * H * Tn * Tn);
    const double* hsk = with_sink ? sink.data() : nullptr;
    cpu::attention_forward<double>(out.data(), probs.data(), q.data(), k.data(), v.data(), B, Tn,
                                   H, G, D, hp, window, hsk, cap);
    expect_close(to_host(dout), out, tol, "attention out " + tag);
    // lse with the sink: log(exp(sink) + sum_s exp(score)) = sink - log(p_sink); without:
    // the diagonal's (always attended) capped score z_tt - log(P_tt)
    Vec lse(B * H * Tn);
    for (int64_t bh = 0; bh < B * H; ++bh)
      for (int64_t t = 0; t < Tn; ++t) {
        double rest = 0;
        for (int64_t s = 0; s <= t; ++s) rest += probs[(bh * Tn + t) * Tn + s];
        const int64_t b = bh / H, h = bh % H, g = h / (H / G);
        double z = 0;
        for (int64_t i = 0; i < D; ++i)
          z += q[((b * Tn + t) * H + h) * D + i] * k[((b * Tn + t) * G + g) * D + i];
        z /= std::sqrt(static_cast<double>(D));
        if (cap > 0) z = cap * std::tanh(z / cap);
        lse[bh * Tn + t] = with_sink ? sink[h] - std::log1p(-rest)
                                     : z - std::log(probs[(bh * Tn + t) * Tn + t]);
      }
    expect_close(to_host(dlse), lse, kTolF32 * 10, "attention lse " + tag);
    Vec rdq = accumulate ? dq0 : Vec(q.size(), 0.0);
    Vec rdk = accumulate ? dk0 : Vec(k.size(), 0.0);
    Vec rdv = accumulate ? dv0 : Vec(v.size(), 0.0);
    Vec rds = accumulate ? ds0 : Vec(H, 0.0);
    Vec scratch(cpu::attention_backward_scratch(Tn, omp_get_max_threads()));
    cpu::attention_backward<double>(rdq.data(), rdk.data(), rdv.data(), scratch.data(), R.data(),
                                    q.data(), k.data(), v.data(), probs.data(), B, Tn, H, G, D,
                                    true, with_sink ? rds.data() : nullptr, cap);
    expect_close(to_host(ddq), rdq, tol, "attention dq " + tag);
    expect_close(to_host(ddk), rdk, tol, "attention dk " + tag);
    expect_close(to_host(ddv), rdv, tol, "attention dv " + tag);
    if (with_sink) expect_close(to_host(dds), rds, tol, "attention dsink " + tag);
  }
};

TEST_F(SinkAttentionTest, ZtKernelMatchesCpu) {
  for (int64_t D : {32, 64, 128}) {
    check<float>(2, 150, 4, 2, D, 0, false, Via::kZt, false);
    check<float>(2, 150, 4, 2, D, 0, false, Via::kZt, true);
    check<bf16_t>(2, 150, 4, 2, D, 0, false, Via::kZt, false);
  }
  check<float>(1, 97, 6, 1, 64, 0, true, Via::kZt, false);  // MQA, packed
  check<float>(3, 1, 2, 1, 16, 0, false, Via::kZt, true);   // one position
}

TEST_F(SinkAttentionTest, SlidingWindowAndDispatched) {
  for (int64_t w : {1, 5, 64, 100, 4096}) {
    check<float>(2, 300, 4, 2, 64, w, false, Via::kZt, false);
    check<bf16_t>(2, 300, 4, 2, 64, w, true, Via::kZt, false);
    // cuDNN would take these shapes without sinks: zt's kernel must run
    check<bf16_t>(1, 257, 8, 2, 64, w, false, Via::kAuto, false);
  }
  check<bf16_t>(1, 257, 8, 2, 128, 0, false, Via::kAuto, true);
}

// Attention logit soft-capping (cap 3: the scores, about N(0, 1) here, bend) and Gemma 3's
// head dim 256 (16-row tiles), each alone and with windows, sinks and packed examples; the
// dispatched bf16 launchers must run zt's kernel for a capped shape cuDNN would take.
TEST_F(SinkAttentionTest, SoftcapAndHeadDim256) {
  for (const double cap : {0.0, 3.0})
    for (const bool sink : {false, true}) {
      check<float>(2, 150, 4, 2, 256, 0, false, Via::kZt, false, sink, cap);
      check<float>(2, 150, 4, 2, 256, 40, true, Via::kZt, true, sink, cap);
      check<bf16_t>(2, 150, 4, 2, 256, 0, false, Via::kZt, false, sink, cap);
      check<bf16_t>(1, 97, 4, 1, 256, 16, false, Via::kAuto, false, sink, cap);
      check<float>(2, 150, 4, 2, 64, 0, false, Via::kZt, false, sink, cap);
      check<float>(1, 97, 6, 1, 128, 5, true, Via::kZt, true, sink, cap);
    }
  for (const int64_t w : {0, 1, 64})  // cuDNN would take these shapes without the cap
    check<bf16_t>(1, 257, 8, 2, 64, w, false, Via::kAuto, false, false, 3.0);
  check<float>(3, 1, 2, 1, 256, 0, false, Via::kZt, true, false, 3.0);  // one position
}

// Partial rotary with yarn's scaled tables (gpt-oss's rope_scaling): the GPU kernels
// against the CPU kernel in double; rd 32, 48 and 64 take the packed kernel (rd / 2 a
// multiple of 8), rd 20 the scalar one; the dims past rd pass through.
TEST_F(SinkAttentionTest, PartialRotaryRope) {
  RopeScaling s;
  s.type = "yarn";
  s.factor = 32;
  s.original_context = 4096;
  s.truncate = false;
  const int64_t B = 2, Tn = 50, nh = 3, D = 64;
  for (const int64_t rd : {int64_t{32}, int64_t{20}, int64_t{48}, D}) {
    std::vector<float> c(Tn * rd / 2), sn(Tn * rd / 2);
    cpu::rope_table<float>(c.data(), sn.data(), Tn, rd, 150000.0, s);
    DeviceBuffer<float> dcos(c.size()), dsin(sn.size());
    dcos.upload(c);
    dsin.upload(sn);
    const Vec cd(c.begin(), c.end()), sd(sn.begin(), sn.end());
    Vec x = randn(B * Tn * nh * D);
    auto dx = to_device<float>(x);
    rope_forward<float>(dx.data(), dcos.data(), dsin.data(), B, Tn, nh, D, nullptr, nullptr, rd);
    Vec y = x;
    cpu::rope_forward<double>(y.data(), cd.data(), sd.data(), B, Tn, nh, D, nullptr, rd);
    expect_close(to_host(dx), y, kTolF32, "rope forward rd " + std::to_string(rd));
    rope_backward<float>(dx.data(), dcos.data(), dsin.data(), B, Tn, nh, D, nullptr, nullptr, rd);
    cpu::rope_backward<double>(y.data(), cd.data(), sd.data(), B, Tn, nh, D, nullptr, rd);
    expect_close(to_host(dx), y, kTolF32, "rope backward rd " + std::to_string(rd));
  }
}

}  // namespace
}  // namespace zt::kernels::cuda::testing
