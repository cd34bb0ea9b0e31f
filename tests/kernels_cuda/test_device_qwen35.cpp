// Qwen3.5's hybrids on the GPU model (docs/model.md "Qwen3.5"; src/model/cuda/device_block.cpp,
// device_linear.cpp, device_moe.cpp) against the CPU model in double
// (DeviceModelTest::check_model, device_model_check.hpp): the loss, every unit's gradient
// (the Gated DeltaNet layers' in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, conv1d, A_log,
// dt_bias, gated norm and out_proj; the full layer's q_proj with its output gate rows, k,
// v, o, q/k norms; the MLPs, norms, embedding), the forward-only loss and the last
// position's logits, with and without recompute. The layers are l l l f (three Gated
// DeltaNet layers, then full attention with the output gate and partial RoPE 0.25), rows
// of T = 150 tokens: two whole chunks of 64 and a partial one. Each piece carries signal:
// the norm weights (the (1 + w) norms and the gated norm) drawn off their init (draw_off_init).
//   qwen3_5_text (tiny_qwen35): hidden 64, 4 heads of 16 (2 kv heads), Gated DeltaNet 2 key
//     heads and 4 value heads of 16, conv kernel 4
//   qwen3_5_moe_text (tiny_qwen35_moe): the same layers with 4 experts of width 48, top 2
//     renormalised, the shared expert (40 wide) and its sigmoid gate in every layer, the
//     aux loss in the loss
// fp32 to 1e-5 (as the other families); bf16 to 1e-2 (loss) and 5e-2 (gradients, logits),
// the MoE with every expert chosen (k = E: no top-k choice a bf16 rounding could flip).
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "device_model_check.hpp"
#include "model_params.hpp"
#include "zt/kernels/cuda/gated_delta.hpp"
#include "zt/kernels/cuda/output_gate.hpp"
#include "zt/model/device_workspace.hpp"

namespace zt::kernels::cuda::testing {
namespace {

constexpr int64_t kB = 2, kT = 150;  // 2 rows of 150 tokens: chunks of 64, 64 and 22

TEST_F(DeviceModelTest, Qwen35TextFp32) {
  const Config cfg = tiny_qwen35(false);
  check_model<double, float, float>(cfg, kB, kT, 1e-5, 1e-5, "qwen3_5_text fp32", true);
  check_model<double, float, float>(cfg, kB, kT, 1e-5, 1e-5, "qwen3_5_text fp32 recompute", true,
                                    true);
  check_model<double, float, float>(tiny_qwen35(true), 1, kT, 1e-5, 1e-5,
                                    "qwen3_5_text tied fp32", true);
}

TEST_F(DeviceModelTest, Qwen35MoeFp32) {
  const Config cfg = tiny_qwen35_moe(4, 2);
  check_model<double, float, float>(cfg, kB, kT, 1e-5, 1e-5, "qwen3_5_moe_text fp32", true);
  check_model<double, float, float>(cfg, kB, kT, 1e-5, 1e-5, "qwen3_5_moe_text fp32 recompute",
                                    true, true);
}

TEST_F(DeviceModelTest, Qwen35Bf16) {
  const Config cfg = tiny_qwen35(false);
  check_model<double, bf16_t, float>(cfg, kB, kT, 1e-2, 5e-2, "qwen3_5_text bf16-mixed", true);
  check_model<double, bf16_t, float>(cfg, kB, kT, 1e-2, 5e-2, "qwen3_5_text bf16-mixed recompute",
                                     true, true);
  check_model<double, bf16_t, float>(tiny_qwen35_moe(3, 3), kB, kT, 1e-2, 5e-2,
                                     "qwen3_5_moe_text k=E bf16-mixed", true);
  check_model<double, bf16_t, bf16_t>(tiny_qwen35_moe(3, 3), kB, kT, 1e-2, 5e-2,
                                      "qwen3_5_moe_text k=E bf16-true recompute", true, true);
}

// The output gate's kernels against its formula in double on the same (rounded) inputs:
// y = att sigmoid(gate); d att = dy s, d gate = dy att s (1 - s) written into the gate
// halves of q_proj's gradient rows [rows, 2D] (the query halves left untouched), fp32 and
// bf16.
TEST_F(DeviceModelTest, Qwen35OutputGateKernel) {
  const auto check = [this]<class T>(T*) {
    const int64_t rows = 300 * 4, D = 16;
    Vec att = randn(rows * D), gate = randn(rows * D, 2.0), dy = randn(rows * D);
    auto datt = to_device<T>(att);  // (rounds the host values to T)
    auto dgate = to_device<T>(gate);
    auto dd = to_device<T>(dy);
    auto y = poisoned<T>(rows * D);
    output_gate_forward<T>(y.data(), datt.data(), dgate.data(), rows, D);
    Vec ry(rows * D), rda(rows * D), rdg(rows * D);
    for (int64_t i = 0; i < rows * D; ++i) {
      const double s = 1.0 / (1.0 + std::exp(-gate[i]));
      ry[i] = att[i] * s;
      rda[i] = dy[i] * s;
      rdg[i] = dy[i] * att[i] * s * (1.0 - s);
    }
    const double tol = tolerance<T>();
    expect_close(to_host(y), ry, tol, std::string("output gate y ") + type_name<T>());
    auto dqg = poisoned<T>(rows * 2 * D);  // [rows, 2D]: d gate into the second halves
    output_gate_backward<T>(dd.data(), dqg.data() + D, datt.data(), dgate.data(), rows, D, 2 * D);
    expect_close(to_host(dd), rda, tol, std::string("output gate d att ") + type_name<T>());
    const Vec got = to_host(dqg);
    Vec halves(rows * D);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < D; ++j) {
        ASSERT_TRUE(std::isnan(got[r * 2 * D + j])) << "query half of row " << r << " written";
        halves[r * D + j] = got[r * 2 * D + D + j];
      }
    expect_close(halves, rdg, tol, std::string("output gate d gate ") + type_name<T>());
  };
  check(static_cast<float*>(nullptr));
  check(static_cast<bf16_t*>(nullptr));
}

// The workspace formula zt estimate shares (zt/model/device_workspace.hpp), without a GPU:
// a Gated DeltaNet layer keeps none of the attention's buffers and an attention layer none
// of its; the shared block holds both; the rule's backward scratch the model allocates is
// what the kernels ask for (gated_delta_backward_scratch with the chunk starts kept) for
// one and many sequences, short and long, few and many value heads.
TEST(DeviceQwen35Workspace, FormulaHoldsEachMixerAndTheRuleScratch) {
  const Config c = tiny_qwen35(false);
  const int64_t N = 300, Q = model::delta_chunk_rows(2, 150);
  EXPECT_EQ(Q, 6);
  const model::DeviceBlockSizes lin = model::DeviceBlockSizes::of(c, N, 0, Q);
  const model::DeviceBlockSizes full = model::DeviceBlockSizes::of(c, N, 3, Q);
  const model::DeviceBlockSizes shared = model::DeviceBlockSizes::of(c, N, -1, Q);
  EXPECT_EQ(lin.q + lin.k + lin.v + lin.att + lin.lse + lin.qr + lin.ogate, 0u);
  EXPECT_EQ(lin.lstarts, static_cast<size_t>(Q * 4 * 16 * 16));
  EXPECT_EQ(full.lqkv + full.lq + full.lstarts, 0u);
  EXPECT_EQ(full.ogate, static_cast<size_t>(N * 64));
  EXPECT_EQ(shared.q, full.q);
  EXPECT_EQ(shared.lstarts, lin.lstarts);
  for (const auto& [B, T, Hv] :
       {std::tuple{2, 150, 4}, {1, 64, 4}, {40, 100, 32}, {1, 4096, 32}}) {
    Config d = c;
    d.linear_value_heads = Hv;
    d.linear_key_heads = Hv / 2;
    d.linear_key_dim = d.linear_value_dim = 128;
    const kernels::cuda::DeltaShape s{.B = B, .T = T, .Hk = Hv / 2, .Hv = Hv, .Dk = 128,
                                      .Dv = 128, .chunk = kernels::cuda::kDeltaChunk};
    const model::DeviceLinearSizes z =
        model::DeviceLinearSizes::of(d, B * T, model::delta_chunk_rows(B, T));
    EXPECT_GE(static_cast<int64_t>(z.rule), gated_delta_backward_scratch(s, false))
        << "B " << B << " T " << T << " Hv " << Hv;
  }
}

// Packed rows (several examples a row) are refused by name on the GPU model with Gated
// DeltaNet layers: its conv and rule run over whole rows.
TEST_F(DeviceModelTest, Qwen35PackedRowsRefused) {
  const Config cfg = tiny_qwen35(false);
  const ParamLayout layout(cfg);
  model::DeviceModel<float, float> gpu(cfg, 1, 8);
  const Batch data = batch(cfg, 8);
  const std::vector<int32_t> pos{0, 1, 2, 0, 1, 2, 3, 4};
  try {
    gpu.loss(data.tokens, data.targets, 1, 8, pos);
    ADD_FAILURE() << "packed rows accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("Gated DeltaNet"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("--no-pack"), std::string::npos) << e.hint();
  }
}

}  // namespace
}  // namespace zt::kernels::cuda::testing
