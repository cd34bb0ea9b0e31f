// zt estimate's GPU activation bytes against a count by hand (issue 35 item 4): the buffers
// DeviceModel allocates (src/model/cuda/device_model.cpp, Impl's members and
// DeviceBlockActs), each shape multiplied out below for one small model, not computed by
// the formula the estimate and the device model share (zt/model/device_workspace.hpp).
#include <gtest/gtest.h>

#include "zt/estimate/estimate.hpp"

namespace {

// C = 64, L = 2, H = 4 heads of D = 16, G = 2 kv heads, I = 128, V = 256, context 32;
// micro_batch 2 x seq_len 16: N = 32 rows.
zt::estimate::Row gpu_row(const char* precision) {
  zt::model::Config m = zt::model::Config::preset("tiny");  // vocab 256, 4 heads, 2 kv heads
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

}  // namespace
