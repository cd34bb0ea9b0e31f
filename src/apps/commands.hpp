#pragma once
// The subcommands of `zt`, one file each in src/apps: each registers itself on the CLI11
// app and returns the function that runs it. The function returns the process exit code
// (zt::ExitCode) or throws zt::Error; main() turns errors into messages and exit codes.
// apps is the top floor: no layer includes this header.
#include <CLI/CLI.hpp>

#include <functional>

namespace zt::apps {

using Run = std::function<int()>;

Run add_check_command(CLI::App& app);     // check_command.cpp    : zt check
Run add_train_command(CLI::App& app);     // train_command.cpp    : zt train
Run add_convert_command(CLI::App& app);   // convert_command.cpp  : zt convert ...
Run add_estimate_command(CLI::App& app);  // estimate_command.cpp : zt estimate

}  // namespace zt::apps
