#pragma once
// Configuration: one schema of known keys, values from a TOML file and `--set a.b=c`
// overrides, resolved in that order (schema default < file < overrides, later --set wins).
//
// A key is a dotted path ("train.lr") naming a leaf of the TOML document:
//     [train]
//     lr = 3e-4          # the key train.lr
// Every key must be in the schema, with a type (int, float, bool, string), an optional
// default, a description and optional limits. Anything else is a zt::InputError (exit 2)
// naming the key and where it came from (the file, or --set):
//   - a key the schema does not know (with the nearest known key as a hint),
//   - a value of the wrong type (an int is accepted where a float is expected),
//   - a value outside the key's range or choices,
//   - a TOML syntax error (with file:line:column), a missing file.
//
// `--set key=value` parses `value` as a TOML value (so 3e-4 is a float, 10 an int, true
// a bool, "x" a string); text that is not a TOML value is taken as a string, so
// `--set model.preset=tiny` works without quotes. For a string key the text is always
// taken as written (`--set data.path=2024` is the string "2024").
//
// The layers define their own keys (src/train defines train.*, data.*, ...); this file is
// only the machinery.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace zt::config {

enum class Type { kInt, kFloat, kBool, kString };
std::string_view type_name(Type t);  // "int", "float", "bool", "string"

using Value = std::variant<int64_t, double, bool, std::string>;
// The value as TOML would write it: 3, 0.0003, true, "tiny".
std::string value_to_string(const Value& v);

struct Key {
  std::string name;                  // dotted: "train.lr"
  Type type = Type::kString;
  std::optional<Value> default_value;  // nullopt: unset unless given (e.g. preset overrides)
  std::string description;
  std::optional<double> min;           // numbers: inclusive lower limit
  std::optional<double> max;           // numbers: inclusive upper limit
  bool min_exclusive = false;          // numbers: the lower limit itself is refused (> min)
  std::vector<std::string> choices;    // strings: allowed values (empty: any)
};

class Schema {
 public:
  // Adds a key; a duplicate name is a programming error (zt::Error).
  Key& add(Key key);
  // Shorthands. `def` nullopt: the key has no default.
  Key& add_int(std::string name, std::optional<int64_t> def, std::string description);
  Key& add_float(std::string name, std::optional<double> def, std::string description);
  Key& add_bool(std::string name, std::optional<bool> def, std::string description);
  Key& add_string(std::string name, std::optional<std::string> def, std::string description);

  const Key* find(std::string_view name) const;  // nullptr when unknown
  const std::vector<Key>& keys() const { return keys_; }

  // The known key closest to `name` by edit distance ("" when none is close).
  std::string nearest(std::string_view name) const;

  // A plain table of every key: name, type, default, description (+ limits), one per line.
  std::string help() const;

 private:
  std::vector<Key> keys_;
};

// The resolved configuration: every key with a default or a given value.
class Config {
 public:
  explicit Config(const Schema& schema);  // defaults only

  // Reads a TOML file and sets every leaf it holds. Errors name `path`.
  void load_file(const std::string& path);
  // Parses the TOML text (errors name `origin`, e.g. the file name).
  void load_string(std::string_view toml_text, const std::string& origin);
  // Applies one "key=value" override (see the header comment). Errors name "--set".
  void apply_override(std::string_view assignment);
  // Sets one key; checks it is known, of the right type and within limits.
  void set(std::string_view key, const Value& value, const std::string& origin);

  bool has(std::string_view key) const;  // a default or a given value exists
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;  // int values convert
  bool get_bool(std::string_view key) const;
  const std::string& get_string(std::string_view key) const;
  // The value of a key of any type (zt::InputError when it has none).
  const Value& value(std::string_view key) const;
  // Where the value came from: "default", a file name, or "--set".
  const std::string& origin(std::string_view key) const;

  const Schema& schema() const { return *schema_; }

  // The resolved configuration as a TOML document (tables per first path component).
  std::string to_toml() const;

 private:
  const Value& lookup(std::string_view key, Type wanted) const;

  const Schema* schema_;
  std::map<std::string, Value, std::less<>> values_;
  std::map<std::string, std::string, std::less<>> origins_;
};

// Convenience: defaults, then `file` (if not empty), then each override in order.
Config load(const Schema& schema, const std::string& file,
            const std::vector<std::string>& overrides);

// Parses the value text of an override as TOML ("3e-4" -> 0.0003); not TOML -> string.
Value parse_value_text(std::string_view text);

}  // namespace zt::config
