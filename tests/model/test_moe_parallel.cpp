// Expert parallelism (model/moe_parallel.hpp) against the single-rank block: every rank
// builds the same global problem (P ranks x N tokens, all E experts), runs its own tokens
// through ExpertParallelMoe with only its E/P experts, and compares with the CPU
// reference kernels (kernels/moe.hpp) in double over every rank's tokens: its output,
// its input and router gradients, and its experts' gradients summed over the tokens of
// every rank, each within 1e-5 of the largest value; the load-balancing statistics of
// its tokens; and that every routed row was computed once (no drops). Runs at 1, 2 and 4
// ranks (4: two experts per rank); at 3, the refusal of a group that does not divide E.
// Both blocks: Mixtral's, and gpt-oss's (router bias, softmax over the k chosen logits,
// experts' biases sliced with the experts and their gradients, SwiGLU clamped at 0.5).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "../kernels/gradcheck.hpp"
#include "zt/comm/mpi_comm.hpp"
#include "zt/core/error.hpp"
#include "zt/kernels/linear.hpp"
#include "zt/kernels/moe.hpp"
#include "zt/model/moe_parallel.hpp"

namespace zt::model {
namespace {

using Vec = std::vector<double>;
namespace cpu = kernels::cpu;

std::vector<float> f32(const Vec& v) { return std::vector<float>(v.begin(), v.end()); }

// max |got - want| / max |want|
double rel(const std::vector<float>& got, const Vec& want, size_t from = 0) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num = std::max(num, std::abs(static_cast<double>(got[i]) - want[from + i]));
    den = std::max(den, std::abs(want[from + i]));
  }
  return den > 0 ? num / den : num;
}

// The reference for one rank's tokens: forward and backward of the whole block in double.
struct Ref {
  Vec out, dx, drouter, dgate_up, ddown, drouter_bias, dgu_bias, ddn_bias;
  std::vector<double> tokens, prob_sum;
};

// gpt-oss's parts (empty, 0, false: Mixtral's block).
struct GptOss {
  Vec router_bias, gu_bias, dn_bias;
  double limit = 0.0;
  bool topk_softmax = false;
};

Ref reference(const Vec& x, const Vec& router, const Vec& gate_up, const Vec& down, const Vec& R,
              int64_t N, int64_t C, int64_t I, int64_t E, int64_t k, double coef, const GptOss& g) {
  Ref r;
  const bool bias = !g.router_bias.empty();
  r.drouter_bias.assign(bias ? E : 0, 0.0);
  r.dgu_bias.assign(g.gu_bias.size(), 0.0);
  r.ddn_bias.assign(g.dn_bias.size(), 0.0);
  cpu::ExpertExtras<double> ex;
  ex.swiglu_limit = g.limit;
  if (bias) {
    ex.gate_up_bias = g.gu_bias.data();
    ex.down_bias = g.dn_bias.data();
    ex.dgate_up_bias = r.dgu_bias.data();
    ex.ddown_bias = r.ddn_bias.data();
  }
  const int64_t S = N * k;
  Vec logits(N * E), probs(N * E), w(S), gu(S * 2 * I), h(S * I), y(S * C);
  std::vector<int32_t> idx(S);
  r.out.resize(N * C);
  r.tokens.assign(E, 0.0);
  r.prob_sum.assign(E, 0.0);
  cpu::linear_forward(logits.data(), x.data(), router.data(), N, C, E);
  if (bias) cpu::bias_forward(logits.data(), g.router_bias.data(), N, E);
  cpu::moe_route(probs.data(), idx.data(), w.data(), logits.data(), N, E, k, true, g.topk_softmax);
  cpu::moe_experts_forward(r.out.data(), gu.data(), h.data(), y.data(), x.data(), gate_up.data(),
                           down.data(), idx.data(), w.data(), N, C, I, E, k, ex);
  cpu::moe_aux_accumulate(r.tokens.data(), r.prob_sum.data(), probs.data(), idx.data(), N, E, k);
  r.dx.assign(N * C, 0.0);
  r.drouter.assign(E * C, 0.0);
  r.dgate_up.assign(gate_up.size(), 0.0);
  r.ddown.assign(down.size(), 0.0);
  Vec dw(S), dprob(E), dl(N * E);
  cpu::moe_experts_backward(r.dx.data(), r.dgate_up.data(), r.ddown.data(), dw.data(), R.data(),
                            x.data(), gate_up.data(), down.data(), idx.data(), w.data(), gu.data(),
                            h.data(), y.data(), N, C, I, E, k, ex);
  cpu::moe_aux_dprob(dprob.data(), r.tokens.data(), static_cast<double>(N), E, coef);
  cpu::moe_route_backward(dl.data(), dw.data(), dprob.data(), probs.data(), idx.data(), w.data(), N,
                          E, k, true, g.topk_softmax);
  cpu::linear_backward(r.dx.data(), r.drouter.data(), dl.data(), x.data(), router.data(), N, C, E);
  if (bias) cpu::bias_backward(r.drouter_bias.data(), dl.data(), N, E);
  return r;
}

class ExpertParallelBlock : public ::testing::TestWithParam<bool> {};

TEST_P(ExpertParallelBlock, EqualsTheSingleRankBlock) {
  const bool gpt_oss = GetParam();
  auto comm = comm::make_mpi_comm(MPI_COMM_WORLD);
  const int P = comm->size(), me = comm->rank();
  const int64_t N = 37, C = 12, I = 10, E = 8, k = 2;
  const double coef = 0.05;
  if (E % P != 0) GTEST_SKIP() << P << " ranks do not divide " << E << " experts (the refusal test)";
  // The global problem, the same on every rank.
  const Vec x_all = testing::randn(P * N * C, 1), router = testing::randn(E * C, 2, 0.5);
  const Vec gate_up = testing::randn(E * 2 * I * C, 3, 0.3), down = testing::randn(E * C * I, 4, 0.3);
  const Vec R_all = testing::randn(P * N * C, 5);
  // fp32 inputs, and the reference on exactly those values.
  auto round = [](const Vec& v) {
    Vec r(v.size());
    for (size_t i = 0; i < v.size(); ++i) r[i] = static_cast<double>(static_cast<float>(v[i]));
    return r;
  };
  const Vec xr = round(x_all), rr = round(router), gr = round(gate_up), dr = round(down), Rr = round(R_all);
  GptOss g;
  if (gpt_oss) {
    g.router_bias = round(testing::randn(E, 6, 0.5));
    g.gu_bias = round(testing::randn(E * 2 * I, 7, 0.3));
    g.dn_bias = round(testing::randn(E * C, 8, 0.3));
    g.limit = 0.5;
    g.topk_softmax = true;
  }

  ExpertParallelMoe ep(*comm, C, I, E, k, ExpertRouting{true, g.topk_softmax});
  const int64_t L = ep.local_experts(), first = ep.first_expert();
  ASSERT_EQ(L, E / P);
  const auto part = [](const Vec& v, int64_t at, int64_t n) {
    return std::vector<float>(v.begin() + at, v.begin() + at + n);
  };
  const std::vector<float> x = part(xr, me * N * C, N * C), dout = part(Rr, me * N * C, N * C);
  const std::vector<float> r32 = f32(rr);
  const std::vector<float> gu = part(gr, first * 2 * I * C, L * 2 * I * C);
  const std::vector<float> dn = part(dr, first * C * I, L * C * I);
  const std::vector<float> rb = f32(g.router_bias);
  const std::vector<float> gub = gpt_oss ? part(g.gu_bias, first * 2 * I, L * 2 * I) : std::vector<float>();
  const std::vector<float> dnb = gpt_oss ? part(g.dn_bias, first * C, L * C) : std::vector<float>();
  std::vector<float> drb(rb.size(), 0.f), dgub(gub.size(), 0.f), ddnb(dnb.size(), 0.f);
  cpu::ExpertExtras<float> ex;
  ex.swiglu_limit = g.limit;
  if (gpt_oss) {
    ex.gate_up_bias = gub.data();
    ex.down_bias = dnb.data();
    ex.dgate_up_bias = dgub.data();
    ex.ddown_bias = ddnb.data();
  }
  std::vector<float> out(N * C);
  ep.forward(out.data(), x.data(), r32.data(), gu.data(), dn.data(), N,
             gpt_oss ? rb.data() : nullptr, ex);
  std::vector<float> dprob(E);
  cpu::moe_aux_dprob(dprob.data(), ep.tokens().data(), static_cast<double>(N), E, coef);
  std::vector<float> dx(N * C, 0.f), drouter(E * C, 0.f), dgu(gu.size(), 0.f), ddn(dn.size(), 0.f);
  ep.backward(dx.data(), drouter.data(), dgu.data(), ddn.data(), dout.data(), x.data(), r32.data(),
              gu.data(), dn.data(), dprob.data(), gpt_oss ? drb.data() : nullptr, ex);

  // References: this rank's tokens; the experts' gradients summed over every rank's.
  Vec sum_dgu(gate_up.size(), 0.0), sum_ddn(down.size(), 0.0);
  Vec sum_dgub(g.gu_bias.size(), 0.0), sum_ddnb(g.dn_bias.size(), 0.0);
  Ref mine;
  for (int p = 0; p < P; ++p) {
    const Vec xp(xr.begin() + p * N * C, xr.begin() + (p + 1) * N * C);
    const Vec Rp(Rr.begin() + p * N * C, Rr.begin() + (p + 1) * N * C);
    Ref r = reference(xp, rr, gr, dr, Rp, N, C, I, E, k, coef, g);
    for (size_t i = 0; i < sum_dgu.size(); ++i) sum_dgu[i] += r.dgate_up[i];
    for (size_t i = 0; i < sum_ddn.size(); ++i) sum_ddn[i] += r.ddown[i];
    for (size_t i = 0; i < sum_dgub.size(); ++i) sum_dgub[i] += r.dgu_bias[i];
    for (size_t i = 0; i < sum_ddnb.size(); ++i) sum_ddnb[i] += r.ddn_bias[i];
    if (p == me) mine = std::move(r);
  }
  EXPECT_LT(rel(out, mine.out), 1e-5) << "output, rank " << me;
  EXPECT_LT(rel(dx, mine.dx), 1e-5) << "dx, rank " << me;
  EXPECT_LT(rel(drouter, mine.drouter), 1e-5) << "drouter, rank " << me;
  EXPECT_LT(rel(dgu, sum_dgu, first * 2 * I * C), 1e-5) << "dgate_up, rank " << me;
  EXPECT_LT(rel(ddn, sum_ddn, first * C * I), 1e-5) << "ddown, rank " << me;
  if (gpt_oss) {
    EXPECT_LT(rel(drb, mine.drouter_bias), 1e-5) << "drouter_bias, rank " << me;
    EXPECT_LT(rel(dgub, sum_dgub, first * 2 * I), 1e-5) << "dgate_up_bias, rank " << me;
    EXPECT_LT(rel(ddnb, sum_ddnb, first * C), 1e-5) << "ddown_bias, rank " << me;
  }
  for (int64_t e = 0; e < E; ++e) EXPECT_EQ(ep.tokens()[e], mine.tokens[e]) << "T of expert " << e;
  std::printf("[ep] %s rank %d of %d: experts [%lld, %lld), rows computed %lld; rel err out %.2e "
              "dx %.2e drouter %.2e dgate_up %.2e ddown %.2e\n",
              gpt_oss ? "gpt-oss" : "mixtral", me, P, static_cast<long long>(first), static_cast<long long>(first + L),
              static_cast<long long>(ep.rows_computed()), rel(out, mine.out), rel(dx, mine.dx),
              rel(drouter, mine.drouter), rel(dgu, sum_dgu, first * 2 * I * C),
              rel(ddn, sum_ddn, first * C * I));
  // Every routed row computed exactly once over the group: no drops, no duplicates.
  long long rows = ep.rows_computed(), total = 0;
  MPI_Allreduce(&rows, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(total, static_cast<long long>(P) * N * k);
}

INSTANTIATE_TEST_SUITE_P(Blocks, ExpertParallelBlock, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "gpt_oss" : "mixtral"; });

// The GPU block's local plan (local_expert_plan) against a stable sort of the received
// rows by their local expert: the same order, pos its inverse, offsets the counts' sums;
// empty sources and experts included, and the refusal of counts that are not [P, L].
TEST(ExpertParallel, LocalPlanIsAStableSortByExpert) {
  const int64_t P = 3, L = 4;
  const std::vector<int64_t> counts = {2, 0, 3, 1,   // from rank 0
                                       0, 0, 0, 0,   // rank 1 sent nothing
                                       1, 0, 2, 4};  // rank 2
  std::vector<int64_t> tag;  // [R] the local expert of each received row, in arrival order
  for (int64_t p = 0; p < P; ++p)
    for (int64_t e = 0; e < L; ++e) tag.insert(tag.end(), counts[p * L + e], e);
  std::vector<int32_t> want(tag.size());
  for (size_t r = 0; r < want.size(); ++r) want[r] = static_cast<int32_t>(r);
  std::stable_sort(want.begin(), want.end(), [&](int32_t a, int32_t b) { return tag[a] < tag[b]; });
  const LocalExpertPlan plan = local_expert_plan(counts, P, L);
  EXPECT_EQ(plan.perm, want);
  ASSERT_EQ(plan.pos.size(), want.size());
  for (size_t q = 0; q < want.size(); ++q) EXPECT_EQ(plan.pos[static_cast<size_t>(want[q])], q);
  EXPECT_EQ(plan.offsets, (std::vector<int64_t>{0, 3, 3, 8, 13}));
  EXPECT_TRUE(local_expert_plan(std::vector<int64_t>(P * L, 0), P, L).perm.empty());
  EXPECT_THROW(local_expert_plan(counts, P, L + 1), std::logic_error);
  EXPECT_THROW(local_expert_plan(std::vector<int64_t>{1, -1}, 1, 2), std::logic_error);
}

TEST(ExpertParallel, AGroupThatDoesNotDivideTheExpertsIsRefused) {
  auto comm = comm::make_mpi_comm(MPI_COMM_WORLD);
  if (8 % comm->size() == 0) GTEST_SKIP() << "needs a group size that does not divide 8 (np 3)";
  EXPECT_THROW(ExpertParallelMoe(*comm, 4, 4, 8, 2), InputError);
}

}  // namespace
}  // namespace zt::model
