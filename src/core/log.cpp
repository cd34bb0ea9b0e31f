#include "zt/core/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "zt/core/error.hpp"
#include "zt/core/log_stdout.hpp"

namespace zt {

std::string vstrf(const char* fmt, va_list args) {
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  if (n <= 0) return {};
  std::string out(static_cast<size_t>(n), '\0');
  std::vsnprintf(out.data(), out.size() + 1, fmt, args);
  return out;
}

std::string strf(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string s = vstrf(fmt, args);
  va_end(args);
  return s;
}

namespace log {
namespace {

Level initial_level() {
  const char* env = std::getenv("ZT_LOG_LEVEL");
  if (!env) return Level::kInfo;
  if (!std::strcmp(env, "debug")) return Level::kDebug;
  if (!std::strcmp(env, "warn")) return Level::kWarn;
  if (!std::strcmp(env, "error")) return Level::kError;
  return Level::kInfo;
}

Level& current() {
  static Level l = initial_level();
  return l;
}

// stdout, or stderr once a machine-readable mode owns stdout.
std::atomic<bool>& stdout_reserved() {
  static std::atomic<bool> reserved{false};
  return reserved;
}
FILE* info_stream() { return stdout_reserved().load() ? stderr : stdout; }

std::mutex& io_mutex() {
  static std::mutex m;
  return m;
}

void emit(FILE* f, std::string_view prefix, std::string_view line) {
  std::lock_guard<std::mutex> lock(io_mutex());
  std::fprintf(f, "%.*s%.*s\n", static_cast<int>(prefix.size()), prefix.data(),
               static_cast<int>(line.size()), line.data());
  std::fflush(f);
}

}  // namespace

void set_level(Level level) { current() = level; }
void reserve_stdout() { stdout_reserved().store(true); }
Level level() { return current(); }

void debug(std::string_view line) {
  if (current() <= Level::kDebug) emit(stderr, where_prefix() + "debug: ", line);
}
void info(std::string_view line) {
  if (current() <= Level::kInfo && process_rank() <= 0) emit(info_stream(), "", line);
}
void info_all(std::string_view line) {
  if (current() <= Level::kInfo) emit(info_stream(), where_prefix(), line);
}
void warn(std::string_view line) {
  if (current() <= Level::kWarn) emit(stderr, where_prefix() + "WARNING: ", line);
}
void error(std::string_view line) { emit(stderr, where_prefix() + "ERROR: ", line); }

}  // namespace log
}  // namespace zt
