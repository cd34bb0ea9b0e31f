#pragma once
// Strict JSON parsing (nlohmann-json) for the files users give: safetensors headers,
// config.json, model.safetensors.index.json (ckpt), tokenizer.json and
// tokenizer_config.json (data).
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace zt {

// Parses `text`, refusing malformed JSON and any object that names a key twice (nlohmann
// would keep the last one silently). Errors are zt::InputError "<what>: ..." with `hint`.
nlohmann::json parse_json_strict(std::string_view text, const std::string& what,
                                 const std::string& hint);

// A short description of a value for an error message: scalars as JSON (strings cut to
// 64 characters), arrays and objects by kind and size (dump() recurses, and a hostile
// header may nest deeply).
std::string describe_json(const nlohmann::json& value);

}  // namespace zt
