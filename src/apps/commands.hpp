#pragma once
// Each subcommand registers itself on the `zt` CLI11 app and returns the function that
// runs it. The function returns the process exit code (zt::ExitCode) or throws
// zt::Error; main() turns errors into messages and exit codes.
#include <CLI/CLI.hpp>

#include <functional>
#include <vector>

namespace zt::apps {

using Run = std::function<int()>;

Run add_check_command(CLI::App& app);    // checklist/  : zt check
Run add_train_command(CLI::App& app);    // src/train/  : zt train
Run add_convert_command(CLI::App& app);  // src/data/   : zt convert ...
Run add_estimate_command(CLI::App& app); // src/estimate/: zt estimate

// Subcommands that join a command another layer created: each leaf with its function.
struct LeafRun {
  CLI::App* sub;
  Run run;
};
// src/ckpt/: zt convert h5-to-hf, zt convert hf-to-h5 (`convert` is add_convert_command's).
std::vector<LeafRun> add_hf_convert_commands(CLI::App& convert);

}  // namespace zt::apps
