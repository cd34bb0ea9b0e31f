// model::Config's field list (zt/model/config_fields.hpp) against every place it feeds:
// each field, set away from its default in a valid config, survives the checkpoint's
// model_config attribute, config.json (when it has a key there) and `--set model.<key>`,
// and a resume with another value refuses or warns naming it. A field of Config missing
// from the list, a row without a sample here, or a place that skips a row fails.
#include <gtest/gtest.h>

#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "zt/ckpt/format.hpp"
#include "zt/ckpt/hf_config.hpp"
#include "zt/core/config.hpp"
#include "zt/core/error.hpp"
#include "zt/model/config_fields.hpp"
#include "zt/model/family.hpp"
#include "zt/train/config.hpp"

namespace {

using zt::model::Config;
using zt::model::ConfigField;

// The number of members of an aggregate (a value of any type initialises each).
struct Any {
  template <class T>
  operator T() const;
};
template <class T, class... A>
constexpr size_t members() {
  if constexpr (requires { T{A{}..., Any{}}; }) return members<T, A..., Any>();
  else return sizeof...(A);
}

// Config's members: the list has a row for each, rope_scaling's five parts each a row.
// When a member is added to Config, add its row to src/model/config_fields.cpp, its
// sample below, and count it here.
static_assert(members<Config>() == 41);
constexpr size_t kRows = 41 - 1 + 11;

Config tiny(const char* family = "llama") {
  Config c = Config::preset("tiny");
  const std::string f = family;
  c.family = f;
  if (f == "mixtral" || f.ends_with("_moe")) {
    c.experts = 4;
    c.experts_per_token = 2;
  }
  if (f.ends_with("_moe")) c.moe_intermediate = 48;  // as config.json writes it back
  if (f == "qwen2_moe") c.shared_expert_intermediate = 40;
  if (f == "gpt_oss") {  // as config.json writes it back
    c.experts = 4;
    c.experts_per_token = 2;
    c.attention_bias = true;
    c.layer_types = "sfsf";
    c.sliding_window = 16;
    c.swiglu_limit = 7.0;
    c.rope_scaling = {.type = "yarn", .factor = 32.0, .original_context = 64};
  }
  if (f == "gemma3_text" || f == "gemma2") {  // as config.json writes it back
    c.layer_types = f == "gemma2" ? "sfsf" : "sssf";
    c.sliding_window = 16;
    if (f == "gemma3_text") c.rope_local_theta = 1e4;
    c.query_pre_attn_scalar = 32;
  }
  if (f == "qwen3_5_text") c.layer_types = "ffff";  // as config.json writes it back
  if (f == "qwen3_5_moe_text") {  // every layer routed, intermediate = the experts' width
    c.layer_types = "ffff";
    c.experts = 4;
    c.experts_per_token = 2;
    c.moe_intermediate = c.intermediate = 48;
    c.shared_expert_intermediate = 40;
  }
  return c;
}

// tiny as a Qwen3.5 hybrid: Gated DeltaNet layers 0, 1 and 3 (2 key heads, 2 value heads
// of 16, conv kernel 4).
Config hybrid() {
  Config c = tiny("qwen3_5_text");
  c.layer_types = "llfl";
  c.linear_key_heads = 2;
  c.linear_value_heads = 2;
  c.linear_key_dim = 16;
  c.linear_value_dim = 16;
  return c;
}

struct Sample {
  const char* key;  // the row's key (or attr for a row without one)
  Config base;      // valid, with the row's field at another value than `changed`
  void (*change)(Config&);
};

std::vector<Sample> samples() {
  return {
      {"name", tiny(), [](Config& c) { c.name = "my-model"; }},
      {"family", tiny(), [](Config& c) { c.family = "qwen3"; }},
      {"vocab", tiny(), [](Config& c) { c.vocab = 300; }},
      {"hidden", tiny(), [](Config& c) { c.hidden = 256; }},
      {"layers", tiny(), [](Config& c) { c.layers = 6; }},
      {"heads", tiny(), [](Config& c) { c.heads = 8; }},
      {"kv_heads", tiny(), [](Config& c) { c.kv_heads = 4; }},
      {"intermediate", tiny(), [](Config& c) { c.intermediate = 384; }},
      {"context", tiny(), [](Config& c) { c.context = 512; }},
      {"tied_embeddings", tiny(), [](Config& c) { c.tied_embeddings = true; }},
      {"head_dim", tiny(), [](Config& c) { c.head_dim_ = 64; }},
      {"attention_bias", tiny(), [](Config& c) { c.attention_bias = true; }},
      {"rope_theta", tiny(), [](Config& c) { c.rope_theta = 5e5; }},
      {"rope_type", tiny(), [](Config& c) { c.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 64}; }},
      {"rope_factor", tiny(), [](Config& c) { c.rope_scaling = {"linear", 4.0, 1.0, 4.0, 0}; }},
      {"rope_low_freq_factor", tiny(),
       [](Config& c) { c.rope_scaling = {"llama3", 8.0, 2.0, 4.0, 64}; }},
      {"rope_high_freq_factor", tiny(),
       [](Config& c) { c.rope_scaling = {"llama3", 8.0, 1.0, 8.0, 64}; }},
      {"rope_original_context", tiny(),
       [](Config& c) { c.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 128}; }},
      {"norm_eps", tiny(), [](Config& c) { c.norm_eps = 1e-6; }},
      {"sliding_window", tiny("mistral"), [](Config& c) { c.sliding_window = 16; }},
      {"experts", tiny("mixtral"), [](Config& c) { c.experts = 6; }},
      {"experts_per_token", tiny("mixtral"), [](Config& c) { c.experts_per_token = 3; }},
      {"router_aux_loss_coef", tiny("mixtral"), [](Config& c) { c.router_aux_loss_coef = 0.25; }},
      {"router_aux_loss", tiny("mixtral"), [](Config& c) { c.router_aux_loss = true; }},
      {"moe_intermediate", tiny("qwen3_moe"), [](Config& c) { c.moe_intermediate = 64; }},
      {"shared_expert_intermediate", tiny("qwen2_moe"),
       [](Config& c) { c.shared_expert_intermediate = 24; }},
      {"norm_topk_prob", tiny("qwen3_moe"), [](Config& c) { c.norm_topk_prob = false; }},
      {"decoder_sparse_step", tiny("qwen3_moe"), [](Config& c) { c.decoder_sparse_step = 2; }},
      {"first_sliding_layer",
       [] {
         Config c = tiny("qwen2");
         c.sliding_window = 16;
         return c;
       }(),
       [](Config& c) { c.first_sliding_layer = 2; }},
      {"mlp_only_layers", tiny("qwen3_moe"), [](Config& c) { c.mlp_only_layers = {1}; }},
      {"layer_types", tiny("gemma3_text"), [](Config& c) { c.layer_types = "sfsf"; }},
      {"rope_local_theta", tiny("gemma3_text"), [](Config& c) { c.rope_local_theta = 500; }},
      {"query_pre_attn_scalar", tiny("gemma3_text"), [](Config& c) { c.query_pre_attn_scalar = 24; }},
      {"final_logit_softcap", tiny("gemma3_text"), [](Config& c) { c.final_logit_softcap = 30; }},
      {"attn_logit_softcap", tiny("gemma2"), [](Config& c) { c.attn_logit_softcap = 50; }},
      {"rope_beta_fast", tiny("gpt_oss"), [](Config& c) { c.rope_scaling.beta_fast = 16; }},
      {"rope_beta_slow", tiny("gpt_oss"), [](Config& c) { c.rope_scaling.beta_slow = 2; }},
      {"rope_truncate", tiny("gpt_oss"), [](Config& c) { c.rope_scaling.truncate = false; }},
      {"rope_mscale", tiny("gpt_oss"), [](Config& c) { c.rope_scaling.mscale = 1; }},
      {"rope_mscale_all_dim", tiny("gpt_oss"), [](Config& c) { c.rope_scaling.mscale_all_dim = 1; }},
      {"rope_attention_factor", tiny("gpt_oss"),
       [](Config& c) { c.rope_scaling.attention_factor = 1.5; }},
      {"partial_rotary_factor", tiny("qwen3_5_text"), [](Config& c) { c.partial_rotary_factor = 0.25; }},
      {"mrope_section", tiny("qwen3_5_text"), [](Config& c) { c.mrope_section = {3, 3, 2}; }},
      {"mrope_interleaved", tiny("qwen3_5_text"), [](Config& c) { c.mrope_interleaved = true; }},
      {"linear_key_heads", hybrid(), [](Config& c) { c.linear_key_heads = 1; }},
      {"linear_value_heads", hybrid(), [](Config& c) { c.linear_value_heads = 4; }},
      {"linear_key_dim", hybrid(), [](Config& c) { c.linear_key_dim = 24; }},
      {"linear_value_dim", hybrid(), [](Config& c) { c.linear_value_dim = 20; }},
      {"linear_conv_kernel", hybrid(), [](Config& c) { c.linear_conv_kernel = 3; }},
      {"swiglu_limit", tiny("gpt_oss"), [](Config& c) { c.swiglu_limit = 5; }},
      {"swiglu_alpha", tiny("gpt_oss"), [](Config& c) { c.swiglu_alpha = 1.5; }},
  };
}

const char* name_of(const ConfigField& f) { return f.key ? f.key : f.attr; }

// The raw values (not ConfigField::shape's) of every row, as text, and "" for the rows
// `skip` leaves out.
std::string values(const Config& c, bool (*skip)(const ConfigField&)) {
  std::string out;
  for (const ConfigField& f : zt::model::config_fields())
    if (!skip(f)) out += std::string(name_of(f)) + "=" + zt::model::field_text(f, c) + " ";
  return out;
}

const Sample* sample_of(const std::vector<Sample>& all, const ConfigField& f) {
  for (const Sample& s : all)
    if (std::string(s.key) == name_of(f)) return &s;
  return nullptr;
}

}  // namespace

TEST(ConfigFields, EveryRowHasASampleAwayFromTheDefault) {
  const auto all = samples();
  EXPECT_EQ(zt::model::config_fields().size(), kRows);
  for (const ConfigField& f : zt::model::config_fields()) {
    const Sample* s = sample_of(all, f);
    ASSERT_NE(s, nullptr) << "no sample for the field " << name_of(f);
    Config c = s->base;
    s->change(c);
    ASSERT_NO_THROW(s->base.validate()) << name_of(f);
    ASSERT_NO_THROW(c.validate()) << name_of(f);
    EXPECT_NE(zt::model::field_text(f, c), zt::model::field_text(f, s->base)) << name_of(f);
    EXPECT_NE(zt::model::field_text(f, c), zt::model::field_text(f, Config{})) << name_of(f);
  }
}

TEST(ConfigFields, EveryFieldRoundTripsThroughTheCheckpointAttribute) {
  for (const Sample& s : samples()) {
    Config c = s.base;
    s.change(c);
    const Config back = zt::ckpt::config_from_json(zt::ckpt::config_to_json(c), "f.h5");
    EXPECT_EQ(values(back, [](const ConfigField&) { return false; }),
              values(c, [](const ConfigField&) { return false; }))
        << s.key;
  }
}

// The attribute holds what checkpoints always held: a field written only when the row's
// save rule says (as written before the field list: the Llama and Mixtral attributes).
TEST(ConfigFields, TheCheckpointAttributeKeepsItsForm) {
  EXPECT_EQ(zt::ckpt::config_to_json(tiny()),
            R"({"context":256,"heads":4,"hidden":128,"intermediate":512,"kv_heads":2,"layers":4,)"
            R"("name":"tiny","norm_eps":1e-05,"rope_theta":10000.0,"tied_embeddings":false,"vocab":256})");
  Config m = tiny("mixtral");
  m.hidden = 64;  // head_dim() 16, not the default's 32: head_dim stays unwritten
  EXPECT_EQ(zt::ckpt::config_to_json(m),
            R"({"context":256,"experts":4,"experts_per_token":2,"family":"mixtral","heads":4,)"
            R"("hidden":64,"intermediate":512,"kv_heads":2,"layers":4,"name":"tiny",)"
            R"("norm_eps":1e-05,"rope_theta":10000.0,"router_aux_loss":false,)"
            R"("router_aux_loss_coef":0.001,"tied_embeddings":false,"vocab":256})");
}

TEST(ConfigFields, EveryFieldWithAHfKeyRoundTripsThroughConfigJson) {
  const auto no_hf = [](const ConfigField& f) { return f.hf == nullptr; };
  for (const Sample& s : samples()) {
    bool has_hf = true;  // the sample's own row: without a config.json key it may not export
    for (const ConfigField& f : zt::model::config_fields())
      if (std::string(name_of(f)) == s.key) has_hf = f.hf != nullptr;
    if (!has_hf) continue;
    Config c = s.base;
    s.change(c);
    const Config back = zt::ckpt::parse_hf_config(zt::ckpt::hf_config_json(c, "float32"), "c.json").model;
    EXPECT_EQ(values(back, no_hf), values(c, no_hf)) << s.key;
  }
}

// Gemma's fields in every family: config.json holds each where the family's row says
// (rope_per_type, gemma_scalars, attn_softcap), and the export of any other family refuses
// it by name rather than write a config.json without it (transformers would run another
// model). transformers 5.24's Gemma3ForCausalLM ignores attn_logit_softcapping: gemma3_text
// refuses the key set on import too.
TEST(ConfigFields, GemmaFieldsExportWhereTheFamilyHoldsThemOnly) {
  struct Field {
    const char* name;
    void (*set)(Config&);
    bool (*held)(const zt::model::Family&);
  };
  const Field fields[] = {
      {"model.rope_local_theta", [](Config& c) { c.rope_local_theta = 500; },
       [](const zt::model::Family& f) { return f.rope_per_type; }},
      {"model.query_pre_attn_scalar", [](Config& c) { c.query_pre_attn_scalar = 24; },
       [](const zt::model::Family& f) { return f.gemma_scalars; }},
      {"model.final_logit_softcap", [](Config& c) { c.final_logit_softcap = 7; },
       [](const zt::model::Family& f) { return f.gemma_scalars; }},
      {"model.attn_logit_softcap", [](Config& c) { c.attn_logit_softcap = 3; },
       [](const zt::model::Family& f) { return f.attn_softcap; }}};
  int held = 0;
  for (const std::string& fam : zt::model::family_names())
    for (const Field& field : fields) {
      Config c = tiny(fam.c_str());
      field.set(c);
      ASSERT_NO_THROW(c.validate()) << fam << " " << field.name;
      if (field.held(zt::model::family(fam))) {
        ++held;
        const Config back =
            zt::ckpt::parse_hf_config(zt::ckpt::hf_config_json(c, "float32"), "c.json").model;
        EXPECT_EQ(values(back, [](const ConfigField& f) { return f.hf == nullptr; }),
                  values(c, [](const ConfigField& f) { return f.hf == nullptr; }))
            << fam << " " << field.name;
        continue;
      }
      try {
        zt::ckpt::hf_config_json(c, "float32");
        ADD_FAILURE() << fam << ": a model with " << field.name << " exported";
      } catch (const zt::InputError& e) {
        EXPECT_NE(std::string(e.what()).find(field.name), std::string::npos) << e.what();
      }
    }
  EXPECT_EQ(held, 3 + 3);  // gemma3_text: all but the attention cap; gemma2: all but the local RoPE
  nlohmann::json j = nlohmann::json::parse(zt::ckpt::hf_config_json(tiny("gemma3_text"), "float32"));
  EXPECT_TRUE(j.at("attn_logit_softcapping").is_null()) << j.dump();
  j["attn_logit_softcapping"] = 3.0;
  try {
    zt::ckpt::parse_hf_config(j.dump(), "c.json");
    ADD_FAILURE() << "attn_logit_softcapping 3.0 imported as gemma3_text";
  } catch (const zt::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'attn_logit_softcapping'"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("does not apply it"), std::string::npos) << e.what();
  }
}

TEST(ConfigFields, EveryFieldWithAKeyIsSetByIt) {
  const auto no_key = [](const ConfigField& f) { return f.key == nullptr; };
  const zt::config::Schema schema = zt::train::train_schema();
  const Config preset = Config::preset("tiny");
  for (const Sample& s : samples()) {
    Config c = s.base;
    s.change(c);
    std::vector<std::string> sets;
    for (const ConfigField& f : zt::model::config_fields())
      if (f.key && zt::model::field_text(f, c) != zt::model::field_text(f, preset))
        sets.push_back(std::string("model.") + f.key + "=" + zt::model::field_text(f, c));
    const auto t = zt::train::resolve(zt::config::load(schema, "", sets), 1);
    EXPECT_EQ(values(t.model, no_key), values(c, no_key)) << s.key;
  }
}

// Resuming a checkpoint of the sample's config in a run of its base: refused naming the
// field (and its --set in the hint) for the shape's rows, a warning naming it for the others.
TEST(ConfigFields, EveryFieldIsComparedOnResume) {
  const auto all = samples();
  for (const ConfigField& f : zt::model::config_fields()) {
    if (f.resume == ConfigField::kFree) continue;
    const Sample& s = *sample_of(all, f);
    Config saved = s.base;
    s.change(saved);
    const std::string key = std::string("model.") + f.key;
    if (f.resume == ConfigField::kWarn) {
      const auto warnings = zt::ckpt::check_same_shape(saved, s.base, "f.h5");
      std::string all_text;
      for (const auto& w : warnings) all_text += w + "\n";
      EXPECT_NE(all_text.find(key + " "), std::string::npos) << all_text;
      continue;
    }
    try {
      zt::ckpt::check_same_shape(saved, s.base, "f.h5");
      ADD_FAILURE() << key << " differs and the resume is not refused";
    } catch (const zt::InputError& e) {
      EXPECT_NE(e.hint().find("--set " + key + "="), std::string::npos) << e.hint();
      if (f.resume == ConfigField::kShape) {
        EXPECT_NE(e.message().find(key + " is"), std::string::npos) << e.message();
      }
    }
  }
}

// config.json: a row with a key is read and written by the loop over plain keys (its key,
// in every family) or by a named piece; the loop's reader is checked apart from its writer
// (the sample's value put into another file), and every family's file holds every plain key.
TEST(ConfigFields, EveryConfigJsonKeyIsReadAndWritten) {
  const auto all = samples();
  for (const ConfigField& f : zt::model::config_fields()) {
    SCOPED_TRACE(name_of(f));
    EXPECT_EQ(f.hf == nullptr, f.hf_form == ConfigField::kHfNone) << "a key without a reader";
    if (!f.hf) continue;
    const Sample& s = *sample_of(all, f);
    Config c = s.base;
    s.change(c);
    const nlohmann::json written = nlohmann::json::parse(zt::ckpt::hf_config_json(c, "float32"));
    const Config back = zt::ckpt::parse_hf_config(written.dump(), "c.json").model;
    EXPECT_EQ(zt::model::field_text(f, back), zt::model::field_text(f, c));
    const auto& fam = zt::model::family(written.at("model_type").get<std::string>());
    const char* key = zt::model::plain_hf_key(f, fam);
    if (!key) continue;
    nlohmann::json value;
    if (f.shape) value = f.shape(c);
    else std::visit([&](auto ref) { value = ref(c); }, f.ref);
    ASSERT_TRUE(written.contains(key)) << key;
    EXPECT_EQ(written.at(key), value) << key;
    nlohmann::json other = nlohmann::json::parse(zt::ckpt::hf_config_json(s.base, "float32"));
    other[key] = value;
    const Config read = zt::ckpt::parse_hf_config(other.dump(), "c.json").model;
    EXPECT_EQ(zt::model::field_text(f, read), zt::model::field_text(f, c)) << key;
  }
  for (const std::string& family : Config::family_names()) {
    const nlohmann::json j = nlohmann::json::parse(zt::ckpt::hf_config_json(tiny(family.c_str()), "float32"));
    for (const ConfigField& f : zt::model::config_fields()) {
      if (const char* key = zt::model::plain_hf_key(f, zt::model::family(family))) {
        EXPECT_TRUE(j.contains(key)) << family << " " << key;
      }
    }
  }
}

// The hint of a refused resume lists what differs, but not a derived size (the row's
// `shape`: head_dim, the experts' width) whose setting is the same in both: it follows from
// the listed fields, and setting it is refused on some families (moe_intermediate on a
// dense one). Every family's checkpoint, with another intermediate, in a tiny llama run.
TEST(ConfigFields, ResumeHintNamesNoDerivedSize) {
  for (const std::string& family : Config::family_names()) {
    Config saved = tiny(family.c_str());
    saved.intermediate = 96;
    const Config run = Config::preset("tiny");
    try {
      zt::ckpt::check_same_shape(saved, run, "f.h5");
      ADD_FAILURE() << family << ": the resume is not refused";
    } catch (const zt::InputError& e) {
      for (const ConfigField& f : zt::model::config_fields()) {
        if (!f.shape || zt::model::field_text(f, saved) != zt::model::field_text(f, run)) continue;
        EXPECT_EQ(e.hint().find(std::string("--set model.") + f.key + "="), std::string::npos)
            << family << ": " << e.hint();
      }
    }
  }
}
