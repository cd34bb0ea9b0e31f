#pragma once
// The training step and evaluation of finetune.objective = dpo | orpo (private to
// zt_train; trainer.cpp calls it in place of its own step and evaluation). A pair (two
// rows) is the sampler's window, so a pair is never split between micro-batches or ranks.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "preference_reference.hpp"
#include "zt/comm/comm.hpp"
#include "zt/data/sampler.hpp"
#include "zt/data/token_file.hpp"
#include "zt/train/config.hpp"
#include "zt/train/preference.hpp"
#include "zt/zero/engine.hpp"

namespace zt::train {

class PreferenceLoop {
 public:
  // Checks the data (a pair file of train.seq_len + 1 rows) and the batch (even
  // micro_batch: whole pairs); zt::InputError naming the key or file otherwise.
  PreferenceLoop(const TrainConfig& cfg, comm::Comm& comm, const data::TokenFile& data,
                 const data::Split& split, zero::Engine& engine);
  // DPO: the reference log-probs of every row (the base with the adapters off, or the
  // weights before the first step of a full fine-tune), one forward pass over the file,
  // rows split over the ranks. A full fine-tune stores them in ckpt_dir/dpo-reference.h5
  // (when ckpt_dir is not empty) and, resumed past step 0, reads them from beside the
  // checkpoint it resumed from (resumed_from) instead (preference_reference.hpp). At step 0
  // a stored file of the same identity (weights, data, seq_len) and checksum is reused; any
  // other is recomputed with a warning. `stop` (collective: every rank calls it alike) is
  // asked between batches: true ends the pass, nothing stored, and reference returns false.
  bool reference(int64_t first_step, const std::string& resumed_from, const std::string& ckpt_dir,
                 const std::function<bool()>& stop);
  // One optimizer step: its loss (the objective's mean), and the metrics in `metrics`.
  zero::StepStats step(int64_t step, double lr, PairMetrics& metrics);
  // The held-out pairs' objective and metrics (eval.batches global batches).
  // The held-out pairs' loss; nullopt when `stop` (asked before each global batch, agreed
  // by every rank) ends it early.
  std::optional<double> evaluate(PairMetrics& metrics, const std::function<bool()>& stop);

 private:
  void fill(size_t i, size_t row_start);
  double run_objective(bool train, double grad_scale, double nll_weight, PairMetrics& m);
  int64_t chosen_targets(size_t row_start) const;
  void store_reference(const std::string& path, const ReferenceIdentity& id);
  size_t last_target(size_t row_start) const;
  bool sequence_nll(size_t row_start) const;

  const TrainConfig& cfg_;
  comm::Comm& comm_;
  const data::TokenFile& data_;
  zero::Engine& engine_;
  const size_t B_, T_, row_;
  data::Sampler sampler_;  // windows = pairs (2 rows)
  std::optional<data::EvalWindows> eval_;
  std::vector<double> ref_;  // [rows of the file] DPO
  std::vector<int32_t> tokens_, targets_;
  std::vector<size_t> rows_;  // the batch's row indices
};

}  // namespace zt::train
