// finetune.objective = dpo (docs/finetune.md "DPO and ORPO"): DPO, IPO and conservative DPO
// over pairs against reference log-probs (preference.hpp; the reference file:
// preference_reference.hpp).
#include <algorithm>

#include "objective_pairs.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::train {

double dpo_value(const PreferenceConfig& cfg, std::span<const double> logp, std::span<const int64_t> count,
                 std::span<const double> ref, std::span<double> dlogp, PairMetrics& m) {
  const size_t P = pair_count(logp, count, dlogp, {}, {});
  ZT_CHECK(ref.size() == logp.size(), "DPO without reference log-probs", "compute the reference first");
  const double inv = 1.0 / static_cast<double>(P);
  double value = 0;
  for (size_t p = 0; p < P; ++p) {
    const auto [ci, ri, c, r, nc, nr] = pair_at(logp, count, p);
    const double cc = c - ref[ci], cr = r - ref[ri];
    double loss = 0;
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
    value += inv * loss;
    add_pair(m, cfg.beta * cc, cfg.beta * cr, c, r);
  }
  m.value += value * static_cast<double>(P);  // the micro-batch's mean, weighted by its pairs
  return value;
}

PreferenceConfig dpo_config(const ObjectiveConfig& o) {
  PreferenceConfig p;
  p.beta = o.number("dpo.beta");
  p.label_smoothing = o.number("dpo.label_smoothing");
  p.ipo = o.text("dpo.loss") == "ipo";
  return p;
}

namespace {

void add_dpo_keys(config::Schema& s) {
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
}

void check_dpo(const TrainConfig& t) {
  const PreferenceConfig p = dpo_config(t.objective);
  if (p.label_smoothing >= 0.5)  // the schema's range is inclusive
    throw InputError(strf("dpo.label_smoothing = %g: must be below 0.5", p.label_smoothing),
                     "0.5 makes chosen and rejected alike; cDPO uses 0.1 .. 0.3");
  if (p.ipo && p.label_smoothing > 0)
    throw InputError("dpo.label_smoothing applies to dpo.loss = sigmoid only",
                     "set dpo.label_smoothing = 0 with dpo.loss = ipo");
  check_pairs(t);
}

class DpoObjective final : public ReferencePairObjective {
 public:
  explicit DpoObjective(const ObjectiveContext& ctx)
      : ReferencePairObjective(ctx), pref_(dpo_config(ctx.cfg.objective)) {}

 private:
  double value(std::span<const double> logp, std::span<const int64_t> count, std::span<double> dlogp,
               PairMetrics& m, std::span<const double> context, std::span<double> dcontext) override {
    std::fill(dcontext.begin(), dcontext.end(), 0.0);  // (no context targets in DPO)
    (void)context;
    return dpo_value(pref_, logp, count, batch_reference(), dlogp, m);
  }

  const PreferenceConfig pref_;
};

}  // namespace

const ObjectiveSpec& dpo_objective() {
  static const ObjectiveSpec spec{"dpo", "dpo.", add_dpo_keys, false, false, true, false, kPairsHint, check_dpo,
                                  make_as<DpoObjective>};
  return spec;
}

}  // namespace zt::train
