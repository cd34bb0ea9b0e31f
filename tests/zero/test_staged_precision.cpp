// The host-staged space at train.precision = bf16-mixed and bf16-true (the device's
// precisions, on a CPU): bf16-mixed computes with the bf16 cast of the fp32 master,
// bf16-true stores bf16 parameters and tracks an independent reference, their checkpoint
// slices resume and load across precisions, and the precisions a space cannot run are
// refused by name. The fp32 path bit for bit against the host space is test_staged.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "staged_fixtures.hpp"
#include "zero_fixtures.hpp"
#include "zt/core/error.hpp"

namespace zt::zero::testing {
namespace {

// train.precision = bf16-mixed on the host-staged space (its model takes bf16 weights
// and computes with Model<float> on their widening): the engine's bf16 path (bf16 casts
// of the fp32 master, bf16 stage-3 gathers and hpZ secondaries) on a CPU.
//  - What the model computes with is the bf16 cast of the fp32 master, bitwise: the
//    engine's eval loss and logits equal Model<float>'s on the rounded gathered master.
//  - Training tracks an independent single-process reference that rounds its weights
//    the same way (fp32 gradients, norm, clipping, AdamW and master), closer than it
//    tracks the fp32 reference.
//  - The stage-3 gather buffers are bf16: half the bytes of fp32.
TEST(Staged, Bf16MixedComputesWithTheBf16CastOfTheMaster) {
  const int n = world_size();
  const model::Config cfg = reduced_config();
  Hyper h;
  h.accum = 2;
  h.steps = 3;
  const ReferenceRun ref_bf16 = reference_run(cfg, h, n, /*bf16_weights=*/true);
  const ReferenceRun ref_fp32 = reference_run(cfg, h, n);
  const std::vector<StagedCase> cases = {
      {"stage0", 0, 0, 1},
      {"stage1 rpn2", 1, 2, 1},
      {"stage2", 2, 0, 1},
      {"stage3", 3, 0, 1},
      {"stage3 rpn2 hpZ", 3, 2, 0},
      {"stage3 rpn2 hpZ qgZ", 3, 2, 0, false, true},
  };
  for (StagedCase c : cases) {
    if (c.rpn > 0 && n % c.rpn != 0) continue;
    c.precision = "bf16-mixed";
    Comms comms = make_comms(c.rpn);
    Engine e = make_engine(c, EngineOptions::Device::kHostStaged, cfg, h, comms);
    const EngineRun run = engine_run(e, cfg, h, h.steps);

    // The weights the model saw: eval loss and logits of Model<float> on the rounded master.
    model::Model<float> m(cfg, h.B, h.T);
    model::Parameters<float> rounded(m.layout());
    for (int u = 0; u < rounded.num_units(); ++u)
      std::transform(run.params[static_cast<size_t>(u)].begin(),
                     run.params[static_cast<size_t>(u)].end(), rounded.params(u).begin(),
                     bf16_round);
    rounded.bind(m);
    const Batch b = make_batch(7, h.B, h.T, cfg.vocab);
    EXPECT_EQ(e.eval_loss(b.tokens, b.targets, h.B, h.T), m.loss(b.tokens, b.targets, h.B, h.T))
        << c.name << ": eval loss on other weights than the bf16 master cast";
    std::vector<float> le(static_cast<size_t>(cfg.vocab)), lm(le.size());
    e.logits_last(b.tokens, h.T, le);
    m.logits_last(b.tokens, h.T, lm);
    std::transform(lm.begin(), lm.end(), lm.begin(), bf16_round);  // the bf16 model's output
    EXPECT_EQ(le, lm) << c.name << ": logits_last";

    // Training against the references (the engine's sums differ in order only).
    const double to_bf16 = max_rel_l2(run.params, ref_bf16.params);
    const double to_fp32 = max_rel_l2(run.params, ref_fp32.params);
    const double loss_diff = max_rel_diff(run.losses, ref_bf16.losses);
    EXPECT_LT(loss_diff, c.qg ? 1e-3 : 1e-6) << c.name << ": losses against the bf16-weight reference";
    EXPECT_LT(to_bf16, c.qg ? 2e-2 : 2e-5) << c.name << ": parameters (L2) against it";
    if (!c.qg) {
      EXPECT_LT(to_bf16 * 10, to_fp32) << c.name << ": closer to fp32 than to bf16?";
    }

    const MemoryStats mem = e.memory();
    if (c.stage == 3) {
      Comms comms32 = make_comms(c.rpn);
      StagedCase c32 = c;
      c32.precision = "fp32";
      Engine e32 = make_engine(c32, EngineOptions::Device::kHostStaged, cfg, h, comms32);
      EXPECT_EQ(2 * mem.gather_buffers, e32.memory().gather_buffers) << c.name;
      EXPECT_EQ(2 * mem.secondary_shards, e32.memory().secondary_shards) << c.name;
    }
    if (world_rank() == 0)
      std::printf("[ staged ] np %d %-20s bf16-mixed: losses %.6f -> %.6f (rel %.2e to the "
                  "bf16 reference), parameters rel L2 %.2e to it, %.2e to fp32\n",
                  n, c.name.c_str(), run.losses.front(), run.losses.back(), loss_diff, to_bf16,
                  to_fp32);
  }
}

// The independent reference of train.precision = bf16-true: one process, the whole global
// batch per step (as reference_run), but the parameters are bf16 values (held widened in
// fp32, so Model<float> computes with exactly the bf16 weights), there is no fp32 master,
// and AdamW is written out here from its formula (PyTorch's AdamW, decoupled decay on the
// 2-D weights) in fp32 per element with fp32 moments, its result rounded to bf16 where
// bf16-true stores it. Gradients stay fp32 (the engine accumulates and reduces fp32 and
// does not round them: docs/zero.md, "bf16-true").
ReferenceRun bf16_true_reference(const model::Config& cfg, const Hyper& h, int n) {
  const int64_t G = static_cast<int64_t>(n) * h.accum * h.B;
  model::Model<float> m(cfg, G, h.T);
  model::Parameters<float> p(m.layout());
  p.init(h.init);
  for (int u = 0; u < p.num_units(); ++u)
    std::transform(p.params(u).begin(), p.params(u).end(), p.params(u).begin(), bf16_round);
  p.bind(m);
  const int units = p.num_units();
  std::vector<std::vector<float>> mm(static_cast<size_t>(units)), vv(mm.size());  // per unit [numel]
  for (int u = 0; u < units; ++u) {
    mm[static_cast<size_t>(u)].assign(p.params(u).size(), 0.0f);
    vv[static_cast<size_t>(u)].assign(p.params(u).size(), 0.0f);
  }
  ReferenceRun out;
  for (int s = 0; s < h.steps; ++s) {
    p.zero_grads();
    const Batch b = make_batch(s * G, G, h.T, cfg.vocab);
    out.losses.push_back(m.loss_and_grad(b.tokens, b.targets, G, h.T, false, 1.0));
    double sq = 0;
    for (int u = 0; u < units; ++u)
      for (float g : p.grads(u)) sq += static_cast<double>(g) * g;
    const double norm = std::sqrt(sq);
    out.norms.push_back(norm);
    const double coef = (h.grad_clip > 0 && norm > h.grad_clip) ? h.grad_clip / (norm + 1e-6) : 1.0;
    const double lr = h.lr(s), b1 = h.adamw.beta1, b2 = h.adamw.beta2;
    const double t = s + 1;
    const float step_size = static_cast<float>(lr / (1.0 - std::pow(b1, t)));
    const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(b2, t)));
    for (const model::TensorInfo& ti : m.layout().tensors()) {
      const float decay = static_cast<float>(1.0 - lr * (ti.weight_decay ? h.adamw.weight_decay : 0.0));
      float* w = p.params(ti.unit).data() + ti.offset;
      const float* g = p.grads(ti.unit).data() + ti.offset;
      float* mi = mm[static_cast<size_t>(ti.unit)].data() + ti.offset;
      float* vi = vv[static_cast<size_t>(ti.unit)].data() + ti.offset;
      for (int64_t k = 0; k < ti.numel; ++k) {
        const float gk = static_cast<float>(g[k] * coef);
        mi[k] = static_cast<float>(b1) * mi[k] + static_cast<float>(1.0 - b1) * gk;
        vi[k] = static_cast<float>(b2) * vi[k] + static_cast<float>(1.0 - b2) * gk * gk;
        const float denom = std::sqrt(vi[k]) * inv_sqrt_bc2 + static_cast<float>(h.adamw.eps);
        w[k] = bf16_round(w[k] * decay - step_size * mi[k] / denom);  // stored as bf16
      }
    }
  }
  for (int u = 0; u < units; ++u) out.params.emplace_back(p.params(u).begin(), p.params(u).end());
  return out;
}

// One bf16 unit in the last place at x (the spacing of bf16 values around |x|).
float bf16_ulp(float x) {
  const float a = std::fabs(x);
  if (a < 1e-30f) return 1e-30f;
  return std::ldexp(1.0f, std::ilogb(a) - 7);  // 8 significant bits
}

// train.precision = bf16-true on the host-staged space: bf16 parameters, no fp32 master.
//  - Every stored parameter is a bf16 value, and the run tracks the reference above:
//    losses within 1e-6 relative, fewer than 0.5% of the parameters off it, their L2
//    distance below 1e-4 relative and at least 10x below the distance to the bf16-mixed
//    reference (so the comparison tells the two precisions apart). Why not bitwise: the
//    engine sums gradients in another order (per micro-step and rank, then reduced) and
//    scales by a float clip factor, so an fp32 update can differ in its last bits. That
//    flips the bf16 rounding of an element whose update lands near a rounding midpoint
//    (1 ulp), and where a gradient is near zero Adam's m / sqrt(v) is near +-1 for
//    either sign, so a last-bit change of the gradient can move that element by a whole
//    update (many ulps): rare elements, bounded by count and in L2, as for bf16-mixed.
//  - Memory: the parameters take 2 bytes each (bf16-mixed: 4 + 2 at stages 0-2, 4 at
//    stage 3); moments stay fp32, equal to bf16-mixed's.
//  - Checkpoint slices carry the widened bf16 parameters; a fresh bf16-true engine
//    loaded from them resumes bitwise, an fp32 engine loaded from them starts from
//    exactly those values, and a bf16-true engine loaded from fp32 slices rounds them.
TEST(Staged, Bf16TrueStoresBf16ParametersAndTracksItsReference) {
  const int n = world_size();
  const model::Config cfg = reduced_config();
  Hyper h;
  h.accum = 2;
  h.steps = 3;
  const ReferenceRun ref = bf16_true_reference(cfg, h, n);
  const ReferenceRun ref_mixed = reference_run(cfg, h, n, /*bf16_weights=*/true);
  const std::vector<StagedCase> cases = {
      {"stage0", 0, 0, 1},
      {"stage1 rpn2", 1, 2, 1},
      {"stage2", 2, 0, 1},
      {"stage3", 3, 0, 1},
      {"stage3 rpn2 hpZ", 3, 2, 0},
  };
  for (StagedCase c : cases) {
    if (c.rpn > 0 && n % c.rpn != 0) continue;
    c.precision = "bf16-true";
    Comms comms = make_comms(c.rpn);
    Engine e = make_engine(c, EngineOptions::Device::kHostStaged, cfg, h, comms);
    const EngineRun run = engine_run(e, cfg, h, h.steps);

    size_t not_bf16 = 0, flipped = 0, total = 0;
    double max_ulps = 0;
    for (size_t u = 0; u < ref.params.size(); ++u)
      for (size_t i = 0; i < ref.params[u].size(); ++i) {
        const float got = run.params[u][i], want = ref.params[u][i];
        not_bf16 += bf16_round(got) != got ? 1 : 0;
        flipped += got != want ? 1 : 0;
        const double ulps = std::fabs(got - want) / bf16_ulp(want);
        max_ulps = std::max(max_ulps, ulps);
        ++total;
      }
    const double loss_diff = max_rel_diff(run.losses, ref.losses);
    EXPECT_EQ(not_bf16, 0u) << c.name << ": stored parameters that are not bf16 values";
    const double to_ref = max_rel_l2(run.params, ref.params);
    const double to_mixed = max_rel_l2(run.params, ref_mixed.params);
    EXPECT_LT(static_cast<double>(flipped), 0.005 * static_cast<double>(total))
        << c.name << ": parameters off the reference";
    EXPECT_LT(to_ref, 1e-4) << c.name << ": parameters (L2) against the reference";
    EXPECT_LT(to_ref * 10, to_mixed) << c.name << ": closer to bf16-mixed than to bf16-true?";
    EXPECT_LT(loss_diff, 1e-6) << c.name << ": losses";

    // Memory against bf16-mixed on the same case.
    Comms comms_mixed = make_comms(c.rpn);
    StagedCase cm = c;
    cm.precision = "bf16-mixed";
    Engine mixed = make_engine(cm, EngineOptions::Device::kHostStaged, cfg, h, comms_mixed);
    const MemoryStats mt = e.memory(), mm = mixed.memory();
    if (c.stage <= 2) {
      EXPECT_EQ(3 * mt.full_params, mm.full_params) << c.name << ": 2 B per parameter, not 4 + 2";
    } else {
      EXPECT_EQ(2 * mt.param_shards, mm.param_shards) << c.name << ": bf16 shards";
      EXPECT_EQ(mt.gather_buffers, mm.gather_buffers) << c.name;
      EXPECT_EQ(mt.secondary_shards, mm.secondary_shards) << c.name;
    }
    EXPECT_EQ(mt.optimizer, mm.optimizer) << c.name << ": fp32 moments in both";
    EXPECT_GT(mt.full_params + mt.param_shards, 0u) << c.name;
    if (world_rank() == 0)
      std::printf("[ staged ] np %d %-20s bf16-true: losses %.6f -> %.6f (rel %.2e to its "
                  "reference), %zu of %zu parameters off it (at most %.0f bf16 ulp, rel L2 %.2e; "
                  "%.2e to bf16-mixed); parameter bytes %zu "
                  "(bf16-mixed %zu)\n",
                  n, c.name.c_str(), run.losses.front(), run.losses.back(), loss_diff, flipped,
                  total, max_ulps, to_ref, to_mixed, mt.full_params + mt.param_shards, mm.full_params + mm.param_shards);
  }
}

TEST(Staged, Bf16TrueCheckpointSlicesResumeAndCrossPrecisionLoads) {
  const int n = world_size();
  const model::Config cfg = reduced_config();
  Hyper h;
  h.accum = 2;
  h.steps = 2;
  for (const StagedCase& base : {StagedCase{"stage0", 0, 0, 1}, StagedCase{"stage2", 2, 0, 1},
                                 StagedCase{"stage3 rpn2 hpZ", 3, 2, 0}}) {
    if (base.rpn > 0 && n % base.rpn != 0) continue;
    StagedCase c = base, c32 = base;
    c.precision = "bf16-true";
    Comms comms = make_comms(c.rpn);
    Engine trained = make_engine(c, EngineOptions::Device::kHostStaged, cfg, h, comms);
    Engine resumed = make_engine(c, EngineOptions::Device::kHostStaged, cfg, h, comms);
    Engine as_fp32 = make_engine(c32, EngineOptions::Device::kHostStaged, cfg, h, comms);
    Engine from_fp32 = make_engine(c, EngineOptions::Device::kHostStaged, cfg, h, comms);
    Engine fp32_run = make_engine(c32, EngineOptions::Device::kHostStaged, cfg, h, comms);
    const EngineRun before = engine_run(trained, cfg, h, h.steps);
    engine_run(fp32_run, cfg, h, h.steps);
    const int units = trained.partition().num_units();
    size_t not_bf16 = 0, differ = 0;
    std::vector<std::vector<float>> fp32_master(static_cast<size_t>(units));  // per unit [owned]
    for (int u = 0; u < units; ++u) {
      const OwnedSlice t = trained.owned(u), r = resumed.owned(u), a = as_fp32.owned(u);
      for (float x : t.params) not_bf16 += bf16_round(x) != x ? 1 : 0;
      std::copy(t.params.begin(), t.params.end(), r.params.begin());
      std::copy(t.m.begin(), t.m.end(), r.m.begin());
      std::copy(t.v.begin(), t.v.end(), r.v.begin());
      std::copy(t.params.begin(), t.params.end(), a.params.begin());
      std::copy(t.m.begin(), t.m.end(), a.m.begin());
      std::copy(t.v.begin(), t.v.end(), a.v.begin());
      const OwnedSlice f = fp32_run.owned(u), b = from_fp32.owned(u);
      fp32_master[static_cast<size_t>(u)].assign(f.params.begin(), f.params.end());
      std::copy(f.params.begin(), f.params.end(), b.params.begin());
      std::copy(f.m.begin(), f.m.end(), b.m.begin());
      std::copy(f.v.begin(), f.v.end(), b.v.begin());
    }
    EXPECT_EQ(not_bf16, 0u) << c.name << ": checkpoint parameters that are not bf16 values";
    for (Engine* e : {&resumed, &as_fp32, &from_fp32}) {
      e->after_load();
      e->set_steps_done(trained.steps_done());
    }
    // Loaded values, read back: the bf16 slices exactly; fp32 slices rounded by bf16-true.
    for (int u = 0; u < units; ++u) {
      const OwnedSlice t = trained.owned(u), a = as_fp32.owned(u), b = from_fp32.owned(u);
      for (size_t i = 0; i < t.params.size(); ++i) differ += a.params[i] != t.params[i] ? 1 : 0;
      const std::vector<float>& f = fp32_master[static_cast<size_t>(u)];
      for (size_t i = 0; i < f.size(); ++i) differ += b.params[i] != bf16_round(f[i]) ? 1 : 0;
    }
    EXPECT_EQ(differ, 0u) << c.name << ": cross-precision loads";
    const EngineRun next_trained = engine_run(trained, cfg, h, 1, h.steps);
    const EngineRun next_resumed = engine_run(resumed, cfg, h, 1, h.steps);
    EXPECT_EQ(next_resumed.losses, next_trained.losses) << c.name;
    EXPECT_EQ(next_resumed.params, next_trained.params) << c.name;
    // The fp32 engine computes its first resumed loss on the same (bf16-valued) weights
    // but through fp32 compute weights: the widened bf16 weights bitwise, so equal.
    const EngineRun next_fp32 = engine_run(as_fp32, cfg, h, 1, h.steps);
    EXPECT_EQ(next_fp32.losses.front(), next_trained.losses.front()) << c.name;
    if (world_rank() == 0)
      std::printf("[ staged ] np %d %-16s bf16-true checkpoint: resumed loss %.9f (trained "
                  "%.9f), as fp32 %.9f; trained losses %.6f -> %.6f\n",
                  n, c.name.c_str(), next_resumed.losses[0], next_trained.losses[0],
                  next_fp32.losses[0], before.losses.front(), before.losses.back());
  }
}

// Precisions the engine cannot run on a space are refused by name (exit 2).
TEST(Staged, PrecisionsASpaceCannotRunAreRefusedByName) {
  Hyper h;
  const model::Config cfg = reduced_config();
  const auto refused = [&](EngineOptions::Device d, const std::string& precision, bool qw,
                           const std::string& needle) {
    Comms comms = make_comms(0);
    StagedCase c{"refused", 3, 0, 1, qw};
    c.precision = precision;
    try {
      Engine e = make_engine(c, d, cfg, h, comms);
      ADD_FAILURE() << precision << ": no error";
    } catch (const zt::InputError& err) {
      EXPECT_NE(std::string(err.what()).find(needle), std::string::npos) << err.what();
    }
  };
  refused(EngineOptions::Device::kHost, "bf16-mixed", false, "train.precision = bf16-mixed");
  refused(EngineOptions::Device::kHost, "bf16-true", false, "train.precision = bf16-true");
  refused(EngineOptions::Device::kHostStaged, "bf16-mixed", true, "zero.quantize_weights");
  refused(EngineOptions::Device::kHostStaged, "bf16-true", true, "zero.quantize_weights");
  // bf16-true has no fp32 master for the offload store: refused naming both keys.
  for (const offload::Home home : {offload::Home::kCpu, offload::Home::kNvme}) {
    Comms comms = make_comms(0);
    EngineOptions o = engine_options(h, 3);
    o.device = EngineOptions::Device::kHostStaged;
    o.precision = "bf16-true";
    o.offload.optimizer = home;
    o.offload.nvme_path = ::testing::TempDir();  // never written: refused before the store
    try {
      Engine e(cfg, *comms.world, nullptr, nullptr, o, h.init, comms.world.get());
      ADD_FAILURE() << "bf16-true with offload: no error";
    } catch (const zt::InputError& err) {
      const std::string w = err.what();
      EXPECT_NE(w.find("offload.optimizer"), std::string::npos) << offload::home_name(home) << ": " << w;
      EXPECT_NE(w.find("train.precision = bf16-true"), std::string::npos) << w;
    }
  }
}

}  // namespace
}  // namespace zt::zero::testing
