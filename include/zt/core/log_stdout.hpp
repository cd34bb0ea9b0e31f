#pragma once
// Who owns stdout (zt/core/log.hpp's info() and info_all() write there by default).
namespace zt::log {

// A machine-readable mode (`zt generate --json`, `zt check --exit-codes nagios`, ...) owns
// stdout: from this call on, info() and info_all() lines go to stderr, so stdout holds
// only the command's documented output.
void reserve_stdout();

}  // namespace zt::log
