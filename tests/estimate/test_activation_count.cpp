// zt estimate's GPU activation bytes against a count by hand (issue 35 item 4): the buffers
// DeviceModel allocates (src/model/cuda/device_model.cpp, Impl's members and
// DeviceBlockActs), each shape multiplied out below for one small model, not computed by
// the formula the estimate and the device model share (zt/model/device_workspace.hpp).
#include <gtest/gtest.h>

#include <utility>

#include "zt/estimate/estimate.hpp"

namespace {

// C = 64, L = 2, H = 4 heads of D = 16, G = 2 kv heads, I = 128, V = 256, context 32;
// micro_batch 2 x seq_len 16: N = 32 rows.
enum class Moe { kNone, kMixtral, kQwen2 };
zt::estimate::Row gpu_row(const char* precision, Moe moe = Moe::kNone) {
  zt::model::Config m = zt::model::Config::preset("tiny");  // vocab 256, 4 heads, 2 kv heads
  if (moe != Moe::kNone) {  // E = 4 experts, k = 2 per token
    m.family = moe == Moe::kMixtral ? "mixtral" : "qwen2_moe";
    m.experts = 4;
    m.experts_per_token = 2;
  }
  if (moe == Moe::kQwen2) {  // experts 48 wide, shared expert 40, layer 0 dense, 1 MoE
    m.moe_intermediate = 48;
    m.shared_expert_intermediate = 40;
    m.decoder_sparse_step = 2;
    m.norm_topk_prob = false;
  }
  m.hidden = 64;
  m.intermediate = 128;
  m.layers = 2;
  m.context = 32;
  zt::estimate::Setup s{.model = m, .micro_batch = 2, .seq_len = 16, .device = zt::estimate::Device::kGpu};
  s.zero.precision = precision;
  return zt::estimate::estimate_row(s, 0, 1, zt::estimate::Offload::kNone, zt::estimate::Offload::kNone);
}

// Bytes by hand, T = the compute dtype's bytes (2 for bf16, 4 for fp32):
//   rope_cos, rope_sin  f32 [context, D/2] = 32 x 8 = 256 each      2 x 256 x 4 =   2048
//   totals              one CrossEntropyTotals (double + 2 int64)             24
//   xs                  T [L+1, N, C] = 3 x 32 x 64 = 6144
//   delta, xf, dres, dxn T [N, C] = 2048 each                  4 x 2048 = 8192
//   logits              T [N, V] = 32 x 256 = 8192
//   datt, dq            T [N, H*D] = 2048 each                            4096
//   dk, dv              T [N, G*D] = 1024 each                            2048
//   dh, dgate, dup      T [N, I] = 4096 each                             12288
//                       => 6144 + 8192 + 8192 + 4096 + 2048 + 12288 = 40960 T
//   rstd_f, row_loss    f32 [N]                                   2 x 32 x 4 =    256
//   tokens, targets, context, positions int32 [N]                 4 x 32 x 4 =    512
//   attn_delta          f32 [N*H] = 128                               128 x 4 =    512
// One block's kept activations (DeviceBlockActs):
//   xn1, x_mid, xn2 [N, C] 3 x 2048; q, att [N, H*D] 2 x 2048; k, v [N, G*D] 2 x 1024;
//   gate, up, h [N, I] 3 x 4096  => 6144 + 4096 + 2048 + 12288 = 24576 T
//   rstd1, rstd2 f32 [N] 2 x 32; lse f32 [N*H] 128  => 192 x 4 = 768 bytes
// Blocks: the shared one, plus one per layer without recompute (3), or the shared alone (1).
constexpr uint64_t fixed_bytes(uint64_t t) { return 2048 + 24 + 40960 * t + 256 + 512 + 512; }
constexpr uint64_t block_bytes(uint64_t t) { return 24576 * t + 768; }

TEST(EstimateActivations, GpuWorkspaceEqualsTheBuffersCountedByHand) {
  const zt::estimate::Row bf16 = gpu_row("bf16-true");
  EXPECT_EQ(bf16.activation_bytes, fixed_bytes(2) + 3 * block_bytes(2));             // 235032
  EXPECT_EQ(bf16.activation_recompute_bytes, fixed_bytes(2) + 1 * block_bytes(2));   // 135192
  EXPECT_EQ(bf16.activation_bytes, 235032u);
  const zt::estimate::Row f32 = gpu_row("fp32");
  EXPECT_EQ(f32.activation_bytes, fixed_bytes(4) + 3 * block_bytes(4));
  EXPECT_EQ(f32.activation_recompute_bytes, fixed_bytes(4) + 1 * block_bytes(4));
}

// The same model as Mixtral, E = 4 experts, k = 2 per token: S = N k = 64 routed rows.
// Fixed: as above without dh, dgate, dup (40960 - 12288 = 28672 T), plus the MoE buffers
// (DeviceMoeSizes, device_moe.cpp):
//   rlogits             T [N, E] = 128
//   moe_rows            T [S, C] = 4096
//   moe_dh              T [S, I] = 8192             => 28672 + 12416 = 41088 T
//   moe_dw              f32 [S]                      64 x 4 =  256
//   aux_dprob           f32 [E]                       4 x 4 =   16
//   router_sums         f64 [2E]                      8 x 8 =   64
//   plan_scratch        int32 [ceil(S / 256) E + E + 1] = 9     9 x 4 =   36
// One block: xn1, x_mid, xn2, q, att, k, v as above (12288 T) and, instead of gate, up, h,
//   xp, my [S, C] 2 x 4096; mg, mu, mh [S, I] 3 x 8192  => 12288 + 32768 = 45056 T
//   rstd1, rstd2 [N], lse [N*H] 192; rprobs [N, E] 128; rw [S] 64  => 384 x 4 = 1536 bytes
//   ridx [N, k], perm, pos [S] int32 3 x 64                          => 192 x 4 =  768 bytes
constexpr uint64_t moe_fixed_bytes(uint64_t t) {
  return 2048 + 24 + 41088 * t + 256 + 512 + 512 + 256 + 16 + 64 + 36;
}
constexpr uint64_t moe_block_bytes(uint64_t t) { return 45056 * t + 1536 + 768; }

TEST(EstimateActivations, GpuMixtralWorkspaceEqualsTheBuffersCountedByHand) {
  const zt::estimate::Row bf16 = gpu_row("bf16-true", Moe::kMixtral);
  EXPECT_EQ(bf16.activation_bytes, moe_fixed_bytes(2) + 3 * moe_block_bytes(2));
  EXPECT_EQ(bf16.activation_recompute_bytes, moe_fixed_bytes(2) + 1 * moe_block_bytes(2));
  EXPECT_EQ(bf16.activation_bytes, 363148u);
  const zt::estimate::Row f32 = gpu_row("fp32", Moe::kMixtral);
  EXPECT_EQ(f32.activation_bytes, moe_fixed_bytes(4) + 3 * moe_block_bytes(4));
  EXPECT_EQ(f32.activation_recompute_bytes, moe_fixed_bytes(4) + 1 * moe_block_bytes(4));
}

// The same model as qwen2_moe: E = 4 experts of I_e = 48, k = 2 (S = 64 routed rows), the
// shared expert S_h = 40 wide, decoder_sparse_step 2: layer 0 dense (I = 128), layer 1 MoE.
// Fixed: as the dense model's (dh, dgate, dup [N, max(I, S_h)] = [N, 128]: 40960 T), plus
//   rlogits             T [N, E] = 128
//   moe_rows            T [S, C] = 4096
//   moe_dh              T [S, I_e] = 3072           => 40960 + 7296 = 48256 T
//   moe_dw, aux_dprob, router_sums, plan_scratch as Mixtral's: 256 + 16 + 64 + 36 bytes
// Each block: xn1, x_mid, xn2, q, att, k, v (12288 T), rstd1, rstd2, lse (768 bytes) and
//   layer 0 (dense): gate, up, h [N, I] 3 x 4096 = 12288      => 24576 T + 768 bytes
//   layer 1 (MoE):   gate, up, h [N, S_h] (the shared expert's) 3 x 1280 = 3840;
//                    xp, my [S, C] 2 x 4096; mg, mu, mh [S, I_e] 3 x 3072; sy [N, C] 2048
//                    => 12288 + 3840 + 8192 + 9216 + 2048 = 35584 T;
//                    f32 rprobs [N, E] 128, rw [S] 64, sg [N] 32 (+ 192) => 416 x 4 = 1664;
//                    int32 ridx, perm, pos [S] 3 x 64 => 768 bytes
//   shared (both kinds; eval, recompute): gate, up, h [N, 128] 12288 with layer 1's rest
//                    => 12288 + 12288 + 8192 + 9216 + 2048 = 44032 T + 1664 + 768 bytes
constexpr uint64_t qwen_fixed_bytes(uint64_t t) {
  return 2048 + 24 + 48256 * t + 256 + 512 + 512 + 256 + 16 + 64 + 36;
}
constexpr uint64_t qwen_dense_block(uint64_t t) { return 24576 * t + 768; }
constexpr uint64_t qwen_moe_block(uint64_t t) { return 35584 * t + 1664 + 768; }
constexpr uint64_t qwen_shared_block(uint64_t t) { return 44032 * t + 1664 + 768; }

TEST(EstimateActivations, GpuQwen2MoeWorkspaceEqualsTheBuffersCountedByHand) {
  for (const auto& [precision, t] : {std::pair{"bf16-true", 2u}, std::pair{"fp32", 4u}}) {
    const zt::estimate::Row r = gpu_row(precision, Moe::kQwen2);
    EXPECT_EQ(r.activation_bytes,
              qwen_fixed_bytes(t) + qwen_shared_block(t) + qwen_dense_block(t) + qwen_moe_block(t))
        << precision;
    EXPECT_EQ(r.activation_recompute_bytes, qwen_fixed_bytes(t) + qwen_shared_block(t))
        << precision;
  }
  EXPECT_EQ(gpu_row("bf16-true", Moe::kQwen2).activation_bytes, 314252u);
}

}  // namespace
