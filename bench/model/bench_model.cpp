// Training-step throughput of the CPU model: forward + backward + AdamW on every unit,
// on a fixed random batch. Threads: OMP_NUM_THREADS. Counters: steps/s, tokens/s and
// model GFLOP/s (Config::flops_per_token, PaLM convention, see docs/model.md). Time is
// wall time; the CPU column is the whole process's CPU time (all threads). Per-phase wall
// time per step (ms), from the model's unit hooks (model.hpp): fwd_ms (embedding and
// blocks), head_ms (lm_head forward, loss and its backward), bwd_ms (blocks and embedding
// backward), adamw_ms (the update of every unit).
//
//   llama-small  hidden 512, 4 layers, 8 heads, 4 KV heads, intermediate 1376, vocab 256,
//                context 256; batch 4 x 256  (the shape compared with PyTorch)
//   tiny         the `tiny` preset; batch 8 x 256, and 16 x 128 (zt train's default)
//   gpt-oss-small gpt_oss family, hidden 512, 4 layers (sliding 128 / full alternating),
//                8 heads, 2 KV heads, head_dim 64, 8 experts of 512 with biases, 2 per
//                token, vocab 256, context 256, yarn, sinks; batch 4 x 256 (compared with
//                transformers' GptOssForCausalLM: bench/peers/llama_torch.py --model gpt-oss-small)
#include <benchmark/benchmark.h>
#include <omp.h>

#include <chrono>
#include <random>
#include <vector>

#include "zt/model/model.hpp"
#include "zt/model/optimizer.hpp"

namespace {

using zt::model::Config;

Config llama_small() {
  return {.name = "llama-small", .vocab = 256, .hidden = 512, .layers = 4, .heads = 8,
          .kv_heads = 4, .intermediate = 1376, .context = 256};
}

// gpt-oss-20b's shape (the preset) scaled down: the same schedule, RoPE, sinks and experts.
Config gpt_oss_small() {
  const Config f = Config::preset("gpt-oss-20b");
  Config c{.name = "gpt-oss-small", .family = f.family, .vocab = 256, .hidden = 512, .layers = 4,
           .heads = 8, .head_dim_ = f.head_dim_, .kv_heads = 2, .intermediate = 512, .context = 256,
           .rope_theta = f.rope_theta, .rope_scaling = f.rope_scaling, .norm_eps = f.norm_eps,
           .attention_bias = f.attention_bias, .sliding_window = f.sliding_window, .experts = 8,
           .experts_per_token = 2, .layer_types = "sfsf", .swiglu_limit = f.swiglu_limit,
           .swiglu_alpha = f.swiglu_alpha};
  c.validate();
  return c;
}

void train_steps(benchmark::State& state, const Config& cfg, int64_t B, int64_t T,
                 bool recompute) {
  zt::model::ParamLayout layout(cfg);
  zt::model::Parameters<float> P(layout);
  P.init(zt::model::InitOptions{});
  zt::model::Model<float> model(cfg, B, T);
  P.bind(model);
  std::vector<std::vector<float>> m, v;
  for (int u = 0; u < P.num_units(); ++u) {
    m.emplace_back(P.params(u).size(), 0.0f);
    v.emplace_back(P.params(u).size(), 0.0f);
  }
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> tokd(0, static_cast<int32_t>(cfg.vocab - 1));
  std::vector<int32_t> tok(B * T), tgt(B * T);
  for (auto& t : tok) t = tokd(rng);
  for (auto& t : tgt) t = tokd(rng);
  using Clock = std::chrono::steady_clock;
  const int head = static_cast<int>(cfg.layers) + 1;
  Clock::time_point head_start, head_done;
  model.set_hooks({.before_use = [&](int u) { if (u == head) head_start = Clock::now(); },
                   .after_use = nullptr,
                   .grad_ready = [&](int u) { if (u == head) head_done = Clock::now(); }});
  const auto ms = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  double fwd_ms = 0, head_ms = 0, bwd_ms = 0, adamw_ms = 0;
  zt::model::AdamWConfig opt;
  int64_t step = 0;
  double loss = 0;
  for (auto _ : state) {
    P.zero_grads();
    const auto t0 = Clock::now();
    loss = model.loss_and_grad(tok, tgt, B, T, recompute);
    const auto t1 = Clock::now();
    ++step;
    for (int u = 0; u < P.num_units(); ++u) {
      zt::model::adamw_unit_slice<float>(layout, u, 0, P.params(u), P.grads(u), m[u], v[u], opt,
                                         step);
    }
    const auto t2 = Clock::now();
    fwd_ms += ms(t0, head_start);
    head_ms += ms(head_start, head_done);
    bwd_ms += ms(head_done, t1);
    adamw_ms += ms(t1, t2);
    benchmark::DoNotOptimize(loss);
  }
  for (auto [name, total] : {std::pair{"fwd_ms", fwd_ms}, {"head_ms", head_ms}, {"bwd_ms", bwd_ms},
                             {"adamw_ms", adamw_ms}}) {
    state.counters[name] = benchmark::Counter(total, benchmark::Counter::kAvgIterations);
  }
  const double tokens = static_cast<double>(B * T);
  state.counters["steps/s"] = benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tokens/s"] = benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = benchmark::Counter(tokens * cfg.flops_per_token(T) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = omp_get_max_threads();
  state.counters["params"] = static_cast<double>(cfg.num_params());
  state.counters["loss"] = loss;
}

void BM_TrainStep_LlamaSmall(benchmark::State& s) { train_steps(s, llama_small(), 4, 256, false); }
void BM_TrainStep_LlamaSmall_Recompute(benchmark::State& s) {
  train_steps(s, llama_small(), 4, 256, true);
}
void BM_TrainStep_Tiny(benchmark::State& s) { train_steps(s, Config::preset("tiny"), 8, 256, false); }
// the `zt train` default micro-batch: 16 x 128
void BM_TrainStep_Tiny_B16_T128(benchmark::State& s) {
  train_steps(s, Config::preset("tiny"), 16, 128, false);
}

void BM_TrainStep_GptOssSmall(benchmark::State& s) { train_steps(s, gpt_oss_small(), 4, 256, false); }

BENCHMARK(BM_TrainStep_LlamaSmall)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime()->MinTime(2.0);
BENCHMARK(BM_TrainStep_LlamaSmall_Recompute)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime()->MinTime(2.0);
BENCHMARK(BM_TrainStep_Tiny)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime()->MinTime(2.0);
BENCHMARK(BM_TrainStep_Tiny_B16_T128)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime()->MinTime(2.0);
BENCHMARK(BM_TrainStep_GptOssSmall)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime()->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
