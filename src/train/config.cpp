// The schema of `zt train` and its resolution into a TrainConfig.
#include "zt/train/config.hpp"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/ckpt/config.hpp"
#include "zt/offload/config.hpp"
#include "zt/zero/config.hpp"

namespace zt::train {

config::Schema train_schema() {
  config::Schema s;
  // --- model: a preset, then optional overrides of its fields ------------------------
  s.add_string("model.preset", "tiny", "model shape preset").choices = model::Config::preset_names();
  s.add_int("model.vocab", std::nullopt, "override: vocabulary size (>= the dataset's)").min = 1;
  s.add_int("model.hidden", std::nullopt, "override: model width").min = 1;
  s.add_int("model.layers", std::nullopt, "override: transformer blocks").min = 1;
  s.add_int("model.heads", std::nullopt, "override: query heads").min = 1;
  s.add_int("model.kv_heads", std::nullopt, "override: key/value heads (GQA)").min = 1;
  s.add_int("model.intermediate", std::nullopt, "override: SwiGLU inner width").min = 1;
  s.add_int("model.context", std::nullopt, "override: longest sequence (RoPE table)").min = 1;
  s.add_bool("model.tied_embeddings", std::nullopt, "override: lm_head shares the embedding");
  s.add_float("model.rope_theta", std::nullopt, "override: RoPE base");
  s.add_float("model.norm_eps", std::nullopt, "override: RMSNorm epsilon");
  s.add_float("model.init_std", 0.02, "std of the normal init of weights").min = 0.0;

  // --- train ------------------------------------------------------------------------
  s.add_int("train.steps", 200, "optimizer steps").min = 1;
  s.add_int("train.micro_batch", 16, "sequences per rank per forward/backward").min = 1;
  s.add_int("train.global_batch", 32,
            "sequences per optimizer step over all ranks; = micro_batch * ranks * accumulation")
      .min = 1;
  s.add_int("train.seq_len", 128, "tokens per sequence (<= model context)").min = 1;
  s.add_float("train.lr", 3e-3, "peak learning rate (after warm-up)").min = 0.0;
  s.add_float("train.min_lr", 3e-4, "learning rate at the end of the cosine decay").min = 0.0;
  s.add_int("train.warmup", 20, "linear warm-up steps").min = 0;
  s.add_float("train.weight_decay", 0.1, "AdamW decoupled weight decay (2-D weights only)").min = 0.0;
  {
    auto& k = s.add_float("train.beta1", 0.9, "AdamW beta1");
    k.min = 0.0;
    k.max = 0.999999;
  }
  {
    auto& k = s.add_float("train.beta2", 0.95, "AdamW beta2");
    k.min = 0.0;
    k.max = 0.999999;
  }
  s.add_float("train.eps", 1e-8, "AdamW epsilon").min = 0.0;
  s.add_float("train.grad_clip", 1.0, "clip the global gradient norm to this; 0 disables").min = 0.0;
  s.add_int("train.max_bad_steps", 5,
            "steps in a row with a NaN/Inf loss or gradient (each skipped with a warning) "
            "before the job stops with exit 1, saving nothing new")
      .min = 1;
  s.add_int("train.seed", 1234, "seed of the parameter init and the data order").min = 0;
  s.add_bool("train.recompute", false, "recompute activations in the backward (less memory)");
  s.add_float("train.peak_tflops", 0.0,
              "peak TFLOP/s per rank for MFU; 0: CPU measures an fp32 GEMM at start-up")
      .min = 0.0;
  s.add_int("train.threads", 0,
            "OpenMP threads per rank; 0: OMP_NUM_THREADS, else the rank's cores / ranks on the node")
      .min = 0;

  // --- data -------------------------------------------------------------------------
  s.add_string("data.path", "",
               "HDF5 token file (zt convert text-to-tokens); empty: the shipped corpus "
               "data/tinyshakespeare.txt, converted into the cache on first use");
  {
    auto& k = s.add_float("data.eval_fraction", 0.1,
                          "share of tokens held out at the END of the file for evaluation; "
                          "0: no evaluation");
    k.min = 0.0;
    k.max = 0.9;
  }

  // --- eval, sample, log, comm ----------------------------------------------------------
  s.add_int("eval.every", 50, "evaluate every N steps (and after the last); 0: only after the last").min = 0;
  s.add_int("eval.batches", 4, "global batches of held-out sequences per evaluation").min = 1;
  s.add_int("sample.tokens", 300, "tokens generated after training (rank 0); 0: no sample").min = 0;
  s.add_string("sample.prompt", "ROMEO:", "prompt of the sample");
  s.add_float("sample.temperature", 0.8, "sampling temperature (> 0)").min = 1e-6;
  s.add_int("sample.seed", 42, "seed of the sampler").min = 0;
  s.add_string("log.metrics", "", "JSONL file: one JSON object per step (rank 0); empty: none");
  s.add_int("log.every", 1, "print a log line every N steps (and the first and last)").min = 1;
  s.add_float("log.progress_every", 10.0,
              "seconds between progress lines of long start-up work (data preparation, engine "
              "init, checkpoint load and save of 1 GiB and more) in a log; 0: off")
      .min = 0.0;
  s.add_float("comm.timeout", 300.0, "seconds a collective may wait before the job is ended").min = 0.001;
  s.add_int("runtime.ranks_per_node", 0,
            "simulate nodes of this many ranks on one host (hierarchical collectives, hpZ); "
            "0: nodes are physical hosts; --ranks-per-node overrides it")
      .min = 0;

  // --- zero: the ZeRO engine (stage 0 = plain data parallelism) -----------------------
  zero::add_zero_keys(s);
  // --- ckpt: checkpoints (docs/checkpoint-format.md) -----------------------------------
  ckpt::add_ckpt_keys(s);
  // --- offload: homes of the optimizer state and stage-3 parameters (docs/offload.md) --
  offload::add_offload_keys(s);
  return s;
}

TrainConfig resolve(const config::Config& c, int world) {
  TrainConfig t;
  t.world = world;

  // Model: preset, then each override that is set.
  t.model = model::Config::preset(c.get_string("model.preset"));
  const auto override_int = [&](const char* key, int64_t& field) {
    if (c.has(key)) field = c.get_int(key);
  };
  override_int("model.vocab", t.model.vocab);
  override_int("model.hidden", t.model.hidden);
  override_int("model.layers", t.model.layers);
  override_int("model.heads", t.model.heads);
  override_int("model.kv_heads", t.model.kv_heads);
  override_int("model.intermediate", t.model.intermediate);
  override_int("model.context", t.model.context);
  if (c.has("model.tied_embeddings")) t.model.tied_embeddings = c.get_bool("model.tied_embeddings");
  if (c.has("model.rope_theta")) t.model.rope_theta = c.get_float("model.rope_theta");
  if (c.has("model.norm_eps")) t.model.norm_eps = c.get_float("model.norm_eps");
  bool overridden = false;
  for (const char* k : {"model.vocab", "model.hidden", "model.layers", "model.heads",
                        "model.kv_heads", "model.intermediate", "model.context",
                        "model.tied_embeddings", "model.rope_theta", "model.norm_eps"})
    overridden = overridden || c.has(k);
  if (overridden) t.model.name = t.model.name + "+overrides";
  t.model.validate();
  t.init_std = c.get_float("model.init_std");

  t.steps = c.get_int("train.steps");
  t.micro_batch = c.get_int("train.micro_batch");
  t.global_batch = c.get_int("train.global_batch");
  t.seq_len = c.get_int("train.seq_len");
  const int64_t per_micro_step = t.micro_batch * world;
  if (t.global_batch % per_micro_step != 0)
    throw InputError(
        strf("train.global_batch = %lld is not divisible by train.micro_batch (%lld) x %d "
             "ranks = %lld",
             static_cast<long long>(t.global_batch), static_cast<long long>(t.micro_batch), world,
             static_cast<long long>(per_micro_step)),
        "global_batch = micro_batch * ranks * accumulation steps; choose train.global_batch a "
        "multiple of " + std::to_string(per_micro_step) + " or change train.micro_batch");
  t.accum = t.global_batch / per_micro_step;
  if (t.seq_len > t.model.context)
    throw InputError(strf("train.seq_len = %lld exceeds the model context %lld (model.context)",
                          static_cast<long long>(t.seq_len),
                          static_cast<long long>(t.model.context)),
                     "lower train.seq_len or raise model.context");

  t.lr = c.get_float("train.lr");
  t.min_lr = c.get_float("train.min_lr");
  if (t.min_lr > t.lr)
    throw InputError(strf("train.min_lr = %g exceeds train.lr = %g", t.min_lr, t.lr),
                     "the cosine schedule decays from train.lr down to train.min_lr");
  t.warmup = c.get_int("train.warmup");
  t.weight_decay = c.get_float("train.weight_decay");
  t.beta1 = c.get_float("train.beta1");
  t.beta2 = c.get_float("train.beta2");
  t.eps = c.get_float("train.eps");
  t.grad_clip = c.get_float("train.grad_clip");
  t.max_bad_steps = c.get_int("train.max_bad_steps");
  t.seed = static_cast<uint64_t>(c.get_int("train.seed"));
  t.recompute = c.get_bool("train.recompute");
  t.peak_tflops = c.get_float("train.peak_tflops");
  t.threads = static_cast<int>(c.get_int("train.threads"));

  t.data_path = c.get_string("data.path");
  t.eval_fraction = c.get_float("data.eval_fraction");
  t.eval_every = c.get_int("eval.every");
  t.eval_batches = c.get_int("eval.batches");
  t.sample_tokens = c.get_int("sample.tokens");
  t.sample_prompt = c.get_string("sample.prompt");
  t.sample_temperature = c.get_float("sample.temperature");
  t.sample_seed = static_cast<uint64_t>(c.get_int("sample.seed"));
  if (t.sample_tokens > 0 && t.sample_prompt.empty())
    throw InputError("sample.prompt is empty", "give a prompt, e.g. --set sample.prompt=ROMEO:, "
                                               "or --set sample.tokens=0");
  t.metrics_path = c.get_string("log.metrics");
  t.log_every = c.get_int("log.every");
  t.comm_timeout_s = c.get_float("comm.timeout");
  t.ranks_per_node = static_cast<int>(c.get_int("runtime.ranks_per_node"));

  t.zero = zero::zero_options(c);
  t.zero.accum = static_cast<int>(t.accum);
  t.zero.grad_clip = t.grad_clip;
  t.zero.adamw = model::AdamWConfig{t.lr, t.beta1, t.beta2, t.eps, t.weight_decay};
  t.zero.max_batch = t.micro_batch;
  t.zero.max_seq = t.seq_len;
  t.zero.offload = offload::offload_options(c);
  t.ckpt = ckpt::ckpt_options(c);
  return t;
}

int resolve_threads(int configured, int ranks_on_node) {
  if (configured > 0) return configured;
  if (const char* env = std::getenv("OMP_NUM_THREADS"); env && *env) return omp_get_max_threads();
  cpu_set_t set;
  CPU_ZERO(&set);
  const int bound = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  const int host = static_cast<int>(std::thread::hardware_concurrency());
  if (bound > 0 && bound < host) return bound;
  return std::max(1, host / std::max(1, ranks_on_node));
}

}  // namespace zt::train
