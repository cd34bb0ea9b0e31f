#pragma once
// Training objectives (finetune.objective; docs/training.md "Objectives"): their keys, the
// data each trains on and their checks at configuration time. Each objective lives in its
// own file (src/train/objective_*.cpp) behind one interface (src/train/objective.hpp) and
// is named once in the registry (src/train/objective_registry.cpp); nothing else switches
// on the objective.
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "zt/core/config.hpp"
#include "zt/data/token_file.hpp"

namespace zt::train {

struct TrainConfig;

// The chosen objective and the values of its own keys (its key group: dpo.* for dpo).
struct ObjectiveConfig {
  std::string name = "sft";  // finetune.objective
  std::map<std::string, config::Value, std::less<>> keys;
  double number(std::string_view key) const;  // a float or int key of the group
  bool flag(std::string_view key) const;
  const std::string& text(std::string_view key) const;
  bool trains_on_pairs() const;  // its data are preference pairs (pair files)
};

// finetune.objective (one choice per registered objective) and every objective's keys.
void add_objective_keys(config::Schema& s);
// The objective named by finetune.objective and the values of its key group.
ObjectiveConfig resolve_objective(const config::Config& c);
// The objective's own checks against the resolved run (zt::InputError naming the keys).
void check_objective(const TrainConfig& t);

// Each objective's key group ("dpo.") and whether it is unused in a run of `chosen`, with
// the fix (config.cpp inert_keys).
struct ObjectiveKeyGroup {
  std::string prefix;
  bool inert = false;
  std::string why;
};
std::vector<ObjectiveKeyGroup> objective_key_groups(const std::string& chosen);

// What a token file says it holds (token_file.hpp): text, instruction data (a /loss_mask)
// preference pairs (pairs = 1) or KTO rows (/labels).
enum class DataKind { kText, kInstruction, kPairs, kUnpaired };
DataKind data_kind(const data::TokenFile& f);
const char* data_kind_name(DataKind k);
// The data each objective trains on is in its registry entry: sft text and instruction
// data, dpo and orpo preference pairs, kto KTO rows. Anything else is zt::InputError naming
// finetune.objective, the file (`data_path`) and what it holds, with the converter or
// objective that fits.
void check_objective_data(const std::string& objective, const data::TokenFile& f,
                          const std::string& data_path);

}  // namespace zt::train
