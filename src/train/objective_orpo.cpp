// finetune.objective = orpo (docs/finetune.md "DPO and ORPO"): the odds ratio of average
// log-probs plus the chosen rows' NLL, no reference (preference.hpp).
#include <algorithm>

#include "objective_pairs.hpp"
#include "zt/core/error.hpp"

namespace zt::train {
namespace {

// log(1 - exp(x)) for x < 0, TRL's log1mexp (branch at -ln 2).
double log1mexp(double x) { return x < -0.6931471805599453 ? std::log1p(-std::exp(x)) : std::log(-std::expm1(x)); }

}  // namespace

double orpo_value(const PreferenceConfig& cfg, std::span<const double> logp, std::span<const int64_t> count,
                  double nll_weight, std::span<double> dlogp, PairMetrics& m, std::span<const double> context,
                  std::span<double> dcontext) {
  const size_t P = pair_count(logp, count, dlogp, context, dcontext);
  const double inv = 1.0 / static_cast<double>(P);
  double value = 0;
  for (size_t p = 0; p < P; ++p) {
    const auto [ci, ri, c, r, nc, nr] = pair_at(logp, count, p);
    const double ac = c / nc, ar = r / nr;
    const double lo = (ac - ar) - (log1mexp(ac) - log1mexp(ar));
    const double loss = -cfg.orpo_lambda * log_sigmoid(lo);
    const double g = -inv * cfg.orpo_lambda * sigmoid(-lo);  // d value / d log_odds
    dlogp[ci] = g * (-1 / std::expm1(ac)) / nc - nll_weight;
    dlogp[ri] = g * (1 / std::expm1(ar)) / nr;
    value += -nll_weight * c;
    if (!context.empty()) {  // orpo.nll = sequence: the chosen row's prompt targets too
      value += -nll_weight * context[ci];
      dcontext[ci] = -nll_weight;
      dcontext[ri] = 0;
    }
    value += inv * loss;
    add_pair(m, cfg.orpo_lambda * ac, cfg.orpo_lambda * ar, ac, ar);  // TRL logs the average log-probs
  }
  m.value += value * static_cast<double>(P);  // the micro-batch's mean, weighted by its pairs
  return value;
}

PreferenceConfig orpo_config(const ObjectiveConfig& o) {
  PreferenceConfig p;
  p.orpo_lambda = o.number("orpo.lambda");
  p.orpo_sequence_nll = o.text("orpo.nll") == "sequence";
  return p;
}

namespace {

void add_orpo_keys(config::Schema& s) {
  {
    auto& k = s.add_float("orpo.lambda", 0.1, "ORPO's odds-ratio weight (TRL's ORPOConfig.beta), > 0");
    k.min = 0.0;
    k.min_exclusive = true;
    k.max = 1e3;
  }
  s.add_string("orpo.nll", "sequence",
               "the tokens of ORPO's NLL term: sequence (the chosen row's prompt and completion, "
               "as TRL's ORPOTrainer and Axolotl) or completion (the prompt masked, as SFT)")
      .choices = {"sequence", "completion"};
}

// ORPO's NLL is the mean over the chosen rows' NLL tokens (orpo.nll) of the whole global
// batch (TRL's over one device's batch): nll_weight = accum x ranks / those tokens.
class OrpoObjective final : public PairObjective {
 public:
  explicit OrpoObjective(const ObjectiveContext& ctx)
      : PairObjective(ctx), pref_(orpo_config(ctx.cfg.objective)) {}

  bool begin_step(int64_t step) override {
    PairObjective::begin_step(step);
    double chosen = 0;
    for (int64_t micro = 0; micro < cfg_.accum; ++micro)
      for (size_t p = 0; p < B_ / 2; ++p) chosen += static_cast<double>(chosen_targets(pair_start(step, micro, p)));
    comm_.all_reduce(&chosen, &chosen, 1, DType::kF64, comm::ReduceOp::kSum);
    nll_weight_ = chosen > 0 ? static_cast<double>(cfg_.accum * comm_.size()) / chosen : 0.0;
    return true;
  }

 private:
  double value(std::span<const double> logp, std::span<const int64_t> count, std::span<double> dlogp,
               PairMetrics& m, std::span<const double> context, std::span<double> dcontext) override {
    return orpo_value(pref_, logp, count, nll_weight_, dlogp, m, context, dcontext);
  }
  // orpo.nll = sequence: a chosen row's (even file row) prompt tokens after its first are
  // context targets.
  bool context_row(size_t start) const override {
    return pref_.orpo_sequence_nll && (start / row_) % 2 == 0;
  }
  bool has_context() const override { return pref_.orpo_sequence_nll; }
  void begin_eval_micro(std::span<const size_t> chosen_starts) override {
    int64_t chosen = 0;
    for (const size_t s : chosen_starts) chosen += chosen_targets(s);
    nll_weight_ = chosen > 0 ? 1.0 / static_cast<double>(chosen) : 0.0;
  }
  // The chosen row's NLL targets: its completion, or (orpo.nll = sequence) every token
  // after the first up to the completion's end, as TRL's ORPO's labels.
  int64_t chosen_targets(size_t start) const {
    if (context_row(start)) return static_cast<int64_t>(last_target(start));
    int64_t n = 0;
    for (size_t t = 1; t <= T_; ++t) n += data_.loss_mask[start + t];
    return n;
  }

  const PreferenceConfig pref_;
  double nll_weight_ = 0;
};

}  // namespace

const ObjectiveSpec& orpo_objective() {
  static const ObjectiveSpec spec{"orpo", "orpo.", add_orpo_keys, false, false, true, false, kPairsHint, check_pairs,
                                  make_as<OrpoObjective>};
  return spec;
}

}  // namespace zt::train
