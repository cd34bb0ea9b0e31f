// GPU causal GQA attention (forward + backward) against the CPU reference kernels in
// double on the same rounded inputs, on both paths: zt's own kernel (every head dim it is
// compiled for, GQA / MHA / MQA groupings, sequence lengths that are not tile multiples,
// fp32 and bf16) and the dispatching launchers (cuDNN's fused SDPA for bf16 where it takes
// the shape), the latter also against zt's kernel on the same inputs; the saved
// log-sum-exp against a direct computation; the path chosen per shape (device-free).
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdlib>

#include "cuda_test_util.hpp"
#include "zt/core/error.hpp"
#include "zt/kernels/cpu.hpp"
#include "zt/kernels/cuda/attention.hpp"

namespace zt::kernels::cuda::testing {
namespace {

struct Shape {
  int64_t B, Tn, H, G, D;
};

// Which launchers a check runs: zt's kernel (*_zt) or the dispatching ones.
enum class Via { kZt, kAuto };

// bf16 gradients of the fused cuDNN kernel: it rounds P and dS to bf16 before the tensor-
// core products (as every flash attention in bf16 does), so dq/dk/dv carry a few bf16 ulps
// more than zt's fp32-accumulating kernel.
constexpr double kTolBF16Grad = 2e-2;

class AttentionTest : public GpuTest {
 protected:
  template <class T>
  void check(const Shape& s, bool accumulate, Via via = Via::kZt) {
    const auto [B, Tn, H, G, D] = s;
    const bool bf16 = std::is_same_v<T, bf16_t>;
    const AttentionPath path =
        via == Via::kZt ? AttentionPath::kZt : attention_path(bf16, B, Tn, H, G, D);
    const double tol = tolerance<T>();
    const double gtol = bf16 && path == AttentionPath::kCudnn ? kTolBF16Grad : tol;
    const std::string tag = std::string(attention_path_name(path)) + " " + type_name<T>() +
                            " B" + std::to_string(B) + " T" + std::to_string(Tn) + " H" +
                            std::to_string(H) + " G" + std::to_string(G) + " D" +
                            std::to_string(D) + (accumulate ? " acc" : " write");
    auto fwd = via == Via::kZt ? attention_forward_zt<T> : attention_forward<T>;
    auto bwd = via == Via::kZt ? attention_backward_zt<T> : attention_backward<T>;
    Vec q = randn(B * Tn * H * D), k = randn(B * Tn * G * D), v = randn(B * Tn * G * D);
    Vec R = randn(B * Tn * H * D);
    auto dq_in = to_device<T>(q);
    auto dk_in = to_device<T>(k);
    auto dv_in = to_device<T>(v);
    auto dR = to_device<T>(R);
    auto dout = poisoned<T>(B * Tn * H * D);
    auto dlse = poisoned<float>(B * H * Tn);
    fwd(dout.data(), dlse.data(), dq_in.data(), dk_in.data(), dv_in.data(), B, Tn, H, G, D,
        nullptr, nullptr, 0, nullptr, 0.0);

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
    bwd(ddq.data(), ddk.data(), ddv.data(), delta.data(), dR.data(), dout.data(), dq_in.data(),
        dk_in.data(), dv_in.data(), dlse.data(), B, Tn, H, G, D, accumulate, nullptr, nullptr, 0, nullptr,
        nullptr, 0.0);
    Vec rdq = accumulate ? dq0 : Vec(q.size(), 0.0);
    Vec rdk = accumulate ? dk0 : Vec(k.size(), 0.0);
    Vec rdv = accumulate ? dv0 : Vec(v.size(), 0.0);
    Vec scratch(cpu::attention_backward_scratch(Tn, omp_get_max_threads()));
    cpu::attention_backward<double>(rdq.data(), rdk.data(), rdv.data(), scratch.data(), R.data(),
                                    q.data(), k.data(), v.data(), probs.data(), B, Tn, H, G, D,
                                    true);
    expect_close(to_host(ddq), rdq, gtol, "attention dq " + tag);
    expect_close(to_host(ddk), rdk, gtol, "attention dk " + tag);
    expect_close(to_host(ddv), rdv, gtol, "attention dv " + tag);
    if (via == Via::kZt) return;

    // The dispatched path against zt's kernel on the same device inputs (the GPU reference):
    // same output, lse and written gradients, within the bf16 tolerances.
    auto zout = poisoned<T>(out.size());
    auto zlse = poisoned<float>(B * H * Tn);
    attention_forward_zt<T>(zout.data(), zlse.data(), dq_in.data(), dk_in.data(), dv_in.data(),
                            B, Tn, H, G, D);
    expect_close(to_host(dout), to_host(zout), tol, "attention out vs zt " + tag);
    expect_close(to_host(dlse), to_host(zlse), kTolF32 * (bf16 ? 10 : 1),
                 "attention lse vs zt " + tag);
    auto zdq = poisoned<T>(q.size()), zdk = poisoned<T>(k.size()), zdv = poisoned<T>(v.size());
    auto adq = poisoned<T>(q.size()), adk = poisoned<T>(k.size()), adv = poisoned<T>(v.size());
    attention_backward_zt<T>(zdq.data(), zdk.data(), zdv.data(), delta.data(), dR.data(),
                             zout.data(), dq_in.data(), dk_in.data(), dv_in.data(), zlse.data(),
                             B, Tn, H, G, D, /*accumulate=*/false);
    attention_backward<T>(adq.data(), adk.data(), adv.data(), delta.data(), dR.data(),
                          dout.data(), dq_in.data(), dk_in.data(), dv_in.data(), dlse.data(), B,
                          Tn, H, G, D, /*accumulate=*/false);
    expect_close(to_host(adq), to_host(zdq), gtol, "attention dq vs zt " + tag);
    expect_close(to_host(adk), to_host(zdk), gtol, "attention dk vs zt " + tag);
    expect_close(to_host(adv), to_host(zdv), gtol, "attention dv vs zt " + tag);
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
  for (int64_t D : attention_head_dims()) check<float>({2, 77, 4, 2, D}, true);
}
TEST_F(AttentionTest, Bf16EveryHeadDim) {
  for (int64_t D : attention_head_dims()) check<bf16_t>({2, 77, 4, 2, D}, true);
}

// The head dims of the shipped presets (tiny 32, tinyllama-1.1b 64, open-llama-3b 100,
// llama-7b / 13b 128) and of common HF Llamas (80, 96), through the dispatching launchers:
// bf16 takes cuDNN where it loads (100 is not a multiple of 8: zt's kernel), fp32 zt's.
// Written gradients (the training step's mode) and accumulated ones (zt's backward on the
// forward's lse, whichever path made it).
TEST_F(AttentionTest, DispatchedEveryPresetHeadDim) {
  std::printf("attention backend: %s\n", attention_backend_summary(true, 64).c_str());
  for (int64_t D : {32, 48, 64, 80, 96, 100, 112, 128}) {
    const AttentionPath want = cudnn_attention_available() && D % 8 == 0 && !std::getenv("ZT_ATTENTION")
                                   ? AttentionPath::kCudnn
                                   : AttentionPath::kZt;
    EXPECT_EQ(attention_path(true, 2, 130, 8, 2, D), want) << "D " << D;
    check<bf16_t>({2, 130, 8, 2, D}, false, Via::kAuto);
    check<bf16_t>({1, 64, 4, 4, D}, true, Via::kAuto);
  }
  check<float>({2, 77, 4, 2, 64}, false, Via::kAuto);
}
TEST_F(AttentionTest, DispatchedGroupingsAndLongerSequence) {
  check<bf16_t>({1, 520, 8, 1, 64}, false, Via::kAuto);   // MQA, > 512 positions
  check<bf16_t>({2, 257, 4, 4, 128}, false, Via::kAuto);  // MHA, odd length
  check<bf16_t>({1, 1, 2, 1, 64}, false, Via::kAuto);     // one position
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

// Packed examples (positions restarting at each example, attention kept inside it):
// zt's kernel and the dispatching launchers (which must run zt's kernel for them) against
// the CPU kernels in double with the same positions; examples of 1..97 tokens, so tiles
// hold several example starts and keys of earlier examples are masked inside a tile.
// With window > 0 the sliding window too (Mistral), with or without the packing.
class PackedAttentionTest : public GpuTest {
 protected:
  template <class T>
  void check(const Shape& s, Via via, int64_t window = 0, bool packed = true) {
    const auto [B, Tn, H, G, D] = s;
    std::vector<int32_t> pos;
    uint64_t x = 12345;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0, left = 0, p = 0; t < Tn; ++t, ++p, --left) {
        if (left == 0) {  // a new example of 1..97 tokens
          x = x * 6364136223846793005ull + 1442695040888963407ull;
          left = 1 + static_cast<int64_t>((x >> 33) % 97);
          p = 0;
        }
        pos.push_back(static_cast<int32_t>(p));
      }
    const double tol = tolerance<T>();
    const std::string tag = std::string(via == Via::kZt ? "zt" : "dispatched") + " packed " +
                            type_name<T>() + " T" + std::to_string(Tn) + " D" + std::to_string(D) +
                            " window " + std::to_string(window) + (packed ? "" : " unpacked");
    Vec q = randn(B * Tn * H * D), k = randn(B * Tn * G * D), v = randn(B * Tn * G * D);
    Vec R = randn(B * Tn * H * D);
    auto dq_in = to_device<T>(q);
    auto dk_in = to_device<T>(k);
    auto dv_in = to_device<T>(v);
    auto dR = to_device<T>(R);
    auto dpos = to_device_i32(pos);
    const int32_t* dp = packed ? dpos.data() : nullptr;
    const int32_t* hp = packed ? pos.data() : nullptr;
    auto dout = poisoned<T>(B * Tn * H * D);
    auto dlse = poisoned<float>(B * H * Tn);
    auto ddq = poisoned<T>(q.size()), ddk = poisoned<T>(k.size()), ddv = poisoned<T>(v.size());
    auto delta = poisoned<float>(B * H * Tn);
    if (via == Via::kZt) {
      attention_forward_zt<T>(dout.data(), dlse.data(), dq_in.data(), dk_in.data(),
                              dv_in.data(), B, Tn, H, G, D, nullptr, dp, window);
      attention_backward_zt<T>(ddq.data(), ddk.data(), ddv.data(), delta.data(), dR.data(),
                               dout.data(), dq_in.data(), dk_in.data(), dv_in.data(),
                               dlse.data(), B, Tn, H, G, D, false, nullptr, dp, window);
    } else {
      attention_forward<T>(dout.data(), dlse.data(), dq_in.data(), dk_in.data(), dv_in.data(),
                           B, Tn, H, G, D, nullptr, dp, window);
      attention_backward<T>(ddq.data(), ddk.data(), ddv.data(), delta.data(), dR.data(),
                            dout.data(), dq_in.data(), dk_in.data(), dv_in.data(), dlse.data(),
                            B, Tn, H, G, D, false, nullptr, dp, window);
    }
    Vec out(B * Tn * H * D), probs(B * H * Tn * Tn);
    cpu::attention_forward<double>(out.data(), probs.data(), q.data(), k.data(), v.data(), B,
                                   Tn, H, G, D, hp, window);
    expect_close(to_host(dout), out, tol, "attention out " + tag);
    Vec rdq(q.size(), 0.0), rdk(k.size(), 0.0), rdv(v.size(), 0.0);
    Vec scratch(cpu::attention_backward_scratch(Tn, omp_get_max_threads()));
    cpu::attention_backward<double>(rdq.data(), rdk.data(), rdv.data(), scratch.data(),
                                    R.data(), q.data(), k.data(), v.data(), probs.data(), B, Tn,
                                    H, G, D, false);
    expect_close(to_host(ddq), rdq, tol, "attention dq " + tag);
    expect_close(to_host(ddk), rdk, tol, "attention dk " + tag);
    expect_close(to_host(ddv), rdv, tol, "attention dv " + tag);
  }
};

TEST_F(PackedAttentionTest, ZtKernelAndDispatchedMatchCpu) {
  for (int64_t D : {32, 64, 128}) {
    check<float>({2, 300, 4, 2, D}, Via::kZt);
    check<bf16_t>({2, 300, 4, 2, D}, Via::kZt);
    check<bf16_t>({1, 257, 8, 2, D}, Via::kAuto);  // cuDNN would take it: zt's kernel runs
  }
}

// Sliding window (Mistral): windows inside one tile, across tiles, and longer than the
// sequence, alone and with packed examples; zt's kernel and the dispatched launchers
// (unpacked bf16: cuDNN's diagonal band where it loads) against the CPU kernels in double.
TEST_F(PackedAttentionTest, SlidingWindowMatchesCpu) {
  for (int64_t D : {64, 128})
    for (int64_t w : {1, 5, 64, 100, 4096}) {
      check<float>({2, 300, 4, 2, D}, Via::kZt, w, false);
      check<bf16_t>({2, 300, 4, 2, D}, Via::kZt, w, true);
      check<bf16_t>({1, 257, 8, 2, D}, Via::kAuto, w, false);
    }
}

// Not a pass/fail check: times forward + backward of tinyllama-1.1b's attention (B 1,
// T 2048, H 32, G 4, D 64, bf16) on each path and prints ms and TFLOP/s (causal FLOPs:
// forward 2 B H T^2 D, backward 2.5x), for docs/gpu-verification.md and the step-time
// model's attention efficiencies (docs/estimate.md).
TEST_F(AttentionTest, TimingReportTinyllamaShape) {
  const int64_t B = 1, Tn = 2048, H = 32, G = 4, D = 64;
  Vec q = randn(B * Tn * H * D), k = randn(B * Tn * G * D), v = randn(B * Tn * G * D);
  auto dq_in = to_device<bf16_t>(q), dk_in = to_device<bf16_t>(k), dv_in = to_device<bf16_t>(v);
  auto out = poisoned<bf16_t>(q.size()), dout = to_device<bf16_t>(q);
  auto dq = poisoned<bf16_t>(q.size()), dk = poisoned<bf16_t>(k.size()), dv = poisoned<bf16_t>(v.size());
  auto lse = poisoned<float>(B * H * Tn), delta = poisoned<float>(B * H * Tn);
  cudaEvent_t t0, t1, t2;
  ZT_CUDA_CHECK(cudaEventCreate(&t0));
  ZT_CUDA_CHECK(cudaEventCreate(&t1));
  ZT_CUDA_CHECK(cudaEventCreate(&t2));
  const double fwd_flops = 2.0 * B * H * Tn * Tn * D, bwd_flops = 2.5 * fwd_flops;
  for (const Via via : {Via::kAuto, Via::kZt}) {
    auto fwd = via == Via::kZt ? attention_forward_zt<bf16_t> : attention_forward<bf16_t>;
    auto bwd = via == Via::kZt ? attention_backward_zt<bf16_t> : attention_backward<bf16_t>;
    const char* name =
        via == Via::kZt ? "zt" : attention_path_name(attention_path(true, B, Tn, H, G, D));
    float fwd_ms = 0, bwd_ms = 0;
    for (int rep = 0; rep < 3; ++rep) {  // the first builds plans / warms up; the last counts
      ZT_CUDA_CHECK(cudaEventRecord(t0));
      fwd(out.data(), lse.data(), dq_in.data(), dk_in.data(), dv_in.data(), B, Tn, H, G, D,
          nullptr, nullptr, 0, nullptr, 0.0);
      ZT_CUDA_CHECK(cudaEventRecord(t1));
      bwd(dq.data(), dk.data(), dv.data(), delta.data(), dout.data(), out.data(), dq_in.data(),
          dk_in.data(), dv_in.data(), lse.data(), B, Tn, H, G, D, false, nullptr, nullptr, 0, nullptr,
          nullptr, 0.0);
      ZT_CUDA_CHECK(cudaEventRecord(t2));
      ZT_CUDA_CHECK(cudaEventSynchronize(t2));
      ZT_CUDA_CHECK(cudaEventElapsedTime(&fwd_ms, t0, t1));
      ZT_CUDA_CHECK(cudaEventElapsedTime(&bwd_ms, t1, t2));
    }
    std::printf("[timing] attention %-5s bf16 B1 T2048 H32 G4 D64: fwd %.3f ms (%.1f TFLOP/s), "
                "bwd %.3f ms (%.1f TFLOP/s)\n",
                name, fwd_ms, fwd_flops / (fwd_ms * 1e-3) / 1e12, bwd_ms,
                bwd_flops / (bwd_ms * 1e-3) / 1e12);
    EXPECT_LT(rel_to_max(to_host(dq), Vec(q.size(), 0.0)), INFINITY) << name << ": dq not finite";
  }
  ZT_CUDA_CHECK(cudaEventDestroy(t0));
  ZT_CUDA_CHECK(cudaEventDestroy(t1));
  ZT_CUDA_CHECK(cudaEventDestroy(t2));
}

TEST(AttentionShapes, UnsupportedHeadDimIsAnInputError) {
  EXPECT_FALSE(attention_head_dim_supported(40));
  EXPECT_FALSE(attention_head_dim_supported(120));
  EXPECT_TRUE(attention_head_dim_supported(48));   // listed in attention.hpp: compiled
  EXPECT_TRUE(attention_head_dim_supported(112));
  EXPECT_TRUE(attention_head_dim_supported(128));
  EXPECT_TRUE(attention_head_dim_supported(100));  // open-llama-3b
  EXPECT_TRUE(attention_head_dim_supported(256));  // gemma-3-1b, 4b, 12b
  EXPECT_FALSE(attention_head_dim_supported(192));
  EXPECT_FALSE(attention_head_dim_supported(512));
  try {
    attention_forward<float>(nullptr, nullptr, nullptr, nullptr, nullptr, 1, 8, 2, 1, 40);
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("head dim 40"), std::string::npos) << w;
    EXPECT_NE(w.find("HINT"), std::string::npos) << w;
  }
}

// The path per shape, device-free: fp32 and head dims that are not multiples of 8 take
// zt's kernel; bf16 multiples of 8 up to 128 take cuDNN exactly when it loads; ZT_ATTENTION
// forces zt's kernel, and a value it does not know is an InputError naming it.
TEST(AttentionPaths, ChosenPerShape) {
  const char* prev = std::getenv("ZT_ATTENTION");
  if (prev) GTEST_SKIP() << "ZT_ATTENTION is set in the environment";
  const std::string summary = attention_backend_summary(true, 64);
  std::printf("attention backend: %s\n", summary.c_str());
  const bool cudnn = cudnn_attention_available();
  EXPECT_EQ(summary.rfind(cudnn ? "cudnn" : "zt", 0), 0u) << summary;
  const std::string fp32 = attention_backend_summary(false, 64);
  const std::string d100 = attention_backend_summary(true, 100);
  EXPECT_EQ(fp32.rfind("zt (", 0), 0u) << fp32;
  EXPECT_EQ(d100.rfind("zt (", 0), 0u) << d100;
  if (cudnn) {
    EXPECT_NE(fp32.find("fp32"), std::string::npos) << fp32;
    EXPECT_NE(d100.find("head dim 100"), std::string::npos) << d100;
  }
  const char* lib = std::getenv("ZT_CUDNN_LIB");  // ctest kernels_cuda_without_cudnn
  if (lib && std::string(lib).find("absent") != std::string::npos) {
    EXPECT_FALSE(cudnn);
    EXPECT_NE(summary.find("did not load"), std::string::npos) << summary;
  }
  const auto want = cudnn ? AttentionPath::kCudnn : AttentionPath::kZt;
  for (int64_t D : {32, 64, 80, 96, 128}) {
    EXPECT_EQ(attention_path(true, 4, 2048, 32, 4, D), want) << D;
    EXPECT_EQ(attention_path(false, 4, 2048, 32, 4, D), AttentionPath::kZt) << D;
  }
  EXPECT_EQ(attention_path(true, 4, 2048, 32, 32, 100), AttentionPath::kZt);  // 100 % 8 != 0
  EXPECT_EQ(attention_path(true, 4, 2048, 32, 32, 256), AttentionPath::kZt);  // > 128
  EXPECT_STREQ(attention_path_name(AttentionPath::kCudnn), "cudnn");
  EXPECT_STREQ(attention_path_name(AttentionPath::kZt), "zt");

  ::setenv("ZT_ATTENTION", "zt", 1);
  EXPECT_EQ(attention_path(true, 4, 2048, 32, 4, 64), AttentionPath::kZt);
  ::setenv("ZT_ATTENTION", "fast", 1);
  try {
    (void)attention_path(true, 4, 2048, 32, 4, 64);
    ADD_FAILURE() << "ZT_ATTENTION=fast accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ZT_ATTENTION=fast"), std::string::npos) << e.what();
  }
  ::unsetenv("ZT_ATTENTION");
}

}  // namespace
}  // namespace zt::kernels::cuda::testing
