// The data-parallel training loop over the ZeRO engine (see trainer.hpp).
#include "zt/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <limits>
#include <new>
#include <memory>
#include <optional>
#include <sstream>
#include <span>
#include <vector>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/progress.hpp"
#include "zt/data/sampler.hpp"
#include "zt/data/text_tokenizer.hpp"
#include "zt/data/tokenizer.hpp"
#include "zt/offload/preflight.hpp"
#include "checkpoints.hpp"
#include "trainer_memory.hpp"
#include "objective.hpp"
#include "sample_prompt.hpp"
#include "zt/train/generate.hpp"
#include "zt/train/metrics.hpp"
#include "zt/train/schedule.hpp"
#include "zt/zero/engine.hpp"

namespace zt::train {
namespace {

using Clock = std::chrono::steady_clock;
using detail::gib;
using detail::model_state_bytes;
using detail::out_of_memory;
using detail::reduce_max_over_ranks;

// The train / held-out split of the token file, checked against the configuration.
data::Split split_checked(const TrainConfig& cfg, const data::TokenFile& data) {
  check_objective_data(cfg.objective.name, data, cfg.data_path);  // before any shape check
  const bool rows = !data.loss_mask.empty();
  if (rows && data.row_len != static_cast<uint64_t>(cfg.seq_len + 1))
    throw InputError(strf("dataset '%s' is instruction data in rows of %u tokens (made with "
                          "--seq-len %u), but train.seq_len is %lld",
                          cfg.data_path.c_str(), data.row_len, data.row_len - 1,
                          static_cast<long long>(cfg.seq_len)),
                     strf("set train.seq_len = %u, or convert the data again with `zt convert "
                          "sft-to-tokens --seq-len %lld`",
                          data.row_len - 1, static_cast<long long>(cfg.seq_len)));
  const data::Split split = data::split_of(data, cfg.eval_fraction);
  if (static_cast<int64_t>(data.vocab_size) > cfg.model.vocab)
    throw InputError(strf("dataset '%s' (tokenizer \"%s\", vocab_size %u) has more tokens than "
                          "the model's vocabulary (model.vocab %lld)",
                          cfg.data_path.c_str(), data.tokenizer.c_str(), data.vocab_size,
                          static_cast<long long>(cfg.model.vocab)),
                     "set model.vocab to at least the dataset's vocab_size, or use a dataset "
                     "made with the model's tokenizer");
  // A real tokenizer's ids mean its tokens: a model of another vocabulary size was made
  // for another tokenizer (the byte tokenizer's 256 ids fit any model.vocab, as before).
  if (!data.tokenizer_hash.empty() && static_cast<int64_t>(data.vocab_size) != cfg.model.vocab)
    throw InputError(strf("dataset '%s' was made with tokenizer \"%s\" (vocab_size %u), which "
                          "does not match the model's vocabulary (model.vocab %lld)",
                          cfg.data_path.c_str(), data.tokenizer.c_str(), data.vocab_size,
                          static_cast<long long>(cfg.model.vocab)),
                     "convert the text with the model's own tokenizer (`zt convert "
                     "text-to-tokens --tokenizer MODEL_DIR ...`), or set model.vocab to the "
                     "tokenizer's vocabulary");
  const size_t need = static_cast<size_t>(cfg.global_batch * (cfg.seq_len + (rows ? 1 : 0)) +
                                          (rows ? 0 : 1));
  if (split.train.size() < need)
    throw InputError(strf("dataset '%s': its training part holds %zu tokens, one global batch "
                          "needs %s = %zu",
                          cfg.data_path.c_str(), split.train.size(),
                          rows ? "train.global_batch rows of train.seq_len + 1"
                               : "train.global_batch x train.seq_len + 1",
                          need),
                     "use a larger dataset or lower train.global_batch / train.seq_len "
                     "(data.eval_fraction takes the tail for evaluation)");
  if (cfg.eval_fraction > 0 && split.eval.size() < static_cast<size_t>(cfg.seq_len + 1))
    throw InputError(strf("dataset '%s': its held-out tail (data.eval_fraction = %g) holds %zu "
                          "tokens, one eval sequence needs train.seq_len + 1 = %lld (a row)",
                          cfg.data_path.c_str(), cfg.eval_fraction, split.eval.size(),
                          static_cast<long long>(cfg.seq_len + 1)),
                     "raise data.eval_fraction, lower train.seq_len, or use a larger dataset");
  return split;
}

// One training run in layers, as torchtitan's trainer: train_step (forward/backward over
// the micro-batches, then the optimizer step), evaluate, record and sample; run() is the
// loop over them.
class Trainer {
 public:
  Trainer(const TrainConfig& cfg, comm::Comm& comm, const data::TokenFile& data, const NodeComms& nodes);
  TrainResult run(const TrainHooks& hooks);

 private:
  zero::StepStats train_step(int64_t step, double lr);
  void count_bad_step(int64_t step, const zero::StepStats& stats);
  StepRecord record(int64_t step, double lr, const zero::StepStats& stats, double seconds);
  void sample(TrainResult& result);

  const TrainConfig& cfg_;
  comm::Comm& comm_;
  const data::TokenFile& data_;
  const int rank_, world_;
  const data::Split split_;
  std::optional<zero::Engine> engine_;
  std::optional<LoopCheckpoints> checkpoints_;
  std::unique_ptr<TrainObjective> objective_;  // finetune.objective (objective.hpp)
  std::unique_ptr<Progress> startup_;  // start-up phases: engine init, resume (rank 0 prints)
  double peak_flops_per_rank_ = 0;
  int64_t tokens_seen_ = 0;
  int64_t bad_in_row_ = 0;  // consecutive skipped (non-finite) steps
  int64_t skipped_in_row_ = 0, no_target_steps_ = 0;  // any kind; steps without a target
  bool no_targets_ = false;  // the last step's global batch had nothing to learn from
};

Trainer::Trainer(const TrainConfig& cfg, comm::Comm& comm, const data::TokenFile& data,
                 const NodeComms& nodes)
    : cfg_(cfg),
      comm_(comm),
      data_(data),
      rank_(comm.rank()),
      world_(comm.size()),
      split_(split_checked(cfg, data)) {
  // Before allocating: the model states of this node's ranks against MemAvailable (the
  // smallest over the ranks, so every rank decides alike). A model that cannot fit is
  // refused with both numbers instead of being ended by the OOM killer without a word.
  // States offloaded to NVMe are not in host memory: not counted then.
  // On a GPU the model states live in device memory: not counted here.
  if (cfg.zero.offload.optimizer != offload::Home::kNvme &&
      cfg.zero.device != zero::EngineOptions::Device::kCuda) {
    const int on_node = nodes.node ? nodes.node->size() : 1;
    const double need = model_state_bytes(cfg, on_node) * on_node;
    double avail = static_cast<double>(offload::mem_available());
    comm_.all_reduce(&avail, &avail, 1, DType::kF64, comm::ReduceOp::kMin);
    if (avail > 0 && need > avail)
      throw InputError(
          strf("model %s (%lld parameters, zero.stage %d over %d ranks) needs about %s of fp32 "
               "model states per rank, %s for the %d rank%s on a node; MemAvailable is %s "
               "(/proc/meminfo, the smallest over the nodes)",
               cfg.model.name.c_str(), static_cast<long long>(cfg.model.num_params()),
               cfg.zero.stage, world_, gib(model_state_bytes(cfg)).c_str(), gib(need).c_str(),
               on_node, on_node == 1 ? "" : "s", gib(avail).c_str()),
          strf("`zt estimate --config <this TOML> --gpus %d` prints the memory per rank of each "
               "ZeRO stage and whether it fits; try zero.stage = 3, more nodes, "
               "offload.optimizer = nvme or a smaller model",
               cfg.world));
  }
  // Start-up in phases, on rank 0: the engine's init, then resume / init_from (a big
  // checkpoint's load reports its own bytes).
  startup_ = std::make_unique<Progress>("train start-up", 2, ProgressUnit::kPhases);
  startup_->note("engine init");
  // The engine: it initialises the parameters from train.seed (a pure function of seed,
  // tensor and index: every rank fills what it holds with the values one process would
  // have) and validates zero.* against the ranks before any collective.
  try {
    engine_.emplace(cfg.model, nodes.engine_world ? *nodes.engine_world : comm, nodes.node,
                    nodes.cross, cfg.zero, model::InitOptions{cfg.seed, cfg.init_std, true},
                    &comm);
  } catch (const std::bad_alloc&) {
    throw out_of_memory(cfg, strf("the ZeRO engine for %s (%lld parameters, stage %d over %d "
                                  "ranks): about %s of fp32 model states per rank",
                                  cfg.model.name.c_str(),
                                  static_cast<long long>(cfg.model.num_params()),
                                  cfg.zero.stage, world_, gib(model_state_bytes(cfg)).c_str()));
  }
  // Checkpoints: ckpt.resume / ckpt.init_from now; saves on the cadence, at the end and
  // on preemption (checkpoints.hpp).
  checkpoints_.emplace(cfg, comm, nodes.mpi, *engine_);
  objective_ = make_objective({cfg, comm, data, split_, *engine_});
  if (!data.tokenizer_hash.empty())  // a real tokenizer: the checkpoint names it (h5-to-hf copies it)
    checkpoints_->set_tokenizer({data.tokenizer, data.tokenizer_path, data.tokenizer_hash});
  startup_->note("resume");  // the phase that runs next (Trainer::run)
  startup_->advance(1);
  peak_flops_per_rank_ = peak_flops_per_rank(cfg.peak_tflops, comm);
}

TrainResult Trainer::run(const TrainHooks& hooks) {
  TrainResult result;
  result.first_step = checkpoints_->start(tokens_seen_);
  startup_->note("");
  startup_->advance(1);
  startup_->finish();
  result.params = cfg_.model.num_params();
  result.engine = engine_->describe();
  result.peak_flops_per_rank = peak_flops_per_rank_;
  const Schedule schedule{cfg_.lr, cfg_.min_lr, cfg_.warmup, cfg_.steps};
  if (result.first_step >= cfg_.steps) {  // a finished job run again (e.g. requeued)
    result.nothing_left = true;
    result.checkpoint = checkpoints_->last_path();
    return result;
  }
  // The objective's reference (DPO: log-probs, full weights: stored beside the
  // checkpoints). A stop request ends it between batches; before_first_step below then
  // saves and ends.
  objective_->reference({result.first_step, checkpoints_->last_path(),
                         checkpoints_->enabled() ? cfg_.ckpt.dir : "",
                         [this] { return checkpoints_->stop_requested(); }});
  if (hooks.on_start) hooks.on_start(result.first_step);
  if (hooks.on_checkpoint) checkpoints_->set_on_saved(hooks.on_checkpoint);
  // A stop request during the start-up (engine init, resume) is honoured before the
  // first step: saved (a no-op when just resumed from this step) and ended.
  if (checkpoints_->before_first_step(result.first_step, tokens_seen_)) {
    result.stopped = true;
    result.stop_signal = checkpoints_->signal();
    result.checkpoint = checkpoints_->last_path();
    return result;
  }
  for (int64_t step = result.first_step; step < cfg_.steps; ++step) {
    const auto t0 = Clock::now();
    const double lr = lr_at(schedule, step);
    const zero::StepStats stats = train_step(step, lr);
    count_bad_step(step, stats);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    const StepRecord rec = record(step, lr, stats, seconds);
    if (hooks.on_step) hooks.on_step(rec);
    result.steps.push_back(rec);
    if (checkpoints_->after_step(step + 1, tokens_seen_, !stats.skipped)) break;  // preempted: saved, stop
  }
  result.stopped = checkpoints_->stopped();
  result.stop_signal = checkpoints_->signal();
  if (result.stopped) {
    result.checkpoint = checkpoints_->last_path();
    return result;  // no final evaluation or sample: the job is being ended
  }
  checkpoints_->finish(cfg_.steps, tokens_seen_);  // skipped steps left the weights as they were
  result.checkpoint = checkpoints_->last_path();
  result.skipped_at_end = skipped_in_row_;
  result.no_target_steps = no_target_steps_;
  if (skipped_in_row_ == 0) sample(result);
  return result;
}

// Forward/backward over this rank's micro-batches of the objective (objective.hpp):
// gradients accumulate (and are reduced as the stage prescribes); then the optimizer
// step. The step's bytes are counted from here to the optimizer step's end (StepStats::
// traffic would include an evaluation in between).
zero::StepStats Trainer::train_step(int64_t step, double lr) {
  const zero::Traffic traffic_before = engine_->traffic();
  no_targets_ = !objective_->begin_step(step);  // (the same on every rank)
  if (no_targets_) {  // nothing to learn from: no update, no weight decay (issue 36, class 7)
    zero::StepStats none;
    none.skipped = true;
    none.loss = std::numeric_limits<double>::quiet_NaN();
    return none;
  }
  for (int64_t micro = 0; micro < cfg_.accum; ++micro) {
    const MicroBatch& b = objective_->micro_batch(step, micro);
    double value = 0;
    try {
      value = engine_->micro_step(b.tokens, b.targets, cfg_.micro_batch, cfg_.seq_len, cfg_.recompute,
                                  b.scale, b.positions);
    } catch (const std::bad_alloc&) {
      throw out_of_memory(cfg_, strf("the activations of step %lld (train.micro_batch %lld x "
                                     "train.seq_len %lld tokens, recompute %s)",
                                     static_cast<long long>(step + 1),
                                     static_cast<long long>(cfg_.micro_batch),
                                     static_cast<long long>(cfg_.seq_len),
                                     cfg_.recompute ? "on" : "off"));
    }
    objective_->end_micro(micro, value);
  }
  zero::StepStats stats = engine_->step(lr);
  stats.traffic = engine_->traffic().minus(traffic_before);
  objective_->end_step(stats);
  return stats;
}

// A non-finite step was skipped by the engine (same verdict on every rank): warn; too
// many in a row end the job before anything (a checkpoint) is saved.
void Trainer::count_bad_step(int64_t step, const zero::StepStats& stats) {
  skipped_in_row_ = stats.skipped ? skipped_in_row_ + 1 : 0;
  if (no_targets_) {
    if (rank_ == 0)
      log::warn(strf("step %lld: no target in its global batch (the loss mask is 0 in every "
                     "row): skipped, no update (%lld such steps so far)",
                     static_cast<long long>(step + 1), static_cast<long long>(++no_target_steps_)));
    return;
  }
  bad_in_row_ = stats.skipped ? bad_in_row_ + 1 : 0;
  if (!stats.skipped) return;
  if (rank_ == 0)
    log::warn(strf("step %lld: loss %g, gradient norm %g: NaN/Inf in the gradient of %s; "
                   "update skipped (%lld in a row, train.max_bad_steps = %lld)",
                   static_cast<long long>(step + 1), stats.loss, stats.grad_norm,
                   stats.bad_units.c_str(), static_cast<long long>(bad_in_row_),
                   static_cast<long long>(cfg_.max_bad_steps)));
  if (bad_in_row_ >= cfg_.max_bad_steps)
    throw Error(strf("%lld steps in a row had a NaN/Inf loss or gradient (steps %lld-%lld; "
                     "last in %s); stopping without saving",
                     static_cast<long long>(bad_in_row_),
                     static_cast<long long>(step + 2 - bad_in_row_),
                     static_cast<long long>(step + 1), stats.bad_units.c_str()),
                "training diverged or the data is bad: lower train.lr, raise train.warmup, "
                "keep train.grad_clip on, or resume from the last checkpoint; "
                "train.max_bad_steps sets how many bad steps in a row are tolerated");
}

// The step's figures (memory and bytes: the maximum over ranks), with an evaluation on
// the eval.every cadence and at the last step.
StepRecord Trainer::record(int64_t step, double lr, const zero::StepStats& stats, double seconds) {
  StepRecord rec;
  rec.step = step + 1;
  rec.loss = stats.loss;
  rec.lr = lr;
  rec.grad_norm = stats.grad_norm;
  rec.clip_coef = stats.clip_coef;
  rec.skipped = stats.skipped;
  rec.router = stats.router;
  rec.step_time_s = seconds;
  rec.tokens_per_s = static_cast<double>(cfg_.tokens_per_step()) / seconds;
  rec.mfu = mfu(rec.tokens_per_s, cfg_.model.flops_per_token(cfg_.seq_len), world_, peak_flops_per_rank_);
  tokens_seen_ += cfg_.tokens_per_step();
  rec.tokens_seen = tokens_seen_;
  reduce_max_over_ranks(comm_, process_memory(), stats, rec);
  const bool last = step + 1 == cfg_.steps;
  // The held-out value; a stop request (asked before each global batch, agreed by every
  // rank) ends it without a figure: the step's checkpoint then comes at once.
  if (cfg_.eval_fraction > 0 && (last || (cfg_.eval_every > 0 && (step + 1) % cfg_.eval_every == 0)))
    rec.eval_loss = objective_->evaluate([this] { return checkpoints_->stop_requested(); });
  objective_->record(rec);
  return rec;
}

// The sample after training (sample.* keys): generated tokens and the text (prompt and
// continuation, decoded by the data's tokenizer) on rank 0; the same generate() as
// `zt generate`.
void Trainer::sample(TrainResult& result) {
  if (cfg_.sample_tokens <= 0) return;
  SamplePrompt prompt = sample_prompt(cfg_, data_, comm_, rank_);
  if (prompt.ids.empty()) return;
  for (const int32_t id : prompt.ids)
    if (id >= cfg_.model.vocab)
      throw InputError(strf("sample.prompt encodes to id %d, outside the model vocabulary (%lld)", id,
                            static_cast<long long>(cfg_.model.vocab)),
                       data_.tokenizer == "bytes"
                           ? "the prompt is byte-tokenized; use a byte-level model (vocab 256)"
                           : "train with the tokenizer the model's vocabulary was made for");
  // logits_last is collective (stage 3 gathers the units): every rank runs the sampler.
  // Rank 0's logits are broadcast so every rank draws the same token even if the ranks'
  // arithmetic differed in the last bit.
  const LogitsFn logits = [&](std::span<const int32_t> window, std::span<float> out) {
    engine_->logits_last(window, static_cast<int64_t>(window.size()), out);
    comm_.broadcast(out.data(), out.size(), DType::kF32, 0);
  };
  SampleOptions options;
  options.tokens = cfg_.sample_tokens;
  options.temperature = cfg_.sample_temperature;
  options.seed = cfg_.sample_seed;
  options.window = cfg_.seq_len;
  options.stop_ids = prompt.stop_ids;
  // A stop request (SIGTERM, SIGUSR1, SIGINT) ends the sample after the token in hand:
  // every rank asks, all agree (one all_reduce per token).
  options.stop = [this](std::span<const int32_t>) { return checkpoints_->stop_requested(); };
  std::vector<int32_t> tokens =
      generate(recompute_decoder(logits, cfg_.model.vocab, cfg_.model.context), prompt.ids, options)
          .tokens;
  if (rank_ != 0) return;
  result.sample = std::move(tokens);
  if (prompt.tokenizer) {
    const std::vector<uint32_t> ids(result.sample.begin(), result.sample.end());
    result.sample_text = cfg_.sample_prompt + prompt.tokenizer->decode(ids);
  } else {
    result.sample_text = data::ByteTokenizer::printable(
        cfg_.sample_prompt + data::ByteTokenizer::decode(std::span<const int32_t>(result.sample)));
  }
}

}  // namespace

TrainResult train(const TrainConfig& cfg, comm::Comm& comm, const data::TokenFile& data,
                  const TrainHooks& hooks, const NodeComms& nodes) {
  ZT_CHECK(cfg.world == comm.size(), "TrainConfig.world differs from the communicator size",
           "resolve the configuration with the world size of the comm that trains");
  Trainer trainer(cfg, comm, data, nodes);
  return trainer.run(hooks);
}

}  // namespace zt::train
