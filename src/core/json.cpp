// Strict JSON parsing (see zt/core/json.hpp).
#include "zt/core/json.hpp"

#include <set>
#include <string>
#include <vector>

#include "zt/core/error.hpp"

namespace zt {

nlohmann::json parse_json_strict(std::string_view text, const std::string& what,
                                 const std::string& hint) {
  using json = nlohmann::json;
  std::vector<std::set<std::string>> open_objects;  // keys seen, one set per open object
  std::string duplicate;
  json::parser_callback_t cb = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == json::parse_event_t::key && !open_objects.empty() && parsed.is_string()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  // nlohmann's lexer takes a NUL byte for the end of input, so "{...}\0junk" would parse;
  // JSON text never holds a raw NUL (inside strings it is written \u0000).
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    throw InputError(what + ": not valid JSON: a NUL byte at offset " + std::to_string(nul), hint);
  json j;
  try {
    j = json::parse(text.begin(), text.end(), cb);
  } catch (const json::exception& e) {
    throw InputError(what + ": not valid JSON: " + e.what(), hint);
  }
  if (!duplicate.empty()) throw InputError(what + ": key '" + duplicate + "' appears twice", hint);
  return j;
}

std::string describe_json(const nlohmann::json& value) {
  if (value.is_array()) return "an array of " + std::to_string(value.size());
  if (value.is_object()) return "an object of " + std::to_string(value.size()) + " keys";
  if (value.is_string()) {
    const std::string& s = value.get_ref<const std::string&>();
    if (s.size() > 64) return nlohmann::json(s.substr(0, 64))
                                  .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                              "...";
  }
  return value.dump();
}

}  // namespace zt
