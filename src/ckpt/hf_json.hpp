#pragma once
// Private to the Hugging Face converters: strict JSON parsing for safetensors headers,
// config.json and model.safetensors.index.json.
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace zt::ckpt::detail {

// Parses `text`, refusing malformed JSON and any object that names a key twice (nlohmann
// would keep the last one silently). Errors are zt::InputError "<what>: ..." with `hint`.
nlohmann::json parse_json_strict(std::string_view text, const std::string& what,
                                 const std::string& hint);

// A short description of a value for an error message: scalars as JSON (strings cut to
// 64 characters), arrays and objects by kind and size (dump() recurses, and a hostile
// header may nest deeply).
std::string describe(const nlohmann::json& value);

}  // namespace zt::ckpt::detail
