#pragma once
// Shared by the ZeRO engine tests: the reduced tiny-shaped model, deterministic batches,
// communicators with simulated nodes, and the independent single-process reference
// (plain Model + Parameters + AdamW over the whole global batch, no comm, no engine).
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "model/model_fixtures.hpp"
#include "support/mpi_fixtures.hpp"
#include "zt/comm/mpi_comm.hpp"
#include "zt/core/dtype.hpp"
#include "zt/model/model.hpp"
#include "zt/model/optimizer.hpp"
#include "zt/runtime/runtime.hpp"
#include "zt/zero/engine.hpp"

namespace zt::zero::testing {

using zt::testing::Comms;
using zt::testing::make_comms;
using zt::testing::world_rank;
using zt::testing::world_size;

// tiny's shape (byte vocabulary, GQA, SwiGLU) cut down: 2 layers, narrower, short context.
// Unnamed fields keep Config's defaults, which are tiny's (vocab 256, RoPE, norm eps).
inline model::Config reduced_config(bool tied = false) {
  return {.name = "tiny-reduced", .hidden = 64, .layers = 2, .heads = 4, .kv_heads = 2,
          .intermediate = 160, .context = 32, .tied_embeddings = tied};
}

// The reduced shape as a Mixtral: 4 experts of width 48 per block, 2 per token; with
// `aux` the load-balancing loss in the loss (coefficient 0.02, as Mixtral 8x7B's).
inline model::Config reduced_mixtral(bool tied = false, bool aux = false) {
  model::Config c = zt::testing::as_mixtral(reduced_config(tied), 4, 2, 48, aux, 0.02);
  c.name = aux ? "tiny-reduced-mixtral-aux" : "tiny-reduced-mixtral";
  return c;
}

// The reduced shape as gpt-oss: the reduced Mixtral's experts with the router's bias, the
// softmax over the top 2, the experts' biases and the clamped SwiGLU (limit 0.1: some gate
// and up values clamp at this init), attention biases and sinks, a sliding layer (window
// 4) then a full one.
inline model::Config reduced_gpt_oss(bool aux = false) {
  model::Config c = reduced_mixtral(false, aux);
  c.family = "gpt_oss";
  c.name = aux ? "tiny-reduced-gpt-oss-aux" : "tiny-reduced-gpt-oss";
  c.attention_bias = true;
  c.layer_types = "sf";
  c.sliding_window = 4;
  c.swiglu_limit = 0.1;
  return c;
}

// The reduced shape as a Qwen2-MoE, 3 layers: layer 0 dense (mlp_only_layers), 4 experts
// of width 48 (the dense MLP 160), 2 per token, not renormalised, the shared expert (64)
// and its gate, q/k/v biases: block units of two sizes.
inline model::Config reduced_qwen2_moe(bool aux = false) {
  model::Config c = zt::testing::as_qwen_moe(reduced_config(), "qwen2_moe", aux, 48, 64, {0});
  c.name = aux ? "tiny-reduced-qwen2-moe-aux" : "tiny-reduced-qwen2-moe";
  c.router_aux_loss_coef = 0.02;
  c.attention_bias = true;  // HF's qkv_bias
  return c;
}

// The reduced shape as a Qwen3-MoE, 3 layers: q/k norms, layer 1 dense (mlp_only_layers),
// 4 experts of width 48 (the dense MLP 160), 2 per token, not renormalised, no shared expert.
inline model::Config reduced_qwen3_moe(bool aux = false) {
  model::Config c = zt::testing::as_qwen_moe(reduced_config(), "qwen3_moe", aux, 48, 0, {1});
  c.name = aux ? "tiny-reduced-qwen3-moe-aux" : "tiny-reduced-qwen3-moe";
  c.router_aux_loss_coef = 0.02;
  return c;
}

// The reduced shape as Qwen3.5-MoE (qwen3_5_moe_text): a Gated DeltaNet layer (2 key heads
// and 4 value heads of 16, conv kernel 4) then a full-attention one (the output gate, q/k
// norms, head_dim 16, partial RoPE 0.5); both routed: 4 experts of width 48, top 2
// renormalised, the shared expert (64) and its gate.
inline model::Config reduced_qwen35_moe(bool aux = false) {
  model::Config c = reduced_config();
  c.family = "qwen3_5_text";
  c.head_dim_ = 16;
  c.partial_rotary_factor = 0.5;
  c = zt::testing::as_qwen_moe(zt::testing::as_hybrid(c, 2, 16, 4, 16, 4), "qwen3_5_moe_text",
                               aux, 48, 64, {});
  c.layers = 2;
  c.intermediate = 48;
  c.norm_topk_prob = true;
  c.router_aux_loss_coef = 0.02;
  c.name = aux ? "tiny-reduced-qwen35-moe-aux" : "tiny-reduced-qwen35-moe";
  return c;
}

// Sequence g of the data: tokens [T], targets [T] (the next tokens). A fixed pseudo-
// random walk over a small alphabet, so there is something to learn.
inline void fill_sequence(int64_t g, int64_t T, int64_t vocab, int32_t* tokens, int32_t* targets) {
  uint64_t s = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(g + 1);
  auto next = [&]() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  };
  int32_t prev = static_cast<int32_t>(next() % 64);
  for (int64_t t = 0; t <= T; ++t) {
    const int32_t tok = static_cast<int32_t>((prev * 5 + static_cast<int32_t>(next() % 7)) %
                                             std::min<int64_t>(vocab, 64));
    if (t < T) tokens[t] = prev;
    if (t > 0) targets[t - 1] = prev;
    prev = tok;
  }
}

// Sequences [first, first + B) as [B, T] batches.
struct Batch {
  std::vector<int32_t> tokens, targets;
};
inline Batch make_batch(int64_t first, int64_t B, int64_t T, int64_t vocab) {
  Batch b{std::vector<int32_t>(static_cast<size_t>(B * T)), std::vector<int32_t>(static_cast<size_t>(B * T))};
  for (int64_t i = 0; i < B; ++i)
    fill_sequence(first + i, T, vocab, b.tokens.data() + i * T, b.targets.data() + i * T);
  return b;
}

// Hyper-parameters shared by the engine runs and the reference.
struct Hyper {
  int64_t B = 1;      // sequences per micro-batch per rank
  int64_t T = 16;
  int accum = 1;
  int steps = 20;
  double grad_clip = 1.0;
  model::AdamWConfig adamw{3e-3, 0.9, 0.95, 1e-8, 0.1};
  model::InitOptions init{1234, 0.02, true};
  double lr(int step) const { return adamw.lr * (step < 2 ? 0.5 * (step + 1) : 1.0); }
};

// Sequence index of micro-batch m of rank r at step s (global batch = n * accum * B).
inline int64_t first_sequence(const Hyper& h, int n, int s, int m, int r) {
  const int64_t global = static_cast<int64_t>(n) * h.accum * h.B;
  return s * global + (static_cast<int64_t>(m) * n + r) * h.B;
}

struct ReferenceRun {
  std::vector<double> losses;     // per step
  std::vector<double> norms;      // per step, before clipping
  std::vector<std::vector<float>> params;  // per unit, after the last step
};

// x rounded to bf16 and widened back (the weights a bf16-mixed model computes with).
inline float bf16_round(float x) { return static_cast<float>(bf16(x)); }

// One process, the whole global batch of every step in one loss_and_grad, the global
// gradient norm over every element, clipping, AdamW on every unit. bf16_weights
// (train.precision = bf16-mixed): the model computes with the bf16 rounding of the fp32
// master weights (a copy `c`, re-rounded after every step); gradients, AdamW and the
// master stay fp32.
inline ReferenceRun reference_run(const model::Config& cfg, const Hyper& h, int n,
                                  bool bf16_weights = false) {
  const int64_t G = static_cast<int64_t>(n) * h.accum * h.B;
  model::Model<float> m(cfg, G, h.T);
  model::Parameters<float> p(m.layout());
  p.init(h.init);
  model::Parameters<float> c(m.layout());  // bf16_weights: the rounded weights and the grads
  const auto round_weights = [&]() {
    for (int u = 0; u < p.num_units(); ++u)
      std::transform(p.params(u).begin(), p.params(u).end(), c.params(u).begin(), bf16_round);
  };
  model::Parameters<float>& bound = bf16_weights ? c : p;  // what the model computes with
  if (bf16_weights) round_weights();
  bound.bind(m);
  const int units = p.num_units();
  std::vector<std::vector<float>> mm(static_cast<size_t>(units)), vv(static_cast<size_t>(units));
  for (int u = 0; u < units; ++u) {
    mm[static_cast<size_t>(u)].assign(p.params(u).size(), 0.0f);
    vv[static_cast<size_t>(u)].assign(p.params(u).size(), 0.0f);
  }
  ReferenceRun out;
  for (int s = 0; s < h.steps; ++s) {
    bound.zero_grads();
    const Batch b = make_batch(s * G, G, h.T, cfg.vocab);
    out.losses.push_back(m.loss_and_grad(b.tokens, b.targets, G, h.T, false, 1.0));
    double sq = 0;
    for (int u = 0; u < units; ++u)
      for (float g : bound.grads(u)) sq += static_cast<double>(g) * g;
    const double norm = std::sqrt(sq);
    out.norms.push_back(norm);
    const double coef = (h.grad_clip > 0 && norm > h.grad_clip) ? h.grad_clip / (norm + 1e-6) : 1.0;
    model::AdamWConfig a = h.adamw;
    a.lr = h.lr(s);
    for (int u = 0; u < units; ++u) {
      std::span<float> g = bound.grads(u);
      for (float& x : g) x = static_cast<float>(x * coef);
      model::adamw_unit_slice<float>(m.layout(), u, 0, p.params(u), g, mm[static_cast<size_t>(u)],
                                     vv[static_cast<size_t>(u)], a, s + 1);
    }
    if (bf16_weights) round_weights();
  }
  for (int u = 0; u < units; ++u)
    out.params.emplace_back(p.params(u).begin(), p.params(u).end());
  return out;
}


inline EngineOptions engine_options(const Hyper& h, int stage) {
  EngineOptions o;
  o.stage = stage;
  o.accum = h.accum;
  o.grad_clip = h.grad_clip;
  o.adamw = h.adamw;
  o.max_batch = h.B;
  o.max_seq = h.T;
  return o;
}

struct EngineRun {
  std::vector<double> losses, norms;
  std::vector<StepStats> stats;
  std::vector<std::vector<float>> params;  // per unit, after the last step
};

// `steps` optimizer steps of the engine on this rank's micro-batches, from step `first`.
inline EngineRun engine_run(Engine& e, const model::Config& cfg, const Hyper& h, int steps,
                            int first = 0) {
  const int n = world_size(), r = world_rank();
  EngineRun out;
  for (int s = first; s < first + steps; ++s) {
    for (int m = 0; m < h.accum; ++m) {
      const Batch b = make_batch(first_sequence(h, n, s, m, r), h.B, h.T, cfg.vocab);
      e.micro_step(b.tokens, b.targets, h.B, h.T, (s + m) % 2 == 1, 1.0 / h.accum);
    }
    const StepStats st = e.step(h.lr(s));
    out.losses.push_back(st.loss);
    out.norms.push_back(st.grad_norm);
    out.stats.push_back(st);
  }
  // (expert parallelism: every expert, not the engine's slice of them)
  model::Parameters<float> p(e.options().expert_parallel > 1 ? model::ParamLayout(cfg) : e.model().layout());
  e.gather_full_params(p);
  for (int u = 0; u < p.num_units(); ++u) out.params.emplace_back(p.params(u).begin(), p.params(u).end());
  return out;
}

// max |a - b| / max |b| over one unit's elements (scale-relative), max over units.
inline double max_rel_diff(const std::vector<std::vector<float>>& a,
                           const std::vector<std::vector<float>>& b) {
  double worst = 0;
  for (size_t u = 0; u < b.size(); ++u) {
    double diff = 0, scale = 0;
    for (size_t i = 0; i < b[u].size(); ++i) {
      diff = std::max(diff, std::fabs(static_cast<double>(a[u][i]) - b[u][i]));
      scale = std::max(scale, std::fabs(static_cast<double>(b[u][i])));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

// ||a - b|| / ||b|| (L2 over one unit's elements), max over units.
inline double max_rel_l2(const std::vector<std::vector<float>>& a,
                         const std::vector<std::vector<float>>& b) {
  double worst = 0;
  for (size_t u = 0; u < b.size(); ++u) {
    double d2 = 0, r2 = 0;
    for (size_t i = 0; i < b[u].size(); ++i) {
      const double d = static_cast<double>(a[u][i]) - b[u][i];
      d2 += d * d;
      r2 += static_cast<double>(b[u][i]) * b[u][i];
    }
    worst = std::max(worst, std::sqrt(d2 / r2));
  }
  return worst;
}

// max over i of |a_i - b_i| / |b_i|.
inline double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < b.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]) / std::fabs(b[i]));
  return worst;
}

// How far a run is from a reference: max relative differences of the losses and the
// gradient norms per step, of the parameters element-wise (scale-relative) and as vectors.
struct RunDiff {
  double loss = 0, norm = 0, params = 0, params_l2 = 0;
};
inline RunDiff run_diff(const EngineRun& run, const std::vector<double>& losses,
                        const std::vector<double>& norms,
                        const std::vector<std::vector<float>>& params) {
  return {max_rel_diff(run.losses, losses), max_rel_diff(run.norms, norms),
          max_rel_diff(run.params, params), max_rel_l2(run.params, params)};
}

}  // namespace zt::zero::testing
