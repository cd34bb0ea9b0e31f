#pragma once
// Checkpoints inside the training loop (private to zt_train): resume or init_from at the
// start, saves on the ckpt.every cadence, after the last step (ckpt.save_final), and on
// preemption (SIGTERM/SIGUSR1 on any rank, or ckpt.stop_after): all ranks agree at the
// step boundary (one max-all_reduce of a flag per step), save, and the loop ends.
#include <mpi.h>

#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <string>

#include "zt/ckpt/checkpoint.hpp"
#include "zt/comm/comm.hpp"
#include "zt/core/files.hpp"
#include "zt/train/config.hpp"
#include "zt/train/metrics.hpp"
#include "zt/zero/engine.hpp"

namespace zt::train {

class LoopCheckpoints {
 public:
  // mpi: the MPI communicator of comm's ranks (parallel HDF5), or MPI_COMM_NULL: then
  // nothing is saved or loaded, and ckpt.* keys that need a file are refused.
  LoopCheckpoints(const TrainConfig& cfg, comm::Comm& comm, MPI_Comm mpi, zero::Engine& engine);

  // Loads what ckpt.resume / ckpt.init_from name. Returns the first step to run (steps
  // done so far) and sets tokens_seen.
  int64_t start(int64_t& tokens_seen);

  // Every rank after step `done` (steps done): agrees on preemption, saves when due.
  // True when the run must end here (preempted or ckpt.stop_after). cadence_save false
  // (a skipped NaN/Inf step): no ckpt.every save at this step, so a run of bad steps never
  // rotates good checkpoints out (ckpt.keep).
  bool after_step(int64_t done, int64_t tokens_seen, bool cadence_save = true);

  // Before the first step: a stop request that came during the start-up (engine init,
  // resume) is agreed, saved and ends the run here. True when it does.
  bool before_first_step(int64_t done, int64_t tokens_seen);

  // Any rank's stop request (SIGTERM, SIGUSR1, SIGINT), agreed by all (one all_reduce):
  // the sampler polls it per token.
  bool stop_requested();

  // The training data's tokenizer, recorded in every checkpoint saved from now on.
  void set_tokenizer(ckpt::TokenizerRecord t) { tokenizer_ = std::move(t); }

  // Called on every rank after each checkpoint is written (TrainHooks::on_checkpoint).
  void set_on_saved(std::function<void(const CheckpointRecord&)> f) { on_saved_ = std::move(f); }

  // After the last step: the final save (ckpt.save_final) unless that step was saved.
  void finish(int64_t done, int64_t tokens_seen);

  bool stopped() const { return stopped_; }
  int signal() const { return signal_; }
  const std::string& last_path() const { return last_path_; }
  bool enabled() const { return mpi_ != MPI_COMM_NULL; }  // checkpoints can be saved and resumed

 private:
  void save(int64_t done, int64_t tokens_seen);
  bool stop_agreed(int32_t* flag);
  void end_here(int64_t done, const int32_t* flag);  // stopped at `done`: collect, log  // flag[0]: any rank asked, flag[1]: the largest signal
  std::chrono::milliseconds comm_timeout() const;  // comm.timeout: the watchdog's limit
  void collect();  // waits for a background save (ckpt.async) and logs it


  const TrainConfig& cfg_;
  comm::Comm& comm_;
  MPI_Comm mpi_;
  zero::Engine& engine_;
  int64_t saved_step_ = -1;
  ckpt::TokenizerRecord tokenizer_;  // set_tokenizer
  std::function<void(const CheckpointRecord&)> on_saved_;  // set_on_saved
  // A LoRA run's base (ckpt.init_from, or a resumed adapters file's base_path): absolute
  // path and content hash (ckpt::base_hash), written into every adapters checkpoint.
  std::string base_path_, base_hash_;
  // A full fine-tune of a multimodal import: the vision tower and config.json of the file
  // it started from (init_from, or the resumed checkpoint), read once by rank 0 and copied
  // into every checkpoint, so each exports as the whole model without the source file.
  std::shared_ptr<const ckpt::HfCarried> carried_;
  // A LoRA run: the base's weights in, and the base recorded (start()).
  void load_base(const std::string& base, std::vector<std::string>* warnings);
  bool stopped_ = false;
  int signal_ = 0;
  std::string last_path_;
  // ckpt.dir's lock (rank 0; ckpt::lock_dir), held from start() to the end: declared
  // before async_, so a background save finishes before it is released.
  std::unique_ptr<FolderLock> lock_;
  std::unique_ptr<ckpt::AsyncSaver> async_;  // ckpt.async
  int64_t async_step_ = -1;                  // the step the background save holds
  double async_stall_ = 0;                   // its start()'s stall (s)
};

}  // namespace zt::train
