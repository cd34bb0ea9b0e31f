// Size strings <-> bytes (see include/zt/core/units.hpp).
#include "zt/core/units.hpp"

#include <cctype>
#include <cstdio>
#include <limits>

#include "zt/core/error.hpp"

namespace zt {
namespace {

constexpr std::string_view kSizeHint =
    "write a whole number of bytes with an optional binary suffix: 8, 64K, 256M, 1G "
    "(K/M/G/T, optionally followed by B or iB; K = 1024)";

[[noreturn]] void bad_size(std::string_view text, std::string_view why) {
  throw InputError("bad size string '" + std::string(text) + "': " + std::string(why),
                   std::string(kSizeHint));
}

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

// Power of 1024 for a suffix letter, or -1 when it is not one.
int suffix_power(char c) {
  switch (lower(c)) {
    case 'k': return 1;
    case 'm': return 2;
    case 'g': return 3;
    case 't': return 4;
    default: return -1;
  }
}

}  // namespace

uint64_t parse_size(std::string_view text) {
  if (text.empty()) bad_size(text, "it is empty");
  size_t pos = 0;
  uint64_t value = 0;
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
    const uint64_t digit = static_cast<uint64_t>(text[pos] - '0');
    if (value > (kMax - digit) / 10) bad_size(text, "it does not fit in 64 bits");
    value = value * 10 + digit;
    ++pos;
  }
  if (pos == 0) {
    if (text[0] == '-') bad_size(text, "sizes cannot be negative");
    bad_size(text, "it does not start with a number");
  }
  std::string_view rest = text.substr(pos);
  if (!rest.empty() && rest[0] == '.') bad_size(text, "fractions are not accepted");

  int power = 0;
  if (!rest.empty() && suffix_power(rest[0]) > 0) {
    power = suffix_power(rest[0]);
    rest.remove_prefix(1);
    if (!rest.empty() && lower(rest[0]) == 'i') {
      rest.remove_prefix(1);
      if (rest.empty() || lower(rest[0]) != 'b') bad_size(text, "'i' must be followed by 'B'");
    }
  }
  if (!rest.empty() && lower(rest[0]) == 'b') rest.remove_prefix(1);
  if (!rest.empty()) bad_size(text, "unknown suffix '" + std::string(rest) + "'");

  for (int i = 0; i < power; ++i) {
    if (value > kMax / 1024) bad_size(text, "it does not fit in 64 bits");
    value *= 1024;
  }
  return value;
}

std::string format_size(uint64_t bytes) {
  static constexpr char kSuffix[] = {'\0', 'K', 'M', 'G', 'T'};
  int power = 0;
  uint64_t value = bytes;
  while (value != 0 && value % 1024 == 0 && power < 4) {
    value /= 1024;
    ++power;
  }
  std::string s = std::to_string(value);
  if (power > 0) s += kSuffix[power];
  return s;
}

std::string format_size_approx(uint64_t bytes) {
  static constexpr char kSuffix[] = {'\0', 'K', 'M', 'G', 'T'};
  if (bytes < 1024) return std::to_string(bytes);
  int power = 0;
  double value = static_cast<double>(bytes);
  while (value >= 1024.0 && power < 4) {
    value /= 1024.0;
    ++power;
  }
  char text[32];
  if (value == static_cast<double>(static_cast<uint64_t>(value)))
    std::snprintf(text, sizeof text, "%llu%c", static_cast<unsigned long long>(value), kSuffix[power]);
  else
    std::snprintf(text, sizeof text, "%.1f%c", value, kSuffix[power]);
  return text;
}

double in_unit(uint64_t bytes, BinaryUnit unit) {
  double scale = 1.0;
  for (int i = 0; i < static_cast<int>(unit); ++i) scale *= 1024.0;
  return static_cast<double>(bytes) / scale;
}

const char* unit_name(BinaryUnit unit) {
  switch (unit) {
    case BinaryUnit::kKiB: return "KiB";
    case BinaryUnit::kMiB: return "MiB";
    case BinaryUnit::kGiB: return "GiB";
  }
  return "?";
}

std::string format_binary(uint64_t bytes, BinaryUnit unit, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f %s", decimals, in_unit(bytes, unit), unit_name(unit));
  return text;
}

std::string format_si(uint64_t bytes) {
  const double x = static_cast<double>(bytes);
  char text[32];
  if (x < 1e3) std::snprintf(text, sizeof text, "%.0f B", x);
  else if (x < 1e6) std::snprintf(text, sizeof text, "%.0f kB", x / 1e3);
  else if (x < 1e9) std::snprintf(text, sizeof text, "%.2f MB", x / 1e6);
  else std::snprintf(text, sizeof text, "%.2f GB", x / 1e9);
  return text;
}

}  // namespace zt
