// finetune.objective = sft: the mean cross-entropy of the targets, over text (token
// windows) or instruction data (rows with a loss mask, packed examples).
//
// Normalisation. Text: every micro-batch weighs 1/accum (each is a mean over B*T tokens).
// Instruction data: the micro-batches hold different numbers of unmasked targets, so the
// step's loss is the sum of the losses of ALL its targets (every micro-batch, every rank)
// divided by their count N (as HF's num_items_in_batch): micro-batch m of c_m targets
// weighs c_m / N (its mean times c_m is its sum). The gradient and the reported loss are
// then the same however the global batch is split into ranks and micro-batches.
#include <algorithm>
#include <limits>

#include "objective.hpp"
#include "zt/core/error.hpp"

namespace zt::train {
namespace {

// The ignored target: prompt tokens, padding, an example's first token (Model: < 0).
constexpr int32_t kMasked = -1;

class SftObjective final : public TrainObjective {
 public:
  explicit SftObjective(const ObjectiveContext& ctx);
  bool begin_step(int64_t step) override;
  const MicroBatch& micro_batch(int64_t step, int64_t micro) override;
  void end_micro(int64_t micro, double value) override;
  void end_step(zero::StepStats& stats) override;
  std::optional<double> evaluate(const std::function<bool()>& stop) override;
  void record(StepRecord& rec) const override {
    if (masked_) rec.trained_tokens = step_trained_;
  }

 private:
  void fill_row(size_t i, size_t start);
  int64_t row_targets(size_t start) const;
  size_t start(int64_t step, int64_t micro, size_t i) const {
    return sampler_.start(static_cast<uint64_t>(step), static_cast<int>(micro), rank_, world_, B_, i);
  }

  const TrainConfig& cfg_;
  comm::Comm& comm_;
  const data::TokenFile& data_;
  zero::Engine& engine_;
  const int rank_, world_;
  const size_t B_, T_;
  const bool masked_;  // instruction data: targets masked, packed examples (positions)
  const data::Sampler sampler_;
  std::optional<data::EvalWindows> eval_windows_;  // none when data.eval_fraction is 0
  MicroBatch batch_;
  std::vector<int64_t> per_micro_;  // masked: this rank's targets per micro-batch of the step
  int64_t total_ = 0;               // masked: the step's targets, all ranks
  double loss_sum_ = 0;             // masked: sum over this rank's targets of their loss
  int64_t step_trained_ = 0;        // targets of the last step, all ranks (masked data)
};

SftObjective::SftObjective(const ObjectiveContext& ctx)
    : cfg_(ctx.cfg),
      comm_(ctx.comm),
      data_(ctx.data),
      engine_(ctx.engine),
      rank_(ctx.comm.rank()),
      world_(ctx.comm.size()),
      B_(static_cast<size_t>(ctx.cfg.micro_batch)),
      T_(static_cast<size_t>(ctx.cfg.seq_len)),
      masked_(!ctx.data.loss_mask.empty()),
      // Whole rows for instruction data, token windows for text (sampler.hpp).
      sampler_(masked_ ? data::Sampler::rows(ctx.split.train, T_, static_cast<size_t>(ctx.cfg.global_batch),
                                             ctx.cfg.seed)
                       : data::Sampler(ctx.split.train, T_, static_cast<size_t>(ctx.cfg.global_batch),
                                       ctx.cfg.seed)),
      batch_{std::vector<int32_t>(B_ * T_), std::vector<int32_t>(B_ * T_),
             std::vector<int32_t>(masked_ ? B_ * T_ : 0), 1.0} {
  if (cfg_.eval_fraction > 0) eval_windows_.emplace(ctx.split.eval, T_, masked_ ? T_ + 1 : 0);
}

// Fills sequence i of the batch from data.tokens[start, start + T]. Instruction data (a
// loss mask; rows, start at a row's first token) also masks the targets whose mask is 0
// and gives each token its position within its example (restarting at each doc start).
void SftObjective::fill_row(size_t i, size_t start) {
  const std::vector<uint32_t>& tok = data_.tokens;
  const size_t T = T_;
  for (size_t t = 0; t < T; ++t) {
    batch_.tokens[i * T + t] = static_cast<int32_t>(tok[start + t]);
    batch_.targets[i * T + t] = static_cast<int32_t>(tok[start + t + 1]);
  }
  if (!masked_) return;
  for (size_t t = 0; t < T; ++t)
    if (!data_.loss_mask[start + t + 1]) batch_.targets[i * T + t] = kMasked;
  const std::vector<uint64_t>& starts = data_.doc_starts;
  auto next = std::upper_bound(starts.begin(), starts.end(), static_cast<uint64_t>(start));
  size_t example = start;  // a row starts with an example
  for (size_t t = 0; t < T; ++t) {
    if (next != starts.end() && *next == start + t) example = *next++;
    batch_.positions[i * T + t] = static_cast<int32_t>(start + t - example);
  }
}

// Targets counted by the loss in sequence i of a batch filled by fill_row: the ones of
// data.loss_mask[start + 1, start + T] (all T without a mask).
int64_t SftObjective::row_targets(size_t start) const {
  if (!masked_) return static_cast<int64_t>(T_);
  int64_t n = 0;
  for (size_t t = 1; t <= T_; ++t) n += data_.loss_mask[start + t];
  return n;
}

// Masked: the targets of this rank's micro-batches of `step` and of the whole step over
// all ranks (one all_reduce). None at all: nothing to learn from, no update, no weight
// decay (issue 36, class 7; the same on every rank).
bool SftObjective::begin_step(int64_t step) {
  loss_sum_ = 0;
  if (!masked_) return true;
  per_micro_.assign(static_cast<size_t>(cfg_.accum), 0);
  for (int64_t micro = 0; micro < cfg_.accum; ++micro)
    for (size_t i = 0; i < B_; ++i) per_micro_[static_cast<size_t>(micro)] += row_targets(start(step, micro, i));
  double total = 0;  // exact: counts stay far below 2^53
  for (const int64_t n : per_micro_) total += static_cast<double>(n);
  comm_.all_reduce(&total, &total, 1, DType::kF64, comm::ReduceOp::kSum);
  total_ = static_cast<int64_t>(total);
  step_trained_ = total_;
  return total_ > 0;
}

const MicroBatch& SftObjective::micro_batch(int64_t step, int64_t micro) {
  for (size_t i = 0; i < B_; ++i) fill_row(i, start(step, micro, i));
  // The engine averages over ranks (divides by the world size): c_m / N times it back.
  const double c = masked_ ? static_cast<double>(per_micro_[static_cast<size_t>(micro)]) : 0;
  batch_.scale = !masked_    ? 1.0 / static_cast<double>(cfg_.accum)
                 : total_ > 0 ? c * static_cast<double>(world_) / static_cast<double>(total_)
                              : 0.0;
  return batch_;
}

void SftObjective::end_micro(int64_t micro, double value) {
  const double c = masked_ ? static_cast<double>(per_micro_[static_cast<size_t>(micro)]) : 0;
  loss_sum_ += c * value;
}

void SftObjective::end_step(zero::StepStats& stats) {
  if (!masked_) return;  // the engine's loss: the mean over the micro-batches and ranks
  comm_.all_reduce(&loss_sum_, &loss_sum_, 1, DType::kF64, comm::ReduceOp::kSum);
  stats.loss = total_ > 0 ? loss_sum_ / static_cast<double>(total_) : 0.0;  // the mean over all targets
}

// Mean held-out loss over eval.batches global batches of fixed windows of the tail
// (instruction data: the mean over all their unmasked targets, like a training step).
std::optional<double> SftObjective::evaluate(const std::function<bool()>& stop) {
  if (!eval_windows_) return std::nullopt;
  double sum = 0.0;
  int64_t count = 0;
  double targets[2] = {0, 0};  // masked: sum of losses, count of targets
  for (int64_t b = 0; b < cfg_.eval_batches; ++b) {
    if (stop()) return std::nullopt;
    for (int64_t micro = 0; micro < cfg_.accum; ++micro) {
      double c = 0;
      for (size_t i = 0; i < B_; ++i) {
        const size_t e = static_cast<size_t>(b * cfg_.global_batch) +
                         data::batch_index(static_cast<int>(micro), rank_, world_, B_, i);
        fill_row(i, eval_windows_->start(e));
        if (masked_) c += static_cast<double>(row_targets(eval_windows_->start(e)));
      }
      const double loss = engine_.eval_loss(batch_.tokens, batch_.targets, cfg_.micro_batch, cfg_.seq_len,
                                            batch_.positions);
      sum += loss;
      targets[0] += c * loss;
      targets[1] += c;
      ++count;
    }
  }
  if (masked_) {
    comm_.all_reduce(targets, targets, 2, DType::kF64, comm::ReduceOp::kSum);
    return targets[1] > 0 ? targets[0] / targets[1] : 0.0;
  }
  double mean = sum / static_cast<double>(count);
  comm_.all_reduce(&mean, &mean, 1, DType::kF64, comm::ReduceOp::kAvg);
  return mean;
}

}  // namespace

const ObjectiveSpec& sft_objective() {
  static const ObjectiveSpec spec{
      "sft", nullptr, nullptr, true, true, false, false,
      "a pair file trains with finetune.objective = dpo or orpo; for SFT on the chosen completions "
      "make instruction data: `zt convert sft-to-tokens` over prompt/response lines",
      nullptr, make_as<SftObjective>};
  return spec;
}

}  // namespace zt::train
