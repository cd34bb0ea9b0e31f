// The device orchestration on a CPU: the engine on the host-staged space (host memory,
// every collective through the pinned-host staging path a device space takes on the MPI
// backend) trains bit for bit like the engine on the host space (the direct path), at
// stages 0-3, hpZ, qwZ/qgZ and bf16 reductions, flat and over simulated nodes; its host
// values (the norm) go over the host-memory control communicator, as beside NCCL. Losses,
// gradient norms, final parameters, the step's traffic per communicator and the memory
// figures must be equal (==, not within a tolerance). Checkpoint slices, a resume from
// them and logits_last, which the host-staged space serves through host copies as a
// device does, are equal too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "zero_fixtures.hpp"
#include "zt/core/error.hpp"

namespace zt::zero::testing {
namespace {

struct StagedCase {
  std::string name;
  int stage;
  int rpn;      // simulated ranks per node (0: one node)
  int hpz;      // zero.hpz_partition_size (0: ranks per node, 1: off)
  bool qw = false, qg = false;
  DType reduce = DType::kF32;
  std::string precision = "fp32";  // train.precision
};

// The engine of case c on `device`. The host-memory control communicator carries the
// engine's host values on the staged (device-like) path.
Engine make_engine(const StagedCase& c, EngineOptions::Device device, const model::Config& cfg,
                   const Hyper& h, Comms& comms) {
  EngineOptions o = engine_options(h, c.stage);
  o.hpz_partition_size = c.hpz;
  o.quantize_weights = c.qw;
  o.quantize_grads = c.qg;
  o.reduce_dtype = c.reduce;
  o.device = device;
  o.precision = c.precision;
  return Engine(cfg, *comms.world, comms.node.get(), comms.cross.get(), o, h.init,
                comms.world.get());
}

EngineRun run(const StagedCase& c, EngineOptions::Device device, const model::Config& cfg,
              const Hyper& h, Traffic* traffic, MemoryStats* memory) {
  Comms comms = make_comms(c.rpn);
  Engine e = make_engine(c, device, cfg, h, comms);
  EngineRun r = engine_run(e, cfg, h, h.steps);
  *traffic = e.traffic();
  *memory = e.memory();
  return r;
}

TEST(Staged, HostStagedSpaceTrainsBitwiseLikeTheHostSpace) {
  const int n = world_size();
  const model::Config cfg = reduced_config();
  Hyper h;
  h.accum = 2;
  h.steps = 3;
  const std::vector<StagedCase> cases = {
      {"stage0", 0, 0, 1},
      {"stage1 rpn2", 1, 2, 1},
      {"stage2", 2, 0, 1},
      {"stage2 rpn2 bf16", 2, 2, 1, false, false, DType::kBF16},
      {"stage3", 3, 0, 1},
      {"stage3 rpn2 hpZ", 3, 2, 0},
      {"stage3 rpn2 hpZ qwZ qgZ", 3, 2, 0, true, true},
  };
  for (const StagedCase& c : cases) {
    if (c.rpn > 0 && n % c.rpn != 0) continue;
    Traffic t_direct, t_staged;
    MemoryStats m_direct, m_staged;
    const EngineRun direct = run(c, EngineOptions::Device::kHost, cfg, h, &t_direct, &m_direct);
    const EngineRun staged =
        run(c, EngineOptions::Device::kHostStaged, cfg, h, &t_staged, &m_staged);
    EXPECT_EQ(staged.losses, direct.losses) << c.name;
    EXPECT_EQ(staged.norms, direct.norms) << c.name;
    ASSERT_EQ(staged.params.size(), direct.params.size());
    size_t differ = 0;
    for (size_t u = 0; u < direct.params.size(); ++u)
      for (size_t i = 0; i < direct.params[u].size(); ++i)
        differ += staged.params[u][i] != direct.params[u][i] ? 1 : 0;
    EXPECT_EQ(differ, 0u) << c.name << ": parameters differing from the direct path";
    for (int g = 0; g < kGroupCount; ++g)
      EXPECT_EQ(t_staged.bytes(static_cast<Group>(g)), t_direct.bytes(static_cast<Group>(g)))
          << c.name << ": bytes sent on " << group_name(static_cast<Group>(g));
    EXPECT_EQ(m_staged.total(), m_direct.total()) << c.name << ": engine memory";
    if (world_rank() == 0)
      std::printf("[ staged ] np %d %-24s losses %.6f -> %.6f, %zu parameters differ, "
                  "%llu bytes sent (direct %llu)\n",
                  n, c.name.c_str(), staged.losses.front(), staged.losses.back(), differ,
                  static_cast<unsigned long long>(t_staged.total_bytes()),
                  static_cast<unsigned long long>(t_direct.total_bytes()));
  }
}

// A world that takes device memory needs the host-memory control communicator.
TEST(Staged, DeviceMemoryWorldWithoutControlCommunicatorIsRefused) {
  Comms comms = make_comms(0);
  Hyper h;
  EngineOptions o = engine_options(h, 0);
  o.device = EngineOptions::Device::kHostStaged;
  try {
    Engine e(reduced_config(), *comms.world, nullptr, nullptr, o, h.init);
    FAIL() << "no error";
  } catch (const zt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no host-memory control communicator"), std::string::npos)
        << e.what();
  }
}

// Checkpoints and logits through the device path on the host-staged space (owned()
// hands out host copies that the next engine call writes back): the slices equal the
// direct engine's, a fresh host-staged engine loaded from the direct engine's slices
// continues exactly like it, and logits_last is equal.
TEST(Staged, CheckpointSlicesResumeAndLogitsThroughHostCopies) {
  const int n = world_size();
  const model::Config cfg = reduced_config();
  Hyper h;
  h.accum = 2;
  h.steps = 2;
  for (const StagedCase& c : {StagedCase{"stage0", 0, 0, 1}, StagedCase{"stage3 rpn2 hpZ", 3, 2, 0}}) {
    if (c.rpn > 0 && n % c.rpn != 0) continue;
    Comms comms = make_comms(c.rpn);
    Engine direct = make_engine(c, EngineOptions::Device::kHost, cfg, h, comms);
    Engine staged = make_engine(c, EngineOptions::Device::kHostStaged, cfg, h, comms);
    Engine fresh = make_engine(c, EngineOptions::Device::kHostStaged, cfg, h, comms);
    engine_run(direct, cfg, h, h.steps);
    engine_run(staged, cfg, h, h.steps);
    const int units = direct.partition().num_units();
    size_t differ = 0;
    const auto count_differ = [&](std::span<const float> a, std::span<const float> b) {
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i] ? 1 : 0;
    };
    for (int u = 0; u < units; ++u) {
      const OwnedSlice d = direct.owned(u), s = staged.owned(u), f = fresh.owned(u);
      count_differ(s.params, d.params);
      count_differ(s.m, d.m);
      count_differ(s.v, d.v);
      std::copy(d.params.begin(), d.params.end(), f.params.begin());
      std::copy(d.m.begin(), d.m.end(), f.m.begin());
      std::copy(d.v.begin(), d.v.end(), f.v.begin());
    }
    EXPECT_EQ(differ, 0u) << c.name << ": checkpoint slices differing from the direct path";
    fresh.after_load();
    fresh.set_steps_done(direct.steps_done());
    const EngineRun next_direct = engine_run(direct, cfg, h, 1, h.steps);
    const EngineRun next_fresh = engine_run(fresh, cfg, h, 1, h.steps);
    EXPECT_EQ(next_fresh.losses, next_direct.losses) << c.name;
    EXPECT_EQ(next_fresh.params, next_direct.params) << c.name;
    const Batch b = make_batch(0, 1, h.T, cfg.vocab);
    std::vector<float> ld(static_cast<size_t>(cfg.vocab)), lf(ld.size());
    direct.logits_last(b.tokens, h.T, ld);
    fresh.logits_last(b.tokens, h.T, lf);
    EXPECT_EQ(lf, ld) << c.name << ": logits_last";
    if (world_rank() == 0)
      std::printf("[ staged ] np %d %-16s checkpoint slices: %zu values differ; resumed step "
                  "loss %.9f (direct %.9f)\n",
                  n, c.name.c_str(), differ, next_fresh.losses[0], next_direct.losses[0]);
  }
}

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

// The engine's device ordering branch on a CPU. NCCL's requests can order the compute
// stream (Request::order_before) without blocking the host; the engine then keeps the
// handle and waits for it at the end of the pass (check_retired). Host backends cannot,
// so the host spaces never take that branch. This host-memory communicator's requests
// say they can (after completing on the host: there is no device to wait on), so the
// engine on the host space takes the device branch: the results must stay bitwise those
// of plain MPI, and every kept request must be waited on by the end of its pass.
struct OrderStats {
  long kept = 0;     // requests compute was "ordered after" (order_before returned true)
  long checked = 0;  // kept requests the host waited on afterwards
};

class OrderingRequest final : public comm::Request {
 public:
  OrderingRequest(comm::Handle inner, OrderStats& st) : inner_(std::move(inner)), st_(st) {}
  void wait() override {
    if (!done_) inner_->wait();
    done_ = true;
    if (kept_ && !checked_) {
      checked_ = true;
      ++st_.checked;
    }
  }
  bool test() override {
    if (!done_ && inner_->test()) done_ = true;
    return done_;
  }
  bool order_before(void*) override {
    if (!done_) inner_->wait();  // the host's stand-in for the device's event wait
    done_ = true;
    kept_ = true;
    ++st_.kept;
    return true;
  }

 private:
  comm::Handle inner_;
  OrderStats& st_;
  bool done_ = false, kept_ = false, checked_ = false;
};

class OrderingComm final : public comm::Comm {
 public:
  OrderingComm(std::unique_ptr<comm::Comm> inner, OrderStats& st) : inner_(std::move(inner)), st_(st) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string_view backend() const override { return inner_->backend(); }
  comm::Memory memory() const override { return comm::Memory::kHost; }
  comm::Handle iall_reduce(const void* s, void* r, size_t n, DType t, comm::ReduceOp op) override {
    return wrap(inner_->iall_reduce(s, r, n, t, op));
  }
  comm::Handle iall_gather(const void* s, void* r, size_t n, DType t) override {
    return wrap(inner_->iall_gather(s, r, n, t));
  }
  comm::Handle ireduce_scatter(const void* s, void* r, size_t n, DType t,
                               comm::ReduceOp op) override {
    return wrap(inner_->ireduce_scatter(s, r, n, t, op));
  }
  comm::Handle ibroadcast(void* b, size_t n, DType t, int root) override {
    return wrap(inner_->ibroadcast(b, n, t, root));
  }
  comm::Handle isend(const void* b, size_t n, DType t, int peer) override {
    return wrap(inner_->isend(b, n, t, peer));
  }
  comm::Handle irecv(void* b, size_t n, DType t, int peer) override {
    return wrap(inner_->irecv(b, n, t, peer));
  }
  void barrier() override { inner_->barrier(); }
  std::unique_ptr<comm::Comm> split(int color, int key) override {
    std::unique_ptr<comm::Comm> sub = inner_->split(color, key);
    if (!sub) return nullptr;
    return std::make_unique<OrderingComm>(std::move(sub), st_);
  }

 private:
  comm::Handle wrap(comm::Handle h) {
    counters_ = inner_->counters();  // the engine's traffic figures read these
    return std::make_unique<OrderingRequest>(std::move(h), st_);
  }
  std::unique_ptr<comm::Comm> inner_;
  OrderStats& st_;
};

TEST(Staged, DeviceOrderingBranchKeepsHandlesAndTrainsBitwise) {
  const int n = world_size();
  Hyper h;
  h.accum = 2;
  h.steps = 3;
  const std::vector<StagedCase> cases = {
      {"stage0", 0, 0, 1},
      {"stage1 rpn2", 1, 2, 1},
      {"stage2 rpn2 bf16", 2, 2, 1, false, false, DType::kBF16},
      {"stage3", 3, 0, 1},
      {"stage3 rpn2 hpZ", 3, 2, 0},
      {"stage3 rpn2 hpZ qwZ qgZ", 3, 2, 0, true, true},
  };
  for (const StagedCase& c : cases) {
    if (c.rpn > 0 && n % c.rpn != 0) continue;
    // Tied embeddings: two units in use at once (and, under qgZ, a head shard wholly in
    // the padding: Lossy.TiedEmbeddingsWithShardsInThePadding).
    const model::Config cfg = reduced_config(/*tied=*/true);
    Comms plain = make_comms(c.rpn);
    Engine direct = make_engine(c, EngineOptions::Device::kHost, cfg, h, plain);
    const EngineRun want = engine_run(direct, cfg, h, h.steps);

    Comms base = make_comms(c.rpn);
    OrderStats st;
    Comms ordering;
    ordering.world = std::make_unique<OrderingComm>(std::move(base.world), st);
    if (base.node) ordering.node = std::make_unique<OrderingComm>(std::move(base.node), st);
    if (base.cross) ordering.cross = std::make_unique<OrderingComm>(std::move(base.cross), st);
    Engine e = make_engine(c, EngineOptions::Device::kHost, cfg, h, ordering);
    const EngineRun got = engine_run(e, cfg, h, h.steps);
    EXPECT_EQ(got.losses, want.losses) << c.name;
    EXPECT_EQ(got.norms, want.norms) << c.name;
    EXPECT_EQ(got.params, want.params) << c.name;
    EXPECT_GT(st.kept, 0) << c.name << ": the engine never took the device branch";
    EXPECT_EQ(st.checked, st.kept) << c.name << ": kept requests never waited on";
    if (world_rank() == 0)
      std::printf("[ staged ] np %d %-24s ordering branch: %ld requests kept, %ld checked at "
                  "the end of their pass; losses %.6f -> %.6f\n",
                  n, c.name.c_str(), st.kept, st.checked, got.losses.front(), got.losses.back());
  }
}

}  // namespace
}  // namespace zt::zero::testing
