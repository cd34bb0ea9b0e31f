// Exact resume: 40 steps straight against 20 steps, stop (ckpt.stop_after, the path a
// preemption takes), resume from `latest`, 20 more steps, at the same world size. The
// reference is the uninterrupted run: the losses and gradient norms of steps 21-40, the
// final evaluation, and the final checkpoint's parameters and AdamW moments (read back
// with the serial reader) must be bitwise equal. np 2: stage 0 and stage 1; np 4: stage 3
// with hpZ over 2 simulated nodes of 2 ranks.
#include <gtest/gtest.h>
#include <omp.h>

#include <filesystem>

#include "ckpt_fixtures.hpp"
#include "zt/ckpt/publish.hpp"
#include "zt/ckpt/serial.hpp"
#include "zt/train/trainer.hpp"

namespace {

using namespace zt::ckpt::testing;

struct Layout {
  int stage;
  int ranks_per_node;
  int hpz;
};

void check_exact_resume(const Layout& l, const std::string& name) {
  omp_set_num_threads(1);
  const int world = world_size();
  Comms c = make_comms(l.ranks_per_node);
  const zt::train::NodeComms nodes{c.node.get(), c.cross.get(), c.mpi};
  const std::vector<std::string> zero = {"zero.stage=" + std::to_string(l.stage),
                                         "zero.hpz_partition_size=" + std::to_string(l.hpz)};
  const auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), zero.begin(), zero.end());
    return small_config(world, more);
  };

  const std::string straight_dir = fresh_dir(name + "_straight");
  const std::string split_dir = fresh_dir(name + "_split");
  const auto straight = zt::train::train(with({"ckpt.dir=" + straight_dir}), *c.world, corpus(), {}, nodes);
  const auto first = zt::train::train(with({"ckpt.dir=" + split_dir, "ckpt.stop_after=20"}), *c.world,
                                      corpus(), {}, nodes);
  ASSERT_TRUE(first.stopped);
  ASSERT_EQ(first.steps.size(), 20u);
  EXPECT_EQ(zt::ckpt::read_latest(split_dir), split_dir + "/step-20.h5");
  const auto second = zt::train::train(with({"ckpt.dir=" + split_dir, "ckpt.resume=auto"}), *c.world,
                                       corpus(), {}, nodes);
  EXPECT_EQ(second.first_step, 20);
  ASSERT_EQ(straight.steps.size(), 40u);
  ASSERT_EQ(second.steps.size(), 20u);

  int loss_diffs = 0;
  for (size_t s = 0; s < 20; ++s) {
    const auto& a = straight.steps[20 + s];
    const auto& b = second.steps[s];
    EXPECT_EQ(a.step, b.step);
    EXPECT_EQ(a.tokens_seen, b.tokens_seen);
    loss_diffs += a.loss != b.loss || a.grad_norm != b.grad_norm || a.lr != b.lr;
  }
  EXPECT_EQ(loss_diffs, 0) << "steps 21-40 differ from the straight run";
  ASSERT_TRUE(straight.steps.back().eval_loss && second.steps.back().eval_loss);
  EXPECT_EQ(*straight.steps.back().eval_loss, *second.steps.back().eval_loss);
  // Earlier steps also equal (same init, same data).
  for (size_t s = 0; s < 20; ++s) EXPECT_EQ(straight.steps[s].loss, first.steps[s].loss);

  if (world_rank() == 0) {
    const zt::ckpt::FullCheckpoint a = zt::ckpt::read_full(straight_dir + "/step-40.h5");
    const zt::ckpt::FullCheckpoint b = zt::ckpt::read_full(split_dir + "/step-40.h5");
    ASSERT_EQ(a.params.size(), b.params.size());
    for (size_t u = 0; u < a.params.size(); ++u) {
      EXPECT_TRUE(same_bits(a.params[u], b.params[u])) << "params of unit " << u;
      EXPECT_TRUE(same_bits(a.exp_avg[u], b.exp_avg[u])) << "exp_avg of unit " << u;
      EXPECT_TRUE(same_bits(a.exp_avg_sq[u], b.exp_avg_sq[u])) << "exp_avg_sq of unit " << u;
    }
    EXPECT_EQ(a.state->step, 40);
    EXPECT_EQ(b.state->step, 40);
    EXPECT_EQ(a.state->tokens_seen, b.state->tokens_seen);
    EXPECT_EQ(a.state->tokens_seen, 40 * 12 * 32);
    std::printf("[exact resume %s] %d ranks, stage %d, hpZ %d: steps 21-40 losses %s; last loss "
                "%.9g vs %.9g; final params + moments bitwise equal: %s\n",
                name.c_str(), world, l.stage, l.hpz, loss_diffs == 0 ? "bitwise equal" : "DIFFER",
                straight.steps.back().loss, second.steps.back().loss,
                ::testing::Test::HasFailure() ? "NO" : "yes");
  }
}

TEST(ExactResume, SameWorldSize) {
  if (world_size() == 4) {
    check_exact_resume(Layout{3, 2, 2}, "np4_stage3_hpz");
  } else {
    check_exact_resume(Layout{0, 0, 0}, "np" + std::to_string(world_size()) + "_stage0");
    check_exact_resume(Layout{1, 0, 0}, "np" + std::to_string(world_size()) + "_stage1");
  }
}

}  // namespace
