// Estimate formulas against hand-computed values (llama-7b: the engine's fp32 4 + 4 + 8
// B/param, + 2 B/param of bf16 copy with bf16-mixed at stages 0-2), offload bookkeeping, bad combinations, and the activation workspace
// against the real model's Model::workspace_bytes after a training step.
#include <gtest/gtest.h>
#include <omp.h>

#include <string>
#include <vector>

#include "zt/core/error.hpp"
#include "zt/estimate/estimate.hpp"
#include "zt/model/model.hpp"

#include "../model/model_fixtures.hpp"

namespace zt::estimate {
namespace {

// LLaMA-7B: 6,738,415,616 parameters (the published count of huggyllama/llama-7b).
constexpr double kPsi7b = 6738415616.0;

Setup llama7b(int gpus_per_node, int nodes) {
  Setup s;
  s.model = model::Config::preset("llama-7b");
  s.micro_batch = 1;
  s.seq_len = 2048;
  s.gpus_per_node = gpus_per_node;
  s.nodes = nodes;
  return s;
}

// Padding adds at most 16 * N elements per unit (34 units): relative 1e-6 is plenty.
void expect_rel(double got, double want, const char* what) {
  EXPECT_NEAR(got / want, 1.0, 1e-6) << what << ": got " << got << ", want " << want;
}

TEST(Formulas, Llama7bParameterCount) {
  EXPECT_EQ(static_cast<double>(model::Config::preset("llama-7b").num_params()), kPsi7b);
}

TEST(Formulas, Llama7bModelStatesPerStage) {
  const double n = 8;
  zt::estimate::Setup s = llama7b(8, 1);
  // The engine on a GPU, fp32: parameters 4 (the master) + gradients 4 + AdamW m, v 8
  // bytes per parameter, replicated or sharded by stage.
  const double fp32[4] = {16 * kPsi7b, 8 * kPsi7b + 8 * kPsi7b / n, 4 * kPsi7b + 12 * kPsi7b / n,
                          16 * kPsi7b / n};
  // bf16-mixed: + a bf16 copy of the full units (2 B) at stages 0-2; at stage 3 the bf16
  // weights are the gather buffers (working memory).
  const double mixed[4] = {18 * kPsi7b, 10 * kPsi7b + 8 * kPsi7b / n,
                           6 * kPsi7b + 12 * kPsi7b / n, 16 * kPsi7b / n};
  for (int stage = 0; stage <= 3; ++stage) {
    s.zero.precision = "fp32";
    expect_rel(static_cast<double>(estimate_row(s, stage, 1, Offload::kNone, Offload::kNone).model_states()),
               fp32[stage], "fp32 model states");
    s.zero.precision = "bf16-mixed";
    expect_rel(static_cast<double>(estimate_row(s, stage, 1, Offload::kNone, Offload::kNone).model_states()),
               mixed[stage], "bf16-mixed model states");
  }
  // 16 Psi = 107.8 GB at stage 0 and 13.5 GB at stage 3 on 8 GPUs.
  s.zero.precision = "fp32";
  const Row r0 = estimate_row(s, 0, 1, Offload::kNone, Offload::kNone);
  EXPECT_NEAR(static_cast<double>(r0.model_states()) / 1e9, 107.81, 0.01);
  const Row r3 = estimate_row(s, 3, 1, Offload::kNone, Offload::kNone);
  EXPECT_NEAR(static_cast<double>(r3.model_states()) / 1e9, 13.48, 0.01);
}

TEST(Formulas, Llama7bCpuEngineIsFp32) {
  zt::estimate::Setup s = llama7b(4, 1);
  s.device = Device::kCpu;
  const Row r0 = estimate_row(s, 0, 1, Offload::kNone, Offload::kNone);
  expect_rel(static_cast<double>(r0.param_bytes), 4 * kPsi7b, "params");
  expect_rel(static_cast<double>(r0.grad_bytes), 4 * kPsi7b, "grads");
  expect_rel(static_cast<double>(r0.optimizer_bytes), 8 * kPsi7b, "m, v");
  const Row r3 = estimate_row(s, 3, 1, Offload::kNone, Offload::kNone);
  expect_rel(static_cast<double>(r3.model_states()), 16 * kPsi7b / 4, "stage 3");
  s.zero.precision = "bf16-mixed";  // the CPU engine trains fp32 only
  EXPECT_THROW(estimate_row(s, 0, 1, Offload::kNone, Offload::kNone), InputError);
}

// Expert parallelism's model states per rank (docs/zero.md): the dense parameters Psi_d
// whole and 1/N of the experts' Psi_e, their biases included (gpt-oss-20b, 2 x 8 ranks,
// N = 8, stages 0 and 3 over the D = 2 ranks of a position), from the whole layout's
// tensors; the GPU rows are refused by name (they do not count the device's exchange
// buffers).
TEST(Formulas, ExpertParallelStatesCountTheExpertSliceWithItsBiases) {
  zt::estimate::Setup s = llama7b(8, 2);
  s.model = model::Config::preset("gpt-oss-20b");
  s.device = Device::kCpu;
  s.zero.expert_parallel = 8;
  double dense = 0, experts = 0, biases = 0;
  const model::ParamLayout whole(s.model);
  for (const model::TensorInfo& t : whole.tensors()) {
    const bool expert = t.name.find("mlp.experts.") != std::string::npos;
    (expert ? experts : dense) += static_cast<double>(t.numel);
    if (expert && t.name.find("_bias") != std::string::npos) biases += static_cast<double>(t.numel);
  }
  EXPECT_EQ(biases, 24.0 * 32 * (2 * 2880 + 2880)) << "gpt-oss-20b's expert biases";
  const double per_rank = dense + experts / 8;
  expect_rel(static_cast<double>(estimate_row(s, 0, 1, Offload::kNone, Offload::kNone).model_states()),
             16 * per_rank, "stage 0");
  expect_rel(static_cast<double>(estimate_row(s, 3, 1, Offload::kNone, Offload::kNone).model_states()),
             16 * per_rank / 2, "stage 3");
  s.device = Device::kGpu;
  EXPECT_THROW(estimate_row(s, 0, 1, Offload::kNone, Offload::kNone), InputError);
}

// The GPU rows count the libraries' device scratch in total(): cuBLASLt's 32 MiB, and with
// bf16 compute on llama-7b (head dim 128: cuDNN's fused attention) the SDPA backward's
// fp32 dQ accumulator and row sums, 4 x (B T) x 32 heads x (128 + 1) bytes; the CPU rows
// none (issue 44).
TEST(Formulas, GpuRowsCountCublasLtAndCudnnWorkspaces) {
  zt::estimate::Setup s = llama7b(4, 1);
  const uint64_t mib32 = uint64_t{32} * 1024 * 1024;
  const uint64_t sdpa = 4ull * 2048 * 32 * 129;
  s.zero.precision = "fp32";
  Row r = estimate_row(s, 3, 1, Offload::kNone, Offload::kNone);
  EXPECT_EQ(r.library_bytes, mib32);  // fp32: zt's attention kernel, no cuDNN
  EXPECT_EQ(r.total(false), r.model_states() + r.working() + r.activation_bytes + mib32);
  s.zero.precision = "bf16-mixed";
  r = estimate_row(s, 3, 1, Offload::kNone, Offload::kNone);
  EXPECT_EQ(r.library_bytes, mib32 + sdpa);
  EXPECT_EQ(r.total(true),
            r.model_states() + r.working() + r.activation_recompute_bytes + mib32 + sdpa);
  s.device = Device::kCpu;
  s.zero.precision = "fp32";
  EXPECT_EQ(estimate_row(s, 3, 1, Offload::kNone, Offload::kNone).library_bytes, 0u);
}

TEST(Formulas, HpzAddsOneSecondaryCopyPerGroup) {
  zt::estimate::Setup s = llama7b(8, 2);  // 16 ranks, hpZ over the 8 of a node
  for (const char* p : {"fp32", "bf16-mixed"}) {
    s.zero.precision = p;
    const Row plain = estimate_row(s, 3, 1, Offload::kNone, Offload::kNone);
    const Row hpz = estimate_row(s, 3, 0, Offload::kNone, Offload::kNone);
    EXPECT_EQ(hpz.hpz, 8);
    // The secondary is in the compute dtype: fp32, or bf16 with bf16-mixed.
    expect_rel(static_cast<double>(hpz.param_bytes - plain.param_bytes),
               (s.zero.precision == "fp32" ? 4 : 2) * kPsi7b / 8, "secondary");
  }
  // On one node hpZ would be the primary partition again: no effect.
  EXPECT_EQ(estimate_row(llama7b(8, 1), 3, 0, Offload::kNone, Offload::kNone).hpz, 1);
}

TEST(Formulas, OffloadMovesStatesOffTheGpu) {
  const double n = 8;
  zt::estimate::Setup s = llama7b(8, 1);
  s.zero.precision = "bf16-mixed";
  // Stage 2 + optimizer cpu: the device keeps the bf16 full units (the CPU AdamW's bf16
  // rounding comes up into them; no fp32 copy on the device) and the fp32 gradient
  // shard; the host store the fp32 master + m + v shard (12 B, each unit's buffer
  // rounded up to 4 KiB: 34 units, < 1e-4 of it).
  const Row opt = estimate_row(s, 2, 1, Offload::kCpu, Offload::kNone);
  expect_rel(static_cast<double>(opt.model_states()), 2 * kPsi7b + 4 * kPsi7b / n, "stage 2 + optimizer offload");
  EXPECT_NEAR(static_cast<double>(opt.host_bytes) / (12 * kPsi7b / n), 1.0, 1e-4) << "host: master, m, v";
  EXPECT_EQ(opt.host_param_bytes, 0u);
  // Stage 3 + optimizer cpu: a bf16 parameter shard on the device (2 B, not 4).
  const Row opt3 = estimate_row(s, 3, 1, Offload::kCpu, Offload::kNone);
  expect_rel(static_cast<double>(opt3.param_bytes), 2 * kPsi7b / n, "stage 3 bf16 shard");
  // Stage 3, both on the host: the device keeps the gradient shard and, in fp32, one
  // staging shard per gather slot (zero.prefetch 2 + 1; bf16-mixed none: each shard
  // comes up in bf16 into its gather buffer); the host the store (12 + 4 B per owned
  // element) and one unit's shard. The largest unit is a block: q, k, v, o 4 x 4096^2 +
  // gate, up, down 3 x 4096 x 11008 + 2 norms x 4096 = 202,383,360 (a multiple of
  // 16 x 8 = 128): 25,297,920 per rank.
  const Row all = estimate_row(s, 3, 1, Offload::kCpu, Offload::kCpu);
  const double max_shard = 25297920;
  EXPECT_EQ(s.zero.prefetch, 2);
  EXPECT_EQ(all.param_bytes, 0u) << "bf16-mixed: no staging";
  zt::estimate::Setup s32 = s;
  s32.zero.precision = "fp32";
  expect_rel(static_cast<double>(estimate_row(s32, 3, 1, Offload::kCpu, Offload::kCpu).param_bytes),
             4 * 3 * max_shard, "staging");
  expect_rel(static_cast<double>(all.grad_bytes), 4 * kPsi7b / n, "gradient shard");
  EXPECT_EQ(all.optimizer_bytes, 0u);
  EXPECT_EQ(all.host_param_bytes, static_cast<uint64_t>(4 * max_shard));
  EXPECT_NEAR(static_cast<double>(all.host_bytes - all.host_param_bytes) / (16 * kPsi7b / n), 1.0, 1e-4)
      << "host: master, m, v + fp32 shards";
  const Row nvme = estimate_row(s, 3, 1, Offload::kNvme, Offload::kNvme);
  EXPECT_NEAR(static_cast<double>(nvme.nvme_bytes) / (16 * kPsi7b / n), 1.0, 1e-4) << "nvme";
}

TEST(Formulas, FitAgainstLimits) {
  const zt::estimate::Setup s = llama7b(8, 1);
  const Row r0 = estimate_row(s, 0, 1, Offload::kNone, Offload::kNone);
  EXPECT_FALSE(check_fit(r0, s, 80ull << 30, 512ull << 30).fits(true));  // 108 GB of states
  const Row r3 = estimate_row(s, 3, 1, Offload::kNone, Offload::kNone);
  EXPECT_TRUE(check_fit(r3, s, 80ull << 30, 512ull << 30).fits(true));
  const Row off = estimate_row(s, 3, 1, Offload::kCpu, Offload::kCpu);
  EXPECT_FALSE(check_fit(off, s, 80ull << 30, 1ull << 30).host);  // 8 x 15 GB on a 1 GiB host
}

TEST(Formulas, BadCombinationsThrow) {
  const zt::estimate::Setup s = llama7b(8, 1);
  EXPECT_THROW(estimate_row(s, 0, 1, Offload::kCpu, Offload::kNone), InputError);
  EXPECT_THROW(estimate_row(s, 2, 1, Offload::kCpu, Offload::kCpu), InputError);
  EXPECT_THROW(estimate_row(s, 4, 1, Offload::kNone, Offload::kNone), InputError);
  EXPECT_THROW(estimate_row(s, 3, 3, Offload::kNone, Offload::kNone), InputError);  // 3 !| 8
  // On the GPU the engine needs the optimizer offloaded to offload the parameters.
  EXPECT_THROW(estimate_row(s, 3, 1, Offload::kNone, Offload::kCpu), InputError);
  zt::estimate::Setup t = s;
  t.zero.precision = "bf16-true";  // no fp32 master: the engine refuses offload with it
  EXPECT_NO_THROW(estimate_row(t, 0, 1, Offload::kNone, Offload::kNone));
  EXPECT_THROW(estimate_row(t, 2, 1, Offload::kCpu, Offload::kNone), InputError);
  t.device = zt::estimate::Device::kCpu;  // the CPU engine trains fp32 only
  EXPECT_THROW(estimate_row(t, 0, 1, Offload::kNone, Offload::kNone), InputError);
}

// The workspace formula against the model itself after a real step.
// Also as a Qwen2-MoE with the aux loss (a dense layer among MoE ones, experts narrower
// than the dense MLP, the shared expert wider than it).
TEST(Formulas, ActivationsMatchTheModelWorkspace) {
  model::Config dense = model::Config::preset("tiny");
  dense.layers = 2;
  dense.context = 32;
  const model::Config qwen = zt::testing::as_qwen_moe(dense, "qwen2_moe", true, 96, 640, {1});
  // Qwen3.5 (issue 56): the Gated DeltaNet layers keep no [B, H, T, T] scores, the full
  // ones no DeltaNet buffers; the output gate's buffers; Gemma's sandwich norms.
  model::Config hybrid = zt::testing::small_qwen35_hybrid();
  hybrid.layer_types = "llfl";
  hybrid.layers = 4;
  model::Config moe = zt::testing::small_qwen35_moe(), gemma = zt::testing::small_gemma();
  for (model::Config* c : {&hybrid, &moe, &gemma}) c->context = 32;
  const int64_t B = 3, T = 24;
  std::vector<int32_t> tok(static_cast<size_t>(B * T), 1), tgt(static_cast<size_t>(B * T), 2);
  for (const model::Config& c : {dense, qwen, hybrid, moe, gemma})
  for (bool recompute : {true, false}) {
    model::Model<float> m(c, B, T);
    model::Parameters<float> p(m.layout());
    p.init(model::InitOptions{});
    p.bind(m);
    m.loss_and_grad(tok, tgt, B, T, recompute, 1.0);
    EXPECT_EQ(activation_bytes(c, B, T, recompute, 4, omp_get_max_threads()), m.workspace_bytes())
        << c.family << " recompute " << recompute;
  }
}

// `zt generate`'s preflight (generation_bytes): its cache is what KvCache allocates (keys
// and values of the attention layers; each Gated DeltaNet layer's conv inputs and state),
// and its workspace bounds the model's after prefilling the whole capacity in chunks.
TEST(Formulas, GenerationBytesAreTheCacheAllocated) {
  model::Config hybrid = zt::testing::small_qwen35_hybrid();
  hybrid.layer_types = "llfl";
  hybrid.layers = 4;
  hybrid.context = 64;
  for (const model::Config& c : {hybrid, model::Config::preset("tiny")})
    for (const int64_t cap : {1, 40}) {
      const int64_t chunk = 16;
      const GenerationBytes g = generation_bytes(c, cap, chunk);
      const model::KvCache<float> cache(c, cap);
      EXPECT_EQ(g.cache, sizeof(float) * (cache.k.size() + cache.v.size() + cache.conv.size() +
                                          cache.state.size()))
          << c.family << " capacity " << cap;
      model::Model<float> m(c, 0, 0);
      model::Parameters<float> p(m.layout());
      p.init(model::InitOptions{});
      p.bind(m);
      model::KvCache<float> run(c, cap);
      std::vector<float> logits(static_cast<size_t>(c.vocab));
      for (int64_t at = 0; at < cap; at += chunk) {
        const std::vector<int32_t> tokens(static_cast<size_t>(std::min(chunk, cap - at)), 1);
        m.decode(tokens, run, logits);
      }
      EXPECT_GE(g.workspace, m.workspace_bytes()) << c.family << " capacity " << cap;
    }
  // A hybrid's cache holds keys and values for its one attention layer, not four.
  model::Config full = hybrid;
  full.layer_types = "ffff";
  EXPECT_LT(generation_bytes(hybrid, 40, 16).cache, generation_bytes(full, 40, 16).cache);
}

}  // namespace
}  // namespace zt::estimate
