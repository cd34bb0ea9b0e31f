// The roofline step-time model (zt/estimate/step_time.hpp) against figures derived by
// hand: GEMM FLOPs = 6 x matmul weights x tokens, causal attention FLOPs, one row's
// memory-bound and compute-bound time, MFU = model FLOPs / (time x peak).
#include <gtest/gtest.h>

#include <string>

#include "zt/core/error.hpp"
#include "zt/estimate/gpus.hpp"
#include "zt/estimate/step_time.hpp"

namespace zt::estimate {
namespace {

double sum_flops(const StepTime& s, const std::string& part) {
  double f = 0;
  for (const KernelTime& k : s.kernels)
    if (k.name.find(part) != std::string::npos) f += k.flops;
  return f;
}
const KernelTime& row(const StepTime& s, const std::string& name) {
  for (const KernelTime& k : s.kernels)
    if (k.name == name) return k;
  throw std::runtime_error("no row " + name);
}

GpuSpec fake_gpu() {  // 100 TFLOP/s bf16, 1000 GB/s
  GpuSpec g;
  g.name = "fake";
  g.bf16_tflops = 100;
  g.bandwidth_gb_s = 1000;
  return g;
}

// tiny: V 256, C 128, L 4, H 4, G 2 (D 32, kv_dim 64), I 512; B 2, T 64 -> 128 tokens.
// Matmul weights per layer: q 128*128 + k,v 2*128*64 + o 128*128 + mlp 3*128*512 = 245,760;
// x 4 layers + lm_head 128*256 = 1,015,808. Forward + backward GEMMs: 6 x 1,015,808 x 128.
TEST(StepTime, GemmAndAttentionFlopsByHand) {
  const auto cfg = model::Config::preset("tiny");
  const StepTime s = step_time(cfg, 2, 64, /*recompute=*/false, fake_gpu(), true);
  EXPECT_EQ(s.tokens, 128);
  EXPECT_DOUBLE_EQ(sum_flops(s, "proj ") + sum_flops(s, "lm_head "), 780140544.0);
  // causal attention per layer: forward 2 B H T^2 D = 2*2*4*64*64*32 = 2,097,152,
  // backward 2.5x that; 4 layers
  EXPECT_DOUBLE_EQ(row(s, "attention fwd (cudnn)").flops, 8388608.0);
  EXPECT_DOUBLE_EQ(row(s, "attention bwd (cudnn)").flops, 20971520.0);
  EXPECT_EQ(row(s, "attention fwd (cudnn)").count, 4);
  // model FLOPs (PaLM): (6 x 1,016,960 + 12 x 4 x 4 x 32 x 64) x 128 = 831,356,928
  EXPECT_DOUBLE_EQ(s.model_flops, 831356928.0);
  // recompute runs the blocks' forward twice: forward GEMMs and attention once more
  const StepTime r = step_time(cfg, 2, 64, /*recompute=*/true, fake_gpu(), true);
  EXPECT_DOUBLE_EQ(row(r, "attention fwd (cudnn)").flops, 2 * 8388608.0);
  EXPECT_EQ(r.model_flops, s.model_flops);
  EXPECT_GT(r.seconds, s.seconds);
}

// lm_head forward of tiny: 2 x 128 x 128 x 256 = 8,388,608 FLOP, bytes 2 x (128*128 +
// 128*256 + 128*256) = 163,840. Compute 8,388,608 / (100e12 x 0.7) = 1.198e-7 s, memory
// 163,840 / (1000e9 x 0.8) = 2.048e-7 s: memory-bound, 2.048e-7 s.
TEST(StepTime, RooflineOfOneRowByHand) {
  const StepTime s = step_time(model::Config::preset("tiny"), 2, 64, false, fake_gpu(), true);
  const KernelTime& k = row(s, "lm_head fwd");
  EXPECT_DOUBLE_EQ(k.flops, 8388608.0);
  EXPECT_DOUBLE_EQ(k.bytes, 163840.0);
  EXPECT_NEAR(k.seconds, 2.048e-7, 1e-12);
  EXPECT_EQ(k.bound, Bound::kMemory);

  // tinyllama-1.1b, B 4, T 2048 on h100-sxm (989 TFLOP/s, 3350 GB/s): lm_head forward
  // 2 x 8192 x 2048 x 32000 = 1.073741824e12 FLOP / (989e12 x 0.7) = 1.5510e-3 s against
  // 2 x (8192*2048 + 2048*32000 + 8192*32000) B / (3350e9 x 0.8) = 2.570e-4 s: compute.
  const GpuSpec h100 = find_gpu(load_shipped_gpus(), "h100-sxm");
  const StepTime t = step_time(model::Config::preset("tinyllama-1.1b"), 4, 2048, false, h100, true);
  const KernelTime& h = row(t, "lm_head fwd");
  EXPECT_DOUBLE_EQ(h.flops, 1073741824000.0);
  EXPECT_NEAR(h.seconds, 1.073741824e12 / (989e12 * 0.7), 1e-9);
  EXPECT_EQ(h.bound, Bound::kCompute);
  // MFU by its definition; below the GEMM efficiency (nothing beats the GEMMs' share)
  EXPECT_NEAR(t.mfu, t.model_flops / (t.seconds * 989e12), 1e-12);
  EXPECT_GT(t.mfu, 0.3);
  EXPECT_LT(t.mfu, 0.7);
  EXPECT_NEAR(t.tokens_per_second, 8192 / t.seconds, 1e-6);
}

// zt's CUDA-core attention (head dims cuDNN does not take) is far slower: the attention
// rows of open-llama-3b (head dim 100) run at peak / 15 x 0.3.
TEST(StepTime, AttentionPathMatters) {
  const auto cfg = model::Config::preset("open-llama-3b");
  EXPECT_FALSE(cudnn_attention_expected(cfg));
  EXPECT_TRUE(cudnn_attention_expected(model::Config::preset("tinyllama-1.1b")));
  // zt's kernel too for sinks (gpt-oss), the attention soft-cap and head dim 256 (Gemma 3)
  EXPECT_FALSE(cudnn_attention_expected(model::Config::preset("gpt-oss-20b")));
  EXPECT_FALSE(cudnn_attention_expected(model::Config::preset("gemma-3-1b")));
  auto capped = model::Config::preset("tinyllama-1.1b");
  capped.attn_logit_softcap = 50;
  EXPECT_FALSE(cudnn_attention_expected(capped));
  const GpuSpec h100 = find_gpu(load_shipped_gpus(), "h100-sxm");
  const StepTime zt = step_time(cfg, 1, 2048, false, h100, false);
  const StepTime cu = step_time(cfg, 1, 2048, false, h100, true);
  const KernelTime& a = row(zt, "attention fwd (zt kernel)");
  EXPECT_NEAR(a.seconds, a.flops / (989e12 / 15.0 * 0.3), 1e-9);
  EXPECT_GT(zt.seconds, cu.seconds);
  EXPECT_LT(zt.mfu, cu.mfu);
}

TEST(StepTime, GpuWithoutBf16IsAnInputError) {
  GpuSpec t4 = fake_gpu();
  t4.name = "t4";
  t4.bf16_tflops = 0;
  EXPECT_THROW(step_time(model::Config::preset("tiny"), 1, 64, false, t4, true), InputError);
}

}  // namespace
}  // namespace zt::estimate
