// Re-shard: a checkpoint saved at 4 ranks (stage 3, hpZ over 2 simulated nodes) loads at
// 1, 2 and 3 ranks (stages 0, 3 and 2) with parameters and moments bitwise equal to what
// was saved, and training continues from it.
//
// np 4 (the fixture, SaveAtFour): an engine trains 3 steps on fixed batches; its exact
// parameters (gather_full_params) are what is saved; ckpt::save writes them; the serial
// reader (a different code path: whole tensors, no MPI) must give the same bits. It also
// dumps two tensors as raw float32 for the h5py check (check_file.py), and resumes 3
// training steps at 4 ranks, whose losses the other world sizes compare with.
// np 1-3 (LoadElsewhere): ckpt::load into an engine of another layout, then
// gather_full_params and each rank's owned moments against the serial reader; then
// 3 training steps from the file, losses within 1e-4 relative of the 4-rank ones (fp32
// sums in another order across ranks).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <fstream>

#include "ckpt_fixtures.hpp"
#include "zt/ckpt/checkpoint.hpp"
#include "zt/ckpt/serial.hpp"
#include "zt/model/layout.hpp"
#include "zt/train/trainer.hpp"
#include "zt/zero/engine.hpp"

namespace {

using namespace zt::ckpt::testing;

std::string shared_dir() { return (std::filesystem::current_path() / "reshard").string(); }
std::string saved_path() { return shared_dir() + "/step-3.h5"; }

std::vector<std::string> layout_keys(int world) {
  switch (world) {
    case 4: return {"zero.stage=3", "zero.hpz_partition_size=2"};
    case 3: return {"zero.stage=2"};
    case 2: return {"zero.stage=3"};
    default: return {"zero.stage=0"};
  }
}

// Continues training from the saved file for 3 steps (steps 4-6); returns the losses.
std::vector<double> continue_training(Comms& c, int world, const std::string& dir) {
  std::vector<std::string> keys = layout_keys(world);
  keys.push_back("train.steps=6");
  keys.push_back("ckpt.dir=" + dir);
  keys.push_back("ckpt.resume=" + saved_path());
  const auto r = zt::train::train(small_config(world, keys), *c.world, corpus(), {},
                                  zt::train::NodeComms{c.node.get(), c.cross.get(), c.mpi});
  std::vector<double> losses;
  for (const auto& s : r.steps) losses.push_back(s.loss);
  return losses;
}

void write_raw(const std::string& path, std::span<const float> x) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(x.data()), static_cast<std::streamsize>(x.size() * sizeof(float)));
}

TEST(Reshard, SaveAtFour) {
  if (world_size() != 4) GTEST_SKIP() << "the fixture runs at np 4";
  omp_set_num_threads(1);
  if (world_rank() == 0) std::filesystem::remove_all(shared_dir());
  fresh_dir("reshard");
  Comms c = make_comms(2);
  const zt::train::TrainConfig t = small_config(4, {"zero.stage=3", "zero.hpz_partition_size=2", "train.steps=6"});
  zt::zero::Engine engine(t.model, *c.world, c.node.get(), c.cross.get(), t.zero,
                          zt::model::InitOptions{t.seed, t.init_std, true});
  ASSERT_EQ(engine.hpz(), 2);
  // 3 optimizer steps on fixed pseudo-random batches.
  train_fixed_batches(engine, t, 12345 + static_cast<uint64_t>(world_rank()), 3);
  zt::model::Parameters<float> full(engine.model().layout());
  engine.gather_full_params(full);
  const zt::ckpt::SaveResult saved =
      zt::ckpt::save(engine, c.mpi, shared_dir(), train_state(t, 3), 0, t.seed);
  ASSERT_EQ(saved.path, saved_path());

  // Every rank reads the file serially: the parameters are the engine's, and each
  // rank's moments are where its shard says.
  const zt::ckpt::FullCheckpoint f = zt::ckpt::read_full(saved_path());
  const zt::model::ParamLayout& layout = engine.model().layout();
  for (int u = 0; u < layout.num_units(); ++u) {
    EXPECT_TRUE(same_bits(f.params[static_cast<size_t>(u)], std::vector<float>(full.params(u).begin(), full.params(u).end())))
        << "unit " << u;
    const zt::zero::OwnedSlice o = engine.owned(u);
    const auto at = [&](const std::vector<float>& v) {
      return std::span<const float>(v).subspan(static_cast<size_t>(o.begin), static_cast<size_t>(o.count));
    };
    EXPECT_TRUE(same_bits(at(f.exp_avg[static_cast<size_t>(u)]), o.m)) << "exp_avg unit " << u;
    EXPECT_TRUE(same_bits(at(f.exp_avg_sq[static_cast<size_t>(u)]), o.v)) << "exp_avg_sq unit " << u;
  }
  if (world_rank() == 0) {
    // Raw dumps of Engine::gather_full_params for the h5py check.
    const auto& q = layout.find("model.layers.0.self_attn.q_proj.weight");
    write_raw(shared_dir() + "/q_proj0.f32",
              full.params(q.unit).subspan(static_cast<size_t>(q.offset), static_cast<size_t>(q.numel)));
    const auto& e = layout.find("model.embed_tokens.weight");
    write_raw(shared_dir() + "/embed.f32",
              full.params(e.unit).subspan(static_cast<size_t>(e.offset), static_cast<size_t>(e.numel)));
  }
  // Steps 4-6 at 4 ranks: the reference for the other world sizes.
  const std::vector<double> losses = continue_training(c, 4, fresh_dir("reshard_cont4"));
  ASSERT_EQ(losses.size(), 3u);
  if (world_rank() == 0) {
    std::ofstream out(shared_dir() + "/losses_np4.txt");
    out.precision(17);
    for (const double l : losses) out << l << "\n";
    std::printf("[reshard] saved %s at 4 ranks (stage 3, hpZ 2): %.2f MB in %.3f s; continued "
                "losses %.9g %.9g %.9g\n",
                saved.path.c_str(), static_cast<double>(saved.bytes) / 1e6, saved.seconds,
                losses[0], losses[1], losses[2]);
  }
}

TEST(Reshard, LoadElsewhere) {
  const int world = world_size();
  if (world == 4) GTEST_SKIP() << "np 4 saves";
  omp_set_num_threads(1);
  ASSERT_TRUE(std::filesystem::exists(saved_path())) << "run test_ckpt_reshard.np4 first";
  Comms c = make_comms(0);
  const zt::train::TrainConfig t = small_config(world, layout_keys(world));
  zt::zero::Engine engine(t.model, *c.world, nullptr, nullptr, t.zero,
                          zt::model::InitOptions{t.seed + 1, t.init_std, true});  // other init
  const zt::ckpt::TrainState st = zt::ckpt::load(engine, c.mpi, saved_path());
  EXPECT_EQ(st.step, 3);
  EXPECT_EQ(st.world_size, 4);
  EXPECT_EQ(engine.steps_done(), 3);
  zt::model::Parameters<float> full(engine.model().layout());
  engine.gather_full_params(full);
  const zt::ckpt::FullCheckpoint f = zt::ckpt::read_full(saved_path());
  const zt::model::ParamLayout& layout = engine.model().layout();
  int unequal = 0;
  for (int u = 0; u < layout.num_units(); ++u) {
    const std::span<const float> p = full.params(u);
    unequal += !same_bits(std::span<const float>(f.params[static_cast<size_t>(u)]), p);
    const zt::zero::OwnedSlice o = engine.owned(u);
    const auto at = [&](const std::vector<float>& v) {
      return std::span<const float>(v).subspan(static_cast<size_t>(o.begin), static_cast<size_t>(o.count));
    };
    unequal += !same_bits(at(f.exp_avg[static_cast<size_t>(u)]), o.m);
    unequal += !same_bits(at(f.exp_avg_sq[static_cast<size_t>(u)]), o.v);
  }
  EXPECT_EQ(unequal, 0);

  std::vector<double> ref;
  {
    std::ifstream in(shared_dir() + "/losses_np4.txt");
    for (double x; in >> x;) ref.push_back(x);
  }
  ASSERT_EQ(ref.size(), 3u) << "run test_ckpt_reshard.np4 first";
  const std::vector<double> losses =
      continue_training(c, world, fresh_dir("reshard_cont" + std::to_string(world)));
  ASSERT_EQ(losses.size(), 3u);
  double worst = 0;
  for (size_t i = 0; i < 3; ++i) worst = std::max(worst, std::fabs(losses[i] - ref[i]) / ref[i]);
  EXPECT_LT(worst, 1e-4);
  if (world_rank() == 0)
    std::printf("[reshard] loaded at %d rank%s (%s): params + moments bitwise equal to the "
                "saved file: %s; steps 4-6 losses %.9g %.9g %.9g, worst rel diff vs 4 ranks %.2e\n",
                world, world == 1 ? "" : "s", layout_keys(world)[0].c_str(),
                unequal == 0 ? "yes" : "NO", losses[0], losses[1], losses[2], worst);
}

}  // namespace
