// ckpt.async without a snapshot (issue 23 item 3): on the host the background save reads
// the engine's own shards while training goes on, and step() waits before AdamW changes a
// unit the save has not yet written. The reference is a synchronous save (ckpt::save) of
// an identical engine at the same step: the file written in the background while the
// engine trains 2 more steps holds the same bits (params, exp_avg, exp_avg_sq, /state's
// step). Twice per stage (0 and 3) and world size (np 1, 2): once as it comes, once with
// the writer held back (delay_writes_for_tests) so the optimizer reaches every unit before
// it is written: then the guard must have waited (update_waits > 0), and without it the
// moments and parameters in the file would be the next step's. The two engines' states
// after the further steps are equal too (the guard changes no arithmetic). A save that
// fails while step() waits releases the units and is rethrown by wait().
#include <gtest/gtest.h>
#include <omp.h>

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

void check_stage(int stage, double delay_s) {
  omp_set_num_threads(1);
  const int np = world_size();
  const zt::train::TrainConfig t = small_config(np, {"zero.stage=" + std::to_string(stage)});
  Comms c = make_comms(0);
  const std::string tag = "s" + std::to_string(stage) + (delay_s > 0 ? "-held" : "") + "-np" + std::to_string(np);
  const std::string sync_dir = fresh_dir("async_in_place/sync-" + tag);
  const std::string async_dir = fresh_dir("async_in_place/async-" + tag);
  const zt::ckpt::TrainState st = train_state(t, 3);

  // The reference: 3 steps, a synchronous save, 2 more steps.
  zt::zero::Engine ref = make_engine(c, t);
  train_fixed_batches(ref, t, 11, 3);
  const zt::ckpt::SaveResult sync = zt::ckpt::save(ref, c.mpi, sync_dir, st, 0, 7);
  train_fixed_batches(ref, t, 23, 2);

  // The same 3 steps, a background save in place, 2 more steps while it writes.
  zt::zero::Engine e = make_engine(c, t);
  ASSERT_TRUE(e.owned_in_place()) << "fp32 host state is saved in place";
  train_fixed_batches(e, t, 11, 3);
  zt::ckpt::AsyncSaver saver(c.mpi);
  saver.prepare(e);  // nothing to prepare in place
  saver.delay_writes_for_tests(delay_s);
  const double stall = saver.start(e, async_dir, st, 0, 7);
  train_fixed_batches(e, t, 23, 2);
  const std::optional<zt::ckpt::SaveResult> done = saver.wait();
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->path, async_dir + "/step-3.h5");
  EXPECT_EQ(done->bytes, sync.bytes);
  if (delay_s > 0) {
    EXPECT_GT(done->update_waits, 0.0) << "the writer was held back " << delay_s
                                       << " s: step() must have waited for unit 0";
  }

  EXPECT_EQ(differing_files(sync.path, done->path), 0)
      << "stage " << stage << ": the background file differs from the synchronous one";
  const std::vector<std::vector<float>> a = full_params(ref), b = full_params(e);
  int after = 0;
  for (size_t u = 0; u < a.size(); ++u) after += !same_bits(a[u], b[u]);
  EXPECT_EQ(after, 0) << "parameters after the 2 further steps differ";
  if (world_rank() == 0)
    std::printf("[async-in-place] np %d stage %d writer held %.1f s: start %.4f s, step() waited "
                "%.3f s, background write %.3f s\n",
                np, stage, delay_s, stall, done->update_waits, done->seconds);
}

TEST(AsyncInPlace, Stage0) { check_stage(0, 0.0); }
TEST(AsyncInPlace, Stage3) { check_stage(3, 0.0); }
TEST(AsyncInPlace, Stage0WriterHeldBack) { check_stage(0, 0.5); }
TEST(AsyncInPlace, Stage3WriterHeldBack) { check_stage(3, 0.5); }

// A save that fails (its folder cannot be made: a regular file is in the way) while the
// optimizer waits for units the writer has not reached: the failure releases them (the
// steps go on, nothing hangs), wait() rethrows it, and the next save in place works.
TEST(AsyncInPlace, FailedSaveReleasesTheUnits) {
  omp_set_num_threads(1);
  const zt::train::TrainConfig t = small_config(world_size(), {"zero.stage=3"});
  Comms c = make_comms(0);
  const std::string dir = fresh_dir("async_in_place/failing-np" + std::to_string(world_size()));
  if (world_rank() == 0) std::ofstream(dir + "/file") << "in the way";
  MPI_Barrier(MPI_COMM_WORLD);
  zt::zero::Engine e = make_engine(c, t);
  train_fixed_batches(e, t, 11, 1);
  zt::ckpt::AsyncSaver saver(c.mpi);
  saver.delay_writes_for_tests(0.3);
  saver.start(e, dir + "/file/sub", train_state(t, 1), 0, 7);
  train_fixed_batches(e, t, 23, 2);  // waits for unit 0 until the writer fails
  EXPECT_THROW(saver.wait(), zt::Error);
  saver.delay_writes_for_tests(0.0);
  saver.start(e, dir, train_state(t, 3), 0, 7);
  train_fixed_batches(e, t, 29, 1);
  const std::optional<zt::ckpt::SaveResult> done = saver.wait();
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->path, dir + "/step-3.h5");
}

}  // namespace
