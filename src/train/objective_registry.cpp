// The one list of training objectives (see objective.hpp): finetune.objective's choices,
// their keys, the data each trains on, and the objective the trainer runs.
#include <variant>

#include "objective.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::train {

// Each objective's file defines its entry, `const ObjectiveSpec& NAME_objective()`.
// Registering one is one X(NAME) here.
#define ZT_OBJECTIVES(X) X(sft) X(dpo) X(orpo) X(kto)

#define ZT_DECLARE(name) const ObjectiveSpec& name##_objective();
ZT_OBJECTIVES(ZT_DECLARE)
#undef ZT_DECLARE

namespace {

std::vector<const ObjectiveSpec*> registry() {
#define ZT_ENTRY(name) &name##_objective(),
  return {ZT_OBJECTIVES(ZT_ENTRY)};
#undef ZT_ENTRY
}

const config::Value& key_value(const ObjectiveConfig& o, std::string_view key) {
  const auto it = o.keys.find(key);
  ZT_CHECK(it != o.keys.end(), strf("objective %s reads key %.*s outside its key group", o.name.c_str(),
                                    static_cast<int>(key.size()), key.data()),
           "read only the keys of the objective's own key group");
  return it->second;
}

}  // namespace

double ObjectiveConfig::number(std::string_view key) const {
  const config::Value& v = key_value(*this, key);
  return std::holds_alternative<int64_t>(v) ? static_cast<double>(std::get<int64_t>(v)) : std::get<double>(v);
}
bool ObjectiveConfig::flag(std::string_view key) const { return std::get<bool>(key_value(*this, key)); }
const std::string& ObjectiveConfig::text(std::string_view key) const {
  return std::get<std::string>(key_value(*this, key));
}
bool ObjectiveConfig::trains_on_pairs() const { return objective_spec(name).pairs; }

const ObjectiveSpec& objective_spec(const std::string& name) {
  for (const ObjectiveSpec* s : registry())
    if (name == s->name) return *s;
  ZT_CHECK(false, "finetune.objective = " + name + " is not a registered objective",
           "the schema's choices come from the registry (objective_registry.cpp)");
  return *registry().front();
}

std::unique_ptr<TrainObjective> make_objective(const ObjectiveContext& ctx) {
  return objective_spec(ctx.cfg.objective.name).make(ctx);
}

void add_objective_keys(config::Schema& s) {
  auto& k = s.add_string("finetune.objective", "sft",
                         "sft (cross-entropy of the targets), dpo or orpo (preference pairs from `zt "
                         "convert pairs-to-tokens`; docs/finetune.md \"DPO and ORPO\"), kto (labelled "
                         "completions from `zt convert kto-to-tokens`; docs/finetune.md \"KTO\")");
  for (const ObjectiveSpec* o : registry()) k.choices.push_back(o->name);
  for (const ObjectiveSpec* o : registry())
    if (o->add_keys) o->add_keys(s);
}

ObjectiveConfig resolve_objective(const config::Config& c) {
  ObjectiveConfig o;
  o.name = c.get_string("finetune.objective");
  const ObjectiveSpec& spec = objective_spec(o.name);
  if (spec.key_group)
    for (const config::Key& k : c.schema().keys())
      if (k.name.starts_with(spec.key_group)) o.keys[k.name] = c.value(k.name);
  return o;
}

void check_objective(const TrainConfig& t) {
  const ObjectiveSpec& spec = objective_spec(t.objective.name);
  if (spec.check) spec.check(t);
}

std::vector<ObjectiveKeyGroup> objective_key_groups(const std::string& chosen) {
  std::vector<ObjectiveKeyGroup> groups;
  for (const ObjectiveSpec* o : registry())
    if (o->key_group)
      groups.push_back({o->key_group, chosen != o->name,
                        strf("set finetune.objective = %s to use it", o->name)});
  return groups;
}

DataKind data_kind(const data::TokenFile& f) {
  if (!f.labels.empty()) return DataKind::kUnpaired;
  return f.pairs ? DataKind::kPairs : f.loss_mask.empty() ? DataKind::kText : DataKind::kInstruction;
}

const char* data_kind_name(DataKind k) {
  return k == DataKind::kPairs      ? "preference pairs"
         : k == DataKind::kUnpaired ? "KTO rows (labelled completions)"
         : k == DataKind::kText     ? "text"
                                    : "instruction data";
}

void check_objective_data(const std::string& objective, const data::TokenFile& f,
                          const std::string& data_path) {
  const ObjectiveSpec& a = objective_spec(objective);
  const DataKind k = data_kind(f);
  if (k == DataKind::kText ? a.text
      : k == DataKind::kInstruction ? a.instruction
      : k == DataKind::kPairs ? a.pairs
                              : a.unpaired)
    return;
  throw InputError(strf("finetune.objective = %s does not train on %s; dataset '%s' holds %s",
                        a.name, data_kind_name(k), data_path.c_str(), data_kind_name(k)),
                   a.data_hint);
}

}  // namespace zt::train
