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

}  // namespace zt::ckpt::detail
