// Batches of pairs, the step's loss and metrics, and the evaluation of the preference
// objectives (see objective_pairs.hpp).
#include "objective_pairs.hpp"

#include <algorithm>
#include <cstddef>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::train {

void add_pair(PairMetrics& m, double rc, double rr, double lc, double lr) {
  m.rewards_chosen += rc;
  m.rewards_rejected += rr;
  m.accuracies += rc > rr ? 1 : 0;
  m.margins += rc - rr;
  m.logps_chosen += lc;
  m.logps_rejected += lr;
  m.pairs += 1;
}

static_assert(offsetof(PairMetrics, kl) - offsetof(PairMetrics, rewards_chosen) ==
              (PairMetrics::kSums - 1) * sizeof(double));

PairMetrics& PairMetrics::operator+=(const PairMetrics& o) {
  rewards_chosen += o.rewards_chosen;
  rewards_rejected += o.rewards_rejected;
  accuracies += o.accuracies;
  margins += o.margins;
  logps_chosen += o.logps_chosen;
  logps_rejected += o.logps_rejected;
  value += o.value;
  pairs += o.pairs;
  chosen += o.chosen;
  rejected += o.rejected;
  kl += o.kl;
  unpaired = unpaired || o.unpaired;
  return *this;
}

size_t pair_count(std::span<const double> logp, std::span<const int64_t> count, std::span<double> dlogp,
                  std::span<const double> context, std::span<double> dcontext) {
  const size_t P = logp.size() / 2;
  ZT_CHECK(logp.size() == 2 * P && P > 0 && count.size() == logp.size() && dlogp.size() == logp.size(),
           "a pair objective over rows that are not pairs", "pass 2P rows: chosen, rejected");
  ZT_CHECK(context.size() == dcontext.size() && (context.empty() || context.size() == logp.size()),
           "a pair objective with context sums of another size than the rows",
           "pass 2P context sums (orpo.nll = sequence) or none");
  return P;
}

void check_pairs(const TrainConfig& t) {
  if (t.zero.expert_parallel > 1)
    throw InputError(strf("moe.expert_parallel = %d with finetune.objective = %s", t.zero.expert_parallel,
                          t.objective.name.c_str()),
                     "preference objectives train with moe.expert_parallel = 1");
}

PairObjective::PairObjective(const ObjectiveContext& ctx)
    : cfg_(ctx.cfg),
      comm_(ctx.comm),
      data_(ctx.data),
      engine_(ctx.engine),
      B_(static_cast<size_t>(ctx.cfg.micro_batch)),
      T_(static_cast<size_t>(ctx.cfg.seq_len)),
      row_(T_ + 1),
      sampler_([&] {
        const TrainConfig& cfg = ctx.cfg;
        if (cfg.micro_batch % 2 != 0 || cfg.global_batch % 2 != 0)
          throw InputError(strf("finetune.objective = %s: train.micro_batch = %lld and train.global_batch "
                                "= %lld count rows, and a pair is two rows: both must be even",
                                cfg.objective.name.c_str(), static_cast<long long>(cfg.micro_batch),
                                static_cast<long long>(cfg.global_batch)),
                           "set train.micro_batch to twice the pairs per micro-batch");
        return data::Sampler::rows(ctx.split.train, 2 * (static_cast<size_t>(cfg.seq_len) + 1) - 1,
                                   static_cast<size_t>(cfg.global_batch) / 2, cfg.seed);
      }()),
      batch_{std::vector<int32_t>(B_ * T_), std::vector<int32_t>(B_ * T_), {}, 1.0},
      rows_(B_) {
  if (cfg_.eval_fraction > 0 && ctx.split.eval.size() >= 2 * row_)
    eval_.emplace(ctx.split.eval, 2 * row_ - 1, 2 * row_);
  engine_.set_row_objective({});
}

size_t PairObjective::last_target(size_t start) const {
  size_t last = 0;
  for (size_t t = 1; t <= T_; ++t)
    if (data_.loss_mask[start + t]) last = t;
  return last;
}

void PairObjective::fill(size_t i, size_t start) {
  rows_[i] = start / row_;
  const size_t context_end = context_row(start) ? last_target(start) : 0;
  for (size_t t = 0; t < T_; ++t) {
    const auto next = static_cast<int32_t>(data_.tokens[start + t + 1]);
    batch_.tokens[i * T_ + t] = static_cast<int32_t>(data_.tokens[start + t]);
    batch_.targets[i * T_ + t] = data_.loss_mask[start + t + 1] ? next : t + 1 <= context_end ? model::context_target(next) : -1;
  }
}

size_t PairObjective::pair_start(int64_t step, int64_t micro, size_t pair) const {
  return sampler_.start(static_cast<uint64_t>(step), static_cast<int>(micro), comm_.rank(), comm_.size(),
                        B_ / 2, pair);
}

// The model passes 2B sums when the micro-batch holds context targets: the rows', then
// the rows' context targets'.
model::RowObjective PairObjective::row_value(PairMetrics& m) {
  const bool context =
      std::any_of(batch_.targets.begin(), batch_.targets.end(), model::is_context_target);
  return [this, &m, context](std::span<const double> logp, std::span<const int64_t> count,
                             std::span<double> dlogp) {
    const bool ctx = logp.size() == 2 * B_;
    ZT_CHECK(ctx || !context, "orpo.nll = sequence: the model returned no sums of the context targets",
             "a model running this objective must implement model.hpp's context targets; set "
             "orpo.nll = completion meanwhile");
    const size_t n = ctx ? B_ : logp.size();
    return value(logp.first(n), count.first(n), dlogp.first(n), m,
                 ctx ? logp.subspan(n) : std::span<const double>{}, ctx ? dlogp.subspan(n) : std::span<double>{});
  };
}

bool PairObjective::begin_step(int64_t) {
  step_metrics_ = PairMetrics{};
  loss_ = 0;
  return true;
}

// Every micro-batch holds micro_batch / 2 pairs: its mean weighs 1 / accum, the engine
// averages over ranks, so the step's value is the mean over the global batch's pairs.
const MicroBatch& PairObjective::micro_batch(int64_t step, int64_t micro) {
  for (size_t i = 0; i < B_; ++i) fill(i, pair_start(step, micro, i / 2) + (i % 2) * row_);
  batch_.scale = 1.0 / static_cast<double>(cfg_.accum);
  engine_.set_row_objective(row_value(step_metrics_));
  return batch_;
}

void PairObjective::end_micro(int64_t, double value) {
  engine_.set_row_objective({});
  loss_ += value;
}

void PairObjective::end_step(zero::StepStats& stats) {
  double loss = loss_ / static_cast<double>(cfg_.accum);
  comm_.all_reduce(&loss, &loss, 1, DType::kF64, comm::ReduceOp::kAvg);
  stats.loss = loss;
  PairMetrics& m = step_metrics_;
  comm_.all_reduce(&m.rewards_chosen, &m.rewards_chosen, PairMetrics::kSums, DType::kF64, comm::ReduceOp::kSum);
  pairs_ = m;
}

std::optional<double> PairObjective::evaluate(const std::function<bool()>& stop) {
  PairMetrics m;
  if (!eval_) return 0.0;
  const int rank = comm_.rank(), world = comm_.size();
  const size_t pairs = B_ / 2;
  std::vector<size_t> chosen(pairs);
  const size_t n = has_context() ? 2 * B_ : B_;
  for (int64_t b = 0; b < cfg_.eval_batches; ++b) {
    if (stop()) return std::nullopt;  // agreed by every rank: the step's checkpoint comes next
    for (int64_t micro = 0; micro < cfg_.accum; ++micro) {
      for (size_t i = 0; i < B_; ++i) {
        const size_t e = static_cast<size_t>(b * cfg_.global_batch / 2) +
                         data::batch_index(static_cast<int>(micro), rank, world, pairs, i / 2);
        fill(i, eval_->start(e) + (i % 2) * row_);
        if (i % 2 == 0) chosen[i / 2] = eval_->start(e);
      }
      begin_eval_micro(chosen);
      std::vector<double> logp(n), dlogp(n);
      std::vector<int64_t> count(n);
      engine_.row_logps(batch_.tokens, batch_.targets, cfg_.micro_batch, cfg_.seq_len, {}, logp, count);
      row_value(m)(logp, count, dlogp);
    }
  }
  comm_.all_reduce(&m.rewards_chosen, &m.rewards_chosen, PairMetrics::kSums, DType::kF64, comm::ReduceOp::kSum);
  eval_pairs_ = m;
  return m.pairs > 0 ? m.value / m.pairs : 0.0;
}

void PairObjective::record(StepRecord& rec) const {
  rec.pairs = pairs_;
  if (rec.eval_loss) rec.eval_pairs = eval_pairs_;
}

}  // namespace zt::train
