#pragma once
// The subcommands of `zt`, one file each in src/apps: each registers itself on the CLI11
// app and returns the function that runs it. The function returns the process exit code
// (zt::ExitCode) or throws zt::Error; main() turns errors into messages and exit codes.
// apps is the top floor: no layer includes this header.
#include <CLI/CLI.hpp>

#include <functional>

namespace zt::apps {

using Run = std::function<int()>;

// How errors end the process. zt's codes: usage 2, failure 1. `zt check --exit-codes
// nagios` (gcm's contract, where 2 means unhealthy) moves them: a usage error exits 64
// (EX_USAGE of sysexits.h), an error that stopped the check 3 (unknown).
struct ErrorExitCodes {
  int usage = 2;
  int failure = 1;
};
inline ErrorExitCodes& error_exit_codes() {
  static ErrorExitCodes codes;
  return codes;
}
constexpr ErrorExitCodes kNagiosErrorExitCodes{64, 3};

Run add_check_command(CLI::App& app);     // check_command.cpp    : zt check
Run add_train_command(CLI::App& app);     // train_command.cpp    : zt train
Run add_convert_command(CLI::App& app);   // convert_command.cpp  : zt convert ...
Run add_estimate_command(CLI::App& app);  // estimate_command.cpp : zt estimate
Run add_generate_command(CLI::App& app);  // generate_command.cpp : zt generate
Run add_report_command(CLI::App& app);    // report_command.cpp   : zt report

}  // namespace zt::apps
