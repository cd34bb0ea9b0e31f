// zt: the one command. Subcommands: check, train, convert, estimate, generate (one file
// each here).
//
// Exit codes: 0 success; 1 a check failed or a runtime failure; 2 bad usage or input
// (`zt check --exit-codes nagios`: 0/1/2/3 healthy/warning/unhealthy/unknown, usage 64).
// A failure seen after MPI started ends every rank (MPI_Abort with the exit code), so a
// rank that failed alone never leaves the others waiting in a collective.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "commands.hpp"
#include "options.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/version.hpp"

namespace {

int mpi_world_size_if_running() {
  int initialized = 0, finalized = 0;
  if (MPI_Initialized(&initialized) != MPI_SUCCESS || !initialized) return 0;
  if (MPI_Finalized(&finalized) != MPI_SUCCESS || finalized) return 0;
  int size = 0;
  if (MPI_Comm_size(MPI_COMM_WORLD, &size) != MPI_SUCCESS) return 0;
  return size;
}

int fail(const zt::Error& e) {
  zt::log::error(e.message() + (e.hint().empty() ? "" : "\n  HINT: " + e.hint()));
  const zt::apps::ErrorExitCodes& codes = zt::apps::error_exit_codes();
  const int code = e.exit_code() == zt::ExitCode::kBadInput ? codes.usage
                   : e.exit_code() == zt::ExitCode::kFailed ? codes.failure
                                                            : static_cast<int>(e.exit_code());
  // The Runtime left MPI running while the error unwound (see Runtime::~Runtime): with
  // other ranks, end them all; alone, finalize cleanly.
  const int size = mpi_world_size_if_running();
  if (size > 1) MPI_Abort(MPI_COMM_WORLD, code);
  if (size == 1) MPI_Finalize();
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zt: check a GPU cluster, then train Llama-style models with ZeRO-3"};
  app.set_version_flag("--version", std::string("zt ") + zt::kVersion + " (" + zt::kGitCommit + ")");
  app.require_subcommand(1);

  // Every subcommand, with the function that runs it.
  struct Entry {
    CLI::App* sub;
    zt::apps::Run run;
  };
  std::vector<Entry> entries;
  for (auto add : {zt::apps::add_check_command, zt::apps::add_train_command,
                   zt::apps::add_convert_command, zt::apps::add_estimate_command,
                   zt::apps::add_generate_command, zt::apps::add_report_command}) {
    zt::apps::Run run = add(app);
    // get_subcommands() with no filter lists only the *parsed* ones; this lists all.
    entries.push_back({app.get_subcommands([](CLI::App*) { return true; }).back(), std::move(run)});
  }
  zt::apps::refuse_empty_values(app);

  // An unknown subcommand: CLI11 would only say that one is required, without the word.
  if (argc > 1 && argv[1][0] != '-') {
    const std::string word = argv[1];
    bool known = false;
    std::string names;
    for (const Entry& entry : entries) {
      known = known || entry.sub->check_name(word);
      names += (names.empty() ? "" : ", ") + entry.sub->get_name();
    }
    if (!known) {
      zt::log::error("'" + word + "' is not a zt command\n  HINT: the commands are " + names +
                     "; `zt --help` describes them, `zt COMMAND --help` each one");
      return static_cast<int>(zt::ExitCode::kBadInput);
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Usage errors happen on every rank alike, before MPI starts: exit 2 everywhere
    // (64 for `zt check --exit-codes nagios`, whose 2 means unhealthy: CLI11 keeps the
    // values it read before the error, so the flag is seen wherever it stood).
    const int rc = app.exit(e);
    if (rc == 0) return 0;
    for (const Entry& entry : entries) {
      if (entry.sub->get_name() != "check") continue;
      const CLI::Option* style = entry.sub->get_option_no_throw("--exit-codes");
      if (style != nullptr && !style->results().empty() && style->results().back() == "nagios")
        return zt::apps::kNagiosErrorExitCodes.usage;
    }
    return static_cast<int>(zt::ExitCode::kBadInput);
  }
  zt::apps::reserve_stdout_for_machine_modes(app);

  // Out of memory: the hint names the command's own options (issue 36, class 10).
  const auto memory_hint = [&entries]() -> std::string {
    std::string name;
    for (const Entry& entry : entries)
      if (entry.sub->parsed()) name = entry.sub->get_name();
    if (name == "check")
      return "lower --max-bytes (and --pair-bytes, --straggler-bytes, --copy-bytes): the sweep "
             "holds buffers of the largest size on every rank";
    if (name == "generate")
      return "a smaller model, or fewer tokens (--max-new-tokens, --window)";
    if (name == "convert") return "convert fewer or smaller files at once";
    return "reduce train.micro_batch or the model size; `zt estimate` tells what fits";
  };
  try {
    for (const Entry& entry : entries)
      if (entry.sub->parsed()) return entry.run();
    return static_cast<int>(zt::ExitCode::kBadInput);
  } catch (const zt::Error& e) {
    return fail(e);
  } catch (const std::bad_alloc&) {
    return fail(zt::Error("out of host memory", memory_hint()));
  } catch (const std::exception& e) {
    return fail(zt::Error(std::string("unexpected error: ") + e.what()));
  }
}
