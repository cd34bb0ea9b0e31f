// The schema of `zt train` and its resolution into a TrainConfig.
#include "zt/train/config.hpp"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>

#include "zt/core/checked.hpp"
#include "zt/core/error.hpp"
#include "zt/core/json.hpp"
#include "zt/core/log.hpp"
#include "zt/ckpt/config.hpp"
#include "zt/offload/config.hpp"
#include "zt/zero/config.hpp"

namespace zt::train {

config::Schema train_schema() {
  config::Schema s;
  // --- model: a preset, then optional overrides of its fields ------------------------
  s.add_string("model.preset", "tiny", "model shape preset").choices = model::Config::preset_names();
  // Limits: what the kernels and the int32/int64 arithmetic of the engine can take. A
  // model far larger than any host is refused later by the memory check (trainer.cpp).
  const auto range = [](config::Key& k, double lo, double hi) -> config::Key& {
    k.min = lo;
    k.max = hi;
    return k;
  };
  constexpr double kInt32Max = 2147483647.0;
  range(s.add_int("model.vocab", std::nullopt, "override: vocabulary size (>= the dataset's)"), 1, kInt32Max);
  range(s.add_int("model.hidden", std::nullopt, "override: model width"), 1, model::Config::kMaxHidden);
  range(s.add_int("model.layers", std::nullopt, "override: transformer blocks"), 1, model::Config::kMaxLayers);
  range(s.add_int("model.heads", std::nullopt, "override: query heads"), 1, 1 << 16);
  range(s.add_int("model.kv_heads", std::nullopt, "override: key/value heads (GQA)"), 1, 1 << 16);
  range(s.add_int("model.intermediate", std::nullopt, "override: SwiGLU inner width"), 1, 1 << 22);
  range(s.add_int("model.context", std::nullopt, "override: longest sequence (RoPE table)"), 1, 1 << 24);
  s.add_bool("model.tied_embeddings", std::nullopt, "override: lm_head shares the embedding");
  s.add_string("model.family", std::nullopt,
               "override: model family = Hugging Face model_type (docs/model.md's table)")
      .choices = model::Config::family_names();
  range(s.add_int("model.head_dim", std::nullopt, "override: head_dim (0: hidden / heads)"), 0,
        model::Config::kMaxHidden);
  s.add_bool("model.attention_bias", std::nullopt,
             "override: biases on q/k/v/o (llama, qwen3; qwen2 has q/k/v biases always)");
  {
    auto& k = s.add_float("model.rope_theta", std::nullopt, "override: RoPE base");
    k.min = 0.0;
    k.min_exclusive = true;
    k.max = 1e12;  // Llama 3's is 5e5; every key has both limits (issue 36, class 10)
  }
  s.add_string("model.rope_type", std::nullopt,
               "override: RoPE scaling (default, linear, llama3; docs/model.md)")
      .choices = {"default", "linear", "llama3"};
  range(s.add_float("model.rope_factor", std::nullopt, "override: RoPE scaling factor"), 0.0, 1e6)
      .min_exclusive = true;
  range(s.add_float("model.rope_low_freq_factor", std::nullopt, "override: llama3 low_freq_factor"),
        0.0, 1e6).min_exclusive = true;
  range(s.add_float("model.rope_high_freq_factor", std::nullopt,
                    "override: llama3 high_freq_factor"), 0.0, 1e6).min_exclusive = true;
  range(s.add_int("model.rope_original_context", std::nullopt,
                  "override: llama3 original_max_position_embeddings"), 1, 1 << 24);
  {
    auto& k = s.add_float("model.norm_eps", std::nullopt, "override: RMSNorm epsilon");
    range(k, 0.0, 1.0).min_exclusive = true;
  }
  range(s.add_int("model.sliding_window", std::nullopt,
                  "override: sliding-window attention, positions attended incl. self (0: full "
                  "causal; Mistral 7B: 4096)"),
        0, 1 << 24);
  range(s.add_int("model.experts", std::nullopt,
                  "override: experts per block (mixtral, qwen2_moe, qwen3_moe; Mixtral 8x7B: 8; "
                  "0: the dense MLP of the other families)"),
        0, model::Config::kMaxExperts);
  range(s.add_int("model.experts_per_token", std::nullopt,
                  "override: experts each token is routed to (1 .. model.experts; Mixtral: 2)"),
        1, model::Config::kMaxExperts);
  range(s.add_float("model.router_aux_loss_coef", std::nullopt,
                    "override: weight of the load-balancing loss (transformers' "
                    "router_aux_loss_coef)"),
        0.0, 1e6);
  s.add_bool("model.router_aux_loss", std::nullopt,
             "override: add router_aux_loss_coef x the load-balancing loss to the loss "
             "(transformers' output_router_logits; default false, as transformers)");
  // Qwen's MoE fields (qwen2_moe, qwen3_moe; Config validates them per family)
  range(s.add_int("model.moe_intermediate", std::nullopt,
                  "override: the experts' width (qwen2_moe, qwen3_moe's moe_intermediate_size; "
                  "0: model.intermediate)"),
        0, model::Config::kMaxIntermediate);
  range(s.add_int("model.shared_expert_intermediate", std::nullopt,
                  "override: qwen2_moe's shared expert width (shared_expert_intermediate_size)"),
        0, model::Config::kMaxIntermediate);
  s.add_bool("model.norm_topk_prob", std::nullopt,
             "override: renormalise the k chosen router probabilities (qwen2_moe, qwen3_moe; "
             "mixtral always does)");
  range(s.add_int("model.decoder_sparse_step", std::nullopt,
                  "override: layer l has the experts when (l + 1) % step == 0, the others the "
                  "dense MLP (qwen2_moe, qwen3_moe; 1: every layer)"),
        1, model::Config::kMaxLayers);
  range(s.add_int("model.first_sliding_layer", std::nullopt,
                  "override: layers from this one on use model.sliding_window, earlier ones "
                  "attend in full (Qwen's max_window_layers; 0: every layer)"),
        0, 1 << 16);
  s.add_string("model.mlp_only_layers", std::nullopt,
               "override: layers with the dense MLP among the experts' ones, comma-separated "
               "indices, e.g. 0,3 (qwen2_moe, qwen3_moe's mlp_only_layers; empty: none)");
  range(s.add_float("model.init_std", 0.02, "std of the normal init of weights"), 0.0, 1e3);

  // --- train ------------------------------------------------------------------------
  range(s.add_int("train.steps", 200, "optimizer steps"), 1, 1e12);
  range(s.add_int("train.micro_batch", 16, "sequences per rank per forward/backward"), 1, 1 << 24);
  range(s.add_int("train.global_batch", 32,
                  "sequences per optimizer step over all ranks; = micro_batch * ranks * "
                  "accumulation"),
        1, 1LL << 40);
  range(s.add_int("train.seq_len", 128, "tokens per sequence (<= model context)"), 1, 1 << 24);
  // lr has no upper limit: a huge lr is how the divergence test provokes NaN steps.
  // Up to 1e30: a rate that can only diverge, kept reachable for the NaN/Inf tests.
  range(s.add_float("train.lr", 3e-3, "peak learning rate (after warm-up)"), 0.0, 1e30);
  range(s.add_float("train.min_lr", 3e-4, "learning rate at the end of the cosine decay"), 0.0, 1e30);
  range(s.add_int("train.warmup", 20, "linear warm-up steps"), 0, 1e12);
  range(s.add_float("train.weight_decay", 0.1, "AdamW decoupled weight decay (2-D weights only)"), 0.0, 1e3);
  range(s.add_float("train.beta1", 0.9, "AdamW beta1"), 0.0, 0.999999);
  range(s.add_float("train.beta2", 0.95, "AdamW beta2"), 0.0, 0.999999);
  // eps = 0 divides 0 by 0 for an element whose gradient is 0: NaN weights.
  range(s.add_float("train.eps", 1e-8, "AdamW epsilon (> 0)"), 0.0, 1.0).min_exclusive = true;
  range(s.add_float("train.grad_clip", 1.0, "clip the global gradient norm to this; 0 disables"), 0.0, 1e30);
  range(s.add_int("train.max_bad_steps", 5,
                  "steps in a row with a NaN/Inf loss or gradient (each skipped with a warning) "
                  "before the job stops with exit 1, saving nothing new"),
        1, 1e9);
  s.add_int("train.seed", 1234, "seed of the parameter init and the data order").min = 0;
  s.add_bool("train.recompute", false, "recompute activations in the backward (less memory)");
  s.add_string("train.device", "auto",
               "where each rank computes: auto (cuda when built with CUDA and the rank sees a "
               "GPU, else cpu), cpu, cuda (the host's local rank picks the GPU)")
      .choices = {"auto", "cpu", "cuda"};
  s.add_string("train.precision", "fp32",
               "fp32, bf16-mixed (bf16 compute, fp32 master weights and moments) or bf16-true; "
               "the CPU trains in fp32 only")
      .choices = {"fp32", "bf16-mixed", "bf16-true"};
  s.add_bool("train.share_gpu", false,
             "allow more ranks than GPUs on a host (they take turns on a GPU; for tests)");
  range(s.add_float("train.peak_tflops", 0.0,
                    "peak TFLOP/s per rank for MFU; 0: CPU measures an fp32 GEMM at start-up"),
        0.0, 1e6);
  range(s.add_int("train.threads", 0,
                  "OpenMP threads per rank; 0: OMP_NUM_THREADS, else the rank's cores / ranks "
                  "on the node; more than 4x the host's cores is refused"),
        0, kMaxThreads);

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
  range(s.add_int("eval.every", 50, "evaluate every N steps (and after the last); 0: only after the last"), 0, 1e12);
  range(s.add_int("eval.batches", 4, "global batches of held-out sequences per evaluation"), 1, 1e6);
  range(s.add_int("sample.tokens", 300, "tokens generated after training (rank 0); 0: no sample"), 0, 1e7);
  s.add_string("sample.prompt", "ROMEO:", "prompt of the sample");
  range(s.add_float("sample.temperature", 0.8, "sampling temperature; 0: greedy"), 0, 1e6);
  s.add_int("sample.seed", 42, "seed of the sampler").min = 0;
  s.add_string("log.metrics", "", "JSONL file: one JSON object per step (rank 0); empty: none");
  s.add_bool("log.report", true,
             "write the run report (report.md, plots) into ckpt.dir/report at each checkpoint "
             "and at the end (rank 0; a failure is a warning)");
  s.add_bool("log.verbose", false,
             "the full step line (memory, comm bytes, engine memory, offload phases); false: "
             "the essentials in about 100 columns");
  range(s.add_int("log.every", 1, "print a log line every N steps (and the first and last)"), 1, 1e12);
  range(s.add_float("log.progress_every", 10.0,
                    "seconds between progress lines of long start-up work (data preparation, "
                    "engine init, checkpoint load and save of 1 GiB and more) in a log; 0: off"),
        0.0, 7 * 24 * 3600.0);
  // Milliseconds are kept in an int64 and handed to timers as int: a week at most.
  range(s.add_float("comm.timeout", 300.0, "seconds a collective may wait before the job is ended"),
        0.001, 7 * 24 * 3600.0);
  s.add_string("comm.backend", "auto",
               "collectives of the engine: auto (nccl on cuda, mpi on cpu), nccl, mpi (device "
               "buffers staged through pinned host memory)")
      .choices = {"auto", "nccl", "mpi"};
  range(s.add_int("runtime.ranks_per_node", 0,
                  "simulate nodes of this many ranks on one host (hierarchical collectives, hpZ); "
                  "0: nodes are physical hosts; --ranks-per-node overrides it"),
        0, 1 << 20);

  // --- zero: the ZeRO engine (stage 0 = plain data parallelism) -----------------------
  zero::add_zero_keys(s);
  // --- ckpt: checkpoints (docs/checkpoint-format.md) -----------------------------------
  ckpt::add_ckpt_keys(s);
  // --- offload: homes of the optimizer state and stage-3 parameters (docs/offload.md) --
  offload::add_offload_keys(s);
  // --- finetune, lora: LoRA / QLoRA adapters (docs/finetune.md) -----------------------
  model::add_finetune_keys(s);
  add_objective_keys(s);  // finetune.objective and each objective's keys (dpo.*, orpo.*)
  return s;
}

std::vector<int64_t> parse_layer_list(const std::string& text, const std::string& key) {
  std::vector<int64_t> layers;
  if (text.find_first_not_of(" \t") == std::string::npos) return layers;
  const auto refuse = [&](const std::string& why) {
    throw InputError(key + " = \"" + text + "\": " + why,
                     "list layer indices, comma-separated (e.g. 0,3), or leave it empty for none");
  };
  nlohmann::json j;
  try {  // "0, 3" is the JSON array [0, 3] without its brackets
    j = nlohmann::json::parse("[" + text + "]");
  } catch (const nlohmann::json::exception&) {
    refuse("not a list of integers");
  }
  for (const nlohmann::json& v : j) {
    if (!v.is_number_integer()) refuse("holds " + describe_json(v) + ", not an integer");
    layers.push_back(v.get<int64_t>());
  }
  return layers;
}

std::vector<PathUse> path_uses(const TrainConfig& t) {
  const ckpt::CkptOptions& o = t.ckpt;
  const std::string ckpt_files = R"(latest|zt\.lock|step-\d+\.h5(\.tmp.*)?)";
  std::error_code ec;
  const bool init_dir = std::filesystem::is_directory(o.init_from, ec);
  std::vector<PathUse> uses{
      {"ckpt.dir", o.dir, true, ckpt_files},
      {"log.metrics", t.metrics_path, true},
      {"data.path", t.data_path, false, "", true},
      {"ckpt.init_from", o.init_from, false, init_dir ? R"(latest|step-\d+\.h5)" : "", true},
      {"ckpt.resume", o.resume == "auto" || o.resume == "none" ? "" : o.resume, false, "", true}};
  if (t.log_report) uses.push_back({"the report folder (log.report)", o.dir + "/report", true, ".*"});
  if (t.zero.offload.uses_nvme())
    uses.push_back({"offload.nvme_path", t.zero.offload.nvme_path, true, R"(zt-offload-rank\d+\.bin.*)"});
  return uses;
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
  override_int("model.sliding_window", t.model.sliding_window);
  override_int("model.experts", t.model.experts);
  override_int("model.experts_per_token", t.model.experts_per_token);
  if (c.has("model.router_aux_loss_coef"))
    t.model.router_aux_loss_coef = c.get_float("model.router_aux_loss_coef");
  if (c.has("model.router_aux_loss")) t.model.router_aux_loss = c.get_bool("model.router_aux_loss");
  override_int("model.moe_intermediate", t.model.moe_intermediate);
  override_int("model.shared_expert_intermediate", t.model.shared_expert_intermediate);
  if (c.has("model.norm_topk_prob")) t.model.norm_topk_prob = c.get_bool("model.norm_topk_prob");
  override_int("model.decoder_sparse_step", t.model.decoder_sparse_step);
  override_int("model.first_sliding_layer", t.model.first_sliding_layer);
  if (c.has("model.mlp_only_layers"))
    t.model.mlp_only_layers = parse_layer_list(c.get_string("model.mlp_only_layers"), "model.mlp_only_layers");
  if (c.has("model.tied_embeddings")) t.model.tied_embeddings = c.get_bool("model.tied_embeddings");
  if (c.has("model.family")) t.model.family = c.get_string("model.family");
  override_int("model.head_dim", t.model.head_dim_);
  if (c.has("model.attention_bias")) t.model.attention_bias = c.get_bool("model.attention_bias");
  if (c.has("model.rope_theta")) t.model.rope_theta = c.get_float("model.rope_theta");
  if (c.has("model.norm_eps")) t.model.norm_eps = c.get_float("model.norm_eps");
  kernels::RopeScaling& rs = t.model.rope_scaling;
  if (c.has("model.rope_type")) rs.type = c.get_string("model.rope_type");
  if (c.has("model.rope_factor")) rs.factor = c.get_float("model.rope_factor");
  if (c.has("model.rope_low_freq_factor")) rs.low_freq_factor = c.get_float("model.rope_low_freq_factor");
  if (c.has("model.rope_high_freq_factor")) rs.high_freq_factor = c.get_float("model.rope_high_freq_factor");
  if (c.has("model.rope_original_context")) rs.original_context = c.get_int("model.rope_original_context");
  bool overridden = false;
  for (const char* k : {"model.vocab", "model.hidden", "model.layers", "model.heads",
                        "model.kv_heads", "model.intermediate", "model.context",
                        "model.tied_embeddings", "model.rope_theta", "model.norm_eps",
                        "model.family", "model.head_dim", "model.attention_bias",
                        "model.rope_type", "model.rope_factor", "model.rope_low_freq_factor",
                        "model.rope_high_freq_factor", "model.rope_original_context",
                        "model.mlp_only_layers",
                        "model.sliding_window", "model.experts", "model.experts_per_token",
                        "model.router_aux_loss_coef", "model.router_aux_loss",
                        "model.first_sliding_layer", "model.moe_intermediate",
                        "model.shared_expert_intermediate", "model.norm_topk_prob",
                        "model.decoder_sparse_step"})
    overridden = overridden || c.has(k);
  if (overridden) t.model.name = t.model.name + "+overrides";
  t.model.validate();
  t.init_std = c.get_float("model.init_std");
  t.lora = model::resolve_lora(c, t.model);
  t.objective = resolve_objective(c);

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

  // The products the run forms from these sizes must fit in 64 bits, with bytes (8 per
  // element at most): tokens per step and per run (tokens_seen), and per micro-batch the
  // logits (tokens x vocab), the attention scores (tokens x seq_len x heads) and the MLP
  // (tokens x intermediate).
  {
    const char* hint = "lower train.micro_batch, train.global_batch or train.seq_len";
    const auto mul = [&](int64_t a, int64_t b, const char* what) {
      return mul_checked(a, b, what, hint);
    };
    mul(mul(mul(t.global_batch, t.seq_len, "train.global_batch x train.seq_len"), t.steps,
            "the tokens of the run (train.steps x global_batch x seq_len)"),
        8, "the tokens of the run, as bytes");
    const int64_t tokens = mul(t.micro_batch, t.seq_len, "train.micro_batch x train.seq_len");
    mul(mul(tokens, t.model.vocab, "the logits of one micro-batch (tokens x model.vocab)"), 8,
        "the logits of one micro-batch, as bytes");
    mul(mul(mul(tokens, t.seq_len, "the attention scores of one micro-batch (tokens x seq_len)"),
            t.model.heads, "the attention scores of one micro-batch (x model.heads)"),
        8, "the attention scores of one micro-batch, as bytes");
    mul(mul(tokens, std::max(t.model.intermediate, t.model.hidden),
            "the MLP activations of one micro-batch (tokens x model.intermediate)"),
        8 * 4, "the activations of one block of one micro-batch, as bytes");
    if (t.model.moe())  // each token's k routed rows keep [2I + I + C]
      mul(mul(mul(tokens, t.model.experts_per_token, "the routed rows of one micro-batch"),
              3 * t.model.expert_width() + t.model.hidden,
              "the experts' activations of one micro-batch"),
          8, "the experts' activations of one micro-batch, as bytes");
  }

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
  t.log_report = c.get_bool("log.report");
  t.log_verbose = c.get_bool("log.verbose");
  t.comm_timeout_s = c.get_float("comm.timeout");
  t.device = c.get_string("train.device");
  t.precision = c.get_string("train.precision");
  // QLoRA quantises the base from the dtype the engine holds it in: fp32 masters, or
  // bf16 with bf16-true; both are quantisable (model::check_qlora_dtype).
  model::check_qlora_dtype(t.lora, t.precision == "bf16-true" ? DType::kBF16 : DType::kF32);
  t.share_gpu = c.get_bool("train.share_gpu");
  t.comm_backend = c.get_string("comm.backend");
  t.ranks_per_node = static_cast<int>(c.get_int("runtime.ranks_per_node"));

  t.zero = zero::zero_options(c);
  t.zero.accum = static_cast<int>(t.accum);
  t.zero.grad_clip = t.grad_clip;
  t.zero.adamw = model::AdamWConfig{t.lr, t.beta1, t.beta2, t.eps, t.weight_decay};
  t.zero.max_batch = t.micro_batch;
  t.zero.max_seq = t.seq_len;
  t.zero.offload = offload::offload_options(c);
  t.zero.lora = t.lora;  // frozen base units + the adapters' unit (docs/zero.md)
  check_objective(t);  // after the zero options (expert parallelism)
  t.ckpt = ckpt::ckpt_options(c);
  return t;
}

std::vector<std::string> inert_keys(const config::Config& c, const TrainConfig& t) {
  const auto value_of = [&](const config::Key& k) -> config::Value {
    switch (k.type) {
      case config::Type::kInt: return c.get_int(k.name);
      case config::Type::kFloat: return c.get_float(k.name);
      case config::Type::kBool: return c.get_bool(k.name);
      default: return c.get_string(k.name);
    }
  };
  // Given on the command line or in a file, and not the default value (a file listing
  // every key at its default says nothing).
  const auto given = [&](const config::Key& k) {
    return c.has(k.name) && c.origin(k.name) != "default" &&
           (!k.default_value || value_of(k) != *k.default_value);
  };
  const std::string rope = t.model.rope_scaling.type;
  const char* no_experts = "the model has no experts (model.experts = 0): set model.family = "
                           "mixtral, qwen2_moe or qwen3_moe and model.experts for them";
  // (key or prefix, inert in this run, why and the fix)
  struct Rule {
    std::string key;
    bool inert;
    std::string why;
  };
  std::vector<Rule> rules = {
      // model.router_aux_loss and its _coef, model.experts_per_token on a dense model
      {"model.router_aux_loss", !t.model.moe(), no_experts},
      {"model.experts_per_token", !t.model.moe(), no_experts},
      {"model.router_aux_loss_coef", !t.model.router_aux_loss,
       "the load-balancing loss is off (model.router_aux_loss = false, as transformers' "
       "output_router_logits): set model.router_aux_loss = true to add it to the loss"},
      {"lora.", t.lora.method == model::FinetuneMethod::kFull,
       "finetune.method = full trains every weight without adapters: set finetune.method = "
       "lora or qlora"},
      {"model.rope_factor", rope == "default", "set model.rope_type = linear or llama3"},
      {"model.rope_low_freq_factor", rope != "llama3", "set model.rope_type = llama3"},
      {"model.rope_high_freq_factor", rope != "llama3", "set model.rope_type = llama3"},
      {"model.rope_original_context", rope != "llama3", "set model.rope_type = llama3"},
      {"model.first_sliding_layer", t.model.sliding_window == 0, "set model.sliding_window"}};
  for (const ObjectiveKeyGroup& g : objective_key_groups(t.objective.name))
    rules.push_back({g.prefix, g.inert, g.why});
  std::vector<std::string> out;
  for (const config::Key& k : c.schema().keys())
    for (const auto& r : rules)
      if (r.inert && k.name.starts_with(r.key) && given(k)) {
        out.push_back(strf("%s = %s has no effect in this run: %s", k.name.c_str(),
                           config::value_to_string(value_of(k)).c_str(), r.why.c_str()));
        break;  // the first reason (no experts before no aux loss)
      }
  return out;
}

int resolve_threads(int configured, int ranks_on_node, const std::string& setting) {
  const int host = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const char* env = std::getenv("OMP_NUM_THREADS");
  const bool from_env = configured <= 0 && env && *env;
  const std::string source = from_env ? strf("OMP_NUM_THREADS = %s", env)
                                      : strf("%s%s%d", setting.c_str(),
                                             setting.starts_with("--") ? " " : " = ", configured);
  int threads = 0;
  if (configured > 0) {
    threads = configured;
  } else if (from_env) {
    // OpenMP parses the variable itself (a list such as "8,2" takes its first entry).
    const long long asked = std::atoll(env);
    threads = asked > kMaxThreads ? kMaxThreads + 1 : omp_get_max_threads();
  } else {
    cpu_set_t set;
    CPU_ZERO(&set);
    const int bound = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    if (bound > 0 && bound < host) return bound;
    return std::max(1, host / std::max(1, ranks_on_node));
  }
  const int cap = std::min(kMaxThreads, 4 * host);
  if (threads > cap)
    throw InputError(strf("%s: more OpenMP threads per rank than 4x this host's %d cores "
                          "(at most %d)",
                          source.c_str(), host, cap),
                     strf("use at most the cores per rank (%d here with %d rank%s on the node); "
                          "0 picks that itself",
                          std::max(1, host / std::max(1, ranks_on_node)), ranks_on_node,
                          ranks_on_node == 1 ? "" : "s"));
  const int per_rank = std::max(1, host / std::max(1, ranks_on_node));
  if (threads > per_rank)
    log::warn(strf("%s: %d OpenMP threads per rank on %d cores shared by %d rank%s "
                   "(%d each): oversubscribed, expect slow steps; 0 picks the cores per rank",
                   source.c_str(), threads, host, ranks_on_node, ranks_on_node == 1 ? "" : "s",
                   per_rank));
  return threads;
}

ckpt::TrainState train_state_of(const TrainConfig& cfg, int64_t step, int64_t tokens_seen) {
  ckpt::TrainState st;
  st.step = step;
  st.tokens_seen = tokens_seen;
  st.sampler_seed = cfg.seed;
  st.sampler_next_step = step;
  st.lr = cfg.lr;
  st.min_lr = cfg.min_lr;
  st.warmup = cfg.warmup;
  st.steps = cfg.steps;
  st.beta1 = cfg.beta1;
  st.beta2 = cfg.beta2;
  st.eps = cfg.eps;
  st.weight_decay = cfg.weight_decay;
  st.grad_clip = cfg.grad_clip;
  st.global_batch = cfg.global_batch;
  st.seq_len = cfg.seq_len;
  st.objective = cfg.objective.name;
  return st;
}

}  // namespace zt::train
