// DPO / ORPO values and their derivatives in the row log-probs (see preference.hpp).
#include "zt/train/preference.hpp"

#include <algorithm>
#include <cmath>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::train {
namespace {

double log_sigmoid(double x) { return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x)); }
double sigmoid(double x) { return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x)); }
// log(1 - exp(x)) for x < 0, TRL's log1mexp (branch at -ln 2).
double log1mexp(double x) { return x < -0.6931471805599453 ? std::log1p(-std::exp(x)) : std::log(-std::expm1(x)); }

}  // namespace

void add_preference_keys(config::Schema& s) {
  s.add_string("finetune.objective", "sft",
               "sft (cross-entropy of the targets), dpo or orpo (preference pairs from `zt "
               "convert pairs-to-tokens`); docs/finetune.md \"DPO and ORPO\"")
      .choices = {"sft", "dpo", "orpo"};
  {
    auto& k = s.add_float("dpo.beta", 0.1, "DPO's beta (the reference's KL weight; IPO's tau), > 0");
    k.min = 0.0;
    k.min_exclusive = true;
    k.max = 1e3;
  }
  {
    auto& k = s.add_float("dpo.label_smoothing", 0.0,
                          "conservative DPO's label noise, in [0, 0.5) (sigmoid loss only)");
    k.min = 0.0;
    k.max = 0.5;
  }
  s.add_string("dpo.loss", "sigmoid", "sigmoid (DPO) or ipo (IPO, length-normalised as TRL)")
      .choices = {"sigmoid", "ipo"};
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

PreferenceConfig resolve_preference(const config::Config& c) {
  PreferenceConfig p;
  const std::string& o = c.get_string("finetune.objective");
  p.objective = o == "dpo" ? Objective::kDpo : o == "orpo" ? Objective::kOrpo : Objective::kSft;
  p.beta = c.get_float("dpo.beta");
  p.label_smoothing = c.get_float("dpo.label_smoothing");
  p.ipo = c.get_string("dpo.loss") == "ipo";
  p.orpo_lambda = c.get_float("orpo.lambda");
  p.orpo_sequence_nll = c.get_string("orpo.nll") == "sequence";
  if (p.label_smoothing >= 0.5)  // the schema's range is inclusive
    throw InputError(strf("dpo.label_smoothing = %g: must be below 0.5", p.label_smoothing),
                     "0.5 makes chosen and rejected alike; cDPO uses 0.1 .. 0.3");
  if (p.ipo && p.label_smoothing > 0)
    throw InputError("dpo.label_smoothing applies to dpo.loss = sigmoid only",
                     "set dpo.label_smoothing = 0 with dpo.loss = ipo");
  return p;
}

const char* objective_name(Objective o) {
  return o == Objective::kDpo ? "dpo" : o == Objective::kOrpo ? "orpo" : "sft";
}

DataKind data_kind(const data::TokenFile& f) {
  return f.pairs ? DataKind::kPairs : f.loss_mask.empty() ? DataKind::kText : DataKind::kInstruction;
}

const char* data_kind_name(DataKind k) {
  return k == DataKind::kPairs ? "preference pairs" : k == DataKind::kText ? "text" : "instruction data";
}

namespace {

constexpr const char* kPairsHint =
    "make pairs with `zt convert pairs-to-tokens --seq-len N PAIRS.jsonl OUT.h5`, or set "
    "finetune.objective = sft";
struct Accepts {
  Objective objective;
  bool text, instruction, pairs;
  const char* hint;  // what to do with other data
};
constexpr Accepts kAccepts[] = {
    {Objective::kSft, true, true, false,
     "a pair file trains with finetune.objective = dpo or orpo; for SFT on the chosen completions "
     "make instruction data: `zt convert sft-to-tokens` over prompt/response lines"},
    {Objective::kDpo, false, false, true,
     kPairsHint},
    {Objective::kOrpo, false, false, true,
     kPairsHint},
};

}  // namespace

void check_objective_data(Objective o, const data::TokenFile& f, const std::string& data_path) {
  const DataKind k = data_kind(f);
  for (const Accepts& a : kAccepts) {
    if (a.objective != o) continue;
    if (k == DataKind::kText ? a.text : k == DataKind::kInstruction ? a.instruction : a.pairs) return;
    throw InputError(strf("finetune.objective = %s does not train on %s; dataset '%s' holds %s",
                          objective_name(o), data_kind_name(k), data_path.c_str(), data_kind_name(k)),
                     a.hint);
  }
  ZT_CHECK(false, "check_objective_data: an objective without a row in kAccepts", "add its row");
}

PairMetrics& PairMetrics::operator+=(const PairMetrics& o) {
  rewards_chosen += o.rewards_chosen;
  rewards_rejected += o.rewards_rejected;
  accuracies += o.accuracies;
  margins += o.margins;
  logps_chosen += o.logps_chosen;
  logps_rejected += o.logps_rejected;
  value += o.value;
  pairs += o.pairs;
  return *this;
}

double preference_value(const PreferenceConfig& cfg, std::span<const double> logp,
                        std::span<const int64_t> count, std::span<const double> ref, double nll_weight,
                        std::span<double> dlogp, PairMetrics& m, std::span<const double> context,
                        std::span<double> dcontext) {
  const size_t P = logp.size() / 2;
  ZT_CHECK(logp.size() == 2 * P && P > 0 && count.size() == logp.size() && dlogp.size() == logp.size(),
           "preference_value: rows are not pairs", "pass 2P rows: chosen, rejected");
  ZT_CHECK(context.size() == dcontext.size() && (context.empty() || context.size() == logp.size()),
           "preference_value: context sums of another size than the rows",
           "pass 2P context sums (orpo.nll = sequence) or none");
  const bool dpo = cfg.objective == Objective::kDpo;
  ZT_CHECK(!dpo || ref.size() == logp.size(), "DPO without reference log-probs",
           "compute the reference first");
  const double inv = 1.0 / static_cast<double>(P);
  double value = 0;
  for (size_t p = 0; p < P; ++p) {
    const size_t ci = 2 * p, ri = 2 * p + 1;
    const double c = logp[ci], r = logp[ri];
    const double nc = static_cast<double>(std::max<int64_t>(count[ci], 1));
    const double nr = static_cast<double>(std::max<int64_t>(count[ri], 1));
    double rc = 0, rr = 0, loss = 0;
    if (dpo) {
      const double cc = c - ref[ci], cr = r - ref[ri];
      if (cfg.ipo) {
        const double d = cc / nc - cr / nr, e = d - 1 / (2 * cfg.beta);
        loss = e * e;
        dlogp[ci] = inv * 2 * e / nc;
        dlogp[ri] = -inv * 2 * e / nr;
      } else {
        const double bd = cfg.beta * (cc - cr), ls = cfg.label_smoothing;
        loss = -(1 - ls) * log_sigmoid(bd) - ls * log_sigmoid(-bd);
        const double g = inv * cfg.beta * (-(1 - ls) * sigmoid(-bd) + ls * sigmoid(bd));
        dlogp[ci] = g;
        dlogp[ri] = -g;
      }
      rc = cfg.beta * cc;
      rr = cfg.beta * cr;
      if (!context.empty()) dcontext[ci] = dcontext[ri] = 0;  // (no context targets in DPO)
    } else {  // ORPO over average log-probs, + the chosen NLL
      const double ac = c / nc, ar = r / nr;
      const double lo = (ac - ar) - (log1mexp(ac) - log1mexp(ar));
      loss = -cfg.orpo_lambda * log_sigmoid(lo);
      const double g = -inv * cfg.orpo_lambda * sigmoid(-lo);  // d value / d log_odds
      dlogp[ci] = g * (-1 / std::expm1(ac)) / nc - nll_weight;
      dlogp[ri] = g * (1 / std::expm1(ar)) / nr;
      value += -nll_weight * c;
      if (!context.empty()) {  // orpo.nll = sequence: the chosen row's prompt targets too
        value += -nll_weight * context[ci];
        dcontext[ci] = -nll_weight;
        dcontext[ri] = 0;
      }
      rc = cfg.orpo_lambda * ac;
      rr = cfg.orpo_lambda * ar;
    }
    value += inv * loss;
    m.rewards_chosen += rc;
    m.rewards_rejected += rr;
    m.accuracies += rc > rr ? 1 : 0;
    m.margins += rc - rr;
    m.logps_chosen += dpo ? c : c / nc;  // TRL's ORPO logs the average log-probs
    m.logps_rejected += dpo ? r : r / nr;
    m.pairs += 1;
  }
  m.value += value * static_cast<double>(P);  // the micro-batch's mean, weighted by its pairs
  return value;
}

}  // namespace zt::train
