#pragma once
// Preference objectives (docs/finetune.md "DPO and ORPO", "KTO"): finetune.objective = dpo | orpo
// over a pair file (zt convert pairs-to-tokens: rows 2p chosen, 2p + 1 rejected). The
// model computes each row's summed completion log-prob logp and backpropagates
// d value / d logp (model::RowObjective); dpo_value (objective_dpo.cpp) and orpo_value
// (objective_orpo.cpp) are that value and its derivative, as TRL 1.16 computes them:
//   dpo, dpo.loss = sigmoid: d = (c - c_ref) - (r - r_ref),
//        loss = -(1 - ls) log sigmoid(beta d) - ls log sigmoid(-beta d)  (ls = dpo.label_smoothing)
//   dpo, dpo.loss = ipo:     d = (c - c_ref) / n_c - (r - r_ref) / n_r,  loss = (d - 1 / (2 beta))^2
//   orpo: a = logp / n (average log-probs), log_odds = (a_c - a_r) - (log1mexp(a_c) - log1mexp(a_r)),
//        loss = NLL(chosen tokens) - lambda log sigmoid(log_odds), the NLL over the chosen
//        row's prompt and completion (orpo.nll = sequence, TRL's) or its completion
// each averaged over pairs. The metrics are TRL's: rewards/chosen = beta (c - c_ref),
// rewards/rejected, rewards/accuracies (chosen > rejected), rewards/margins, logps/chosen,
// logps/rejected (ORPO: rewards = lambda x average log-prob, TRL's ORPO's).
#include <cstdint>
#include <span>

#include "zt/train/objective.hpp"

namespace zt::train {

// The keys of dpo.* and orpo.* (each objective reads its own group).
struct PreferenceConfig {
  double beta = 0.1;             // dpo.beta
  double label_smoothing = 0.0;  // dpo.label_smoothing
  bool ipo = false;              // dpo.loss = ipo
  double orpo_lambda = 0.1;      // orpo.lambda (TRL's ORPOConfig.beta)
  bool orpo_sequence_nll = true;  // orpo.nll = sequence (prompt + completion), else completion
};
PreferenceConfig dpo_config(const ObjectiveConfig& o);   // finetune.objective = dpo
PreferenceConfig orpo_config(const ObjectiveConfig& o);  // finetune.objective = orpo

// Sums over pairs of TRL's metrics (divide by pairs for the means). KTO (unpaired): pairs
// counts examples, the rewards and log-probs are sums over the desirable (chosen) and
// undesirable (rejected) rows, divided by those counts; kl is the KL estimate x examples.
struct PairMetrics {
  double rewards_chosen = 0, rewards_rejected = 0, accuracies = 0, margins = 0;
  double logps_chosen = 0, logps_rejected = 0, value = 0;
  double pairs = 0;
  double chosen = 0, rejected = 0, kl = 0;
  static constexpr size_t kSums = 11;  // the doubles above, from rewards_chosen: summed over ranks
  bool unpaired = false;               // KTO's metrics
  PairMetrics& operator+=(const PairMetrics& o);
};

// finetune.objective = kto (docs/finetune.md "KTO"), as TRL 1.16's KTOTrainer (loss_type
// kto): over examples e of label y_e (rows 2e: prompt + completion, 2e + 1: prompt + a
// mismatched completion), with r_e = logp_2e - ref_2e and the KL estimate z (the mean of
// logp - ref over the mismatched rows of the step's global batch, clamped at 0, a
// constant of the gradient):
//   loss_e = desirable_weight (1 - sigmoid(beta (r_e - z)))      y_e desirable
//          = undesirable_weight (1 - sigmoid(beta (z - r_e)))    y_e undesirable
// averaged over examples; rewards = beta r_e per label; kl = z.
struct KtoConfig {
  double beta = 0.1;                // kto.beta
  double desirable_weight = 1.0;    // kto.desirable_weight
  double undesirable_weight = 1.0;  // kto.undesirable_weight
};
KtoConfig kto_config(const ObjectiveConfig& o);
// logp, count, ref, dlogp: [2E] rows; labels [E] (1 desirable). Returns mean_e loss_e,
// writes dlogp (0 on the mismatched rows) and adds the metrics (kl: z x E).
double kto_value(const KtoConfig& cfg, std::span<const double> logp, std::span<const int64_t> count,
                 std::span<const double> ref, std::span<const uint8_t> labels, double kl, std::span<double> dlogp,
                 PairMetrics& metrics);

// The objectives over rows of pairs (logp, count, dlogp: [2P]): each returns mean_p loss_p,
// writes dlogp and adds the metrics. DPO: ref [2P], the reference's log-probs. ORPO: + the
// chosen rows' NLL, nll_weight x their summed NLL (the caller passes 1 / the chosen
// targets it averages over); context, dcontext ([2P] or empty): each row's summed log-prob
// of its context targets (the prompt's, orpo.nll = sequence; model.hpp RowObjective) and
// d value / d them: the chosen row's join its NLL.
double dpo_value(const PreferenceConfig& cfg, std::span<const double> logp, std::span<const int64_t> count,
                 std::span<const double> ref, std::span<double> dlogp, PairMetrics& metrics);
double orpo_value(const PreferenceConfig& cfg, std::span<const double> logp, std::span<const int64_t> count,
                  double nll_weight, std::span<double> dlogp, PairMetrics& metrics,
                  std::span<const double> context = {}, std::span<double> dcontext = {});

}  // namespace zt::train
