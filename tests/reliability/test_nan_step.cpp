// A step whose gradient holds NaN is skipped: parameters, AdamW moments and AdamW's step
// count stay as they were, the gradients are dropped, and the step reports the units to
// blame. Reference: a second engine that never saw the bad micro-batch. After one more
// good step on both, every rank's parameters and moments are bit-for-bit equal.
// The NaN: one parameter of layer 0 is set to NaN on rank 0 during the bad micro-batch's
// forward/backward (a transient fault) and restored before step(). Stages 0-3.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "zero/zero_fixtures.hpp"

namespace zt::zero::testing {
namespace {

struct State {
  std::vector<std::vector<float>> params, m, v;  // per unit: this rank's owned slice
};
State snapshot(Engine& e) {
  State s;
  for (int u = 0; u < e.model().layout().num_units(); ++u) {
    const OwnedSlice o = e.owned(u);
    s.params.emplace_back(o.params.begin(), o.params.end());
    s.m.emplace_back(o.m.begin(), o.m.end());
    s.v.emplace_back(o.v.begin(), o.v.end());
  }
  return s;
}
void expect_same(const State& a, const State& b, const char* what, int stage) {
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t u = 0; u < a.params.size(); ++u) {
    EXPECT_EQ(a.params[u], b.params[u]) << what << ": params of unit " << u << ", stage " << stage;
    EXPECT_EQ(a.m[u], b.m[u]) << what << ": exp_avg of unit " << u << ", stage " << stage;
    EXPECT_EQ(a.v[u], b.v[u]) << what << ": exp_avg_sq of unit " << u << ", stage " << stage;
  }
}

void micro(Engine& e, const model::Config& cfg, const Hyper& h, int data_step) {
  const Batch b = make_batch(first_sequence(h, world_size(), data_step, 0, world_rank()), h.B, h.T, cfg.vocab);
  e.micro_step(b.tokens, b.targets, h.B, h.T, false, 1.0);
}

TEST(NanStep, SkippedStepEqualsARunWithoutIt) {
  const model::Config cfg = reduced_config();
  Hyper h;
  for (int stage = 0; stage <= 3; ++stage) {
    Comms ca = make_comms(0), cb = make_comms(0);
    Engine a(cfg, *ca.world, nullptr, nullptr, engine_options(h, stage), h.init);
    Engine b(cfg, *cb.world, nullptr, nullptr, engine_options(h, stage), h.init);
    // Step 1 on both: data step 0.
    micro(a, cfg, h, 0);
    micro(b, cfg, h, 0);
    EXPECT_FALSE(a.step(h.lr(0)).skipped);
    EXPECT_FALSE(b.step(h.lr(0)).skipped);

    // A: data step 1 with a NaN parameter in layer 0 (unit 1) on rank 0.
    const State before = snapshot(a);
    const int poisoned_unit = 1;
    OwnedSlice o = a.owned(poisoned_unit);
    const bool poison_here = world_rank() == 0 && o.count > 0;
    float saved = 0;
    if (poison_here) {
      saved = o.params[0];
      o.params[0] = std::numeric_limits<float>::quiet_NaN();
    }
    micro(a, cfg, h, 1);
    if (poison_here) a.owned(poisoned_unit).params[0] = saved;
    const StepStats bad = a.step(h.lr(1));
    EXPECT_TRUE(bad.skipped) << "stage " << stage;
    EXPECT_FALSE(std::isfinite(bad.loss) && std::isfinite(bad.grad_norm)) << "stage " << stage;
    EXPECT_NE(bad.bad_units.find("layers.0 (model.layers.0.*)"), std::string::npos)
        << bad.bad_units << ", stage " << stage;
    EXPECT_EQ(a.steps_done(), 1) << "AdamW's step count must not advance, stage " << stage;
    expect_same(snapshot(a), before, "after the skipped step", stage);

    // Both: data step 2. B never saw data step 1.
    micro(a, cfg, h, 2);
    micro(b, cfg, h, 2);
    const StepStats sa = a.step(h.lr(1));
    const StepStats sb = b.step(h.lr(1));
    EXPECT_FALSE(sa.skipped);
    EXPECT_EQ(sa.loss, sb.loss) << "stage " << stage;
    EXPECT_EQ(sa.grad_norm, sb.grad_norm) << "stage " << stage;
    EXPECT_EQ(a.steps_done(), 2);
    EXPECT_EQ(b.steps_done(), 2);
    expect_same(snapshot(a), snapshot(b), "after the next good step", stage);
  }
}

}  // namespace
}  // namespace zt::zero::testing
