// Bytes sent per optimizer step, read from the comm layer's counters on the engine's
// communicators, against the ZeRO / ZeRO++ formulas computed here. The counters are
// modelled from the calls (algorithm_bytes: the ring formula on each call's arguments),
// not measured on a wire, so this checks which collectives the engine issues and how
// large, per communicator; it cannot see what the MPI library really sends. (Ψ = parameter bytes
// in the comm dtype, fp32 here; n ranks, K per node, N nodes, h the hpZ group):
//
//   one gather or reduce-scatter of Ψ:  inter-node Ψ (N-1)/n, intra-node Ψ (K-1)/K
//                                       (their sum is the flat ring's Ψ (n-1)/n)
//   stage 0: all-reduce = 2 of them;  stage 1: reduce-scatter + gather;
//   stage 2: accum reduce-scatters + 1 gather;
//   stage 3: per micro-batch a forward gather of Ψ, a backward gather of Ψ - Ψ_head
//   and a reduce-scatter of Ψ: 3 Ψ - Ψ_head. (The model uses the head unit, final norm
//   + LM head, once for its forward, the loss and its backward, so it is gathered once;
//   Ψ_head is 14% of this model, so the textbook 3 Ψ would be 4.6% high.)
//   stage 3 + hpZ: the first forward gather of a step from all ranks, the other
//   gathers of the step within the hpZ group: (h-1)/h of their bytes, intra-node.
//   qwZ / qgZ: the moved bytes are int8 + one fp32 scale per block: Q = S + 4 S / block
//   per shard of S elements, shards padded to whole blocks.
// Tolerance 1%: padding to 16-element rows and the step's 16-byte norm all-reduce.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "zero_fixtures.hpp"
#include "zt/zero/partition.hpp"
#include "zt/zero/quantize.hpp"

namespace zt::zero::testing {
namespace {

struct Topology {
  int n, K, N;  // ranks, ranks per node, nodes
};

Topology topology(int rpn) {
  const int n = world_size();
  const int K = rpn > 0 ? rpn : n;
  return {n, K, n / K};
}

// Traffic of the second optimizer step of a fresh engine.
Traffic step_traffic(int rpn, EngineOptions o, const Hyper& h) {
  const model::Config cfg = reduced_config();
  Comms comms = make_comms(rpn);
  o.accum = h.accum;
  Engine e(cfg, *comms.world, comms.node.get(), comms.cross.get(), o, h.init);
  Hyper h2 = h;
  const EngineRun run = engine_run(e, cfg, h2, 2);
  return run.stats.back().traffic;
}

double psi() { return 4.0 * static_cast<double>(model::ParamLayout(reduced_config()).total_numel()); }
double psi_head() {
  const model::ParamLayout layout(reduced_config());
  return 4.0 * static_cast<double>(layout.unit(layout.head_unit()).numel);
}

void expect_bytes(const char* what, uint64_t actual, double expected, const std::string& label) {
  if (world_rank() == 0)
    std::printf("[ bytes ] np %d %-28s %-6s modelled %10llu B/step, theory %12.1f (%+.3f%%)\n",
                world_size(), label.c_str(), what, static_cast<unsigned long long>(actual),
                expected, expected > 0 ? 100.0 * (static_cast<double>(actual) / expected - 1) : 0.0);
  if (expected == 0) {
    EXPECT_LE(actual, 32u) << label << " " << what;  // at most the norm all-reduce
  } else {
    EXPECT_NEAR(static_cast<double>(actual) / expected, 1.0, 0.01) << label << " " << what;
  }
}

TEST(CommBytes, StagesMatchTheory) {
  const double P = psi();
  const double PH = psi_head();
  for (int rpn : {0, 1, 2}) {
    if (rpn > 0 && world_size() % rpn != 0) continue;
    const Topology t = topology(rpn);
    const double inter1 = P * (t.N - 1) / t.n;  // one gather / reduce-scatter of Ψ
    const double intra1 = P * (t.K - 1) / t.K;
    for (int stage = 0; stage <= 3; ++stage) {
      for (int accum : {1, 2}) {
        Hyper h;
        h.accum = accum;
        EngineOptions o = engine_options(h, stage);
        o.hpz_partition_size = 1;  // off (see the next test)
        const Traffic tr = step_traffic(rpn, o, h);
        // In units of Ψ moved by gathers / reduce-scatters (an all-reduce is 2).
        const double per_step[4] = {2, 2, accum + 1.0, accum * (3.0 - PH / P)};
        const std::string label = "rpn" + std::to_string(rpn) + " stage" + std::to_string(stage) +
                                  " accum" + std::to_string(accum);
        expect_bytes("total", tr.total_bytes(), per_step[stage] * P * (t.n - 1) / t.n, label);
        expect_bytes("inter", tr.inter_node_bytes(), per_step[stage] * inter1, label);
        expect_bytes("intra", tr.intra_node_bytes(), per_step[stage] * intra1, label);
        if (stage == 3 && world_rank() == 0 && t.n > 1)
          std::printf("[ bytes ] np %d %s: total / (3 Ψ (n-1)/n) = %.4f\n", t.n, label.c_str(),
                      static_cast<double>(tr.total_bytes()) / (3.0 * accum * P * (t.n - 1) / t.n));
      }
    }
  }
}

TEST(CommBytes, HpzMovesBackwardGathersIntoTheNode) {
  const int n = world_size();
  if (n % 2 != 0) GTEST_SKIP() << "needs nodes of 2 ranks";
  const double P = psi();
  const double PH = psi_head();
  const Topology t = topology(2);
  for (int accum : {1, 2}) {
    Hyper h;
    h.accum = accum;
    EngineOptions o = engine_options(h, 3);
    o.hpz_partition_size = 1;
    const Traffic plain = step_traffic(2, o, h);
    o.hpz_partition_size = 0;  // ranks per node
    const Traffic hpz = step_traffic(2, o, h);
    const int g = t.N > 1 ? 2 : 1;  // hpZ in effect only across nodes
    // Gathers of the step: accum (2 Ψ - Ψ_head); the first forward one (Ψ) from all ranks.
    const double gathered = accum * (2 * P - PH);
    const double secondary = g > 1 ? (gathered - P) * (g - 1) / g : 0.0;
    const std::string label = "stage3 hpz accum" + std::to_string(accum);
    if (g > 1) {
      expect_bytes("inter", hpz.inter_node_bytes(), (1.0 + accum) * P * (t.N - 1) / t.n, label);
      expect_bytes("intra", hpz.intra_node_bytes(),
                   (1.0 + accum) * P * (t.K - 1) / t.K + secondary, label);
      expect_bytes("hpz", hpz.bytes(Group::kHpz), secondary, label);
      const double ratio = static_cast<double>(hpz.inter_node_bytes()) /
                           static_cast<double>(plain.inter_node_bytes());
      const double theory = (1.0 + accum) * P / (accum * (3 * P - PH));
      if (world_rank() == 0)
        std::printf("[ bytes ] np %d stage3 accum%d: inter-node with hpZ / without = %.4f "
                    "(theory %.4f; textbook (1 + accum) / (3 accum) = %.4f)\n",
                    n, accum, ratio, theory, (1.0 + accum) / (3.0 * accum));
      EXPECT_NEAR(ratio, theory, 0.01);
    } else {
      EXPECT_EQ(hpz.total_bytes(), plain.total_bytes());  // one node: nothing to do
    }
  }
}

// Bytes of the int8 payload + scales of every unit's shard, with qwZ/qgZ padding
// (without the head unit when `head` is false).
double quantized_shard_bytes(int n, int block, bool head = true) {
  const model::ParamLayout layout(reduced_config());
  double q = 0;
  for (const model::UnitInfo& u : layout.units()) {
    if (!head && u.kind == model::UnitKind::kHead) continue;
    const size_t shard = static_cast<size_t>(padded_numel(u.numel, n, block) / n);
    q += static_cast<double>(packed_bytes(shard, static_cast<size_t>(block)));
  }
  return q;
}

// fp32 bytes of every padded unit but the head (qwZ/qgZ padding): the backward gathers.
double padded_bytes_but_head(int n, int block) {
  const model::ParamLayout layout(reduced_config());
  double b = 0;
  for (const model::UnitInfo& u : layout.units())
    if (u.kind != model::UnitKind::kHead) b += 4.0 * padded_numel(u.numel, n, block);
  return b;
}

TEST(CommBytes, QuantizedWeightsAndGradients) {
  const int n = world_size();
  Hyper h;
  EngineOptions o = engine_options(h, 3);
  o.quantize_weights = true;
  o.quantize_grads = true;
  const double Q = quantized_shard_bytes(n, o.quantize_block);
  const double Qb = quantized_shard_bytes(n, o.quantize_block, false);  // backward gathers

  // Flat (one node): forward + backward gathers and the gradient all-to-all, each
  // (n-1) shards of int8 + scales: (n-1) (2 Q + Q_backward), about a quarter of fp32's.
  const Traffic flat = step_traffic(0, o, h);
  expect_bytes("total", flat.total_bytes(), (n - 1) * (2 * Q + Qb), "qwZ+qgZ flat");
  if (n > 1 && world_rank() == 0)
    std::printf("[ bytes ] np %d qwZ+qgZ flat: total / unquantized theory = %.4f\n", n,
                static_cast<double>(flat.total_bytes()) /
                    ((3.0 * psi() - psi_head()) * (n - 1) / n));

  if (n % 2 != 0 || n < 4) return;
  // Two or more nodes of 2 with hpZ: inter-node = the forward gather's and the
  // gradients' cross phases, (N-1) Q each; intra-node = their node phases, (K-1) N Q
  // each, plus the backward gather within the hpZ group in fp32.
  const Topology t = topology(2);
  const Traffic q = step_traffic(2, o, h);
  expect_bytes("inter", q.inter_node_bytes(), 2.0 * (t.N - 1) * Q, "qwZ+qgZ+hpZ rpn2");
  expect_bytes("intra", q.intra_node_bytes(),
               2.0 * (t.K - 1) * t.N * Q + padded_bytes_but_head(n, o.quantize_block) * (2 - 1) / 2,
               "qwZ+qgZ+hpZ rpn2");
  o.quantize_weights = false;
  o.quantize_grads = false;
  const Traffic plain = step_traffic(2, o, h);
  const double ratio = static_cast<double>(q.inter_node_bytes()) /
                       static_cast<double>(plain.inter_node_bytes());
  if (world_rank() == 0)
    std::printf("[ bytes ] np %d stage3 hpZ: inter-node with qwZ+qgZ / without = %.4f "
                "(%.2fx less)\n",
                n, ratio, 1 / ratio);
  EXPECT_GT(ratio, 0.24);  // int8 + scales instead of fp32: about 4x less
  EXPECT_LT(ratio, 0.27);
}

TEST(CommBytes, Bf16Reductions) {
  const int n = world_size();
  for (int accum : {1, 2}) {
    Hyper h;
    h.accum = accum;
    EngineOptions o = engine_options(h, 2);
    o.reduce_dtype = DType::kBF16;
    const Traffic tr = step_traffic(0, o, h);
    // accum reduce-scatters of Ψ/2 (bf16), one fp32 gather of Ψ.
    expect_bytes("total", tr.total_bytes(), (accum / 2.0 + 1) * psi() * (n - 1) / n,
                 "stage2 bf16 accum" + std::to_string(accum));
  }
}

}  // namespace
}  // namespace zt::zero::testing
