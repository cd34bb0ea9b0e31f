// The one rule for numeric options (see options.hpp).
#include "options.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/log_stdout.hpp"
#include "zt/core/units.hpp"

namespace zt::apps {
namespace {

// 1048576 for whole numbers, else %g: the limits as --help and messages show them.
std::string limit_text(double x) {
  if (std::floor(x) == x && std::fabs(x) < 1e18) return strf("%.0f", x);
  return strf("%g", x);
}

std::string range_text(double lo, double hi) {
  return "[" + limit_text(lo) + ", " + limit_text(hi) + "]";
}

}  // namespace

CLI::Validator int_in(int64_t lo, int64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& value) -> std::string {
        const char* s = value.c_str();
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(s, &end, 10);
        if (value.empty() || end == s || *end != '\0' || value.find_first_of(" \t") != std::string::npos)
          return "must be a whole number in " + range + ", got '" + value + "'";
        if (errno == ERANGE || v < lo || v > hi)
          return "must be a whole number in " + range + ", got " + value;
        return {};
      },
      "in " + range);
}

namespace {

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  size_t at = 0;
  for (;;) {
    const size_t comma = text.find(',', at);
    parts.push_back(text.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) return parts;
    at = comma + 1;
  }
}

}  // namespace

CLI::Validator int_list_in(int64_t lo, int64_t hi) {
  const CLI::Validator one = int_in(lo, hi);
  return CLI::Validator(
      [one](std::string& value) -> std::string {
        for (std::string part : split_commas(value)) {
          const std::string error = one(part);
          if (!error.empty()) return error;
        }
        return {};
      },
      "INT list in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

std::vector<int64_t> int_list(const std::vector<std::string>& texts) {
  std::vector<int64_t> out;
  for (const std::string& text : texts)
    for (const std::string& part : split_commas(text)) out.push_back(std::strtoll(part.c_str(), nullptr, 10));
  return out;
}

CLI::Validator number_in(double lo, double hi) {
  const std::string range = range_text(lo, hi);
  return CLI::Validator(
      [lo, hi, range](std::string& value) -> std::string {
        const char* s = value.c_str();
        char* end = nullptr;
        const double v = std::strtod(s, &end);
        if (value.empty() || end == s || *end != '\0')
          return "must be a number in " + range + ", got '" + value + "'";
        if (!std::isfinite(v)) return "must be a finite number in " + range + ", got " + value;
        if (v < lo || v > hi) return "must be a number in " + range + ", got " + value;
        return {};
      },
      "in " + range);
}

CLI::Validator size_in(uint64_t lo, uint64_t hi) {
  const std::string range = "[" + format_size(lo) + ", " + format_size(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& value) -> std::string {
        uint64_t v = 0;
        try {
          v = parse_size(value);
        } catch (const InputError& e) {
          return e.message() + (e.hint().empty() ? "" : " (" + e.hint() + ")");
        }
        if (v < lo || v > hi) return "must be a size in " + range + " bytes, got " + value;
        return {};
      },
      "SIZE in " + range);
}

void refuse_empty_values(CLI::App& app) {
  for (CLI::Option* opt : app.get_options())
    if (opt->get_type_size() != 0 && opt->get_name() != "--help")
      opt->check(CLI::Validator(
          [](std::string& value) -> std::string {
            return value.empty() ? "an empty value: give one, or leave the option out" : "";
          },
          ""));
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) refuse_empty_values(*sub);
}

void reserve_stdout_for_machine_modes(const CLI::App& app) {
  const struct {
    const char* command;  // a subcommand's path below zt, e.g. "generate"
    const char* option;
    const char* value;    // nullptr: the flag given
  } modes[] = {{"generate", "--json", nullptr}, {"estimate", "--json", nullptr}, {"check", "--exit-codes", "nagios"}};
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App* s) { return s->parsed(); }))
    for (const auto& m : modes) {
      const CLI::Option* opt = sub->get_name() == m.command ? sub->get_option_no_throw(m.option) : nullptr;
      if (opt == nullptr || opt->count() == 0) continue;
      if (m.value == nullptr || (!opt->results().empty() && opt->results().back() == m.value)) log::reserve_stdout();
    }
}

void warn_inert_options(const CLI::App& sub, const std::vector<InertOption>& rules) {
  for (const InertOption& r : rules) {
    const CLI::Option* opt = sub.get_option_no_throw(r.option);
    if (opt == nullptr || opt->count() == 0 || !r.inert) continue;
    std::string value;
    for (const std::string& v : opt->results()) value += (value.empty() ? " " : ",") + v;
    log::warn(std::string(r.option) + value + " has no effect in this run: " + r.why);
  }
}

std::vector<std::pair<std::string, std::string>> option_values(const CLI::App& app) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_name() == "--help") continue;
    std::string value;
    if (opt->count() > 0) {
      for (const std::string& r : opt->results()) value += (value.empty() ? "" : ",") + r;
    } else {
      value = opt->get_default_str();
    }
    out.emplace_back(opt->get_name(), value);
  }
  return out;
}

}  // namespace zt::apps
