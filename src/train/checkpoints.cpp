// Checkpoints inside the training loop (see checkpoints.hpp).
#include "checkpoints.hpp"

#include <chrono>
#include <filesystem>
#include <vector>

#include "zt/ckpt/adapters.hpp"
#include "zt/ckpt/checkpoint.hpp"
#include "zt/ckpt/io.hpp"
#include "zt/ckpt/preemption.hpp"
#include "zt/ckpt/publish.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/runtime/watchdog.hpp"

namespace zt::train {
namespace {

// What may change when a run resumes: one row per setting the checkpoint records, with
// what a change does. A refused change is zt::InputError naming the key and the fix.
struct ResumeRule {
  const char* key;
  std::string was, now;  // "" was: the checkpoint predates the record (not compared)
  bool refuse;
  const char* why;
};

std::string num(double v) { return strf("%g", v); }

void check_resume_changes(const ckpt::TrainState& st, const TrainConfig& cfg, const std::string& path,
                          std::vector<std::string>* warnings) {
  const char* schedule = "this run follows its own LR schedule from the checkpoint's step";
  const ResumeRule rules[] = {
      {"finetune.objective", st.objective, cfg.objective.name, true,
       "the optimizer moments and steps belong to the objective that made them, and a DPO run's "
       "reference is the weights before its own first step"},
      {"train.steps", num(static_cast<double>(st.steps)), num(static_cast<double>(cfg.steps)), false, schedule},
      {"train.lr", num(st.lr), num(cfg.lr), false, schedule},
      {"train.min_lr", num(st.min_lr), num(cfg.min_lr), false, schedule},
      {"train.warmup", num(static_cast<double>(st.warmup)), num(static_cast<double>(cfg.warmup)), false, schedule},
      {"train.seed", std::to_string(st.sampler_seed), std::to_string(cfg.seed), false, "the data order changes"},
      {"train.global_batch", num(static_cast<double>(st.global_batch)),
       num(static_cast<double>(cfg.global_batch)), false, "the batch shape changes"},
      {"train.seq_len", num(static_cast<double>(st.seq_len)), num(static_cast<double>(cfg.seq_len)), false,
       "the batch shape changes"},
  };
  for (const ResumeRule& r : rules) {
    if (r.was.empty() || r.was == r.now) continue;
    const std::string what = strf("%s = %s, but checkpoint '%s' was trained with %s", r.key, r.now.c_str(),
                                  path.c_str(), r.was.c_str());
    if (!r.refuse) {
      warnings->push_back(what + ": " + r.why);
      continue;
    }
    throw InputError(what + ": a resume cannot change it (" + r.why + ")",
                     strf("resume with %s = %s, or start anew from these weights: ckpt.init_from = %s "
                          "with ckpt.resume = none (a fresh optimizer at step 0; another ckpt.dir, or "
                          "ckpt.overwrite = true)",
                          r.key, r.was.c_str(), path.c_str()));
  }
}

}  // namespace

LoopCheckpoints::LoopCheckpoints(const TrainConfig& cfg, comm::Comm& comm, MPI_Comm mpi,
                                 zero::Engine& engine)
    : cfg_(cfg), comm_(comm), mpi_(mpi), engine_(engine) {
  const ckpt::CkptOptions& o = cfg.ckpt;
  if (mpi_ == MPI_COMM_NULL &&
      (o.resume != "none" || !o.init_from.empty() || o.every > 0 || o.stop_after > 0))
    throw InputError("ckpt.resume / ckpt.init_from / ckpt.every / ckpt.stop_after need the "
                     "training communicator as an MPI communicator (NodeComms::mpi)",
                     "zt train passes it; a caller of train::train must too");
  if (o.async && mpi_ != MPI_COMM_NULL) {
    async_ = std::make_unique<ckpt::AsyncSaver>(mpi_);
    async_->prepare(engine_);  // the snapshot's page faults beside training, not in a stall
  }
}

int64_t LoopCheckpoints::start(int64_t& tokens_seen) {
  tokens_seen = 0;
  if (mpi_ == MPI_COMM_NULL) return 0;
  const ckpt::CkptOptions& o = cfg_.ckpt;
  const bool root = comm_.rank() == 0;
  // A checkpoint may be saved (cadence, the end, a preemption): an unusable ckpt.dir is
  // said now, not after the training (issue 20).
  ckpt::preflight_dir(mpi_, o.dir);
  // One run per ckpt.dir (issue 36, class 1): taken before `latest` is read.
  lock_ = ckpt::lock_dir(mpi_, o.dir);
  std::vector<std::string> warnings;
  int64_t first = 0;
  // ckpt.resume (a path, or `latest` in ckpt.dir with "auto") wins; init_from applies
  // when there is nothing to resume (ckpt_options refuses a named path with init_from).
  const std::string path = ckpt::resolve_resume(mpi_, o.resume, o.dir);
  // Starting fresh over another run's checkpoints would overwrite them and move `latest`
  // (issue 20): refused unless ckpt.overwrite.
  if (path.empty()) ckpt::refuse_fresh_run_over(mpi_, o.dir, o.resume, o.overwrite);
  const bool lora = cfg_.lora.enabled();
  // A ckpt.dir as init_from is the checkpoint its `latest` names, as for --weights.
  const std::string init_from = path.empty() || lora ? ckpt::resolve_init_from(mpi_, o.init_from) : "";
  if (path.empty() && !init_from.empty()) {
    if (lora)
      load_base(init_from, &warnings);
    else
      ckpt::load_weights(engine_, mpi_, init_from, &warnings);
    if (root) log::info("ckpt: initial weights from " + init_from + " (fresh optimizer, step 0)");
  } else {
    if (path.empty()) {
      if (root && o.resume == "auto")
        log::info("ckpt: no checkpoint in " + o.dir + " (no 'latest'): starting fresh");
      if (lora)
        warnings.push_back("finetune.method = " + std::string(cfg_.lora.method == model::FinetuneMethod::kQlora ? "qlora" : "lora") +
                           " without ckpt.init_from: the adapters train on a random base (from "
                           "train.seed); name a pre-trained base with ckpt.init_from");
    } else {
      if (lora) {  // the base first: the file names it, ckpt.init_from may (and must match)
        const ckpt::Header h = ckpt::read_header(mpi_, path);
        ckpt::check_loadable(h, path, cfg_.lora, /*resume=*/true);
        const std::string base = init_from.empty() ? h.adapters.base_path : init_from;
        const std::string hash = ckpt::base_hash(mpi_, base);
        ckpt::check_same_base(h, path, base, hash);
        load_base(base, &warnings);
      }
      const ckpt::TrainState st = ckpt::load(engine_, mpi_, path, &warnings);
      // A finished job requeued (slurm/train.sbatch) finds its last checkpoint at or past
      // train.steps: not an error, the run has nothing to do (Trainer::run returns at
      // once, zt train says "nothing is left to train" and exits 0).
      first = st.step;
      tokens_seen = st.tokens_seen;
      saved_step_ = st.step;
      last_path_ = path;  // what a stop before the first step leaves (nothing new is saved)
      check_resume_changes(st, cfg_, path, &warnings);
      if (root)
        log::info(strf("ckpt: resumed from %s at step %lld (saved by %lld rank%s, stage %lld, hpZ %lld)",
                       path.c_str(), static_cast<long long>(st.step),
                       static_cast<long long>(st.world_size), st.world_size == 1 ? "" : "s",
                       static_cast<long long>(st.zero_stage), static_cast<long long>(st.hpz)));
    }
  }
  // A full fine-tune carries its source's /hf_carried (a LoRA run's adapters file names its
  // base, whose export carries it).
  const std::string source = path.empty() ? init_from : path;
  if (!lora && !source.empty()) carried_ = ckpt::read_carried(mpi_, source);
  if (root && carried_)
    log::info("ckpt: every checkpoint carries the vision tower and config.json of " + source +
              " (group /hf_carried): its export is the whole multimodal model");
  if (root)
    for (const std::string& w : warnings) log::warn("ckpt: " + w);
  return first;
}

void LoopCheckpoints::load_base(const std::string& base, std::vector<std::string>* warnings) {
  base_path_ = base.empty() ? "" : std::filesystem::absolute(base).lexically_normal().string();
  base_hash_ = ckpt::base_hash(mpi_, base);
  if (!base.empty()) ckpt::load_weights(engine_, mpi_, base, warnings);
}

bool LoopCheckpoints::stop_agreed(int32_t* flag) {
  flag[0] = ckpt::preemption_requested() ? 1 : 0;
  flag[1] = ckpt::preemption_signal();
  comm_.all_reduce(flag, flag, 2, DType::kI32, comm::ReduceOp::kMax);
  return flag[0] != 0;
}

bool LoopCheckpoints::stop_requested() {
  int32_t flag[2];
  return stop_agreed(flag);
}

bool LoopCheckpoints::after_step(int64_t done, int64_t tokens_seen, bool cadence_save) {
  // Preemption: any rank's flag, agreed by all at this boundary.
  int32_t flag[2];
  const bool stop = stop_agreed(flag) || (cfg_.ckpt.stop_after > 0 && done >= cfg_.ckpt.stop_after);
  const bool due = cadence_save && cfg_.ckpt.every > 0 && done % cfg_.ckpt.every == 0;
  if (mpi_ != MPI_COMM_NULL && (stop || due)) save(done, tokens_seen);
  if (stop && done < cfg_.steps) end_here(done, flag);
  else if (stop) collect();  // the job ends: the checkpoint must be complete
  return stopped_;
}

bool LoopCheckpoints::before_first_step(int64_t done, int64_t tokens_seen) {
  int32_t flag[2];
  if (!stop_agreed(flag)) return false;
  if (mpi_ != MPI_COMM_NULL) save(done, tokens_seen);  // a no-op right after a resume
  end_here(done, flag);
  return true;
}

void LoopCheckpoints::end_here(int64_t done, const int32_t* flag) {
  collect();  // the job ends: the checkpoint must be complete
  stopped_ = true;
  signal_ = flag[1];
  if (comm_.rank() == 0)
    log::info(strf("%s at step %lld: checkpoint %s written",
                   flag[0] ? (signal_ ? strf("preempted (signal %d)", signal_).c_str() : "preempted")
                           : "ckpt.stop_after reached",
                   static_cast<long long>(done),
                   last_path_.empty() ? "(none: no MPI communicator)" : last_path_.c_str()));
}

void LoopCheckpoints::finish(int64_t done, int64_t tokens_seen) {
  if (mpi_ != MPI_COMM_NULL && cfg_.ckpt.save_final && saved_step_ != done) save(done, tokens_seen);
  collect();
}

void LoopCheckpoints::collect() {
  if (!async_ || !async_->busy()) return;
  const runtime::Watchdog guard(strf("the background checkpoint of step %lld into %s",
                                     static_cast<long long>(async_step_), cfg_.ckpt.dir.c_str()),
                                comm_timeout());
  const std::optional<ckpt::SaveResult> r = async_->wait();
  if (!r) return;
  last_path_ = r->path;
  // In place (no snapshot), training's stall is the start plus what step() did on
  // reaching units the writer had not yet written: copy them (at memory bandwidth), or
  // wait where the copy could not be allocated (rank 0's).
  const ckpt::UpdateGuardStats& g = r->update_guard;
  const std::string no_copy =
      g.copy_failures > 0 ? strf(" (%d copies not allocated: waited for the writer)", g.copy_failures) : "";
  const std::string stall =
      engine_.owned_in_place()
          ? strf("; training stalled %.3f s: %.3f s at the start + %.3f s copying %.1f MB on reach + "
                 "%.3f s waited%s",
                 async_stall_ + g.copy_seconds + g.waited, async_stall_, g.copy_seconds,
                 static_cast<double>(g.copied_bytes) / 1e6, g.waited, no_copy.c_str())
          : "";
  if (comm_.rank() == 0)
    log::info(strf("ckpt: step %lld -> %s written in the background (%.1f MB in %.2f s, %.0f MB/s%s)",
                   static_cast<long long>(async_step_), r->path.c_str(),
                   static_cast<double>(r->bytes) / 1e6, r->seconds,
                   static_cast<double>(r->bytes) / 1e6 / std::max(r->seconds, 1e-9), stall.c_str()));
  if (on_saved_)
    on_saved_({async_step_, r->path, r->bytes, r->seconds,
               engine_.owned_in_place() ? async_stall_ + g.copy_seconds + g.waited : async_stall_, true});
}

void LoopCheckpoints::save(int64_t done, int64_t tokens_seen) {
  if (saved_step_ == done) return;
  ckpt::TrainState st = train_state_of(cfg_, done, tokens_seen);
  st.world_size = comm_.size();
  st.zero_stage = engine_.options().stage;
  st.hpz = engine_.hpz();
  st.tokenizer = tokenizer_;
  st.base_path = base_path_;
  st.base_hash = base_hash_;
  st.carried = carried_;
  if (async_) {
    // The stall: waiting for the previous background save, then the snapshot copy (in
    // place: none; step() may wait later for units not yet written, collect() says).
    const auto t0 = std::chrono::steady_clock::now();
    collect();
    async_->start(engine_, cfg_.ckpt.dir, st, cfg_.ckpt.keep, cfg_.seed);
    const double stall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    saved_step_ = done;
    async_step_ = done;
    async_stall_ = stall;
    if (comm_.rank() == 0)
      log::info(strf("ckpt: step %lld %s, writing in the background (training stalled %.3f s)",
                     static_cast<long long>(done),
                     engine_.owned_in_place() ? "in place (no snapshot)" : "snapshot taken", stall));
    return;
  }
  // Parallel HDF5 blocks inside MPI: bound the save by comm.timeout (a full or read-only
  // disk can leave the ranks in different collectives forever).
  const runtime::Watchdog guard(strf("saving the checkpoint of step %lld into %s",
                                     static_cast<long long>(done), cfg_.ckpt.dir.c_str()),
                                comm_timeout());
  const ckpt::SaveResult r = ckpt::save(engine_, mpi_, cfg_.ckpt.dir, st, cfg_.ckpt.keep, cfg_.seed);
  saved_step_ = done;
  last_path_ = r.path;
  if (comm_.rank() == 0)
    log::info(strf("ckpt: step %lld -> %s (%.1f MB in %.2f s, %.0f MB/s; training stalled %.2f s)",
                   static_cast<long long>(done), r.path.c_str(), static_cast<double>(r.bytes) / 1e6,
                   r.seconds, static_cast<double>(r.bytes) / 1e6 / std::max(r.seconds, 1e-9),
                   r.seconds));
  if (on_saved_) on_saved_({done, r.path, r.bytes, r.seconds, r.seconds, false});
}

std::chrono::milliseconds LoopCheckpoints::comm_timeout() const {
  return std::chrono::milliseconds(static_cast<int64_t>(cfg_.comm_timeout_s * 1000.0));
}

}  // namespace zt::train
