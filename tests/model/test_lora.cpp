// LoRA on the CPU model (model/lora.hpp):
//  - keys: every bad input is a zt::InputError naming its key;
//  - init: A ~ U(-1/sqrt(in), 1/sqrt(in)) (PEFT's kaiming_uniform_(a = sqrt(5))), B = 0,
//    deterministic from the seed; fresh adapters leave the logits bit for bit unchanged;
//  - gradients of A and B by five-point finite differences in double (every coordinate of
//    the small config, all eight targets, untied and tied, with and without dropout and
//    recompute), and no base gradient at all: the units are bound without gradient spans;
//  - merge_lora: the merged base computes what the base with its adapters does (LoRA and
//    QLoRA, untied and tied);
//  - the banner in PEFT's format. The counts and the forward against PEFT itself are the
//    hf test model.hf.lora_peer (tests/model/hf/lora_peer_test.py).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <stdexcept>
#include <string>

#include "../kernels/gradcheck.hpp"
#include "model_fixtures.hpp"
#include "zt/core/error.hpp"
#include "zt/model/lora.hpp"

namespace zt::model {
namespace {
using testing::lora_all;
using testing::resolve_error;

config::Schema finetune_schema() {
  config::Schema s;
  add_finetune_keys(s);
  return s;
}


TEST(Lora, KeysResolve) {
  const config::Schema s = finetune_schema();
  const config::Config c = config::load(
      s, "", {"finetune.method=lora", "lora.rank=4", "lora.alpha=8", "lora.dropout=0.1",
              "lora.targets=q, v,lm_head", "lora.rslora=true"});
  const LoraConfig l = resolve_lora(c, Config::preset("tiny"));
  EXPECT_EQ(l.method, FinetuneMethod::kLora);
  EXPECT_EQ(l.rank, 4);
  EXPECT_DOUBLE_EQ(l.scale(), 8.0 / 2.0);  // rslora: alpha / sqrt(4)
  EXPECT_TRUE(l.has_target(LoraTarget::kQ) && l.has_target(LoraTarget::kV) &&
              l.has_target(LoraTarget::kLmHead));
  EXPECT_FALSE(l.has_target(LoraTarget::kK) || l.has_target(LoraTarget::kDown));
  // Defaults: full fine-tuning (the keys of LoRA unused), alpha / r without rslora.
  const LoraConfig d = resolve_lora(config::load(s, "", {}), Config::preset("tiny"));
  EXPECT_FALSE(d.enabled());
  EXPECT_DOUBLE_EQ(d.scale(), 16.0 / 8.0);
}

TEST(Lora, BadInputNamesTheKey) {
  const Config tiny = Config::preset("tiny");  // hidden 128, kv_dim 64, intermediate 512
  const std::string lora = "finetune.method=lora";
  EXPECT_NE(resolve_error({lora, "lora.targets=q,value"}, tiny).find("lora.targets"),
            std::string::npos);
  EXPECT_NE(resolve_error({lora, "lora.targets=q,,v"}, tiny).find("lora.targets"),
            std::string::npos);
  EXPECT_NE(resolve_error({lora, "lora.rank=0"}, tiny).find("lora.rank"), std::string::npos);
  EXPECT_NE(resolve_error({lora, "lora.rank=-3"}, tiny).find("lora.rank"), std::string::npos);
  // k_proj is [64, 128]: rank 64 fits, 65 does not; q alone takes up to 128.
  EXPECT_EQ(resolve_error({lora, "lora.rank=64", "lora.targets=q,k"}, tiny), "");
  const std::string k65 = resolve_error({lora, "lora.rank=65", "lora.targets=q,k"}, tiny);
  EXPECT_NE(k65.find("lora.rank"), std::string::npos) << k65;
  EXPECT_NE(k65.find("k_proj"), std::string::npos) << k65;
  EXPECT_EQ(resolve_error({lora, "lora.rank=128", "lora.targets=q"}, tiny), "");
  EXPECT_NE(resolve_error({lora, "lora.rank=129", "lora.targets=q"}, tiny).find("lora.rank"),
            std::string::npos);
  EXPECT_NE(resolve_error({lora, "lora.dropout=1"}, tiny).find("lora.dropout"), std::string::npos);
  EXPECT_NE(resolve_error({lora, "lora.dropout=-0.1"}, tiny).find("lora.dropout"),
            std::string::npos);
  EXPECT_EQ(resolve_error({lora, "lora.dropout=0.999"}, tiny), "");
  EXPECT_NE(resolve_error({lora, "lora.alpha=0"}, tiny).find("lora.alpha"), std::string::npos);
  EXPECT_NE(resolve_error({"finetune.method=dora"}, tiny).find("finetune.method"),
            std::string::npos);
}

TEST(Lora, QloraDtype) {
  LoraConfig q;
  q.method = FinetuneMethod::kQlora;
  EXPECT_NO_THROW(check_qlora_dtype(q, DType::kF32));
  EXPECT_NO_THROW(check_qlora_dtype(q, DType::kBF16));
  try {
    check_qlora_dtype(q, DType::kF64);
    ADD_FAILURE() << "qlora on fp64 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("finetune.method"), std::string::npos) << e.what();
  }
  LoraConfig l = q;
  l.method = FinetuneMethod::kLora;
  EXPECT_NO_THROW(check_qlora_dtype(l, DType::kF64));  // LoRA keeps the base as it is
}

TEST(Lora, LayoutAndInit) {
  const Config cfg = Config::preset("tiny");
  LoraConfig l = lora_all(8, 0.0);
  const LoraLayout layout(cfg, l);
  // PEFT's order and names; A then B of each, back to back.
  ASSERT_EQ(layout.adapters().size(), static_cast<size_t>(7 * cfg.layers + 1));
  EXPECT_EQ(layout.adapters()[0].name, "model.layers.0.self_attn.q_proj");
  EXPECT_EQ(layout.adapters()[6].name, "model.layers.0.mlp.down_proj");
  EXPECT_EQ(layout.adapters().back().name, "lm_head");
  int64_t next = 0;
  for (const auto& a : layout.adapters()) {
    EXPECT_EQ(a.a_offset, next);
    EXPECT_EQ(a.b_offset, next + l.rank * a.in);
    next = a.b_offset + a.out * l.rank;
    EXPECT_EQ(layout.find(a.layer, a.target), &a);
  }
  EXPECT_EQ(layout.numel(), next);
  EXPECT_EQ(trainable_counts(cfg, l).trainable, layout.numel());
  EXPECT_EQ(trainable_counts(cfg, l).all, cfg.num_params() + layout.numel());

  std::vector<float> p(static_cast<size_t>(layout.numel())), p2(p.size()), p3(p.size());
  init_lora<float>(layout, 5, p);
  init_lora<float>(layout, 5, p2);
  init_lora<float>(layout, 6, p3);
  EXPECT_EQ(p, p2);  // a pure function of the seed
  EXPECT_NE(p, p3);
  for (const auto& a : layout.adapters()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(a.in));
    double sum = 0, sq = 0;
    const int64_t n = l.rank * a.in;
    for (int64_t i = 0; i < n; ++i) {
      const double v = p[static_cast<size_t>(a.a_offset + i)];
      ASSERT_LE(std::abs(v), bound) << a.name;
      sum += v;
      sq += v * v;
    }
    // U(-b, b): mean 0, variance b^2 / 3; tolerances of 5 standard errors.
    const double var = bound * bound / 3.0;
    EXPECT_LT(std::abs(sum / n), 5.0 * std::sqrt(var / n)) << a.name;
    EXPECT_NEAR(sq / n, var, 5.0 * var * std::sqrt(0.8 / n)) << a.name;
    for (int64_t i = 0; i < a.out * l.rank; ++i)
      ASSERT_EQ(p[static_cast<size_t>(a.b_offset + i)], 0.0f) << a.name;
  }
}

// Fresh adapters (B = 0) add exactly zero: the logits equal the base model's bit for bit.
TEST(Lora, FreshAdaptersChangeNothing) {
  const Config cfg = Config::preset("tiny");
  ParamLayout layout(cfg);
  Parameters<float> P(layout);
  testing::init_general(P, layout, 0.05, 3);
  const LoraLayout ll(cfg, lora_all(4, 0.0));
  std::vector<float> lp(static_cast<size_t>(ll.numel()));
  init_lora<float>(ll, 1, lp);
  Model<float> base(cfg), adapted(cfg);
  P.bind(base);
  P.bind(adapted);
  adapted.bind_lora(ll, lp, {});
  const auto tok = testing::random_tokens(12, cfg.vocab, 4);
  std::vector<float> a(static_cast<size_t>(cfg.vocab)), b(a.size());
  base.logits_last(tok, 12, a);
  adapted.logits_last(tok, 12, b);
  EXPECT_EQ(a, b);
  // ... and a non-zero B changes them.
  for (const auto& ad : ll.adapters()) lp[static_cast<size_t>(ad.b_offset)] = 0.5f;
  adapted.logits_last(tok, 12, b);
  EXPECT_NE(a, b);
}

// Every coordinate of A and B against five-point central differences of the loss, h =
// 1e-4: the adapters' N(0, 0.4) values (and dropout's 1 / (1 - p)) make the loss steep
// enough in block 0 that h = 1e-3 leaves a truncation error of 2e-5 (it falls as h^4:
// 1.6e-7 at 3e-4, 1.9e-9 at 1e-4, measured), while the rounding error stays < 1e-10.
constexpr double kH = 1e-4;
void lora_gradcheck(bool tied, double dropout, bool recompute,
                    const Config& cfg_in = Config{.vocab = 0}, uint32_t extra_targets = 0) {
  const Config cfg = cfg_in.vocab == 0 ? testing::small_config(tied) : cfg_in;
  const std::string tag = cfg.family + " " + std::string(tied ? "tied" : "untied") + " dropout " +
                          std::to_string(dropout) + (recompute ? " recompute" : "") +
                          (extra_targets ? " target bits " + std::to_string(extra_targets) : "");
  ParamLayout layout(cfg);
  Parameters<double> P(layout);
  testing::init_general(P, layout, 0.3, 7);
  LoraConfig lc = lora_all(2, dropout);
  if (cfg.moe()) {  // the MLP is the experts: experts.gate_up and experts.down for gate/up/down
    for (const LoraTarget t : {LoraTarget::kGate, LoraTarget::kUp, LoraTarget::kDown})
      lc.targets &= ~(1u << static_cast<int>(t));
  }
  lc.targets |= extra_targets;
  const LoraLayout ll(cfg, lc);
  const auto n = static_cast<size_t>(ll.numel());
  std::vector<double> lp(n);              // [n] adapters
  std::vector<double> lg(n, 0.0);         // [n] their gradient
  std::vector<double> scratch(n, 0.0);    // [n] the gradients of the finite differences' calls
  std::mt19937_64 rng(13);
  std::normal_distribution<double> d(0.0, 0.4);
  for (auto& v : lp) v = d(rng);  // B != 0, so A's gradient carries signal
  Model<double> m(cfg);
  for (int u = 0; u < layout.num_units(); ++u) m.bind_unit(u, P.params(u), {});  // frozen: no grads
  m.bind_lora(ll, lp, lg);
  m.set_lora_stream(99);
  const int64_t B = 2, T = 5;
  const auto tok = testing::random_tokens(B * T, cfg.vocab, 8);
  auto tgt = testing::random_tokens(B * T, cfg.vocab, 9);
  tgt[1] = -1;
  const double grad_scale = 0.7;
  m.loss_and_grad(tok, tgt, B, T, recompute, grad_scale);
  // The loss with the same dropout masks: loss_and_grad's (its gradient goes to scratch).
  m.bind_lora(ll, lp, scratch);
  const auto f = [&] { return grad_scale * m.loss_and_grad(tok, tgt, B, T, recompute); };
  testing::ErrStats s;
  const double floor = std::max(1e-6, testing::fd_floor(f(), kH, 1e-6));  // the FD's rounding
  for (const auto& a : ll.adapters()) {
    testing::ErrStats sa;
    for (int64_t i = a.a_offset; i < a.b_offset + a.out * 2 * a.experts; ++i) {
      const double num = testing::central_diff5(f, &lp[static_cast<size_t>(i)], kH);
      s.add(lg[static_cast<size_t>(i)], num, floor);
      sa.add(lg[static_cast<size_t>(i)], num, floor);
    }
    EXPECT_LT(sa.max_rel, 1e-6) << tag << " " << a.name;
  }
  s.print("lora " + tag);
  EXPECT_LT(s.max_rel, 1e-6) << tag;
  EXPECT_GT(s.max_grad, 1e-3) << tag;  // the check has signal
}

TEST(Lora, GradcheckUntied) { lora_gradcheck(false, 0.0, false); }
TEST(Lora, GradcheckTied) { lora_gradcheck(true, 0.0, false); }
// Adapters over the family pieces (frozen biases, q/k norms, head_dim != hidden/heads).
// (qwen3 tied with recompute measured 2.1e-6 relative at 2.0e-9 absolute on one small
// coordinate: finite-difference truncation at this std, above the 1e-6 bound.)
TEST(Lora, GradcheckQwenFamilies) {
  lora_gradcheck(false, 0.0, false, testing::small_qwen2());
  lora_gradcheck(false, 0.0, true, testing::small_qwen3());
}
// Mixtral: adapters on q, k, v, o and lm_head over the frozen router and experts (their
// input gradient flows, no weight gradient), then with the experts' adapters too (PEFT's
// target_parameters: both stacks, and each alone); gate/up/down are refused.
TEST(Lora, GradcheckMixtralAttention) {
  lora_gradcheck(false, 0.0, false, testing::small_mixtral());
  lora_gradcheck(true, 0.0, true, testing::small_mixtral(true));
  const uint32_t gu = 1u << static_cast<int>(LoraTarget::kExpertsGateUp);
  const uint32_t dn = 1u << static_cast<int>(LoraTarget::kExpertsDown);
  lora_gradcheck(false, 0.0, false, testing::small_mixtral(), gu | dn);
  lora_gradcheck(true, 0.0, true, testing::small_mixtral(true), gu | dn);
  // (gate_up alone untied with recompute measured 1.4e-6 relative at 6.2e-11 absolute on one
  // coordinate of |g| ~ 4e-5, 1.6e-11 absolute with h halved: rounding of the differences at
  // max |g| 2.3, above the 1e-6 bound; the two below measure 5.8e-7 and 5.0e-8.)
  lora_gradcheck(true, 0.0, false, testing::small_mixtral(true), gu);
  lora_gradcheck(false, 0.0, true, testing::small_mixtral(), dn);
  for (const LoraTarget t : {LoraTarget::kGate, LoraTarget::kUp, LoraTarget::kDown}) {
    LoraConfig l = lora_all(2, 0.0);
    l.targets = (1u << static_cast<int>(LoraTarget::kQ)) | (1u << static_cast<int>(t));
    try {
      const LoraLayout bad(testing::small_mixtral(), l);
      ADD_FAILURE() << "adapters on " << lora_target_name(t) << " of a mixtral were accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("lora.targets"), std::string::npos) << e.what();
    }
  }
}
// gpt-oss: adapters on q, k, v, o, lm_head and both expert stacks over the frozen sinks,
// attention and expert biases, router bias and clamped SwiGLU (LoRA trains no sink).
TEST(Lora, GradcheckGptOss) {
  const uint32_t gu = 1u << static_cast<int>(LoraTarget::kExpertsGateUp);
  const uint32_t dn = 1u << static_cast<int>(LoraTarget::kExpertsDown);
  lora_gradcheck(false, 0.0, false, testing::small_gpt_oss(), gu | dn);
  lora_gradcheck(true, 0.0, true, testing::small_gpt_oss(true), gu | dn);
}
// Qwen3.5's hybrid: adapters on the Gated DeltaNet layer's five projections (PEFT's
// in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj) and on the full layer's q, k, v, o
// (q with its output gate's rows), over the frozen conv1d, A_log, dt_bias and gated norm.
constexpr uint32_t kLinearTargets = (1u << static_cast<int>(LoraTarget::kInQkv)) |
                                    (1u << static_cast<int>(LoraTarget::kInZ)) |
                                    (1u << static_cast<int>(LoraTarget::kInB)) |
                                    (1u << static_cast<int>(LoraTarget::kInA)) |
                                    (1u << static_cast<int>(LoraTarget::kOutProj));
TEST(Lora, GradcheckQwen35GatedDeltaNet) {
  lora_gradcheck(false, 0.0, false, testing::small_qwen35_hybrid(), kLinearTargets);
  lora_gradcheck(true, 0.3, true, testing::small_qwen35_hybrid(true), kLinearTargets);
  // Each Gated DeltaNet layer holds the five, the full layer q, k, v, o only.
  LoraConfig l = lora_all(2, 0.0);
  l.targets |= kLinearTargets;
  const LoraLayout ll(testing::small_qwen35_hybrid(), l);
  for (int t = 0; t < kNumLoraTargets; ++t) {
    const auto target = static_cast<LoraTarget>(t);
    if (!l.has_target(target) || target == LoraTarget::kLmHead) continue;
    EXPECT_EQ(ll.find(0, target) != nullptr, target >= LoraTarget::kInQkv || target >= LoraTarget::kGate) << t;
    EXPECT_EQ(ll.find(1, target) != nullptr, target < LoraTarget::kInQkv) << t;
  }
  EXPECT_EQ(ll.find(0, LoraTarget::kInQkv)->name, "model.layers.0.linear_attn.in_proj_qkv");
  EXPECT_EQ(trainable_counts(testing::small_qwen35_hybrid(), l).trainable, ll.numel());
  // A Gated DeltaNet target on a model without such layers is refused by name; the hybrid
  // takes LoRA and QLoRA.
  const std::vector<std::string> lin = {"finetune.method=lora", "lora.targets=q,in_proj_z", "lora.rank=2"};
  EXPECT_NE(resolve_error(lin, testing::small_qwen35()).find("lora.targets has in_proj_z"),
            std::string::npos);
  EXPECT_EQ(resolve_error(lin, testing::small_qwen35_hybrid()), "");
  EXPECT_EQ(resolve_error({"finetune.method=qlora", "lora.targets=in_proj_qkv,out_proj,q,v", "lora.rank=2"},
                          testing::small_qwen35_hybrid()), "");
}
TEST(Lora, GradcheckDropoutRecompute) {
  lora_gradcheck(false, 0.3, false);
  lora_gradcheck(false, 0.3, true);
}

// Dropout applies in training only, its masks follow the stream, and eval has none.
TEST(Lora, DropoutStream) {
  const Config cfg = testing::small_config();
  ParamLayout layout(cfg);
  Parameters<double> P(layout);
  testing::init_general(P, layout, 0.3, 7);
  const LoraLayout ll(cfg, lora_all(2, 0.5));
  std::vector<double> lp(static_cast<size_t>(ll.numel()), 0.3), lg(lp.size());
  Model<double> m(cfg);
  for (int u = 0; u < layout.num_units(); ++u) m.bind_unit(u, P.params(u), {});
  m.bind_lora(ll, lp, lg);
  const auto tok = testing::random_tokens(8, cfg.vocab, 8);
  const auto tgt = testing::random_tokens(8, cfg.vocab, 9);
  m.set_lora_stream(1);
  const double a = m.loss_and_grad(tok, tgt, 1, 8);
  const double a2 = m.loss_and_grad(tok, tgt, 1, 8);
  m.set_lora_stream(2);
  const double b = m.loss_and_grad(tok, tgt, 1, 8);
  const double eval = m.loss(tok, tgt, 1, 8);
  EXPECT_EQ(a, a2);
  EXPECT_NE(a, b);
  EXPECT_NE(a, eval);
  // With dropout 0 training and eval agree.
  const LoraLayout l0(cfg, lora_all(2, 0.0));
  m.bind_lora(l0, lp, lg);
  EXPECT_NEAR(m.loss_and_grad(tok, tgt, 1, 8), m.loss(tok, tgt, 1, 8), 1e-12);
}

// The engine's view (ParamLayout(cfg, lora)): the base units frozen, one trainable unit
// last whose tensors are the packed adapters (names, shapes, offsets as LoraLayout's);
// its init (init_unit, any slice) is init_lora bit for bit; trainable_only() keeps it alone.
TEST(Lora, AdaptersUnitOfTheParamLayout) {
  for (bool tied : {false, true}) {
    Config cfg = Config::preset("tiny");
    cfg.tied_embeddings = tied;
    const LoraConfig l = lora_all(4, 0.0);
    const LoraLayout ll(cfg, l);
    const ParamLayout base(cfg), full(cfg, l);
    ASSERT_EQ(full.num_units(), base.num_units() + 1);
    const int a = full.adapter_unit();
    ASSERT_EQ(a, base.num_units());
    EXPECT_EQ(base.adapter_unit(), -1);
    for (int u = 0; u < base.num_units(); ++u) EXPECT_TRUE(full.frozen(u)) << u;
    EXPECT_FALSE(full.frozen(a));
    EXPECT_EQ(full.unit(a).numel, ll.numel());
    EXPECT_EQ(full.trainable_numel(), ll.numel());
    EXPECT_EQ(full.total_numel(), base.total_numel() + ll.numel());
    ASSERT_EQ(full.unit(a).num_tensors, static_cast<int>(2 * ll.adapters().size()));
    for (size_t i = 0; i < ll.adapters().size(); ++i) {
      const LoraAdapterInfo& ad = ll.adapters()[i];
      const TensorInfo& A = full.tensors()[static_cast<size_t>(full.unit(a).first_tensor) + 2 * i];
      const TensorInfo& B = full.tensors()[static_cast<size_t>(full.unit(a).first_tensor) + 2 * i + 1];
      EXPECT_EQ(A.name, ad.name + ".lora_A.weight");
      EXPECT_EQ(B.name, ad.name + ".lora_B.weight");
      EXPECT_EQ(A.shape, (std::vector<int64_t>{l.rank, ad.in}));
      EXPECT_EQ(B.shape, (std::vector<int64_t>{ad.out, l.rank}));
      EXPECT_EQ(A.offset, ad.a_offset);
      EXPECT_EQ(B.offset, ad.b_offset);
      EXPECT_TRUE(A.weight_decay && B.weight_decay);
    }
    std::vector<float> want(static_cast<size_t>(ll.numel())), got(want.size());
    init_lora<float>(ll, 99, want);
    const InitOptions init{99, 0.02, true};
    init_unit<float>(full, a, init, got);
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
    // A slice starting mid-tensor, as a stage-3 shard.
    const int64_t begin = ll.numel() / 3, n = ll.numel() / 2;
    std::vector<float> part(static_cast<size_t>(n));
    init_unit_slice<float>(full, a, init, begin, part);
    EXPECT_EQ(0, std::memcmp(want.data() + begin, part.data(), part.size() * sizeof(float)));
    const ParamLayout only = full.trainable_only();
    ASSERT_EQ(only.num_units(), 1);
    EXPECT_EQ(only.adapter_unit(), 0);
    EXPECT_EQ(only.unit(0).first_tensor, 0);
    EXPECT_EQ(only.tensors().size(), 2 * ll.adapters().size());
    EXPECT_EQ(only.tensors().front().unit, 0);
    EXPECT_EQ(only.total_numel(), ll.numel());
  }
}

TEST(Lora, Banner) {
  // PEFT: f"trainable params: {t:,d} || all params: {a:,d} || trainable%: {100 * t / a:.4f}"
  EXPECT_EQ(trainable_banner({1234567, 1234567890}),
            "trainable params: 1,234,567 || all params: 1,234,567,890 || trainable%: 0.1000");
  EXPECT_EQ(trainable_banner({512, 999}),
            "trainable params: 512 || all params: 999 || trainable%: 51.2513");
}

}  // namespace
}  // namespace zt::model

namespace zt::model {
namespace {

// merge_lora (the merged export of `zt convert h5-to-hf` and `zt generate` on adapters):
// the merged base alone computes what the base with its adapters bound computes (the LoRA
// forward checked against PEFT in model.hf.lora_peer), for LoRA and QLoRA (bind_qlora),
// untied and tied with an lm_head adapter (which the merge unties: the embedding keeps
// its values). PEFT's own merge against zt's is model.hf.lora_export.
// A Mixtral (`experts`) has adapters on v, the experts' two stacks and lm_head.
void merge_equals_adapters(bool tied, FinetuneMethod method, bool experts = false) {
  const Config cfg = experts ? testing::small_mixtral(tied) : testing::small_config(tied);
  const std::string tag = std::string(tied ? "tied" : "untied") +
                          (method == FinetuneMethod::kQlora ? " qlora" : " lora") +
                          (experts ? " mixtral experts" : "");
  ParamLayout layout(cfg);
  Parameters<float> P(layout);
  testing::init_general(P, layout, 0.1, 11);
  LoraConfig lc = lora_all(2, 0.0);
  lc.method = method;
  if (experts)
    lc.targets = (1u << static_cast<int>(LoraTarget::kV)) | (1u << static_cast<int>(LoraTarget::kLmHead)) |
                 (1u << static_cast<int>(LoraTarget::kExpertsGateUp)) |
                 (1u << static_cast<int>(LoraTarget::kExpertsDown));
  const LoraLayout ll(cfg, lc);
  std::vector<float> lp(static_cast<size_t>(ll.numel()));  // [numel] adapters, B != 0
  std::mt19937_64 rng(17);
  std::normal_distribution<float> d(0.0f, 0.2f);
  for (auto& v : lp) v = d(rng);
  std::vector<std::vector<float>> base;  // [units][numel]
  for (int u = 0; u < layout.num_units(); ++u) base.emplace_back(P.params(u).begin(), P.params(u).end());

  const MergedWeights m = merge_lora(cfg, base, ll, lp);
  EXPECT_EQ(m.config.tied_embeddings, false) << tag;  // all targets include lm_head
  const ParamLayout out(m.config);
  // The embedding is the base's, bit for bit, even when the head was tied to it.
  const TensorInfo& e = out.find("model.embed_tokens.weight");
  EXPECT_TRUE(std::equal(base[0].begin(), base[0].begin() + e.numel, m.units[0].begin())) << tag;

  Model<float> adapted(cfg), merged(m.config), plain(cfg);
  for (int u = 0; u < layout.num_units(); ++u) {
    adapted.bind_unit(u, base[static_cast<size_t>(u)], {});
    plain.bind_unit(u, base[static_cast<size_t>(u)], {});
  }
  for (int u = 0; u < out.num_units(); ++u) merged.bind_unit(u, m.units[static_cast<size_t>(u)], {});
  adapted.bind_lora(ll, lp, {});
  std::vector<std::span<const float>> spans(base.begin(), base.end());
  const QloraBase q(ll, layout, spans);
  if (method == FinetuneMethod::kQlora) adapted.bind_qlora(q);

  const int64_t T = cfg.context;
  const auto tok = testing::random_tokens(T, cfg.vocab, 23);
  std::vector<float> la(static_cast<size_t>(cfg.vocab)), lm(la.size()), lb(la.size());
  adapted.logits_last(tok, T, la);
  merged.logits_last(tok, T, lm);
  plain.logits_last(tok, T, lb);
  double diff = 0, moved = 0, scale = 0;
  for (size_t i = 0; i < la.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(la[i] - lm[i])));
    moved = std::max(moved, static_cast<double>(std::abs(la[i] - lb[i])));
    scale = std::max(scale, static_cast<double>(std::abs(la[i])));
  }
  std::printf("[merge] %s: max |logit adapters - merged| %.3e (max |logit| %.2f; the adapters move "
              "them by %.3f)\n", tag.c_str(), diff, scale, moved);
  // fp32 rounding of the merged weights and of two summation orders: 6e-8 .. 1.6e-7
  // measured; a merge without QLoRA's NF4 round trip misses by ~1e-2.
  EXPECT_LE(diff, 2e-6 * std::max(1.0, scale)) << tag;
  EXPECT_GT(moved, 1e-2) << tag;
}

TEST(LoraMerge, UntiedLora) { merge_equals_adapters(false, FinetuneMethod::kLora); }
TEST(LoraMerge, TiedLora) { merge_equals_adapters(true, FinetuneMethod::kLora); }
TEST(LoraMerge, UntiedQlora) { merge_equals_adapters(false, FinetuneMethod::kQlora); }
TEST(LoraMerge, TiedQlora) { merge_equals_adapters(true, FinetuneMethod::kQlora); }
TEST(LoraMerge, MixtralExperts) {
  merge_equals_adapters(false, FinetuneMethod::kLora, true);
  merge_equals_adapters(true, FinetuneMethod::kLora, true);
}

}  // namespace
}  // namespace zt::model
