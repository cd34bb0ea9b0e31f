// Expert parallelism on the GPU model (DeviceModel::set_expert_group, src/model/cuda/
// device_moe_ep.cpp) against the GPU model without it (the single-rank MoE block, itself
// held to the CPU model by test_device_model.cpp and test_device_gemma_gptoss.cpp), fp32,
// on tiny Mixtral (E 4, k 2, the load-balancing loss in the loss), tiny gpt_oss (E 4, k 2:
// the router's bias and softmax over the top k, the experts' biases and clamped SwiGLU)
// and tiny qwen2_moe / qwen3_moe (experts narrower than the MLP, top-k not renormalised, a
// dense layer, qwen2_moe's shared expert; model_params.hpp). The norm weights and every bias are drawn off
// their init (draw_off_init), so the experts' biases carry signal. Every rank builds the
// same global problem: P ranks x (B, T) tokens, one parameter set. The reference, on
// every rank, is the whole model run once per rank's tokens; the expert-parallel model
// holds only this rank's E/P experts (ParamLayout::expert_slice) and runs its own tokens,
// collectively over the group. Then
//   - loss, forward-only loss and router statistics (tokens per expert exactly, rows, aux):
//     those of the reference pass on this rank's tokens;
//   - the dense gradients (attention, norms, router and its bias, embedding, head, dense
//     layers, the shared expert): that pass's;
//   - this rank's experts' gradients, their biases' too: the sum of every rank's pass (the
//     group's tokens),
//   each within 1e-5 (max |got - ref| / max |ref| per buffer), with and without recompute;
//   and bf16-mixed on the model (k = E: no top-k flips) within bf16's 1e-2.
// Groups: MPI (host memory: the exchanges staged through pinned buffers; 2 ranks may share
// one GPU) at 1 and 2 ranks; NCCL (device buffers) at 1 rank (all_to_all to itself) and at
// 2 ranks where 2 GPUs are visible. Skips (exit 77, SKIPPED:) without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.hpp"
#include "model_params.hpp"
#include "support/mpi_fixtures.hpp"
#include "zt/comm/mpi_comm.hpp"
#include "zt/comm/nccl_comm.hpp"
#include "zt/model/device_model.hpp"
#include "zt/model/model.hpp"

namespace zt::kernels::cuda::testing {
namespace {

using model::Config;
using model::ParamLayout;
using zt::testing::world_rank;
using zt::testing::world_size;

constexpr double kTol = 1e-5;
constexpr int64_t kB = 2, kT = 16;  // each rank's batch

// Unit u of the whole layout `full` cut to the expert slice `mine` holds: each of its
// tensors is elements [global_begin, global_begin + numel) of the whole tensor of that
// name (the experts' weights and biases: this slice's; the rest whole).
std::vector<float> slice_unit(const ParamLayout& full, const ParamLayout& mine, int u,
                              std::span<const float> whole) {
  std::vector<float> s(static_cast<size_t>(mine.unit(u).numel));
  int64_t filled = 0;
  for (const model::TensorInfo& t : mine.tensors()) {
    if (t.unit != u) continue;
    const model::TensorInfo& w = full.find(t.name);
    EXPECT_EQ(w.numel, t.global_rows > 0 ? t.numel * mine.expert_parts() : t.numel) << t.name;
    std::copy_n(whole.begin() + w.offset + t.global_begin, t.numel, s.begin() + t.offset);
    filled += t.numel;
  }
  EXPECT_EQ(filled, mine.unit(u).numel) << "unit " << u;
  return s;
}

class DeviceExpertParallel : public ::testing::Test {
 protected:
  void SetUp() override {
    const int devices = device_count();
    if (devices == 0) GTEST_SKIP() << "no GPU visible";
    ZT_CUDA_CHECK(cudaSetDevice(world_rank() % devices));
    // One seed for every rank (rank 0's), so all build the same problem.
    const char* env = std::getenv("ZT_TEST_SEED");
    seed_ = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    MPI_Bcast(&seed_, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    if (world_rank() == 0)
      std::printf("seed %llu (ZT_TEST_SEED=%llu replays it)\n", seed_, seed_);
    // The expert-parallel model's own stream (a device group is ordered after it).
    ZT_CUDA_CHECK(cudaStreamCreate(&stream_));
  }
  void TearDown() override {
    if (device_count() == 0) return;
    ZT_CUDA_CHECK(cudaDeviceSynchronize());
    if (stream_) ZT_CUDA_CHECK(cudaStreamDestroy(stream_));
  }

  // The comparison above of model cfg over `group` (its size P, this process's rank in
  // it), with weights and activations T (fp32, or bf16-mixed: bf16 with fp32 gradients),
  // tolerances tol (loss, aux) and grad_tol.
  template <class T>
  void check(const Config& cfg, comm::Comm& group, bool recompute, const std::string& tag,
             double tol = kTol, double grad_tol = kTol) {
    const int P = group.size(), me = group.rank();
    ASSERT_EQ(cfg.experts % P, 0) << "the group must divide the experts";
    const ParamLayout full(cfg), mine = ParamLayout::expert_slice(cfg, P, me);
    model::Parameters<float> init(full);
    init.init({.seed = seed_});
    std::mt19937_64 off(seed_ + 2);
    draw_off_init(init, full, off, 0.1, 3.0);  // norms 1 + N(0, 0.1), biases N(0, 0.3)
    // Every rank's tokens (the same on every process).
    std::mt19937_64 rng(seed_ + 1);
    const int64_t N = kB * kT;
    std::vector<std::vector<int32_t>> tokens(P), targets(P);
    for (int p = 0; p < P; ++p)
      for (int64_t n = 0; n < N; ++n) {
        tokens[p].push_back(static_cast<int32_t>(rng() % cfg.vocab));
        targets[p].push_back(n % 7 == 3 ? -1 : static_cast<int32_t>(rng() % cfg.vocab));
      }

    // The reference: the whole model, once per rank's tokens, fresh gradients each.
    model::DeviceModel<T, float> whole(cfg, kB, kT);
    std::vector<DeviceBuffer<T>> wp;
    std::vector<DeviceBuffer<float>> wg;
    for (int u = 0; u < full.num_units(); ++u) {
      Vec v(init.params(u).begin(), init.params(u).end());
      wp.push_back(to_device<T>(v));
      wg.emplace_back(v.size());
      whole.bind_unit(u, wp.back().data(), wg.back().data());
    }
    double ref_loss = 0, ref_eval = 0;
    model::RouterStats ref_router, ref_eval_router;
    std::vector<Vec> mine_grads(full.num_units()), sum_grads(full.num_units());
    for (int p = 0; p < P; ++p) {
      for (auto& g : wg) g.fill_bytes(0);
      const double l = whole.loss_and_grad(tokens[p], targets[p], kB, kT);
      for (int u = 0; u < full.num_units(); ++u) {
        const Vec g = to_host(wg[u]);
        if (p == me) mine_grads[u] = g;
        if (sum_grads[u].empty()) sum_grads[u].assign(g.size(), 0.0);
        for (size_t i = 0; i < g.size(); ++i) sum_grads[u][i] += g[i];
      }
      if (p != me) continue;
      ref_loss = l;
      ref_router = whole.router_stats();
      ref_eval = whole.loss(tokens[p], targets[p], kB, kT);
      ref_eval_router = whole.router_stats();
    }

    // Expert parallelism: this rank's slice, its own tokens.
    model::DeviceModel<T, float> ep(mine, kB, kT, stream_);
    std::vector<DeviceBuffer<T>> ep_p;
    std::vector<DeviceBuffer<float>> ep_g;
    for (int u = 0; u < mine.num_units(); ++u) {
      const std::vector<float> s = slice_unit(full, mine, u, init.params(u));
      Vec v(s.begin(), s.end());
      ep_p.push_back(to_device<T>(v));
      ep_g.emplace_back(v.size());
      ep_g.back().fill_bytes(0);
      ep.bind_unit(u, ep_p.back().data(), ep_g.back().data());
    }
    ep.set_expert_group(&group);
    const double loss = ep.loss_and_grad(tokens[me], targets[me], kB, kT, recompute);
    const model::RouterStats router = ep.router_stats();
    const double eval = ep.loss(tokens[me], targets[me], kB, kT);
    std::printf("[device ep] %s rank %d of %d: loss %.8f vs %.8f, eval %.8f vs %.8f, aux %.8f vs "
                "%.8f\n", tag.c_str(), me, P, loss, ref_loss, eval, ref_eval, router.aux,
                ref_router.aux);
    EXPECT_LT(std::abs(loss - ref_loss) / ref_loss, tol) << tag << " loss";
    EXPECT_LT(std::abs(eval - ref_eval) / ref_eval, tol) << tag << " forward-only loss";
    EXPECT_EQ(router.tokens, ref_router.tokens) << tag << " tokens per expert";
    EXPECT_EQ(router.rows, ref_router.rows) << tag << " routed rows";
    EXPECT_LT(std::abs(router.aux - ref_router.aux) / ref_router.aux, tol) << tag << " aux";
    EXPECT_EQ(ep.router_stats().tokens, ref_eval_router.tokens) << tag << " forward-only tokens";
    for (int u = 0; u < mine.num_units(); ++u) {
      // dense: this rank's pass; experts: the group's (the sum), cut to this slice
      // (the experts [b, x) of the unit; the shared expert follows them, dense)
      const ParamLayout::ElementRange r = mine.expert_range(u);
      const Vec got = to_host(ep_g[u]);
      std::vector<float> s32(sum_grads[u].begin(), sum_grads[u].end());
      const std::vector<float> e = slice_unit(full, mine, u, s32);
      const std::vector<float> m32(mine_grads[u].begin(), mine_grads[u].end());  // (fp32 values)
      const std::vector<float> d = slice_unit(full, mine, u, m32);
      const auto piece = [](const auto& v, int64_t a, int64_t b) {
        return Vec(v.begin() + a, v.begin() + b);
      };
      const int64_t n = mine.unit(u).numel;
      expect_close(piece(got, 0, r.begin), piece(d, 0, r.begin), grad_tol,
                   tag + " dense grad " + mine.unit(u).name);
      expect_close(piece(got, r.end, n), piece(d, r.end, n), grad_tol,
                   tag + " dense grad after the experts " + mine.unit(u).name);
      if (r.end > r.begin)
        expect_close(piece(got, r.begin, r.end), piece(e, r.begin, r.end), grad_tol,
                     tag + " expert grad " + mine.unit(u).name);
    }
  }

  unsigned long long seed_ = 0;
  cudaStream_t stream_ = nullptr;
};

TEST_F(DeviceExpertParallel, MpiGroupFp32) {
  auto group = comm::make_mpi_comm(MPI_COMM_WORLD);
  check<float>(tiny_mixtral(4, 2), *group, false, "mpi");
}

TEST_F(DeviceExpertParallel, MpiGroupFp32Recompute) {
  auto group = comm::make_mpi_comm(MPI_COMM_WORLD);
  check<float>(tiny_mixtral(4, 2), *group, true, "mpi recompute");
}

// gpt-oss's block: the router's bias and top-k softmax before the exchange, the experts'
// biases (and their gradients) and clamped SwiGLU on the experts' ranks.
TEST_F(DeviceExpertParallel, MpiGroupGptOssFp32) {
  auto group = comm::make_mpi_comm(MPI_COMM_WORLD);
  check<float>(tiny_gpt_oss(4, 2), *group, false, "mpi gpt_oss");
  check<float>(tiny_gpt_oss(4, 2), *group, true, "mpi gpt_oss recompute");
}

// Qwen's blocks: the experts' own width, the top-k not renormalised, a dense layer (no
// exchange), qwen2_moe's shared expert and its gate on every rank for its own tokens.
TEST_F(DeviceExpertParallel, MpiGroupQwenMoeFp32) {
  auto group = comm::make_mpi_comm(MPI_COMM_WORLD);
  for (const char* family : {"qwen2_moe", "qwen3_moe"}) {
    check<float>(tiny_qwen_moe(family, 4, 2, 0), *group, false, std::string("mpi ") + family);
    check<float>(tiny_qwen_moe(family, 4, 2, 1), *group, true, std::string("mpi recompute ") + family);
  }
}

// bf16-mixed on the model (the engine still refuses it: validate_experts), with k = E so
// no rounding can flip a top-k choice; bf16's tolerances (cuda_test_util.hpp).
TEST_F(DeviceExpertParallel, MpiGroupBf16MixedAllExperts) {
  auto group = comm::make_mpi_comm(MPI_COMM_WORLD);
  check<bf16_t>(tiny_mixtral(4, 4), *group, false, "mpi bf16-mixed", kTolBF16, kTolBF16);
  check<bf16_t>(tiny_gpt_oss(4, 4), *group, false, "mpi gpt_oss bf16-mixed", kTolBF16, kTolBF16);
}

TEST_F(DeviceExpertParallel, NcclGroupFp32) {
  if (world_size() > device_count())
    GTEST_SKIP() << world_size() << " ranks but " << device_count() << " GPUs (NCCL: one each)";
  auto group = comm::make_nccl_comm(MPI_COMM_WORLD);
  group->set_timeout(std::chrono::seconds(60));
  for (const Config& cfg : {tiny_mixtral(4, 2), tiny_gpt_oss(4, 2)}) {
    check<float>(cfg, *group, false, "nccl " + cfg.family);
    check<float>(cfg, *group, true, "nccl recompute " + cfg.family);
  }
}

// A model on the whole layout cannot join a group of 2 (nor a dense model any group).
TEST_F(DeviceExpertParallel, RefusesALayoutOfAnotherSlice) {
  auto group = comm::make_mpi_comm(MPI_COMM_WORLD);
  if (group->size() < 2) GTEST_SKIP() << "needs 2 ranks";
  model::DeviceModel<float, float> m(tiny_mixtral(4, 2), kB, kT);
  EXPECT_THROW(m.set_expert_group(group.get()), InputError);
  model::DeviceModel<float, float> dense(tiny_family("llama", 0, false), kB, kT);
  EXPECT_THROW(dense.set_expert_group(group.get()), InputError);
}

}  // namespace
}  // namespace zt::kernels::cuda::testing
