// The schema of `zt train` and its resolution into a TrainConfig.
#include "zt/train/config.hpp"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "zt/core/checked.hpp"
#include "zt/core/error.hpp"
#include "zt/core/json.hpp"
#include "zt/core/log.hpp"
#include "zt/ckpt/config.hpp"
#include "zt/model/config_fields.hpp"
#include "zt/model/cpu_workspace.hpp"
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
  // One key per field of model::Config's field list (model/config_fields.cpp).
  for (const model::ConfigField& f : model::config_fields()) {
    if (!f.key) continue;
    const std::string key = std::string("model.") + f.key;
    config::Key& k = std::visit(
        [&](auto ref) -> config::Key& {
          using T = std::decay_t<decltype(ref(std::declval<model::Config&>()))>;
          if constexpr (std::is_same_v<T, int64_t>) return range(s.add_int(key, std::nullopt, f.help), f.min, f.max);
          else if constexpr (std::is_same_v<T, double>) return range(s.add_float(key, std::nullopt, f.help), f.min, f.max);
          else if constexpr (std::is_same_v<T, bool>) return s.add_bool(key, std::nullopt, f.help);
          else return s.add_string(key, std::nullopt, f.help);  // a string, or a list of layers
        },
        f.ref);
    k.min_exclusive = f.min_exclusive;
    if (f.choices) k.choices = f.choices();
  }
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
  bool overridden = false;
  for (const model::ConfigField& f : model::config_fields()) {
    const std::string key = f.key ? std::string("model.") + f.key : "";
    if (!f.key || !c.has(key)) continue;
    overridden = true;
    std::visit(
        [&](auto ref) {
          auto& v = ref(t.model);
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, int64_t>) v = c.get_int(key);
          else if constexpr (std::is_same_v<T, double>) v = c.get_float(key);
          else if constexpr (std::is_same_v<T, bool>) v = c.get_bool(key);
          else if constexpr (std::is_same_v<T, std::string>) v = c.get_string(key);
          else v = parse_layer_list(c.get_string(key), key);
        },
        f.ref);
  }
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
  // logits (tokens x vocab), the attention scores (tokens x seq_len x heads), the MLP
  // (tokens x intermediate) and the Gated DeltaNet layers' buffers.
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
    if (t.model.linear_layers())  // a Gated DeltaNet layer's buffers (model::LinearActSizes)
      mul(mul(tokens, model::LinearActSizes::of(t.model, 1).elements(),
              "the Gated DeltaNet activations of one micro-batch (tokens x their widths)"),
          8, "the Gated DeltaNet activations of one micro-batch, as bytes");
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
  // (key or prefix, inert in this run, why and the fix); model.* keys: the field list's,
  // an objective's key group: the objective registry's.
  struct Rule {
    std::string key;
    bool inert;
    std::string why;
  };
  std::vector<Rule> rules = {
      {"lora.", t.lora.method == model::FinetuneMethod::kFull,
       "finetune.method = full trains every weight without adapters: set finetune.method = "
       "lora or qlora"}};
  for (const ObjectiveKeyGroup& g : objective_key_groups(t.objective.name))
    rules.push_back({g.prefix, g.inert, g.why});
  const auto why_inert = [&](const std::string& key) -> std::optional<std::string> {
    if (key.starts_with("model."))
      if (const model::ConfigField* f = model::config_field(key.substr(6))) {
        if (const char* why = f->inert ? f->inert(t.model) : nullptr) return std::string(why);
        return std::nullopt;
      }
    for (const auto& r : rules)
      if (r.inert && key.starts_with(r.key)) return r.why;
    return std::nullopt;
  };
  std::vector<std::string> out;
  for (const config::Key& k : c.schema().keys())
    if (const std::optional<std::string> why = why_inert(k.name); why && given(k))
      out.push_back(strf("%s = %s has no effect in this run: %s", k.name.c_str(),
                         config::value_to_string(value_of(k)).c_str(), why->c_str()));
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
