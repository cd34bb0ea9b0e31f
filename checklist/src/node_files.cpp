// Kernel files, environment variables and their numbers for node health (node_files.hpp).
#include "node_files.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/log.hpp"

namespace zt::check {

std::optional<std::string> read_kernel_line(const std::string& path, std::string* why_not) {
  std::string text;
  try {
    // ReadFile: O_NONBLOCK open, fstat, a regular file only (else InputError naming it).
    ReadFile file(path, "kernel file", "");
    char buffer[kMaxKernelFileBytes + 1];
    while (text.size() <= kMaxKernelFileBytes) {
      const ssize_t got = ::read(file.fd(), buffer, sizeof buffer - text.size());
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        *why_not = strf("reading '%s' failed: %s", path.c_str(), std::strerror(errno));
        return std::nullopt;
      }
      if (got == 0) break;
      text.append(buffer, static_cast<size_t>(got));
    }
  } catch (const InputError& e) {
    *why_not = e.message();
    return std::nullopt;
  }
  if (text.size() > kMaxKernelFileBytes) {
    *why_not = strf("'%s' holds more than %zu bytes: not a sysfs attribute", path.c_str(), kMaxKernelFileBytes);
    return std::nullopt;
  }
  text = text.substr(0, text.find('\n'));
  text.erase(text.find_last_not_of(" \t\r") + 1);
  if (text.empty()) {
    *why_not = strf("'%s' is empty", path.c_str());
    return std::nullopt;
  }
  return text;
}

std::optional<uint64_t> parse_whole_number(std::string_view text) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  uint64_t v = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10) return std::nullopt;  // past 2^64-1
    v = v * 10 + digit;
  }
  return v;
}

std::optional<uint64_t> read_kernel_counter(const std::string& path, std::string* why_not) {
  const std::optional<std::string> text = read_kernel_line(path, why_not);
  if (!text) return std::nullopt;
  const std::optional<uint64_t> v = parse_whole_number(*text);
  if (!v) *why_not = strf("'%s' holds '%.40s', not a whole number below 2^64", path.c_str(), text->c_str());
  return v;
}

std::optional<uint64_t> env_whole_number(const char* name, uint64_t max, std::string* why_not) {
  const char* s = std::getenv(name);
  if (s == nullptr || *s == '\0') return std::nullopt;
  const std::optional<uint64_t> v = parse_whole_number(s);
  if (v && *v <= max) return v;
  *why_not = strf("%s='%.40s' is not a whole number in [0, %llu]", name, s,
                  static_cast<unsigned long long>(max));
  return std::nullopt;
}

}  // namespace zt::check
