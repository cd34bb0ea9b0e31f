// libFuzzer target: the TOML config loader (zt::config::Config::load_string and the
// `--set key=value` override parser) on arbitrary bytes.
//
// A schema with every key type, limits and choices stands in for a layer's schema (the
// loader's code paths depend on the key types, not on which layer defines them).
// Anything the loader rejects must be a zt::InputError; a document it accepts must come
// back unchanged through to_toml() -> load_string() (the resolved values are equal).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include "zt/core/config.hpp"
#include "zt/core/error.hpp"

namespace {

zt::config::Schema make_schema() {
  zt::config::Schema s;
  s.add_int("train.steps", 200, "steps").min = 1;
  s.add_int("model.vocab", std::nullopt, "vocab").min = 1;
  {
    auto& k = s.add_float("train.beta1", 0.9, "beta1");
    k.min = 0.0;
    k.max = 0.999999;
  }
  s.add_float("train.lr", 3e-3, "lr").min = 0.0;
  s.add_float("model.rope_theta", std::nullopt, "theta");
  s.add_bool("train.recompute", false, "recompute");
  s.add_string("model.preset", "tiny", "preset").choices = {"tiny", "llama-7b"};
  s.add_string("data.path", "", "path");
  s.add_string("name", std::nullopt, "a top-level key");
  s.add_int("a.b.c.d", 0, "a deep key");
  return s;
}

bool same(const zt::config::Value& a, const zt::config::Value& b) {
  if (a.index() != b.index()) return false;
  if (const double* x = std::get_if<double>(&a)) {
    const double y = std::get<double>(b);
    return (std::isnan(*x) && std::isnan(y)) || *x == y;
  }
  return a == b;
}

zt::config::Value value_of(const zt::config::Config& c, const zt::config::Key& k) {
  switch (k.type) {
    case zt::config::Type::kInt: return c.get_int(k.name);
    case zt::config::Type::kFloat: return c.get_float(k.name);
    case zt::config::Type::kBool: return c.get_bool(k.name);
    default: return c.get_string(k.name);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const zt::config::Schema schema = make_schema();
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  // 1. The whole input as a TOML document.
  zt::config::Config cfg(schema);
  bool accepted = true;
  try {
    cfg.load_string(text, "fuzz.toml");
  } catch (const zt::InputError&) {
    accepted = false;
  }
  if (accepted) {
    zt::config::Config again(schema);
    again.load_string(cfg.to_toml(), "round-trip.toml");  // must not throw
    for (const zt::config::Key& k : schema.keys()) {
      if (cfg.has(k.name) != again.has(k.name)) std::abort();
      if (cfg.has(k.name) && !same(value_of(cfg, k), value_of(again, k))) std::abort();
    }
  }

  // 2. Each line as a --set override.
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    zt::config::Config over(schema);
    try {
      over.apply_override(text.substr(start, end - start));
    } catch (const zt::InputError&) {
    }
    start = end + 1;
  }
  return 0;
}
