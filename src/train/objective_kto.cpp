// finetune.objective = kto (docs/finetune.md "KTO"): unpaired desirable and undesirable
// completions against reference log-probs, with TRL's KL estimate from mismatched
// completions (preference.hpp; the data: zt/data/kto.hpp). An example is two rows, the
// pair objectives' window (objective_pairs.hpp): its completion's and its mismatched one's.
#include <algorithm>

#include "objective_pairs.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::train {

double kto_value(const KtoConfig& cfg, std::span<const double> logp, std::span<const int64_t> count,
                 std::span<const double> ref, std::span<const uint8_t> labels, double kl, std::span<double> dlogp,
                 PairMetrics& m) {
  const size_t E = pair_count(logp, count, dlogp, {}, {});
  ZT_CHECK(ref.size() == logp.size() && labels.size() == E, "KTO without reference log-probs or labels",
           "compute the reference first; one label per example");
  const double inv = 1.0 / static_cast<double>(E);
  double value = 0;
  for (size_t e = 0; e < E; ++e) {
    const double r = logp[2 * e] - ref[2 * e];
    const bool good = labels[e] != 0;
    // desirable: w (1 - sigmoid(beta (r - z))); undesirable: w (1 - sigmoid(beta (z - r))).
    const double x = good ? cfg.beta * (r - kl) : cfg.beta * (kl - r);
    const double w = good ? cfg.desirable_weight : cfg.undesirable_weight;
    const double s = sigmoid(x);
    value += inv * w * (1 - s);
    const double d = -w * s * (1 - s) * cfg.beta;  // d loss / d x, times d x / d r = +-beta
    dlogp[2 * e] = inv * (good ? d : -d);
    dlogp[2 * e + 1] = 0;  // the KL estimate is a constant of the gradient
    (good ? m.rewards_chosen : m.rewards_rejected) += cfg.beta * r;
    (good ? m.logps_chosen : m.logps_rejected) += logp[2 * e];
    (good ? m.chosen : m.rejected) += 1;
    m.pairs += 1;
  }
  m.kl += kl * static_cast<double>(E);
  m.value += value * static_cast<double>(E);  // the micro-batch's mean, weighted by its examples
  m.unpaired = true;
  return value;
}

KtoConfig kto_config(const ObjectiveConfig& o) {
  KtoConfig k;
  k.beta = o.number("kto.beta");
  k.desirable_weight = o.number("kto.desirable_weight");
  k.undesirable_weight = o.number("kto.undesirable_weight");
  return k;
}

namespace {

constexpr const char* kKtoHint =
    "make KTO rows with `zt convert kto-to-tokens --seq-len N EXAMPLES.jsonl OUT.h5` "
    "({prompt, completion, label} lines), or set finetune.objective = sft";

void add_kto_keys(config::Schema& s) {
  {
    auto& k = s.add_float("kto.beta", 0.1, "KTO's beta (the reference's weight, TRL's KTOConfig.beta), > 0");
    k.min = 0.0;
    k.min_exclusive = true;
    k.max = 1e3;
  }
  for (const char* side : {"desirable", "undesirable"}) {
    auto& k = s.add_float(strf("kto.%s_weight", side), 1.0,
                          strf("the weight of the %s examples' losses (TRL's %s_weight), > 0", side, side));
    k.min = 0.0;
    k.min_exclusive = true;
    k.max = 1e3;
  }
}

// TRL's KL estimate: the mean of logp - ref over the mismatched rows, clamped at 0.
double kl_estimate(double sum, double rows) { return std::max(sum / rows, 0.0); }

class KtoObjective final : public ReferencePairObjective {
 public:
  explicit KtoObjective(const ObjectiveContext& ctx)
      : ReferencePairObjective(ctx), kto_(kto_config(ctx.cfg.objective)) {}

  // The KL estimate of the step: the policy's log-probs of the mismatched rows of the
  // whole global batch (a forward pass over this rank's micro-batches), less the
  // reference's, averaged over every rank's examples and clamped at 0 (TRL's).
  bool begin_step(int64_t step) override {
    PairObjective::begin_step(step);
    eval_ = false;
    double sum[2] = {0, 0};  // sum of logp - ref over the mismatched rows, their count
    std::vector<double> logp(B_);
    std::vector<int64_t> count(B_);
    for (int64_t micro = 0; micro < cfg_.accum; ++micro) {
      for (size_t i = 0; i < B_; ++i) fill(i, pair_start(step, micro, i / 2) + (i % 2) * row_);
      engine_.row_logps(batch_.tokens, batch_.targets, cfg_.micro_batch, cfg_.seq_len, {}, logp, count);
      for (size_t i = 1; i < B_; i += 2) sum[0] += logp[i] - ref_[rows_[i]];
      sum[1] += static_cast<double>(B_ / 2);
    }
    comm_.all_reduce(sum, sum, 2, DType::kF64, comm::ReduceOp::kSum);
    kl_ = kl_estimate(sum[0], sum[1]);
    return true;
  }

 private:
  double value(std::span<const double> logp, std::span<const int64_t> count, std::span<double> dlogp,
               PairMetrics& m, std::span<const double> context, std::span<double> dcontext) override {
    std::fill(dcontext.begin(), dcontext.end(), 0.0);  // (no context targets in KTO)
    (void)context;
    const std::span<const double> ref = batch_reference();
    labels_.clear();
    for (size_t i = 0; i < logp.size(); i += 2) labels_.push_back(data_.labels[rows_[i] / 2]);
    double kl = kl_;
    if (eval_) {  // held out: the estimate of the evaluation micro-batch's own mismatched rows
      double sum = 0;
      for (size_t i = 1; i < logp.size(); i += 2) sum += logp[i] - ref[i];
      kl = kl_estimate(sum, static_cast<double>(logp.size() / 2));
    }
    return kto_value(kto_, logp, count, ref, labels_, kl, dlogp, m);
  }
  void begin_eval_micro(std::span<const size_t>) override { eval_ = true; }

  const KtoConfig kto_;
  double kl_ = 0;
  bool eval_ = false;
  std::vector<uint8_t> labels_;
};

}  // namespace

const ObjectiveSpec& kto_objective() {
  static const ObjectiveSpec spec{"kto", "kto.", add_kto_keys, false, false, false, true, kKtoHint, check_pairs,
                                  make_as<KtoObjective>};
  return spec;
}

}  // namespace zt::train
