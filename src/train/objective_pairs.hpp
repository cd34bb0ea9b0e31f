#pragma once
// What the preference objectives (DPO, ORPO: objective_dpo.cpp, objective_orpo.cpp) share:
// batches of whole pairs, the step's loss and metrics, the held-out evaluation. A pair
// (two rows: chosen, rejected) is the sampler's window, so a pair is never split between
// micro-batches or ranks. Each objective gives its pair value (value) and, if it needs
// them, context targets (a chosen row's prompt in its NLL) and per-step weights.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "objective.hpp"
#include "preference_reference.hpp"
#include "zt/train/preference.hpp"

namespace zt::train {

inline double log_sigmoid(double x) {
  return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x));
}
inline double sigmoid(double x) { return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x)); }

// What to do with other data than pairs (ObjectiveSpec::data_hint).
inline constexpr const char* kPairsHint =
    "make pairs with `zt convert pairs-to-tokens --seq-len N PAIRS.jsonl OUT.h5`, or set "
    "finetune.objective = sft";

// Pair p of the rows: its rows' indices, log-probs and target counts (at least 1).
struct Pair {
  size_t ci, ri;
  double c, r, nc, nr;
};
inline Pair pair_at(std::span<const double> logp, std::span<const int64_t> count, size_t p) {
  const size_t ci = 2 * p, ri = 2 * p + 1;
  return {ci, ri, logp[ci], logp[ri], static_cast<double>(std::max<int64_t>(count[ci], 1)),
          static_cast<double>(std::max<int64_t>(count[ri], 1))};
}

// Adds one pair's metrics (rewards and log-probs of the chosen and rejected rows).
void add_pair(PairMetrics& m, double reward_chosen, double reward_rejected, double logp_chosen,
              double logp_rejected);
// Checks the rows are pairs (and context sums, when given, one per row).
size_t pair_count(std::span<const double> logp, std::span<const int64_t> count, std::span<double> dlogp,
                  std::span<const double> context, std::span<double> dcontext);
// The configuration checks of every pair objective (expert parallelism).
void check_pairs(const TrainConfig& t);

class PairObjective : public TrainObjective {
 public:
  // Checks the batch (even micro_batch and global_batch: whole pairs); zt::InputError
  // naming the keys otherwise. (The data's kind: check_objective_data, before this.)
  explicit PairObjective(const ObjectiveContext& ctx);

  bool begin_step(int64_t step) override;
  const MicroBatch& micro_batch(int64_t step, int64_t micro) override;
  void end_micro(int64_t micro, double value) override;
  void end_step(zero::StepStats& stats) override;
  std::optional<double> evaluate(const std::function<bool()>& stop) override;
  void record(StepRecord& rec) const override;

 protected:
  // The objective over the micro-batch's rows (rows_ names their file rows): mean over
  // pairs, d value / d logp, the metrics added to m; context: the rows' context sums
  // (empty when the batch holds no context target).
  virtual double value(std::span<const double> logp, std::span<const int64_t> count, std::span<double> dlogp,
                       PairMetrics& m, std::span<const double> context, std::span<double> dcontext) = 0;
  // Whether the row at `start` has context targets (-2 - token, model.hpp RowObjective).
  virtual bool context_row(size_t /*start*/) const { return false; }
  // Whether any row may have them (the evaluation then asks the model for 2B sums).
  virtual bool has_context() const { return false; }
  // Before an evaluation micro-batch: the file offsets of its pairs' chosen rows (ORPO
  // weighs its NLL by 1 / their targets).
  virtual void begin_eval_micro(std::span<const size_t> /*chosen_starts*/) {}

  // A row's sequence ends at its last completion token: that token's index in the row.
  size_t last_target(size_t start) const;
  void fill(size_t i, size_t start);
  size_t pair_start(int64_t step, int64_t micro, size_t pair) const;
  const char* name() const { return cfg_.objective.name.c_str(); }

  const TrainConfig& cfg_;
  comm::Comm& comm_;
  const data::TokenFile& data_;
  zero::Engine& engine_;
  const size_t B_, T_, row_;
  data::Sampler sampler_;  // windows = pairs (2 rows)
  std::optional<data::EvalWindows> eval_;
  MicroBatch batch_;
  std::vector<size_t> rows_;  // the batch's file rows

 private:
  model::RowObjective row_value(PairMetrics& m);

  PairMetrics step_metrics_, pairs_, eval_pairs_;  // in progress, the last step's and evaluation's
  double loss_ = 0;
};

// A pair objective against reference log-probs of every row of the file (DPO, KTO):
// computed once before the first step (the base with the adapters off, or the weights
// before the first step of a full fine-tune) and kept beside the checkpoints
// (preference_reference.hpp).
class ReferencePairObjective : public PairObjective {
 public:
  explicit ReferencePairObjective(const ObjectiveContext& ctx) : PairObjective(ctx) {}
  bool reference(const ReferenceContext& r) override;

 protected:
  // The reference log-probs of the micro-batch's rows (rows_).
  std::span<const double> batch_reference();

  std::vector<double> ref_;  // [rows of the file]

 private:
  void store_reference(const std::string& path, const ReferenceIdentity& id);
  std::vector<double> batch_ref_;
};

}  // namespace zt::train
