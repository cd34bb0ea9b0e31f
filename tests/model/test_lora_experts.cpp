// LoRA on the experts of a mixture-of-experts model (lora.hpp, lora_experts.hpp), as PEFT's
// target_parameters adapts transformers' 3-D expert stacks:
//  - keys: experts.gate_up / experts.down accepted on a Mixtral; refused (zt::InputError
//    naming the key) on a dense model, with dropout, with qlora; gate/up/down on a Mixtral
//    refused with a hint naming the experts' targets;
//  - layout: PEFT's names (the nested ParamWrappers: "mlp.experts.base_layer" for gate_up
//    when both stacks are targeted) and shapes (A [E*r, in], B [out, r*E]), the counts;
//  - the merged stack against the per-expert product computed here from PEFT's reshapes,
//    and the adapters' gradient from the stack's by finite differences.
// The model's gradients by finite differences are Lora.GradcheckMixtralAttention and
// merge_lora on the experts LoraMerge.MixtralExperts (test_lora.cpp);
// PEFT itself is the hf test model.hf.moe_lora_peer.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "lora_experts.hpp"  // src/model (the test's include path)
#include "model_fixtures.hpp"
#include "zt/core/error.hpp"
#include "zt/model/lora.hpp"

namespace zt::model {
namespace {

using testing::resolve_error;

constexpr uint32_t bit(LoraTarget t) { return 1u << static_cast<int>(t); }

LoraConfig experts_lora(uint32_t targets, int64_t rank = 2) {
  LoraConfig l;
  l.method = FinetuneMethod::kLora;
  l.rank = rank;
  l.alpha = 3.0;
  l.targets = targets;
  return l;
}

TEST(LoraExperts, KeysResolveAndRefuse) {
  const Config mix = testing::small_mixtral();
  const Config dense = testing::small_config();
  const std::string lora = "finetune.method=lora";
  config::Schema s;
  add_finetune_keys(s);
  const LoraConfig l = resolve_lora(
      config::load(s, "", {lora, "lora.targets=q, experts.gate_up,experts.down", "lora.rank=2"}), mix);
  EXPECT_TRUE(l.has_target(LoraTarget::kExpertsGateUp) && l.has_target(LoraTarget::kExpertsDown));
  EXPECT_EQ(lora_target_name(LoraTarget::kExpertsGateUp), "experts.gate_up");
  EXPECT_EQ(lora_module_name(LoraTarget::kExpertsDown), "experts.down_proj");
  const std::string on_dense = resolve_error({lora, "lora.targets=experts.down", "lora.rank=2"}, dense);
  EXPECT_NE(on_dense.find("lora.targets"), std::string::npos) << on_dense;
  EXPECT_NE(on_dense.find("no experts"), std::string::npos) << on_dense;
  const std::string drop = resolve_error({lora, "lora.targets=experts.down", "lora.dropout=0.1", "lora.rank=2"}, mix);
  EXPECT_NE(drop.find("lora.dropout"), std::string::npos) << drop;
  const std::string q = resolve_error({"finetune.method=qlora", "lora.targets=q,experts.gate_up", "lora.rank=2"}, mix);
  EXPECT_NE(q.find("finetune.method = qlora"), std::string::npos) << q;
  const std::string gate = resolve_error({lora, "lora.targets=gate", "lora.rank=2"}, mix);
  EXPECT_NE(gate.find("lora.targets"), std::string::npos) << gate;
  EXPECT_NE(gate.find("experts.gate_up"), std::string::npos) << gate;
  // down [C, I] = [8, 6] per expert: rank 6 fits, 7 does not.
  for (const int rank : {6, 7}) {
    const std::string e = resolve_error({lora, "lora.targets=experts.down", "lora.rank=" + std::to_string(rank)}, mix);
    EXPECT_EQ(e.find("lora.rank") != std::string::npos, rank == 7) << e;
  }
  // Attention on a Mixtral with dropout stays allowed.
  EXPECT_EQ(resolve_error({lora, "lora.targets=q,v", "lora.dropout=0.1", "lora.rank=2"}, mix), "");
}

TEST(LoraExperts, LayoutNamesShapesCounts) {
  const Config cfg = testing::small_mixtral();  // C 8, I 6, E 4, 2 layers
  const int64_t C = cfg.hidden, I = cfg.intermediate, E = cfg.experts, r = 2;
  const LoraConfig both = experts_lora(bit(LoraTarget::kQ) | bit(LoraTarget::kExpertsGateUp) |
                                       bit(LoraTarget::kExpertsDown));
  const LoraLayout ll(cfg, both);
  ASSERT_EQ(ll.adapters().size(), 3u * cfg.layers);
  const LoraAdapterInfo& gu = ll.adapters()[1];
  const LoraAdapterInfo& dn = ll.adapters()[2];
  EXPECT_EQ(gu.name, "model.layers.0.mlp.experts.base_layer");  // PEFT: gate_up wrapped by down
  EXPECT_EQ(dn.name, "model.layers.0.mlp.experts");
  EXPECT_EQ(gu.weight, "model.layers.0.mlp.experts.gate_up_proj");
  EXPECT_EQ(dn.weight, "model.layers.0.mlp.experts.down_proj");
  EXPECT_EQ(gu.experts, E);
  EXPECT_EQ(gu.in, C);
  EXPECT_EQ(gu.out, 2 * I);
  EXPECT_EQ(dn.in, I);
  EXPECT_EQ(dn.out, C);
  EXPECT_EQ(gu.b_offset - gu.a_offset, E * r * C);
  EXPECT_EQ(dn.a_offset - gu.b_offset, 2 * I * r * E);
  EXPECT_EQ(ll.find(1, LoraTarget::kExpertsDown)->name, "model.layers.1.mlp.experts");
  const ParamLayout pl(cfg, both);
  EXPECT_EQ(pl.find("model.layers.0.mlp.experts.base_layer.lora_A.weight").shape,
            (std::vector<int64_t>{E * r, C}));
  EXPECT_EQ(pl.find("model.layers.0.mlp.experts.base_layer.lora_B.weight").shape,
            (std::vector<int64_t>{2 * I, r * E}));
  EXPECT_EQ(pl.find("model.layers.1.mlp.experts.lora_A.weight").shape, (std::vector<int64_t>{E * r, I}));
  EXPECT_EQ(pl.find("model.layers.1.mlp.experts.lora_B.weight").shape, (std::vector<int64_t>{C, r * E}));
  EXPECT_EQ(pl.unit(pl.adapter_unit()).numel, ll.numel());
  // One stack alone is PEFT's outer (only) wrapper: "mlp.experts".
  const LoraLayout one(cfg, experts_lora(bit(LoraTarget::kExpertsGateUp)));
  EXPECT_EQ(one.adapters()[0].name, "model.layers.0.mlp.experts");
  // PEFT's print_trainable_parameters: r (in + out) per expert per stack per layer, q's too.
  const TrainableCounts tc = trainable_counts(cfg, both);
  EXPECT_EQ(tc.trainable, ll.numel());
  EXPECT_EQ(tc.trainable, cfg.layers * (r * (C + C) + E * r * (C + 2 * I) + E * r * (I + C)));
  EXPECT_EQ(tc.all, cfg.num_params() + tc.trainable);
}

// add_expert_delta against the per-expert product written from PEFT's reshapes:
// A.reshape(E, r, in)[e], B.reshape(out, r, E)[:, :, e]; and expert_delta_backward against
// the adjoint identity <dW, delta(A, B)> = <dA, A> + <dB, B> ... checked by a directional
// finite difference (the delta is bilinear, so central differences are exact up to rounding).
TEST(LoraExperts, DeltaIsPeftsPerExpertProduct) {
  const int64_t E = 3, out = 5, in = 4, r = 2;
  const double scale = 1.5;
  std::mt19937_64 rng(3);
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<double> A(E * r * in), B(out * r * E), W(E * out * in), dW(E * out * in);
  for (auto* v : {&A, &B, &W, &dW})
    for (double& x : *v) x = d(rng);
  std::vector<double> M = W;
  detail::add_expert_delta<double>(M.data(), A.data(), B.data(), E, out, in, r, scale);
  double err = 0;
  for (int64_t e = 0; e < E; ++e)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {
        double s = 0;
        for (int64_t k = 0; k < r; ++k) s += B[(o * r + k) * E + e] * A[(e * r + k) * in + i];
        const size_t at = static_cast<size_t>((e * out + o) * in + i);
        err = std::max(err, std::abs(M[at] - (W[at] + scale * s)));
      }
  EXPECT_LT(err, 1e-13);
  // f(A, B) = <dW, W + delta(A, B)>: its gradient is expert_delta_backward's.
  std::vector<double> gA(A.size(), 0.0), gB(B.size(), 0.0);
  detail::expert_delta_backward<double>(gA.data(), gB.data(), dW.data(), A.data(), B.data(), E,
                                        out, in, r, scale);
  const auto f = [&] {
    std::vector<double> m = W;
    detail::add_expert_delta<double>(m.data(), A.data(), B.data(), E, out, in, r, scale);
    double s = 0;
    for (size_t i = 0; i < m.size(); ++i) s += m[i] * dW[i];
    return s;
  };
  double gerr = 0;
  for (auto [p, g] : {std::pair{&A, &gA}, std::pair{&B, &gB}})
    for (size_t i = 0; i < p->size(); ++i) {
      const double keep = (*p)[i];
      (*p)[i] = keep + 1e-3;
      const double up = f();
      (*p)[i] = keep - 1e-3;
      const double dn = f();
      (*p)[i] = keep;
      gerr = std::max(gerr, std::abs((up - dn) / 2e-3 - (*g)[i]));
    }
  EXPECT_LT(gerr, 1e-9);
}

}  // namespace
}  // namespace zt::model
