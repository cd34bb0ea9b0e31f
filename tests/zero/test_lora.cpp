// LoRA / QLoRA on the ZeRO engine (docs/zero.md "Frozen units"): the base frozen (no
// gradient, no state, bitwise unchanged by steps), the adapters an ordinary unit. Every
// stage, hpZ and accumulation trains like one process running the whole global batch
// through Model::bind_lora (and bind_qlora) directly: the reference is computed here,
// without the engine, with the model's own LoRA path (checked against finite differences
// in tests/model/test_lora.cpp and against PEFT in tests/model/hf/lora_peer_test.py).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <unistd.h>
#include <string>

#include "zero_fixtures.hpp"
#include "zt/core/error.hpp"
#include "zt/model/lora.hpp"

namespace zt::zero::testing {
namespace {

constexpr double kTol = 1e-5;  // relative, fp32 (as the full-model equivalence tests)

model::LoraConfig lora_config(model::FinetuneMethod method, double dropout = 0.0) {
  model::LoraConfig l;
  l.method = method;
  l.rank = 4;
  l.alpha = 8.0;
  l.dropout = dropout;
  l.targets = model::kProjectionTargets;  // every projection and lm_head
  return l;
}

struct LoraReference {
  std::vector<double> losses, norms;
  std::vector<float> adapters;  // [lora numel] after the last step
};

// One process: the base initialised as the engine's (InitOptions), frozen; the adapters
// initialised by init_lora (PEFT's init) and trained with the whole global batch of
// every step, the norm over the adapters' gradient only, clipping, AdamW with the decay
// rule of the adapters' unit.
LoraReference lora_reference(const model::Config& cfg, const model::LoraConfig& lc, const Hyper& h,
                             int n) {
  const int64_t G = static_cast<int64_t>(n) * h.accum * h.B;
  model::Model<float> m(cfg, G, h.T);
  model::Parameters<float> base(m.layout());
  base.init(h.init);
  for (int u = 0; u < base.num_units(); ++u) m.bind_unit(u, base.params(u), {});
  const model::LoraLayout ll(cfg, lc);
  const model::ParamLayout full(cfg, lc);
  const int a_unit = full.adapter_unit();
  std::vector<float> a(static_cast<size_t>(ll.numel())), g(a.size()), mm(a.size(), 0.0f), vv(a.size(), 0.0f);
  model::init_lora<float>(ll, h.init.seed, a);
  m.bind_lora(ll, a, g);
  std::vector<std::span<const float>> spans;
  for (int u = 0; u < base.num_units(); ++u) spans.push_back(base.params(u));
  std::unique_ptr<model::QloraBase> q;
  if (lc.method == model::FinetuneMethod::kQlora) {
    q = std::make_unique<model::QloraBase>(ll, m.layout(), spans);
    m.bind_qlora(*q);
  }
  LoraReference out;
  for (int s = 0; s < h.steps; ++s) {
    std::fill(g.begin(), g.end(), 0.0f);
    const Batch b = make_batch(s * G, G, h.T, cfg.vocab);
    out.losses.push_back(m.loss_and_grad(b.tokens, b.targets, G, h.T, false, 1.0));
    double sq = 0;
    for (float x : g) sq += static_cast<double>(x) * x;
    const double norm = std::sqrt(sq);
    out.norms.push_back(norm);
    const double coef = (h.grad_clip > 0 && norm > h.grad_clip) ? h.grad_clip / (norm + 1e-6) : 1.0;
    for (float& x : g) x = static_cast<float>(x * coef);
    model::AdamWConfig ad = h.adamw;
    ad.lr = h.lr(s);
    model::adamw_unit_slice<float>(full, a_unit, 0, std::span<float>(a), g, mm, vv, ad, s + 1);
  }
  out.adapters = a;
  return out;
}

struct LoraCase {
  int stage;
  int accum;
  int rpn;   // simulated ranks per node (0: one node)
  int hpz;   // zero.hpz_partition_size
  bool tied;
  model::FinetuneMethod method = model::FinetuneMethod::kLora;
};

std::string case_name(const LoraCase& c) {
  return std::string(c.method == model::FinetuneMethod::kQlora ? "qlora" : "lora") + "_stage" +
         std::to_string(c.stage) + "_accum" + std::to_string(c.accum) +
         (c.rpn ? "_rpn" + std::to_string(c.rpn) : "") + (c.hpz != 1 ? "_hpz" : "") +
         (c.tied ? "_tied" : "");
}

class LoraEquivalence : public ::testing::TestWithParam<LoraCase> {};

TEST_P(LoraEquivalence, MatchesSingleProcessBindLora) {
  const LoraCase c = GetParam();
  const int n = world_size();
  if (c.rpn > 0 && n % c.rpn != 0) GTEST_SKIP() << "needs a world size divisible by " << c.rpn;
  const model::Config cfg = reduced_config(c.tied);
  const model::LoraConfig lc = lora_config(c.method);
  Hyper h;
  h.accum = c.accum;
  h.steps = 8;
  LoraReference ref;
  if (world_rank() == 0) ref = lora_reference(cfg, lc, h, n);
  ref.losses.resize(static_cast<size_t>(h.steps));
  ref.norms.resize(static_cast<size_t>(h.steps));
  ref.adapters.resize(static_cast<size_t>(model::LoraLayout(cfg, lc).numel()));
  MPI_Bcast(ref.losses.data(), h.steps, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  MPI_Bcast(ref.norms.data(), h.steps, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  MPI_Bcast(ref.adapters.data(), static_cast<int>(ref.adapters.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);

  Comms comms = make_comms(c.rpn);
  EngineOptions o = engine_options(h, c.stage);
  o.hpz_partition_size = c.hpz;
  o.lora = lc;
  Engine e(cfg, *comms.world, comms.node.get(), comms.cross.get(), o, h.init);
  const model::ParamLayout& layout = e.model().layout();
  ASSERT_EQ(layout.adapter_unit(), layout.num_units() - 1);
  model::Parameters<float> before(layout);
  e.gather_full_params(before);
  const EngineRun run = engine_run(e, cfg, h, h.steps);

  const int a = layout.adapter_unit();
  const double loss_diff = max_rel_diff(run.losses, ref.losses);
  const double norm_diff = max_rel_diff(run.norms, ref.norms);
  const double l2 = max_rel_l2({run.params[static_cast<size_t>(a)]}, {ref.adapters});
  if (world_rank() == 0)
    std::printf("[ lora  ] np %d %-28s: max rel diff loss %.2e norm %.2e adapters L2 %.2e "
                "(loss %.4f -> %.4f)\n",
                n, case_name(c).c_str(), loss_diff, norm_diff, l2, run.losses.front(),
                run.losses.back());
  EXPECT_LT(loss_diff, kTol) << e.describe();
  EXPECT_LT(norm_diff, 10 * kTol) << e.describe();
  EXPECT_LT(l2, kTol) << e.describe();
  // Training happened (the tied runs' lm_head adapter on the shared embedding climbs out
  // of the init more slowly: not asserted there, as in test_equivalence.cpp).
  if (!c.tied) {
    EXPECT_LT(run.losses.back(), run.losses.front());
  }
  // The base: bitwise what it was before the steps.
  for (int u = 0; u < layout.num_units(); ++u) {
    if (!layout.frozen(u)) continue;
    const std::span<const float> b = before.params(u);
    ASSERT_EQ(0, std::memcmp(b.data(), run.params[static_cast<size_t>(u)].data(), b.size_bytes()))
        << "frozen unit " << layout.unit(u).name << " changed";
  }
  // Frozen units hold no gradients and no optimizer state: the adapters' alone.
  const MemoryStats mem = e.memory();
  const UnitPartition& pa = e.partition().unit(a);
  const size_t grads = static_cast<size_t>(c.stage <= 1 ? pa.padded : pa.shard) * sizeof(float);
  const size_t moments = static_cast<size_t>(c.stage == 0 ? pa.padded : pa.shard) * 2 * sizeof(float);
  EXPECT_EQ(mem.grads, grads);
  EXPECT_EQ(mem.optimizer, moments);
}

std::vector<LoraCase> cases() {
  std::vector<LoraCase> v;
  for (int stage = 0; stage <= 3; ++stage)
    for (int accum : {1, 2}) v.push_back({stage, accum, 0, 1, false});
  v.push_back({3, 2, 2, 0, false});  // hpZ over simulated nodes of 2
  v.push_back({3, 1, 2, 0, true});   // tied: lm_head's adapter on the shared embedding
  v.push_back({2, 2, 0, 1, true});
  v.push_back({0, 1, 0, 1, false, model::FinetuneMethod::kQlora});
  v.push_back({3, 2, 2, 0, false, model::FinetuneMethod::kQlora});
  v.push_back({3, 1, 0, 1, true, model::FinetuneMethod::kQlora});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cover, LoraEquivalence, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<LoraCase>& i) { return case_name(i.param); });

// QLoRA holds its targeted W as NF4 only (ParamLayout(cfg, lora) leaves them out): the
// engine's parameters are the non-targeted tensors (counted from the whole model's layout
// minus each targeted W, padded as the partition pads) + the adapters + the NF4 base
// (QloraBase::bytes of a base quantised here from the whole model's initial units). And
// the numerics are those of the whole-model path (Model(cfg) with every W in fp32 units,
// QloraBase built from them, bind_qlora: what the engine ran before the units left the
// W out): after training, the engine's eval loss and last logits equal that model's on
// the engine's adapters bit for bit, at stages 0 and 3, untied and tied.
TEST(QloraEngine, HoldsNoFp32TargetedWAndComputesAsTheWholeModel) {
  for (const bool tied : {false, true})
    for (const int stage : {0, 3}) {
      SCOPED_TRACE(std::string(tied ? "tied" : "untied") + " stage " + std::to_string(stage));
      const model::Config cfg = reduced_config(tied);
      const model::LoraConfig lc = lora_config(model::FinetuneMethod::kQlora);
      Hyper h;
      h.steps = 3;
      Comms comms = make_comms(0);
      EngineOptions o = engine_options(h, stage);
      o.lora = lc;
      Engine e(cfg, *comms.world, comms.node.get(), comms.cross.get(), o, h.init);
      engine_run(e, cfg, h, h.steps);

      // The whole model's units, initialised as the engine initialises (by name, element).
      const model::ParamLayout whole(cfg);
      model::Parameters<float> units(whole);
      units.init(h.init);
      std::vector<std::span<const float>> spans;
      for (int u = 0; u < units.num_units(); ++u) spans.push_back(units.params(u));
      const model::LoraLayout ll(cfg, lc);
      const model::QloraBase q(ll, whole, spans);

      // Bytes: the targeted W counted out of the whole layout by their shapes.
      const model::ParamLayout& layout = e.model().layout();
      int64_t targeted = 0;
      for (const model::LoraAdapterInfo& a : ll.adapters())
        if (!(tied && a.target == model::LoraTarget::kLmHead)) targeted += a.in * a.out;
      int64_t held = 0;
      for (int u = 0; u < layout.num_units(); ++u)
        if (u != layout.adapter_unit()) held += layout.unit(u).numel;
      EXPECT_EQ(held, whole.total_numel() - targeted);
      const int n = world_size();
      size_t params = 0;  // stage 0: every unit whole; stage 3: this rank's shards
      for (int u = 0; u < layout.num_units(); ++u) {
        const int64_t padded = padded_numel(layout.unit(u).numel, n, 16);
        params += static_cast<size_t>(stage == 0 ? padded : padded / n) * sizeof(float);
      }
      const MemoryStats mem = e.memory();
      EXPECT_EQ(mem.full_params + mem.param_shards, params + static_cast<size_t>(q.bytes()));

      // Numerics: the whole-model path on the engine's adapters.
      model::Parameters<float> trained(layout);
      e.gather_full_params(trained);
      const std::span<const float> adapters = trained.params(layout.adapter_unit());
      model::Model<float> m(cfg, h.B, h.T);
      for (int u = 0; u < units.num_units(); ++u) m.bind_unit(u, units.params(u), {});
      m.bind_lora(ll, adapters, {});
      m.bind_qlora(q);
      const Batch b = make_batch(4242 + world_rank(), h.B, h.T, cfg.vocab);
      const double want = m.loss(b.tokens, b.targets, h.B, h.T);
      const double got = e.eval_loss(b.tokens, b.targets, h.B, h.T);
      EXPECT_EQ(std::memcmp(&want, &got, sizeof want), 0) << want << " vs " << got;
      std::vector<float> lw(static_cast<size_t>(cfg.vocab)), lg(lw.size());  // [vocab] each
      const std::vector<int32_t> seq(b.tokens.begin(), b.tokens.begin() + h.T);
      m.logits_last(seq, h.T, lw);
      e.logits_last(seq, h.T, lg);
      EXPECT_EQ(lw, lg);
    }
}

// The same with bf16 weights on the host-staged space (the widened-bf16 model: Model<float>
// on the bf16 rounding of the weights): the NF4 base is quantised from what the run
// holds as the base, the fp32 values with bf16-mixed (the fp32 master) and their bf16
// rounding with bf16-true (no master); the model computes on the bf16 rounding of the
// other tensors and of the adapters. The engine's eval loss equals that whole-model
// reference bit for bit, at stages 0 and 3.
TEST(QloraEngine, Bf16WeightsQuantiseWhatTheRunHolds) {
  const auto rounded = [](std::span<const float> v) {
    std::vector<float> r(v.size());  // [n] the bf16 rounding of v, widened
    for (size_t i = 0; i < v.size(); ++i) r[i] = static_cast<float>(bf16(v[i]));
    return r;
  };
  for (const std::string precision : {"bf16-mixed", "bf16-true"})
    for (const int stage : {0, 3}) {
      SCOPED_TRACE(precision + " stage " + std::to_string(stage));
      const model::Config cfg = reduced_config();
      const model::LoraConfig lc = lora_config(model::FinetuneMethod::kQlora);
      Hyper h;
      h.steps = 2;
      Comms comms = make_comms(0);
      EngineOptions o = engine_options(h, stage);
      o.lora = lc;
      o.precision = precision;
      o.device = EngineOptions::Device::kHostStaged;
      Engine e(cfg, *comms.world, comms.node.get(), comms.cross.get(), o, h.init, comms.world.get());
      engine_run(e, cfg, h, h.steps);

      const model::ParamLayout whole(cfg);
      model::Parameters<float> units(whole);
      units.init(h.init);
      std::vector<std::vector<float>> narrow;  // [units][numel] the bf16 rounding
      std::vector<std::span<const float>> fp32, bf16s;
      for (int u = 0; u < units.num_units(); ++u) narrow.push_back(rounded(units.params(u)));
      for (int u = 0; u < units.num_units(); ++u) {
        fp32.push_back(units.params(u));
        bf16s.push_back(narrow[static_cast<size_t>(u)]);
      }
      const model::LoraLayout ll(cfg, lc);
      const model::QloraBase q(ll, whole, precision == "bf16-true" ? bf16s : fp32);
      model::Parameters<float> trained(e.model().layout());
      e.gather_full_params(trained);
      const std::vector<float> adapters = rounded(trained.params(e.model().layout().adapter_unit()));
      model::Model<float> m(cfg, h.B, h.T);
      for (int u = 0; u < whole.num_units(); ++u) m.bind_unit(u, bf16s[static_cast<size_t>(u)], {});
      m.bind_lora(ll, adapters, {});
      m.bind_qlora(q);
      const Batch b = make_batch(777 + world_rank(), h.B, h.T, cfg.vocab);
      const double want = m.loss(b.tokens, b.targets, h.B, h.T);
      const double got = e.eval_loss(b.tokens, b.targets, h.B, h.T);
      EXPECT_EQ(std::memcmp(&want, &got, sizeof want), 0) << want << " vs " << got;
    }
}

// One engine of `cfg` with the adapters `lc` (options `more` applied), trained h.steps.
template <class More>
EngineRun lora_engine_run(const model::Config& cfg, const Hyper& h, int stage,
                          const model::LoraConfig& lc, More&& more) {
  Comms comms = make_comms(0);
  EngineOptions o = engine_options(h, stage);
  o.lora = lc;
  more(o);
  // (control: the host-memory communicator a space taking device memory needs)
  Engine e(cfg, *comms.world, comms.node.get(), comms.cross.get(), o, h.init, comms.world.get());
  EngineRun r = engine_run(e, cfg, h, h.steps);
  // A checkpoint's view (owned slices) of every unit: the frozen ones have no moments.
  for (int u = 0; u < e.model().layout().num_units(); ++u)
    EXPECT_EQ(e.owned(u).m.empty(), e.model().layout().frozen(u)) << "unit " << u;
  return r;
}
EngineRun lora_engine_run(const model::Config& cfg, const Hyper& h, int stage, const model::LoraConfig& lc) {
  return lora_engine_run(cfg, h, stage, lc, [](EngineOptions&) {});
}

// Two runs that must train alike: losses and every unit within kTol.
void expect_close(const EngineRun& a, const EngineRun& b) {
  EXPECT_LT(max_rel_diff(a.losses, b.losses), kTol);
  EXPECT_LT(max_rel_l2(a.params, b.params), kTol);
}

// A bigger micro-batch equals accumulation over smaller ones, stage 3 at this world size.
TEST(LoraEngine, AccumulationEqualsBiggerMicroBatch) {
  const model::Config cfg = reduced_config();
  Hyper h1;
  h1.B = 2;
  h1.steps = 4;
  Hyper h2 = h1;
  h2.B = 1;
  h2.accum = 2;
  // Same sequences per step and rank: B = 2 takes sequences (2r, 2r + 1) of a step's
  // global batch; accum 2 takes (r, n + r). At np 1 they coincide.
  if (world_size() != 1) GTEST_SKIP() << "the two runs see the same sequences at np 1 only";
  const model::LoraConfig lc = lora_config(model::FinetuneMethod::kLora);
  expect_close(lora_engine_run(cfg, h1, 3, lc), lora_engine_run(cfg, h2, 3, lc));
}

// Dropout masks depend on (step, micro-step, rank) only: stage 3 with hpZ draws what
// stage 0 draws, and the runs agree.
TEST(LoraEngine, DropoutSameOnEveryStage) {
  const model::Config cfg = reduced_config();
  Hyper h;
  h.steps = 4;
  const model::LoraConfig lc = lora_config(model::FinetuneMethod::kLora, 0.25);
  expect_close(lora_engine_run(cfg, h, 0, lc), lora_engine_run(cfg, h, 3, lc));
}

// The host-staged space (the device path's staging and copies, on the host; docs/zero.md
// "Memory spaces"): the same run bit for bit, and owned() of frozen units through the
// checkout copies a device space takes. bf16-mixed (the widened-bf16 test model) trains.
TEST(LoraEngine, HostStagedEqualsHost) {
  const model::Config cfg = reduced_config();
  Hyper h;
  h.steps = 3;
  const model::LoraConfig lc = lora_config(model::FinetuneMethod::kQlora);
  for (int stage : {0, 3}) {
    const EngineRun host = lora_engine_run(cfg, h, stage, lc);
    const EngineRun staged = lora_engine_run(cfg, h, stage, lc, [](EngineOptions& o) {
      o.device = EngineOptions::Device::kHostStaged;
    });
    EXPECT_EQ(host.losses, staged.losses) << "stage " << stage;
    EXPECT_EQ(host.params, staged.params) << "stage " << stage;
  }
  // bf16-mixed: the model computes on the bf16 rounding of base and adapters; the losses
  // stay near the fp32 run's (measured 7e-6 .. 1.8e-5 relative at np 1-4; bound 1e-4, about 5x the largest).
  // bf16-true (the GPU's LoRA runs it too: the adapters' unit stored in bf16, AdamW on its
  // fp32 widening) rounds the adapters' updates to bf16 at every step (measured 7.3e-6 ..
  // 1.8e-5; the same bound), and differs from bf16-mixed's run (no fp32 master).
  const model::LoraConfig l = lora_config(model::FinetuneMethod::kLora);
  const EngineRun fp32 = lora_engine_run(cfg, h, 3, l);
  std::vector<std::vector<double>> bf16_losses;  // [bf16-mixed, bf16-true][steps]
  for (const std::string precision : {"bf16-mixed", "bf16-true"}) {
    const EngineRun bf16 = lora_engine_run(cfg, h, 3, l, [&](EngineOptions& o) {
      o.device = EngineOptions::Device::kHostStaged;
      o.precision = precision;
    });
    const double d = max_rel_diff(bf16.losses, fp32.losses);
    if (world_rank() == 0)
      std::printf("[ lora  ] %s (host-staged) vs fp32 losses: max rel diff %.2e\n", precision.c_str(), d);
    EXPECT_LT(d, 1e-4) << precision;
    EXPECT_GT(d, 0.0) << precision;  // the bf16 weights were used
    bf16_losses.push_back(bf16.losses);
  }
  EXPECT_NE(bf16_losses[0], bf16_losses[1]);
}

// NaN skipping applies to the adapters: a NaN in one adapter element (rank 0's slice)
// makes the step's gradient non-finite; the step is skipped, the adapters' unit is named,
// and nothing changes (the base is never touched either way).
TEST(LoraEngine, NonFiniteAdapterStepIsSkipped) {
  const model::Config cfg = reduced_config();
  Hyper h;
  Comms comms = make_comms(0);
  EngineOptions o = engine_options(h, 3);
  o.lora = lora_config(model::FinetuneMethod::kLora);
  Engine e(cfg, *comms.world, comms.node.get(), comms.cross.get(), o, h.init);
  engine_run(e, cfg, h, 1);  // B != 0 after a step: a NaN in A reaches the loss
  const int a = e.model().layout().adapter_unit();
  const OwnedSlice sl = e.owned(a);
  if (world_rank() == 0 && sl.count > 0) sl.params[0] = std::numeric_limits<float>::quiet_NaN();
  e.after_load();
  model::Parameters<float> before(e.model().layout());
  e.gather_full_params(before);
  const Batch b = make_batch(1000, h.B, h.T, cfg.vocab);
  e.micro_step(b.tokens, b.targets, h.B, h.T, false, 1.0);
  const StepStats st = e.step(1e-3);
  EXPECT_TRUE(st.skipped);
  EXPECT_NE(st.bad_units.find("lora"), std::string::npos) << st.bad_units;
  EXPECT_EQ(st.bad_units.find("layers."), std::string::npos) << st.bad_units;  // frozen: not checked
  model::Parameters<float> after(e.model().layout());
  e.gather_full_params(after);
  for (int u = 0; u < after.num_units(); ++u)
    EXPECT_EQ(0, std::memcmp(before.params(u).data(), after.params(u).data(), before.params(u).size_bytes()))
        << "unit " << u << " changed in a skipped step";
}

// Offload (docs/offload.md) with frozen units: the store holds the adapters' state only;
// the optimizer in host memory or on NVMe, the stage-3 shards (frozen ones too) on NVMe,
// train bit for bit as without offload (the same CPU AdamW on the same floats), and the
// base stays bitwise unchanged.
TEST(LoraEngine, OffloadEqualsNoOffload) {
  const model::Config cfg = reduced_config();
  Hyper h;
  h.steps = 4;
  h.accum = 2;
  std::string dir = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/zt-lora-offload-XXXXXX";
  if (world_rank() == 0 && ::mkdtemp(dir.data()) == nullptr) FAIL() << "mkdtemp " << dir;
  MPI_Bcast(dir.data(), static_cast<int>(dir.size()), MPI_CHAR, 0, MPI_COMM_WORLD);
  const auto run = [&](int stage, offload::Home opt_home, offload::Home params_home) {
    return lora_engine_run(cfg, h, stage, lora_config(model::FinetuneMethod::kQlora), [&](EngineOptions& o) {
      o.offload.optimizer = opt_home;
      o.offload.params = params_home;
      o.offload.nvme_path = dir;
      o.offload.subgroup_bytes = 48 << 10;
    });
  };
  for (int stage : {1, 3}) {
    const EngineRun plain = run(stage, offload::Home::kNone, offload::Home::kNone);
    const EngineRun cpu = run(stage, offload::Home::kCpu, offload::Home::kNone);
    EXPECT_EQ(plain.losses, cpu.losses) << "stage " << stage;
    EXPECT_EQ(plain.params, cpu.params) << "stage " << stage;
    if (stage == 3) {
      const EngineRun nvme = run(stage, offload::Home::kNvme, offload::Home::kNvme);
      EXPECT_EQ(plain.losses, nvme.losses);
      EXPECT_EQ(plain.params, nvme.params);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace zt::zero::testing
