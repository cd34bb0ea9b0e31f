#pragma once
// The field list of model::Config: one row per field (src/model/config_fields.cpp), from
// which `zt train`'s model.* keys and their overrides (train/config.cpp), the checkpoint's
// model_config attribute (write, read, the same-shape check on resume: ckpt/format.cpp)
// and config.json (read, write and the names in refusals: ckpt/hf_config.cpp) are made.
// Adding a field to Config: its declaration in config.hpp, one row here, and its meaning
// where it is used.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "zt/model/config.hpp"

namespace zt::model {

struct Family;

struct ConfigField {
  // The zt train key model.<key>, and the name refusals use; nullptr: no key (name).
  const char* key = nullptr;
  // The checkpoint's model_config attribute ("rope_scaling.factor": inside the object
  // rope_scaling).
  const char* attr = nullptr;
  // The config.json key (named in refusals of imported files); nullptr: config.json has none.
  const char* hf = nullptr;
  // How config.json holds the field (ckpt/hf_config.cpp). kHfPlain: the key `hf` in every
  // family, read and written by one loop over the rows: its type, the limits below (a row
  // with `shape` holds shape(), >= 1, and reads back as 0 when 0 gives the same shape),
  // absent or null: hf_absent's value (nullptr: required). kHfFamily: the same under the key
  // the family row names (hf_key; nullptr: the family has none, the field stays default).
  // The others are read and written by a named piece: kHfModelType model_type, kHfRope
  // rope_parameters / rope_scaling, kHfWindow the sliding-window keys and layer_types,
  // kHfSchedule Gemma's RoPE per layer type and scalars, kHfMoe the experts' keys.
  enum Hf : uint8_t {
    kHfNone, kHfPlain, kHfFamily, kHfModelType, kHfRope, kHfWindow, kHfSchedule, kHfMoe
  } hf_form = kHfNone;
  double (*hf_absent)(const Family&, const Config&) = nullptr;
  const char* (*hf_key)(const Family&) = nullptr;
  // The member (one accessor, read and written through it).
  using Ref = std::variant<int64_t& (*)(Config&), double& (*)(Config&), bool& (*)(Config&),
                           std::string& (*)(Config&), std::vector<int64_t>& (*)(Config&)>;
  Ref ref;
  // When the checkpoint attribute is written: always (read as required), when not the
  // default, with experts (Config::moe()), with a RoPE scaling (rope_scaling.type set).
  enum Save : uint8_t { kAlways, kNonDefault, kWithExperts, kWithRope } save = kNonDefault;
  // On resume: kShape refused when it differs (compared as `shape` when set: head_dim()),
  // kLayers refused when another layer has the experts, kWarn a warning, kFree nothing.
  enum Resume : uint8_t { kShape, kLayers, kWarn, kFree } resume = kWarn;
  int64_t (*shape)(const Config&) = nullptr;
  const char* refused_as = "shape";  // "holds a model of another <refused_as>"
  // The key's limits and help (zt train --help).
  double min = 0, max = 0;
  bool min_exclusive = false;
  const char* help = "";
  std::vector<std::string> (*choices)() = nullptr;
  // Why the key has no effect in this config (zt warns), or nullptr.
  const char* (*inert)(const Config&) = nullptr;
};

std::span<const ConfigField> config_fields();
// The field's config.json key in `fam` (kHfPlain: hf; kHfFamily: the family row's), or
// nullptr when the loop over plain keys does not handle it there.
const char* plain_hf_key(const ConfigField& f, const Family& fam);
// The row of model.<key> (key without "model."), or nullptr.
const ConfigField* config_field(std::string_view key);

// The field's value as JSON-like text ("8", "0.5", "true", "qwen3", "0,3") for messages
// and --set flags; whether two configs hold the same value (as `shape` when the row has
// one: head_dim()), and the same member value (raw).
std::string field_text(const ConfigField& f, const Config& c);
bool same_field(const ConfigField& f, const Config& a, const Config& b);
bool same_value(const ConfigField& f, const Config& a, const Config& b);

}  // namespace zt::model
