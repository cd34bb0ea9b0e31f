// Exact resume: 40 steps straight against 20 steps, stop (ckpt.stop_after, the path a
// preemption takes), resume from `latest`, 20 more steps, at the same world size. The
// reference is the uninterrupted run: the losses and gradient norms of steps 21-40, the
// final evaluation, and the final checkpoint's parameters and AdamW moments (read back
// with the serial reader) must be bitwise equal. np 2: stage 0 and stage 1; np 4: stage 3
// with hpZ over 2 simulated nodes of 2 ranks.
#include <gtest/gtest.h>
#include <omp.h>

#include <sys/mount.h>

#include <filesystem>
#include <fstream>

#include "ckpt_fixtures.hpp"
#include "zt/ckpt/checkpoint.hpp"
#include "zt/ckpt/publish.hpp"
#include "zt/model/model.hpp"
#include "zt/zero/engine.hpp"
#include "zt/ckpt/serial.hpp"
#include "zt/core/error.hpp"
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

// ckpt.init_from: a weights-only file (as `zt convert hf-to-h5` writes) loads as the
// initial parameters at step 0 with fresh (zero) moments. The reference is the
// Parameters object the file was written from (initialised in one process from another
// seed), compared bitwise with the engine's gathered parameters; train() starts from it.
TEST(InitFrom, WeightsOnlyFileIsTheInitialParameters) {
  omp_set_num_threads(1);
  const int world = world_size();
  Comms c = make_comms(0);
  const zt::train::TrainConfig t = small_config(world, {"zero.stage=3", "train.steps=3"});
  const std::string dir = fresh_dir("init_from_np" + std::to_string(world));
  const std::string path = dir + "/weights.h5";
  const zt::model::ParamLayout layout(t.model);
  zt::model::Parameters<float> ref(layout);
  ref.init(zt::model::InitOptions{777, 0.02, true});
  if (world_rank() == 0) zt::ckpt::write_weights_only(path, t.model, ref, {"f32"});
  MPI_Barrier(MPI_COMM_WORLD);

  zt::zero::Engine engine(t.model, *c.world, nullptr, nullptr, t.zero,
                          zt::model::InitOptions{t.seed, t.init_std, true});
  zt::ckpt::load_weights(engine, c.mpi, path);
  EXPECT_EQ(engine.steps_done(), 0);
  zt::model::Parameters<float> full(layout);
  engine.gather_full_params(full);
  int unequal = 0, nonzero_moments = 0;
  for (int u = 0; u < layout.num_units(); ++u) {
    unequal += !same_bits(std::span<const float>(full.params(u)), std::span<const float>(ref.params(u)));
    const zt::zero::OwnedSlice o = engine.owned(u);
    for (size_t i = 0; i < o.m.size(); ++i) nonzero_moments += o.m[i] != 0.0f || o.v[i] != 0.0f;
  }
  EXPECT_EQ(unequal, 0);
  EXPECT_EQ(nonzero_moments, 0);
  // Resuming from it is refused; init_from trains from step 0.
  EXPECT_THROW(zt::ckpt::load(engine, c.mpi, path), zt::InputError);
  const auto r = zt::train::train(small_config(world, {"zero.stage=3", "train.steps=3", "ckpt.dir=" + dir,
                                                       "ckpt.init_from=" + path}),
                                  *c.world, corpus(), {}, zt::train::NodeComms{nullptr, nullptr, c.mpi});
  EXPECT_EQ(r.first_step, 0);
  ASSERT_EQ(r.steps.size(), 3u);

  // resume = auto with init_from (a fine-tuning job that may be requeued): an empty
  // ckpt.dir starts from init_from's weights (the same first loss as above); once the
  // run saved, the same configuration resumes from `latest` instead.
  const std::string requeue_dir = fresh_dir("init_from_requeue_np" + std::to_string(world));
  const auto requeue_cfg = [&](const std::string& steps) {
    return small_config(world, {"zero.stage=3", "train.steps=" + steps, "ckpt.dir=" + requeue_dir,
                                "ckpt.resume=auto", "ckpt.init_from=" + path});
  };
  const zt::train::NodeComms mpi_only{nullptr, nullptr, c.mpi};
  const auto fresh = zt::train::train(requeue_cfg("3"), *c.world, corpus(), {}, mpi_only);
  EXPECT_EQ(fresh.first_step, 0);
  ASSERT_EQ(fresh.steps.size(), 3u);
  EXPECT_EQ(fresh.steps[0].loss, r.steps[0].loss);
  const auto resumed = zt::train::train(requeue_cfg("5"), *c.world, corpus(), {}, mpi_only);
  EXPECT_EQ(resumed.first_step, 3);
  EXPECT_EQ(resumed.steps.size(), 2u);
  // A named resume path with init_from contradicts itself.
  EXPECT_THROW(small_config(world, {"ckpt.resume=" + path, "ckpt.init_from=" + path}), zt::InputError);
  if (world_rank() == 0)
    std::printf("[init_from] %d ranks: weights-only file -> engine parameters bitwise equal: %s, "
                "moments zero, step 0; resume refused; 3 steps from it, first loss %.6f\n",
                world, unequal == 0 ? "yes" : "NO", r.steps[0].loss);
}

// A full disk and a read-only folder: the save fails with a zt::Error naming the path
// (and errno), on every rank; `latest` and the previous checkpoint stay, no .tmp is left.
// tmpfs mounts need root (CI and the dev machines run as root); skipped otherwise.
struct Tmpfs {
  std::string dir;
  bool ok = false;
  Tmpfs(const std::string& name, const std::string& size, bool read_only) : dir(fresh_dir(name)) {
    int mounted = 0;
    if (world_rank() == 0)
      mounted = ::mount("tmpfs", dir.c_str(), "tmpfs", read_only ? MS_RDONLY : 0,
                        ("size=" + size).c_str()) == 0;
    MPI_Bcast(&mounted, 1, MPI_INT, 0, MPI_COMM_WORLD);
    ok = mounted != 0;
  }
  ~Tmpfs() {
    MPI_Barrier(MPI_COMM_WORLD);
    if (ok && world_rank() == 0) ::umount2(dir.c_str(), MNT_DETACH);
  }
};

std::string train_error(Comms& c, const std::vector<std::string>& keys,
                        zt::ExitCode want = zt::ExitCode::kFailed) {
  try {
    zt::train::train(small_config(world_size(), keys), *c.world, corpus(), {},
                     zt::train::NodeComms{nullptr, nullptr, c.mpi});
  } catch (const zt::Error& e) {
    EXPECT_EQ(e.exit_code(), want);
    return e.what();
  }
  return "";
}

TEST(SaveFailure, DiskFullAndReadOnly) {
  omp_set_num_threads(1);
  Comms c = make_comms(0);
  {
    // 2 MiB: the step-2 checkpoint (1.43 MB) fits, the step-4 one does not.
    Tmpfs full("disk_full_np" + std::to_string(world_size()), "2m", false);
    if (!full.ok) GTEST_SKIP() << "cannot mount a tmpfs (not root?)";
    const std::string msg = train_error(c, {"train.steps=4", "ckpt.every=2", "ckpt.dir=" + full.dir});
    EXPECT_NE(msg.find(full.dir + "/step-4.h5.tmp"), std::string::npos) << msg;
    EXPECT_EQ(zt::ckpt::read_latest(full.dir), full.dir + "/step-2.h5");
    for (const auto& e : std::filesystem::directory_iterator(full.dir))  // no staging file left
      EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
    EXPECT_FALSE(std::filesystem::exists(full.dir + "/step-4.h5"));
    if (world_rank() == 0) {
      EXPECT_EQ(zt::ckpt::read_full(full.dir + "/step-2.h5").state->step, 2);  // intact
      std::printf("[disk full] %s\n", msg.substr(0, 400).c_str());
    }
  }
  {
    Tmpfs ro("read_only_np" + std::to_string(world_size()), "1m", true);
    if (!ro.ok) GTEST_SKIP() << "cannot mount a tmpfs (not root?)";
    // Refused before the first step (ckpt::preflight_dir), not at the save after it.
    const std::string msg =
        train_error(c, {"train.steps=2", "ckpt.dir=" + ro.dir}, zt::ExitCode::kBadInput);
    EXPECT_NE(msg.find("ckpt.dir = '" + ro.dir + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("read-only file system"), std::string::npos) << msg;
    EXPECT_NE(msg.find("errno 30"), std::string::npos) << msg;
    if (world_rank() == 0) std::printf("[read-only] %s\n", msg.substr(0, 400).c_str());
  }
}

}  // namespace
