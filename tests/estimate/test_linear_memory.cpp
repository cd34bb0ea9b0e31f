// A Gated DeltaNet layer's training activations (qwen3_5_text, layer_types 'l') grow
// linearly with the sequence: the bytes the CPU model allocates for one layer kept for the
// backward, the estimate's, and a count by hand of the buffers it keeps (no T x T term), at
// two sequence lengths. The per-layer bytes are the workspace without recompute less the
// workspace with it (the same model and shape): the blocks kept per layer.
#include <gtest/gtest.h>
#include <omp.h>

#include <vector>

#include "zt/estimate/estimate.hpp"
#include "zt/model/model.hpp"
#include "../model/model_fixtures.hpp"

namespace zt::estimate {
namespace {

// The model tests' small qwen3_5_text (hidden 8, 2 heads of 8 with 1 kv head, MLP 12;
// linear layers: 1 key head of 4, 2 value heads of 3, so conv channels Cc = 2 * 4 + 6 = 14)
// with the schedule `layer_types` and a context for the lengths below.
model::Config qwen35(const char* layer_types) {
  model::Config c = testing::small_qwen35_hybrid();
  c.layer_types = layer_types;
  c.layers = static_cast<int64_t>(c.layer_types.size());
  c.context = 256;
  return c;
}

// Bytes of one linear layer's kept activations by hand, fp32, per row of N = B T:
//   xn1, x_mid, xn2 [C] 3 x 8; rstd1, rstd2 2;             mixer: qkv_pre, qkv [Cc] 2 x 14;
//   q, k [Hk Dk] 2 x 4; v, z, out, y [Hv Dv] 4 x 6; a, beta, g, rstd [Hv] 4 x 2;
//   MLP gate, up, h [I] 3 x 12        => 26 + 28 + 8 + 24 + 8 + 36 = 130 floats.
uint64_t linear_layer_by_hand(int64_t B, int64_t T) { return 4u * 130u * static_cast<uint64_t>(B * T); }
// A full-attention layer's (output gate, q/k norm): 26 as above; q, att [HD] 2 x 16; k, v
// [GD] 2 x 8; qr 16, kr 8, rstd_q 2, rstd_k 1; qg [2 HD] 32, ogate, att_g 2 x 16; MLP 36
// => 201 floats per row, and the softmax probabilities [B, H, T, T].
uint64_t full_layer_by_hand(int64_t B, int64_t T) {
  return 4u * (201u * static_cast<uint64_t>(B * T) + static_cast<uint64_t>(B * 2 * T * T));
}

// The model's workspace after one training step with or without recompute.
uint64_t workspace(const model::Config& c, int64_t B, int64_t T, bool recompute) {
  model::Model<float> m(c, B, T);
  model::Parameters<float> p(m.layout());
  p.init(model::InitOptions{});
  p.bind(m);
  std::vector<int32_t> tok(static_cast<size_t>(B * T)), tgt(tok.size());
  for (size_t i = 0; i < tok.size(); ++i) {
    tok[i] = static_cast<int32_t>((i * 7 + 3) % 16);
    tgt[i] = static_cast<int32_t>((i * 5 + 1) % 16);
  }
  m.loss_and_grad(tok, tgt, B, T, recompute, 1.0);
  return m.workspace_bytes();
}

TEST(LinearLayerMemory, GrowsLinearlyAndTheEstimateCountsWhatTheModelAllocates) {
  const int threads = omp_get_max_threads();
  const int64_t B = 2;
  for (const char* types : {"lll", "lllf"}) {
    const model::Config c = qwen35(types);
    const int64_t linear = 3, full = c.layers - linear;
    for (int64_t T : {64, 200}) {  // one chunk; three, the last partial
      const uint64_t kept = workspace(c, B, T, false), rc = workspace(c, B, T, true);
      EXPECT_EQ(activation_bytes(c, B, T, false, 4, threads), kept) << types << " T " << T;
      EXPECT_EQ(activation_bytes(c, B, T, true, 4, threads), rc) << types << " T " << T;
      // the layers' own blocks: each linear layer's by hand (no T x T), the full one's with it
      EXPECT_EQ(kept - rc, linear * linear_layer_by_hand(B, T) + full * full_layer_by_hand(B, T))
          << types << " T " << T;
    }
  }
}

}  // namespace
}  // namespace zt::estimate
