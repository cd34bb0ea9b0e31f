// Training-step throughput of the CPU model: forward + backward + AdamW on every unit,
// on a fixed random batch. Threads: OMP_NUM_THREADS. Counters: steps/s, tokens/s and
// model GFLOP/s (Config::flops_per_token, PaLM convention, see docs/model.md). Time is
// wall time; the CPU column is the whole process's CPU time (all threads).
//
//   llama-small  hidden 512, 4 layers, 8 heads, 4 KV heads, intermediate 1376, vocab 256,
//                context 256; batch 4 x 256  (the shape compared with PyTorch)
//   tiny         the `tiny` preset; batch 8 x 256, and 16 x 128 (zt train's default)
#include <benchmark/benchmark.h>
#include <omp.h>

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
  zt::model::AdamWConfig opt;
  int64_t step = 0;
  double loss = 0;
  for (auto _ : state) {
    P.zero_grads();
    loss = model.loss_and_grad(tok, tgt, B, T, recompute);
    ++step;
    for (int u = 0; u < P.num_units(); ++u) {
      zt::model::adamw_unit_slice<float>(layout, u, 0, P.params(u), P.grads(u), m[u], v[u], opt,
                                         step);
    }
    benchmark::DoNotOptimize(loss);
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

BENCHMARK(BM_TrainStep_LlamaSmall)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime()->MinTime(2.0);
BENCHMARK(BM_TrainStep_LlamaSmall_Recompute)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime()->MinTime(2.0);
BENCHMARK(BM_TrainStep_Tiny)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime()->MinTime(2.0);
BENCHMARK(BM_TrainStep_Tiny_B16_T128)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime()->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
