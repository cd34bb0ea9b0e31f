#pragma once
// The interface of a training objective (private to zt_train; zt/train/objective.hpp is
// its configuration side). The trainer's step is the same for every objective:
//
//   if (!o.begin_step(step)) skip the step (nothing to learn from);
//   for each micro-batch m: b = o.micro_batch(step, m);
//                           v = engine.micro_step(b.tokens, b.targets, ..., b.scale, b.positions);
//                           o.end_micro(m, v);
//   engine.step(lr); o.end_step(stats);
//
// and the run asks it for its reference before the first step, its held-out value and
// its metrics. What each objective implements:
//   - what a batch is: micro_batch (rows of tokens and targets, a target < 0 is not a
//     token of the value; its gradient scale) and begin_step (per-step work over the whole
//     global batch: counts, rollouts);
//   - the value and d value / d logp: the model's mean cross-entropy of the targets when
//     it installs nothing, else the per-row function it installs on the engine in
//     micro_batch (Engine::set_row_objective: each row's summed log-prob in, d value / d
//     it out) and removes in end_micro;
//   - the reference it needs: reference (DPO: the reference log-probs of every row);
//   - metrics: end_step (the step's loss in stats.loss) and record.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zt/comm/comm.hpp"
#include "zt/core/config.hpp"
#include "zt/data/sampler.hpp"
#include "zt/data/token_file.hpp"
#include "zt/train/config.hpp"
#include "zt/train/metrics.hpp"
#include "zt/train/objective.hpp"
#include "zt/zero/engine.hpp"
#include "zt/zero/stats.hpp"

namespace zt::train {

// What an objective is built over: the run's configuration, ranks, data and engine.
struct ObjectiveContext {
  const TrainConfig& cfg;
  comm::Comm& comm;
  const data::TokenFile& data;
  const data::Split& split;
  zero::Engine& engine;
};

// Where the reference can be kept and read back, and the stop request (collective: every
// rank asks alike; true ends the work between batches).
struct ReferenceContext {
  int64_t first_step = 0;     // steps done before this run
  std::string resumed_from;   // the checkpoint resumed from ("" none)
  std::string ckpt_dir;       // ckpt.dir when checkpoints are written, else ""
  std::function<bool()> stop;
};

// One micro-batch as the engine runs it: micro_batch rows of seq_len tokens.
struct MicroBatch {
  std::vector<int32_t> tokens, targets;  // [B, T]; a target < 0 is masked (model.hpp)
  std::vector<int32_t> positions;        // [B, T] packed examples; else empty
  double scale = 1;                      // the gradient's weight (Engine::micro_step)
};

class TrainObjective {
 public:
  virtual ~TrainObjective() = default;
  // Before the first step: the reference the objective needs. false: `stop` ended it
  // (nothing kept; the run then saves and ends).
  virtual bool reference(const ReferenceContext&) { return true; }
  // Work over the step's whole global batch before its micro-batches (collective). false:
  // the global batch has nothing to learn from: no update, the step is skipped.
  virtual bool begin_step(int64_t step) = 0;
  // Fills micro-batch `micro` of `step` and installs its value on the engine, if any.
  virtual const MicroBatch& micro_batch(int64_t step, int64_t micro) = 0;
  // The micro-step's value (Engine::micro_step's return); removes what micro_batch installed.
  virtual void end_micro(int64_t micro, double value) = 0;
  // After the optimizer step: the step's loss (stats.loss, the same on every rank) and metrics.
  virtual void end_step(zero::StepStats& stats) = 0;
  // The held-out value over eval.batches global batches; nullopt when `stop` (asked before
  // each global batch, agreed by every rank) ends it early.
  virtual std::optional<double> evaluate(const std::function<bool()>& stop) = 0;
  // The last step's metrics (and the last evaluation's, when rec.eval_loss is set).
  virtual void record(StepRecord& rec) const = 0;
};

// An objective's registry entry (objective_registry.cpp lists them).
struct ObjectiveSpec {
  const char* name;                         // finetune.objective
  const char* key_group;                    // its own keys' prefix ("dpo."), nullptr none
  void (*add_keys)(config::Schema&);        // adds them; nullptr none
  bool text, instruction, pairs, unpaired;  // the data it trains on (DataKind)
  const char* data_hint;                    // what to do with other data
  void (*check)(const TrainConfig&);        // configuration checks; nullptr none
  std::unique_ptr<TrainObjective> (*make)(const ObjectiveContext&);
};

template <class T>
std::unique_ptr<TrainObjective> make_as(const ObjectiveContext& ctx) {
  return std::make_unique<T>(ctx);
}

// The entry of `name` (an internal error for a name the schema did not offer).
const ObjectiveSpec& objective_spec(const std::string& name);
std::unique_ptr<TrainObjective> make_objective(const ObjectiveContext& ctx);

}  // namespace zt::train
