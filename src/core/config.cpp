// Configuration machinery: schema, TOML file loading (toml++), `--set` overrides.
// See include/zt/core/config.hpp for the rules.
#include "zt/core/config.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/log.hpp"

namespace zt::config {
namespace {

constexpr const char* kListHint = "`zt train --help-config` lists every key with its type and default";

Type type_of(const Value& v) {
  switch (v.index()) {
    case 0: return Type::kInt;
    case 1: return Type::kFloat;
    case 2: return Type::kBool;
    default: return Type::kString;
  }
}

// Levenshtein distance, for "did you mean" hints.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0u : 1u)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string trim(std::string_view s) {
  const char* ws = " \t\r\n";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(ws);
  return std::string(s.substr(b, e - b + 1));
}

// A TOML node that is a leaf value -> Value; nullopt for arrays, dates and tables.
std::optional<Value> leaf_value(const toml::node& node) {
  if (auto v = node.as_integer()) return Value{static_cast<int64_t>(v->get())};
  if (auto v = node.as_floating_point()) return Value{static_cast<double>(v->get())};
  if (auto v = node.as_boolean()) return Value{static_cast<bool>(v->get())};
  if (auto v = node.as_string()) return Value{std::string(v->get())};
  return std::nullopt;
}

std::string where_in(const toml::node& node, const std::string& origin) {
  const auto& src = node.source();
  if (src.begin.line == 0) return origin;
  return strf("%s:%u:%u", origin.c_str(), static_cast<unsigned>(src.begin.line),
              static_cast<unsigned>(src.begin.column));
}

// A limit as written in messages: 1048576, not 1.04858e+06.
std::string limit_text(double x) {
  if (std::floor(x) == x && std::fabs(x) < 1e15) return strf("%.0f", x);
  return strf("%g", x);
}

}  // namespace

std::string_view type_name(Type t) {
  switch (t) {
    case Type::kInt: return "int";
    case Type::kFloat: return "float";
    case Type::kBool: return "bool";
    case Type::kString: return "string";
  }
  return "?";
}

std::string value_to_string(const Value& v) {
  switch (v.index()) {
    case 0: return std::to_string(std::get<int64_t>(v));
    case 1: {
      const double d = std::get<double>(v);
      if (std::isnan(d)) return "nan";
      if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
      if (std::floor(d) == d && std::fabs(d) < 1e15) return strf("%.1f", d);  // 300.0
      // Shortest text that reads back to the same double.
      std::string s;
      for (int prec = 1; prec <= 17; ++prec) {
        s = strf("%.*g", prec, d);
        if (std::strtod(s.c_str(), nullptr) == d) break;
      }
      if (s.find_first_of(".en") == std::string::npos) s += ".0";  // stay a TOML float
      return s;
    }
    case 2: return std::get<bool>(v) ? "true" : "false";
    default: {
      std::ostringstream os;
      os << toml::value<std::string>(std::get<std::string>(v));  // quoted and escaped
      return os.str();
    }
  }
}

// ---------------------------------------------------------------------------- Schema

Key& Schema::add(Key key) {
  ZT_CHECK(find(key.name) == nullptr, "config key '" + key.name + "' defined twice",
           "each key is defined once, by the layer that owns it");
  if (key.default_value && type_of(*key.default_value) != key.type)
    ZT_CHECK(false, "default of '" + key.name + "' has the wrong type", "fix the schema");
  keys_.push_back(std::move(key));
  return keys_.back();
}

Key& Schema::add_int(std::string name, std::optional<int64_t> def, std::string description) {
  Key k{std::move(name), Type::kInt, std::nullopt, std::move(description)};
  if (def) k.default_value = Value{*def};
  return add(std::move(k));
}

Key& Schema::add_float(std::string name, std::optional<double> def, std::string description) {
  Key k{std::move(name), Type::kFloat, std::nullopt, std::move(description)};
  if (def) k.default_value = Value{*def};
  return add(std::move(k));
}

Key& Schema::add_bool(std::string name, std::optional<bool> def, std::string description) {
  Key k{std::move(name), Type::kBool, std::nullopt, std::move(description)};
  if (def) k.default_value = Value{*def};
  return add(std::move(k));
}

Key& Schema::add_string(std::string name, std::optional<std::string> def,
                        std::string description) {
  Key k{std::move(name), Type::kString, std::nullopt, std::move(description)};
  if (def) k.default_value = Value{std::move(*def)};
  return add(std::move(k));
}

const Key* Schema::find(std::string_view name) const {
  for (const Key& k : keys_)
    if (k.name == name) return &k;
  return nullptr;
}

std::string Schema::nearest(std::string_view name) const {
  std::string best;
  size_t best_d = std::max<size_t>(2, name.size() / 3) + 1;
  for (const Key& k : keys_) {
    const size_t d = edit_distance(name, k.name);
    if (d < best_d) {
      best_d = d;
      best = k.name;
    }
  }
  return best;
}

std::string Schema::help() const {
  size_t wn = 3, wt = 4, wd = 7;
  std::vector<std::string> defaults;
  for (const Key& k : keys_) {
    defaults.push_back(k.default_value ? value_to_string(*k.default_value) : "(unset)");
    wn = std::max(wn, k.name.size());
    wt = std::max(wt, type_name(k.type).size());
    wd = std::max(wd, defaults.back().size());
  }
  std::string out = strf("%-*s  %-*s  %-*s  %s\n", static_cast<int>(wn), "key",
                         static_cast<int>(wt), "type", static_cast<int>(wd), "default",
                         "description");
  for (size_t i = 0; i < keys_.size(); ++i) {
    const Key& k = keys_[i];
    std::string desc = k.description;
    const char* open = k.min_exclusive ? "(" : "[";
    if (k.min && k.max)
      desc += strf(" %s%s, %s]", open, limit_text(*k.min).c_str(), limit_text(*k.max).c_str());
    else if (k.min)
      desc += strf(" [%s %s]", k.min_exclusive ? ">" : ">=", limit_text(*k.min).c_str());
    else if (k.max)
      desc += strf(" [<= %s]", limit_text(*k.max).c_str());
    if (!k.choices.empty()) {
      desc += " {";
      for (size_t c = 0; c < k.choices.size(); ++c) desc += (c ? "|" : "") + k.choices[c];
      desc += "}";
    }
    out += strf("%-*s  %-*s  %-*s  %s\n", static_cast<int>(wn), k.name.c_str(),
                static_cast<int>(wt), std::string(type_name(k.type)).c_str(),
                static_cast<int>(wd), defaults[i].c_str(), desc.c_str());
  }
  return out;
}

// ---------------------------------------------------------------------------- Config

Config::Config(const Schema& schema) : schema_(&schema) {
  for (const Key& k : schema.keys()) {
    if (!k.default_value) continue;
    values_[k.name] = *k.default_value;
    origins_[k.name] = "default";
  }
}

void Config::set(std::string_view name, const Value& given, const std::string& origin) {
  const Key* key = schema_->find(name);
  if (!key) {
    const std::string near = schema_->nearest(name);
    throw InputError(strf("unknown config key '%.*s' (in %s)", static_cast<int>(name.size()),
                          name.data(), origin.c_str()),
                     (near.empty() ? std::string() : "did you mean '" + near + "'? ") + kListHint);
  }
  Value value = given;
  // An int where a float is expected is fine (lr = 1 means 1.0).
  if (key->type == Type::kFloat && type_of(value) == Type::kInt)
    value = static_cast<double>(std::get<int64_t>(value));
  if (type_of(value) != key->type) {
    throw InputError(strf("config key '%s' (in %s) must be a %s, got %s %s", key->name.c_str(),
                          origin.c_str(), std::string(type_name(key->type)).c_str(),
                          std::string(type_name(type_of(value))).c_str(),
                          value_to_string(value).c_str()),
                     strf("%s: %s. %s", key->name.c_str(), key->description.c_str(), kListHint));
  }
  if (key->type == Type::kInt || key->type == Type::kFloat) {
    const double x = key->type == Type::kInt ? static_cast<double>(std::get<int64_t>(value))
                                             : std::get<double>(value);
    if (!std::isfinite(x))
      throw InputError(strf("config key '%s' (in %s) must be a finite number, got %s",
                            key->name.c_str(), origin.c_str(), value_to_string(value).c_str()),
                       key->description);
    const bool below = key->min && (key->min_exclusive ? x <= *key->min : x < *key->min);
    if (below || (key->max && x > *key->max)) {
      const char* open = key->min_exclusive ? "(" : "[";
      std::string range =
          key->min && key->max
              ? strf("in %s%s, %s]", open, limit_text(*key->min).c_str(),
                     limit_text(*key->max).c_str())
          : key->min ? strf("%s %s", key->min_exclusive ? ">" : ">=", limit_text(*key->min).c_str())
                     : strf("<= %s", limit_text(*key->max).c_str());
      throw InputError(strf("config key '%s' (in %s) must be %s, got %s", key->name.c_str(),
                            origin.c_str(), range.c_str(), value_to_string(value).c_str()),
                       key->description);
    }
  }
  if (key->type == Type::kString && !key->choices.empty()) {
    const std::string& s = std::get<std::string>(value);
    if (std::find(key->choices.begin(), key->choices.end(), s) == key->choices.end()) {
      std::string list;
      for (const std::string& c : key->choices) list += (list.empty() ? "" : ", ") + c;
      throw InputError(strf("config key '%s' (in %s) must be one of {%s}, got \"%s\"",
                            key->name.c_str(), origin.c_str(), list.c_str(), s.c_str()),
                       key->description);
    }
  }
  values_[key->name] = std::move(value);
  origins_[key->name] = origin;
}

void Config::load_file(const std::string& path) {
  // A directory would read as nothing (all defaults), a device or FIFO until memory runs
  // out; an empty file is most likely one a failed script truncated.
  load_string(read_regular_file(path, "config file (--config)",
                                "--config names a TOML file of keys (jobs/tiny.toml is an "
                                "example; relative paths are from the current directory); "
                                "leave it out to use the defaults",
                                /*allow_empty=*/false),
              path);
}

void Config::load_string(std::string_view toml_text, const std::string& origin) {
  toml::table root;
  try {
    root = toml::parse(toml_text, origin);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    throw InputError(strf("%s:%u:%u: TOML syntax error: %.*s", origin.c_str(),
                          static_cast<unsigned>(b.line), static_cast<unsigned>(b.column),
                          static_cast<int>(e.description().size()), e.description().data()),
                     "see https://toml.io for the syntax; strings need quotes in a file");
  }
  // Walk the tree; every leaf is one dotted key.
  struct Walker {
    Config& cfg;
    const std::string& origin;
    void walk(const toml::table& table, const std::string& prefix) {
      for (auto&& [k, node] : table) {
        const std::string name = prefix.empty() ? std::string(k.str())
                                                : prefix + "." + std::string(k.str());
        if (const toml::table* sub = node.as_table()) {
          walk(*sub, name);
          continue;
        }
        const std::string where = where_in(node, origin);
        std::optional<Value> v = leaf_value(node);
        if (!v) {
          // Unknown keys are reported as such, before their odd type.
          if (!cfg.schema().find(name)) cfg.set(name, Value{std::string()}, where);
          throw InputError(strf("config key '%s' (in %s) has an unsupported value type "
                                "(arrays, dates and inline tables are not used)",
                                name.c_str(), where.c_str()),
                           kListHint);
        }
        cfg.set(name, *v, where);
      }
    }
  };
  Walker{*this, origin}.walk(root, "");
}

Value parse_value_text(std::string_view text) {
  const std::string t = trim(text);
  if (t.empty() || t.find('\n') != std::string::npos) return Value{t};
  try {
    toml::table tbl = toml::parse("v = " + t);
    if (tbl.size() == 1)
      if (const toml::node* n = tbl.get("v"))
        if (std::optional<Value> v = leaf_value(*n)) return *v;
  } catch (const toml::parse_error&) {
    // Not a TOML value: a bare string.
  }
  return Value{t};
}

void Config::apply_override(std::string_view assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string_view::npos)
    throw InputError(strf("--set '%.*s' is not of the form key=value",
                          static_cast<int>(assignment.size()), assignment.data()),
                     "write e.g. --set train.lr=3e-4 or --set model.preset=tiny");
  const std::string name = trim(assignment.substr(0, eq));
  const std::string text = trim(assignment.substr(eq + 1));
  Value v = parse_value_text(text);
  const Key* key = schema_->find(name);
  if (key && key->type == Type::kString && type_of(v) != Type::kString) v = Value{text};
  set(name, v, "--set");
}

bool Config::has(std::string_view key) const { return values_.find(key) != values_.end(); }

const Value& Config::lookup(std::string_view name, Type wanted) const {
  const Key* key = schema_->find(name);
  ZT_CHECK(key != nullptr, "config key '" + std::string(name) + "' is not in the schema",
           "add it to the schema of the layer that reads it");
  ZT_CHECK(key->type == wanted || (wanted == Type::kFloat && key->type == Type::kInt),
           "config key '" + std::string(name) + "' read as " + std::string(type_name(wanted)) +
               " but declared " + std::string(type_name(key->type)),
           "read a key with the getter of its declared type");
  auto it = values_.find(name);
  if (it == values_.end())
    throw InputError("config key '" + std::string(name) + "' has no value",
                     "set it in the config file or with --set " + std::string(name) + "=...");
  return it->second;
}

int64_t Config::get_int(std::string_view key) const {
  return std::get<int64_t>(lookup(key, Type::kInt));
}

const Value& Config::value(std::string_view name) const {
  const Key* key = schema_->find(name);
  ZT_CHECK(key != nullptr, "config key '" + std::string(name) + "' is not in the schema",
           "add it to the schema of the layer that reads it");
  return lookup(name, key->type);
}

double Config::get_float(std::string_view key) const {
  const Value& v = lookup(key, Type::kFloat);
  if (const int64_t* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}

bool Config::get_bool(std::string_view key) const {
  return std::get<bool>(lookup(key, Type::kBool));
}

const std::string& Config::get_string(std::string_view key) const {
  return std::get<std::string>(lookup(key, Type::kString));
}

const std::string& Config::origin(std::string_view key) const {
  static const std::string kUnset = "unset";
  auto it = origins_.find(key);
  return it == origins_.end() ? kUnset : it->second;
}

std::string Config::to_toml() const {
  // Group by first path component, in schema order.
  std::vector<std::string> sections;
  for (const Key& k : schema_->keys()) {
    const std::string sec = k.name.substr(0, k.name.find('.'));
    if (std::find(sections.begin(), sections.end(), sec) == sections.end())
      sections.push_back(sec);
  }
  std::string out;
  for (const std::string& sec : sections) {
    std::string body;
    for (const Key& k : schema_->keys()) {
      const size_t dot = k.name.find('.');
      if (k.name.substr(0, dot) != sec) continue;
      auto it = values_.find(k.name);
      if (it == values_.end()) continue;
      if (dot == std::string::npos) continue;  // top-level keys are written first
      body += k.name.substr(dot + 1) + " = " + value_to_string(it->second) + "\n";
    }
    if (!body.empty()) out += (out.empty() ? "" : "\n") + ("[" + sec + "]\n") + body;
  }
  std::string top;
  for (const Key& k : schema_->keys()) {
    if (k.name.find('.') != std::string::npos) continue;
    auto it = values_.find(k.name);
    if (it != values_.end()) top += k.name + " = " + value_to_string(it->second) + "\n";
  }
  return top.empty() ? out : top + "\n" + out;
}

Config load(const Schema& schema, const std::string& file,
            const std::vector<std::string>& overrides) {
  Config cfg(schema);
  if (!file.empty()) cfg.load_file(file);
  for (const std::string& o : overrides) cfg.apply_override(o);
  return cfg;
}

}  // namespace zt::config
