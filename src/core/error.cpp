#include "zt/core/error.hpp"

#include <unistd.h>

#include <array>
#include <filesystem>

namespace zt {
namespace {

struct Identity {
  int rank = -1;
  std::string host;
};

// Written once by the runtime at start-up, before any thread is started.
Identity& identity() {
  static Identity id = [] {
    Identity i;
    std::array<char, 256> name{};
    if (gethostname(name.data(), name.size() - 1) == 0) i.host = name.data();
    return i;
  }();
  return id;
}

// compose() and `zt`'s last message print a hint after "HINT: ", so a hint written with
// that label already would read "HINT: HINT: ...": the label (and the blanks after it)
// is dropped here, once for every error.
std::string without_label(std::string hint) {
  constexpr std::string_view kLabel = "HINT:";
  while (std::string_view(hint).starts_with(kLabel)) {
    const size_t text = hint.find_first_not_of(" \t", kLabel.size());
    hint.erase(0, text == std::string::npos ? hint.size() : text);
  }
  return hint;
}

std::string compose(const std::string& message, const std::string& hint) {
  std::string s = where_prefix() + message;
  if (!hint.empty()) s += "\n  HINT: " + hint;
  return s;
}

}  // namespace

Error::Error(std::string message, std::string hint, ExitCode code)
    : std::runtime_error(compose(message, without_label(hint))),
      message_(std::move(message)),
      hint_(without_label(std::move(hint))),
      code_(code) {}

std::string where_prefix() {
  const Identity& id = identity();
  if (id.rank < 0) return {};
  return "[rank " + std::to_string(id.rank) + " on " + id.host + "] ";
}

void set_process_identity(int world_rank, std::string_view host) {
  identity().rank = world_rank;
  identity().host = std::string(host);
}

int process_rank() { return identity().rank; }
const std::string& process_host() { return identity().host; }

void fail_call(std::string_view call, std::string_view detail, std::string_view hint,
               const char* file, int line) {
  std::string msg(call);
  msg += " failed";
  if (!detail.empty()) {
    msg += ": ";
    msg += detail;
  }
  msg += " (" + std::filesystem::path(file).filename().string() + ":" + std::to_string(line) + ")";
  throw Error(std::move(msg), std::string(hint));
}

}  // namespace zt
