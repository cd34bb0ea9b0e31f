// ckpt.async without a snapshot (issue 23 item 3): on the host the background save reads
// the engine's own shards while training goes on, and step() waits before AdamW changes a
// unit the save has not yet written. The reference is a synchronous save (ckpt::save) of
// an identical engine at the same step: the file written in the background while the
// engine trains 2 more steps holds the same bits (params, exp_avg, exp_avg_sq, /state's
// step). Per stage (0 and 3) and world size (np 1, 2): once as it comes, once with the
// writer held back (delay_writes_for_tests) so the optimizer reaches every unit before it
// is written: then the guard must have copied them on reach (copied_bytes > 0) and the
// writer read the copies (else the moments and parameters in the file would be the next
// step's), and step() must not have waited for the writer (its stall well under the
// hold), and once more held back with every copy failing (fail_reach_copies_for_tests, as
// std::bad_alloc): then step() waits for the writer instead. The two engines' states after
// the further steps are equal too (the guard changes no arithmetic). A save that fails
// while step() waits, or after units were copied on reach, releases (frees) them and is
// rethrown by wait().
#include <gtest/gtest.h>
#include <omp.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "ckpt_fixtures.hpp"
#include "zt/ckpt/checkpoint.hpp"
#include "zt/ckpt/serial.hpp"
#include "zt/core/error.hpp"
#include "zt/zero/engine.hpp"

namespace {

using namespace zt::ckpt::testing;

zt::zero::Engine make_engine(Comms& c, const zt::train::TrainConfig& t) {
  return zt::zero::Engine(t.model, *c.world, c.node.get(), c.cross.get(), t.zero,
                          zt::model::InitOptions{t.seed, t.init_std, true});
}

std::vector<std::vector<float>> full_params(zt::zero::Engine& e) {
  zt::model::Parameters<float> full(e.model().layout());
  e.gather_full_params(full);
  std::vector<std::vector<float>> r;  // [units][numel]
  for (int u = 0; u < full.num_units(); ++u) r.emplace_back(full.params(u).begin(), full.params(u).end());
  return r;
}

// Tensors (params, moments) and step differing between two files.
int differing_files(const std::string& a, const std::string& b) {
  const zt::ckpt::FullCheckpoint fa = zt::ckpt::read_full(a), fb = zt::ckpt::read_full(b);
  int d = fa.state->step == fb.state->step ? 0 : 1;
  for (size_t u = 0; u < fa.params.size(); ++u) {
    d += !same_bits(fa.params[u], fb.params[u]);
    d += !same_bits(fa.exp_avg[u], fb.exp_avg[u]);
    d += !same_bits(fa.exp_avg_sq[u], fb.exp_avg_sq[u]);
  }
  return d;
}

void check_stage(int stage, double delay_s, bool fail_copies = false) {
  omp_set_num_threads(1);
  const int np = world_size();
  const zt::train::TrainConfig t = small_config(np, {"zero.stage=" + std::to_string(stage)});
  Comms c = make_comms(0);
  const std::string tag = "s" + std::to_string(stage) + (delay_s > 0 ? "-held" : "") + (fail_copies ? "-nocopy" : "") + "-np" + std::to_string(np);
  const std::string sync_dir = fresh_dir("async_in_place/sync-" + tag);
  const std::string async_dir = fresh_dir("async_in_place/async-" + tag);
  const zt::ckpt::TrainState st = train_state(t, 3);

  // The reference: 3 steps, a synchronous save, 2 more steps.
  zt::zero::Engine ref = make_engine(c, t);
  train_fixed_batches(ref, t, 11, 3);
  const zt::ckpt::SaveResult sync = zt::ckpt::save(ref, c.mpi, sync_dir, st, 0, 7);
  train_fixed_batches(ref, t, 23, 1);
  train_fixed_batches(ref, t, 31, 1);

  // The same 3 steps, a background save in place, 2 more steps while it writes.
  zt::zero::Engine e = make_engine(c, t);
  ASSERT_TRUE(e.owned_in_place()) << "fp32 host state is saved in place";
  train_fixed_batches(e, t, 11, 3);
  zt::ckpt::AsyncSaver saver(c.mpi);
  saver.prepare(e);  // nothing to prepare in place
  saver.delay_writes_for_tests(delay_s);
  saver.fail_reach_copies_for_tests(fail_copies);
  const double stall = saver.start(e, async_dir, st, 0, 7);
  const auto t0 = std::chrono::steady_clock::now();
  train_fixed_batches(e, t, 23, 1);  // the step that reaches the units the writer holds
  const double first_step = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  train_fixed_batches(e, t, 31, 1);
  const std::optional<zt::ckpt::SaveResult> done = saver.wait();
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->path, async_dir + "/step-3.h5");
  EXPECT_EQ(done->bytes, sync.bytes);
  const zt::ckpt::UpdateGuardStats& g = done->update_guard;
  if (delay_s > 0 && !fail_copies) {
    EXPECT_GT(g.copied_bytes, 0u) << "the writer was held back " << delay_s
                                  << " s: step() must have copied the units on reach";
    EXPECT_EQ(g.copy_failures, 0);
    // Not a wait for the writer: the copy (KBs here) and at most a read in flight.
    EXPECT_LT(g.copy_seconds + g.waited, 0.25) << "step() waited for the writer held " << delay_s << " s";
    EXPECT_LT(first_step, delay_s) << "the step after the save's start waited for the writer";
  }
  if (delay_s > 0 && fail_copies) {
    EXPECT_EQ(g.copied_bytes, 0u);
    EXPECT_GT(g.copy_failures, 0);
    EXPECT_GT(g.waited, 0.0) << "no copy: step() must have waited for unit 0's write";
  }

  EXPECT_EQ(differing_files(sync.path, done->path), 0)
      << "stage " << stage << ": the background file differs from the synchronous one";
  const std::vector<std::vector<float>> a = full_params(ref), b = full_params(e);
  int after = 0;
  for (size_t u = 0; u < a.size(); ++u) after += !same_bits(a[u], b[u]);
  EXPECT_EQ(after, 0) << "parameters after the 2 further steps differ";
  if (world_rank() == 0)
    std::printf("[async-in-place] np %d stage %d writer held %.1f s%s: start %.4f s, copied on reach "
                "%llu B in %.4f s, waited %.3f s, first step %.3f s, background write %.3f s\n",
                np, stage, delay_s, fail_copies ? " (copies fail)" : "", stall,
                static_cast<unsigned long long>(g.copied_bytes), g.copy_seconds, g.waited, first_step,
                done->seconds);
}

TEST(AsyncInPlace, Stage0) { check_stage(0, 0.0); }
TEST(AsyncInPlace, Stage3) { check_stage(3, 0.0); }
TEST(AsyncInPlace, Stage0WriterHeldBack) { check_stage(0, 0.5); }
TEST(AsyncInPlace, Stage3WriterHeldBack) { check_stage(3, 0.5); }
TEST(AsyncInPlace, Stage0CopyFailsWaits) { check_stage(0, 0.5, true); }
TEST(AsyncInPlace, Stage3CopyFailsWaits) { check_stage(3, 0.5, true); }

// A fresh folder with a regular file "file" in it: a save into file/sub fails (its
// folder cannot be made).
std::string dir_with_file_in_the_way(const std::string& name) {
  const std::string dir = fresh_dir("async_in_place/" + name + "-np" + std::to_string(world_size()));
  if (world_rank() == 0) std::ofstream(dir + "/file") << "in the way";
  MPI_Barrier(MPI_COMM_WORLD);
  return dir;
}

// A save that fails (its folder cannot be made: a regular file is in the way) while the
// optimizer waits for units the writer has not reached (no copy on reach: as when its
// allocation fails): the failure releases them (the steps go on, nothing hangs), wait()
// rethrows it, and the next save in place works.
TEST(AsyncInPlace, FailedSaveReleasesTheUnits) {
  omp_set_num_threads(1);
  const zt::train::TrainConfig t = small_config(world_size(), {"zero.stage=3"});
  Comms c = make_comms(0);
  const std::string dir = dir_with_file_in_the_way("failing");
  zt::zero::Engine e = make_engine(c, t);
  train_fixed_batches(e, t, 11, 1);
  zt::ckpt::AsyncSaver saver(c.mpi);
  saver.delay_writes_for_tests(0.3);
  saver.fail_reach_copies_for_tests(true);
  saver.start(e, dir + "/file/sub", train_state(t, 1), 0, 7);
  train_fixed_batches(e, t, 23, 2);  // waits for unit 0 until the writer fails
  EXPECT_THROW(saver.wait(), zt::Error);
  saver.delay_writes_for_tests(0.0);
  saver.fail_reach_copies_for_tests(false);
  saver.start(e, dir, train_state(t, 3), 0, 7);
  train_fixed_batches(e, t, 29, 1);
  const std::optional<zt::ckpt::SaveResult> done = saver.wait();
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->path, dir + "/step-3.h5");
}

// Units copied on reach, then the save fails (its folder cannot be made): wait() rethrows,
// the copies are freed with the units' release (a second save in place, which copies
// again, works and matches a synchronous save of the same state), nothing hangs.
TEST(AsyncInPlace, FailedSaveAfterCopiesFrees) {
  omp_set_num_threads(1);
  const zt::train::TrainConfig t = small_config(world_size(), {"zero.stage=3"});
  Comms c = make_comms(0);
  const std::string dir = dir_with_file_in_the_way("copied-failing");
  const std::string sync_dir = fresh_dir("async_in_place/copied-failing-sync-np" + std::to_string(world_size()));
  zt::zero::Engine e = make_engine(c, t);
  train_fixed_batches(e, t, 11, 1);
  zt::ckpt::AsyncSaver saver(c.mpi);
  saver.delay_writes_for_tests(0.5);
  saver.start(e, dir + "/file/sub", train_state(t, 1), 0, 7);
  const auto t0 = std::chrono::steady_clock::now();
  train_fixed_batches(e, t, 23, 1);  // copies every unit on reach, then goes on
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.5)
      << "step() waited for the writer instead of copying";
  EXPECT_GT(saver.reach_copy_bytes_held_for_tests(), 0u) << "the writer (held 0.5 s) has not yet read the copies";
  EXPECT_THROW(saver.wait(), zt::Error);
  EXPECT_EQ(saver.reach_copy_bytes_held_for_tests(), 0u) << "the failed save's copies were not freed";
  // Again, writing: the copies of this save are made and freed as the writer goes.
  zt::zero::Engine ref = make_engine(c, t);
  train_fixed_batches(ref, t, 11, 1);
  train_fixed_batches(ref, t, 23, 1);
  const zt::ckpt::SaveResult sync = zt::ckpt::save(ref, c.mpi, sync_dir, train_state(t, 2), 0, 7);
  saver.start(e, dir, train_state(t, 2), 0, 7);
  train_fixed_batches(e, t, 29, 1);
  const std::optional<zt::ckpt::SaveResult> done = saver.wait();
  ASSERT_TRUE(done.has_value());
  EXPECT_GT(done->update_guard.copied_bytes, 0u);
  EXPECT_EQ(saver.reach_copy_bytes_held_for_tests(), 0u) << "the written units' copies were not freed";
  EXPECT_EQ(differing_files(sync.path, done->path), 0);
}

}  // namespace
