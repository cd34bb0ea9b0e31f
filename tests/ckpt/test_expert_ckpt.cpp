// Expert-parallel checkpoints (moe.expert_parallel; docs/zero.md "Expert parallelism")
// are the world-size-independent format: whole [E, 2I, C] / [E, C, I] expert tensors.
// At np 4: the reduced Mixtral trained 3 steps at 2 ranks with expert_parallel = 2
// (stage 3) is saved; the same run with expert_parallel = 1 saves a file whose tensors
// equal it within fp32 rounding (same names, shapes, checksums verified by the serial
// reader). The EP = 2 file then loads at 1 rank (EP = 1, stage 0) and at 4 ranks (EP = 4,
// stage 2): the loaded parameters are bitwise the file's (serial reader), and steps 4-6
// on the same global batches give the losses and gradient norms of the EP = 2 run
// continuing without a save, within fp32 rounding; the EP = 1 file loads at 4 ranks
// (EP = 2, stage 1) bitwise and steps 4-6 match the EP = 1 run continuing. The same for
// the reduced gpt-oss (its experts' biases [E, 2I] and [E, C] whole in the file, as the
// weights) and the reduced Qwen2-MoE (the shared expert after the experts in its unit, a
// dense layer: units of two sizes).
#include <gtest/gtest.h>
#include <mpi.h>
#include <omp.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "ckpt_fixtures.hpp"
#include "zero/zero_fixtures.hpp"
#include "zt/ckpt/checkpoint.hpp"
#include "zt/ckpt/serial.hpp"
#include "zt/comm/mpi_comm.hpp"

namespace {

using namespace zt;
using zt::ckpt::testing::fresh_dir;
using zt::zero::testing::Hyper;
using zt::zero::testing::max_rel_diff;
using zt::zero::testing::max_rel_l2;

constexpr int64_t kGlobal = 4;  // sequences per step, split over the ranks
constexpr double kTol = 1e-5;   // relative, fp32

struct Steps {
  std::vector<double> losses, norms;
};

zero::Engine make_engine(const model::Config& cfg, comm::Comm& world, int stage, int ep) {
  Hyper h;
  zero::EngineOptions o = zero::testing::engine_options(h, stage);
  o.max_batch = kGlobal / world.size();
  o.expert_parallel = ep;
  return zero::Engine(cfg, world, nullptr, nullptr, o, h.init);
}

// Steps [first, first + count) on the global batches of kGlobal sequences.
Steps train(zero::Engine& e, const model::Config& cfg, comm::Comm& world, int first, int count) {
  const Hyper h;
  const int64_t B = kGlobal / world.size();
  Steps out;
  for (int s = first; s < first + count; ++s) {
    const zero::testing::Batch b =
        zero::testing::make_batch(s * kGlobal + world.rank() * B, B, h.T, cfg.vocab);
    e.micro_step(b.tokens, b.targets, B, h.T, false, 1.0);
    const zero::StepStats st = e.step(h.lr(s));
    out.losses.push_back(st.loss);
    out.norms.push_back(st.grad_norm);
  }
  return out;
}

ckpt::TrainState state_at(int64_t step) {
  ckpt::TrainState st;
  st.step = step;
  st.sampler_next_step = step;
  return st;
}

// Whether every unit the engine holds (experts gathered) is bitwise the file's.
bool equals_file(zero::Engine& e, const model::Config& cfg, const ckpt::FullCheckpoint& file) {
  model::Parameters<float> p{model::ParamLayout(cfg)};
  e.gather_full_params(p);
  for (int u = 0; u < p.num_units(); ++u) {
    const auto& f = file.params[static_cast<size_t>(u)];
    if (f.size() != p.params(u).size() ||
        std::memcmp(f.data(), p.params(u).data(), f.size() * sizeof(float)) != 0)
      return false;
  }
  return true;
}

void bcast(std::vector<double>& v, int n) {
  v.resize(static_cast<size_t>(n));
  MPI_Bcast(v.data(), n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
}

void any_world_size_any_expert_parallel(const model::Config& cfg) {
  const int rank = zt::testing::world_rank();
  std::unique_ptr<comm::Comm> world = comm::make_mpi_comm(MPI_COMM_WORLD);
  MPI_Comm two_mpi = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &two_mpi);
  const std::string dir_ep = fresh_dir(cfg.name + "_ckpt_ep2"), dir_one = fresh_dir(cfg.name + "_ckpt_ep1");
  const std::string file = dir_ep + "/step-3.h5";

  Steps straight, straight_one;  // EP = 2 (and EP = 1) at 2 ranks: steps 1-3, save, steps 4-6
  if (two_mpi != MPI_COMM_NULL) {
    std::unique_ptr<comm::Comm> two = comm::make_mpi_comm(two_mpi);
    {
      zero::Engine e = make_engine(cfg, *two, 3, 2);
      train(e, cfg, *two, 0, 3);
      ckpt::save(e, two_mpi, dir_ep, state_at(3), 2, 7);
      straight = train(e, cfg, *two, 3, 3);
    }
    {  // the same run without expert parallelism, for the file's figures, then on
      zero::Engine e = make_engine(cfg, *two, 3, 1);
      train(e, cfg, *two, 0, 3);
      ckpt::save(e, two_mpi, dir_one, state_at(3), 2, 7);
      straight_one = train(e, cfg, *two, 3, 3);
    }
    MPI_Comm_free(&two_mpi);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  bcast(straight.losses, 3);
  bcast(straight.norms, 3);
  bcast(straight_one.losses, 3);
  bcast(straight_one.norms, 3);

  const ckpt::FullCheckpoint saved = ckpt::read_full(file);  // verifies every checksum
  if (rank == 0) {  // the same format and tensors as the EP = 1 run's file
    const ckpt::FullCheckpoint one = ckpt::read_full(dir_one + "/step-3.h5");
    const model::ParamLayout whole(cfg);
    ASSERT_EQ(saved.params.size(), static_cast<size_t>(whole.num_units()));
    for (int u = 0; u < whole.num_units(); ++u)
      ASSERT_EQ(saved.params[static_cast<size_t>(u)].size(), static_cast<size_t>(whole.unit(u).numel));
    const double p = max_rel_l2(saved.params, one.params), m = max_rel_l2(saved.exp_avg, one.exp_avg);
    const double v = max_rel_l2(saved.exp_avg_sq, one.exp_avg_sq);
    std::printf("[ep ckpt] %s: file of EP=2 at 2 ranks vs EP=1 at 2 ranks after 3 steps: max rel L2 "
                "params %.2e exp_avg %.2e exp_avg_sq %.2e\n", cfg.name.c_str(), p, m, v);
    EXPECT_LT(p, kTol);
    EXPECT_LT(m, kTol);
    EXPECT_LT(v, kTol);
  }

  Steps one_rank;  // EP = 1 at 1 rank, stage 0
  if (rank == 0) {
    std::unique_ptr<comm::Comm> self = comm::make_mpi_comm(MPI_COMM_SELF);
    zero::Engine e = make_engine(cfg, *self, 0, 1);
    EXPECT_EQ(ckpt::load(e, MPI_COMM_SELF, file).step, 3);
    EXPECT_TRUE(equals_file(e, cfg, saved)) << "EP=1 at 1 rank: the loaded parameters differ from the file";
    one_rank = train(e, cfg, *self, 3, 3);
  }
  bcast(one_rank.losses, 3);
  bcast(one_rank.norms, 3);

  zero::Engine e4 = make_engine(cfg, *world, 2, 4);  // EP = 4 at 4 ranks, stage 2
  EXPECT_EQ(ckpt::load(e4, MPI_COMM_WORLD, file).step, 3);
  EXPECT_TRUE(equals_file(e4, cfg, saved)) << "EP=4 at 4 ranks: the loaded parameters differ from the file";
  const Steps four = train(e4, cfg, *world, 3, 3);

  const double l1 = max_rel_diff(one_rank.losses, straight.losses), n1 = max_rel_diff(one_rank.norms, straight.norms);
  const double l4 = max_rel_diff(four.losses, straight.losses), n4 = max_rel_diff(four.norms, straight.norms);
  if (rank == 0)
    std::printf("[ep ckpt] %s: steps 4-6 after loading the EP=2 file, vs EP=2 continuing: EP=1 at 1 rank "
                "loss %.2e norm %.2e; EP=4 at 4 ranks loss %.2e norm %.2e (loss %.5f %.5f %.5f)\n",
                cfg.name.c_str(), l1, n1, l4, n4, straight.losses[0], straight.losses[1], straight.losses[2]);
  EXPECT_LT(l1, kTol);
  EXPECT_LT(l4, kTol);
  EXPECT_LT(n1, 10 * kTol);
  EXPECT_LT(n4, 10 * kTol);

  // The other way: the EP = 1 file at EP = 2 on 4 ranks (stage 1), against EP = 1 continuing.
  const std::string file_one = dir_one + "/step-3.h5";
  zero::Engine e2 = make_engine(cfg, *world, 1, 2);
  EXPECT_EQ(ckpt::load(e2, MPI_COMM_WORLD, file_one).step, 3);
  EXPECT_TRUE(equals_file(e2, cfg, ckpt::read_full(file_one)))
      << "EP=2 at 4 ranks: the loaded parameters differ from the EP=1 file";
  const Steps two = train(e2, cfg, *world, 3, 3);
  const double l2 = max_rel_diff(two.losses, straight_one.losses);
  const double n2 = max_rel_diff(two.norms, straight_one.norms);
  if (rank == 0)
    std::printf("[ep ckpt] %s: steps 4-6 after loading the EP=1 file at EP=2 on 4 ranks, vs EP=1 "
                "continuing: loss %.2e norm %.2e\n", cfg.name.c_str(), l2, n2);
  EXPECT_LT(l2, kTol);
  EXPECT_LT(n2, 10 * kTol);
}

// One row per MoE family: Mixtral; gpt-oss (its experts' biases); Qwen2-MoE (the shared
// expert, replicated after the experts in its unit; a dense layer).
struct CkptFamily {
  const char* name;
  model::Config (*config)();
};
class ExpertCheckpoint : public ::testing::TestWithParam<CkptFamily> {};

TEST_P(ExpertCheckpoint, AnyWorldSizeAnyExpertParallel) {
  if (zt::testing::world_size() != 4) GTEST_SKIP() << "saves at 2 ranks, loads at 1 and 4 in one job";
  omp_set_num_threads(1);
  any_world_size_any_expert_parallel(GetParam().config());
}

INSTANTIATE_TEST_SUITE_P(
    Families, ExpertCheckpoint,
    ::testing::Values(CkptFamily{"mixtral", [] { return zero::testing::reduced_mixtral(); }},
                      CkptFamily{"gpt_oss", [] { return zero::testing::reduced_gpt_oss(); }},
                      CkptFamily{"qwen2_moe", [] { return zero::testing::reduced_qwen2_moe(); }}),
    [](const ::testing::TestParamInfo<CkptFamily>& i) { return std::string(i.param.name); });

}  // namespace
