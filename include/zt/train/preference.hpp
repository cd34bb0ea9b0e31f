#pragma once
// Preference objectives on the engine (docs/finetune.md "DPO and ORPO"):
// finetune.objective = sft | dpo | orpo over a pair file (zt convert pairs-to-tokens: rows
// 2p chosen, 2p + 1 rejected). The model computes each row's summed completion log-prob
// logp and backpropagates d value / d logp (model::RowObjective); these functions are
// that value and its derivative, as TRL 1.16 computes them:
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

#include "zt/core/config.hpp"
#include "zt/data/token_file.hpp"

namespace zt::train {

enum class Objective { kSft, kDpo, kOrpo };

struct PreferenceConfig {
  Objective objective = Objective::kSft;
  double beta = 0.1;             // dpo.beta
  double label_smoothing = 0.0;  // dpo.label_smoothing
  bool ipo = false;              // dpo.loss = ipo
  double orpo_lambda = 0.1;      // orpo.lambda (TRL's ORPOConfig.beta)
  bool orpo_sequence_nll = true;  // orpo.nll = sequence (prompt + completion), else completion
  bool enabled() const { return objective != Objective::kSft; }
};

void add_preference_keys(config::Schema& s);
PreferenceConfig resolve_preference(const config::Config& c);
const char* objective_name(Objective o);

// What a token file says it holds (token_file.hpp): text, instruction data (a /loss_mask)
// or preference pairs (pairs = 1).
enum class DataKind { kText, kInstruction, kPairs };
DataKind data_kind(const data::TokenFile& f);
const char* data_kind_name(DataKind k);
// The one table of what each objective trains on: sft text and instruction data, dpo and
// orpo preference pairs. Anything else is zt::InputError naming finetune.objective, the
// file (`data_path`) and what it holds, with the converter or objective that fits.
void check_objective_data(Objective o, const data::TokenFile& f, const std::string& data_path);

// Sums over pairs of TRL's metrics (divide by pairs for the means).
struct PairMetrics {
  double rewards_chosen = 0, rewards_rejected = 0, accuracies = 0, margins = 0;
  double logps_chosen = 0, logps_rejected = 0, value = 0;
  double pairs = 0;
  PairMetrics& operator+=(const PairMetrics& o);
};

// The objective over rows of pairs (logp, count, dlogp: [2P]; ref: [2P] for DPO, empty for
// ORPO): returns mean_p loss_p + nll (ORPO: nll_weight x the chosen rows' summed NLL; the
// caller passes 1 / the chosen targets it averages over), writes dlogp, adds the metrics.
// context, dcontext ([2P] or empty): each row's summed log-prob of its context targets
// (the prompt's, orpo.nll = sequence; model.hpp RowObjective) and d value / d them: ORPO
// adds the chosen row's to its NLL.
double preference_value(const PreferenceConfig& cfg, std::span<const double> logp,
                        std::span<const int64_t> count, std::span<const double> ref, double nll_weight,
                        std::span<double> dlogp, PairMetrics& metrics,
                        std::span<const double> context = {}, std::span<double> dcontext = {});

}  // namespace zt::train
