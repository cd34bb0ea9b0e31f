#pragma once
// The config.json readers shared by hf_config.cpp and hf_schedule.cpp (private to ckpt):
// typed reads that refuse by the file and key, and the RoPE dictionary of either form.
#include <cstdint>
#include <optional>
#include <string>
#include <nlohmann/json.hpp>

#include "zt/model/config.hpp"
#include "zt/model/family.hpp"

namespace zt::ckpt {

using json = nlohmann::json;

namespace hfj {

const model::Family::Defaults& hf_defaults(const std::string& model_type);
bool present(const json& j, const std::string& key);
// "is 7", or "is absent (transformers' <family> default: 7)".
std::string held(const json& j, const std::string& key, const std::string& family,
                 const std::string& value);
// zt::InputError "config '<where>': '<key>' <what>" with the converter's hint.
[[noreturn]] void bad(const std::string& where, const std::string& key, const std::string& what);
int64_t get_int(const json& j, const std::string& key, const std::string& where,
                std::optional<int64_t> fallback = std::nullopt);
double get_double(const json& j, const std::string& key, const std::string& where, double fallback);
bool get_bool(const json& j, const std::string& key, const std::string& where, bool fallback);
// One RoPE dictionary (rope_scaling, rope_parameters or one layer type's) into *scaling,
// its rope_theta into *theta when present; its partial_rotary_factor and multimodal
// sections (mrope_section, mrope_interleaved) into *shares when given (Qwen3.5's), else
// refused unless 1 / absent.
void read_rope_dict(const json& d, const std::string& name, const std::string& where,
                    int64_t context, const json& top, kernels::RopeScaling* scaling,
                    std::optional<double>* theta, model::Config* shares = nullptr);
// The RoPE dictionary of a scaling (rope_type default when none), without rope_theta.
json rope_dict(const kernels::RopeScaling& r);
std::string hint();

}  // namespace hfj

// Families with transformers' layer_types (Family::kLayerTypes, Gemma 3; hf_schedule.cpp):
// layer_types (absent: sliding_window_pattern), sliding_window, the RoPE per layer type
// (transformers 5's rope_parameters.{sliding_attention, full_attention}, or transformers
// 4's rope_theta, rope_scaling and rope_local_base_freq). Read into m (its sizes already
// read), written into j.
// read/write_window: the sliding-window keys of every Family::Window kind (Mistral's, Qwen's
// use_sliding_window, max_window_layers and layer_types, kLayerTypes' layer_types);
// read/write_layer_schedule: the RoPE per type (Family::rope_per_type, Gemma 3).
void read_window(const json& j, const std::string& where, const model::Family& fam,
                 model::Config& m);
void write_window(const model::Config& cfg, const model::Family& fam, json& j);
void read_layer_schedule(const json& j, const std::string& where, model::Config& m);
void write_layer_schedule(const model::Config& cfg, json& j);
// Gemma's scalars (Family::gemma_scalars): query_pre_attn_scalar, the soft-caps (absent:
// the family's default; null: none; attn_logit_softcapping refused set without
// Family::attn_softcap), hidden_activation, use_bidirectional_attention.
void read_gemma_scalars(const json& j, const std::string& where, const model::Family& fam,
                        model::Config& m);
void write_gemma_scalars(const model::Config& cfg, const model::Family& fam, json& j);
// Refuses (InputError) a schedule or a Gemma scalar the family's config.json cannot hold.
void check_schedule_exportable(const model::Config& cfg, const model::Family& fam);

}  // namespace zt::ckpt
