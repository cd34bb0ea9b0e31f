#pragma once
// Errors with hints. Every failure zt reports names what failed, where (rank, host,
// file:line) and what to try. Library code throws; only the `zt` command decides how
// the process ends (see src/apps/main.cpp), never `exit()` deep in a library.
#include <stdexcept>
#include <string>
#include <string_view>

namespace zt {

// Process exit codes of the `zt` command.
enum class ExitCode : int {
  kOk = 0,
  kFailed = 1,    // a check failed, or a runtime failure (MPI, I/O, numerics)
  kBadInput = 2,  // bad usage, bad configuration, bad input file
};

// A failure with a hint. `what()` gives the whole message:
//   "[rank 3 on node7] MPI_Allreduce failed: MPI_ERR_TRUNCATE (comm.cpp:120)\n  HINT: ..."
// The hint is the advice alone: the "HINT: " label is added when printing (a hint that
// starts with "HINT:" has it removed, so no message reads "HINT: HINT:").
class Error : public std::runtime_error {
 public:
  Error(std::string message, std::string hint = {}, ExitCode code = ExitCode::kFailed);
  const std::string& message() const noexcept { return message_; }
  const std::string& hint() const noexcept { return hint_; }
  ExitCode exit_code() const noexcept { return code_; }

 private:
  std::string message_;
  std::string hint_;
  ExitCode code_;
};

// Bad usage or bad input from the user (exit code 2): a flag, a config key, a file.
class InputError : public Error {
 public:
  explicit InputError(std::string message, std::string hint = {})
      : Error(std::move(message), std::move(hint), ExitCode::kBadInput) {}
};

// "[rank R on HOST] " once the runtime has said who this process is, else "".
std::string where_prefix();

// Set once by the runtime after MPI initialisation; read by errors and logging.
void set_process_identity(int world_rank, std::string_view host);
int process_rank();                 // -1 before set_process_identity
const std::string& process_host();  // gethostname() before set_process_identity

// Throws zt::Error("<where>CALL failed: DETAIL (file:line)", hint).
[[noreturn]] void fail_call(std::string_view call, std::string_view detail,
                            std::string_view hint, const char* file, int line);

}  // namespace zt

// ZT_CHECK(cond, message, hint): an internal invariant or a precondition.
#define ZT_CHECK(cond, message, hint)                                             \
  do {                                                                            \
    if (!(cond)) ::zt::fail_call("check `" #cond "`", (message), (hint), __FILE__, \
                                 __LINE__);                                       \
  } while (0)
