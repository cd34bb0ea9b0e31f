#pragma once
// The keys of `zt train` (one schema: type, default, description of each) and the
// resolved training configuration. docs/training.md lists the keys; so does
// `zt train --help-config`.
#include <cstdint>
#include <string>
#include <vector>

#include "zt/ckpt/config.hpp"
#include "zt/ckpt/format.hpp"
#include "zt/core/config.hpp"
#include "zt/model/config.hpp"
#include "zt/model/lora.hpp"
#include "zt/train/objective.hpp"
#include "zt/core/outputs.hpp"
#include "zt/zero/options.hpp"

namespace zt::train {

// Every key `zt train` accepts: model.*, train.*, zero.*, data.*, eval.*, sample.*, log.*,
// comm.*, runtime.*, finetune.*, lora.*.
// The defaults are the embedded default: tiny on the shipped corpus, tuned to reach an
// eval loss under 2.3 in well under 3 minutes with `mpirun -np 2` on 2 CPU cores.
config::Schema train_schema();

struct TrainConfig {
  model::Config model;  // model.preset with the model.* overrides applied, validated

  int64_t steps = 0;         // optimizer steps
  int64_t micro_batch = 0;   // sequences per rank per forward/backward
  int64_t global_batch = 0;  // sequences per optimizer step, all ranks together
  int64_t accum = 0;         // derived: global_batch / (micro_batch * world)
  int64_t seq_len = 0;
  int world = 1;

  double lr = 0, min_lr = 0;  // peak and floor of the schedule
  int64_t warmup = 0;         // linear warm-up steps
  double weight_decay = 0, beta1 = 0, beta2 = 0, eps = 0;
  double grad_clip = 0;  // max global gradient norm; 0 disables clipping
  int64_t max_bad_steps = 5;  // non-finite steps in a row before the job fails
  uint64_t seed = 0;     // parameter init and data order
  double init_std = 0.02;
  bool recompute = false;
  double peak_tflops = 0;  // per rank; 0: measured (CPU) at start-up
  int threads = 0;         // OpenMP threads per rank; 0: automatic

  std::string data_path;  // "" = the shipped corpus, converted into the cache on first use
  double eval_fraction = 0.1;

  int64_t eval_every = 0;    // 0 disables periodic eval (the final step is always evaluated)
  int64_t eval_batches = 0;  // global batches of held-out sequences per evaluation

  int64_t sample_tokens = 0;  // 0 disables the final sample
  std::string sample_prompt;
  double sample_temperature = 1.0;
  uint64_t sample_seed = 0;

  std::string metrics_path;  // JSONL, "" for none
  int64_t log_every = 1;
  bool log_report = true;    // the run report in ckpt.dir/report (report.hpp)
  bool log_verbose = false;  // the full step line
  double comm_timeout_s = 300;
  // train.device, train.precision, train.share_gpu, comm.backend as written; resolved
  // against what each rank sees by choose_device (device.hpp).
  std::string device = "auto", precision = "fp32", comm_backend = "auto";
  bool share_gpu = false;
  int ranks_per_node = 0;  // runtime.ranks_per_node: simulated nodes of K ranks; 0 physical

  // zero.* keys, plus the train.* fields the engine needs (accum, grad_clip, AdamW,
  // micro-batch shape). Checked against the world and ranks per node by validate().
  zero::EngineOptions zero;

  ckpt::CkptOptions ckpt;  // ckpt.* keys (checkpoints: cadence, resume, preemption)
  model::LoraConfig lora;  // finetune.* and lora.* keys, checked against the model
  ObjectiveConfig objective;  // finetune.objective and its keys (zt/train/objective.hpp)

  int64_t tokens_per_step() const { return global_batch * seq_len; }
};

// Reads and checks every key. world = data-parallel ranks. Throws zt::InputError naming
// the keys at fault (e.g. global batch not divisible by micro_batch * world).
TrainConfig resolve(const config::Config& cfg, int world);

// Every path the run reads or writes, for refuse_collisions (core/outputs.hpp): ckpt.dir
// (its latest, zt.lock, step-N.h5 and their staging), the run report folder
// ckpt.dir/report (log.report: all of it), log.metrics, offload.nvme_path's files (when
// an offload home is nvme), and the inputs data.path, ckpt.init_from (a ckpt.dir: its
// latest and step-N.h5), ckpt.resume (a path). zt train checks them before any work.
std::vector<PathUse> path_uses(const TrainConfig& t);

// "0, 3" -> {0, 3} (model.mlp_only_layers); empty -> none. Anything but integers is a
// zt::InputError naming `key` (the model's validate() checks the range).
std::vector<int64_t> parse_layer_list(const std::string& text, const std::string& key);

// The keys given (in a file or --set, at other than their default) that this run does not
// use because another key turns their feature off, each as a warning naming the key and the
// fix: model.router_aux_loss_coef without model.router_aux_loss, lora.* with finetune.method
// = full, dpo.* / orpo.* with another objective, RoPE factors of another rope_type,
// model.first_sliding_layer without a window, model.experts_per_token and
// model.router_aux_loss(_coef) without experts.
std::vector<std::string> inert_keys(const config::Config& c, const TrainConfig& t);

// The schema's upper limit of train.threads, whatever the host.
inline constexpr int kMaxThreads = 4096;

// OpenMP threads per rank: train.threads when > 0; else OMP_NUM_THREADS when set; else
// the cores this rank is bound to, or (unbound) the host's cores shared by its ranks.
// More than 4x the host's cores (train.threads or OMP_NUM_THREADS) is a zt::InputError:
// the OpenMP runtime cannot start that many threads' stacks (100000 crashed the
// attention kernel); more than the cores per rank is run with a warning. Messages name
// `setting` as the user gave it: a key ("train.threads = 9000") or an option ("--threads
// 9000", a name starting with "--").
int resolve_threads(int configured, int ranks_on_node, const std::string& setting);

// The run's part of a checkpoint's training state (docs/checkpoint-format.md): the step,
// tokens seen, sampler position and the optimizer / schedule / batch keys of `cfg`. The
// caller adds what the engine and data know (world size, stage, hpZ, tokenizer).
ckpt::TrainState train_state_of(const TrainConfig& cfg, int64_t step, int64_t tokens_seen);

}  // namespace zt::train
