// The one gnuplot runner (see gnuplot.hpp).
#include "zt/core/gnuplot.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/log.hpp"

extern char** environ;

namespace zt {
namespace {

// Runs `gnuplot plots.gp` in the folder `work` with stdout and stderr into plots.log
// there; returns its exit status, or -1 with errno set when it could not be started.
int spawn_gnuplot(const std::filesystem::path& work) {
  posix_spawn_file_actions_t actions;
  if (const int rc = posix_spawn_file_actions_init(&actions); rc != 0) {
    errno = rc;
    return -1;
  }
  const std::string log = (work / "plots.log").string();
  const std::string work_dir = work.string();
  int rc = posix_spawn_file_actions_addchdir_np(&actions, work_dir.c_str());
  if (rc == 0)
    rc = posix_spawn_file_actions_addopen(&actions, 1, log.c_str(),
                                          O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0666);
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(&actions, 1, 2);
  if (rc != 0) {
    posix_spawn_file_actions_destroy(&actions);
    errno = rc;
    return -1;
  }
  const char* chosen = std::getenv("ZT_GNUPLOT");
  const std::string program = chosen != nullptr && *chosen != '\0' ? chosen : "gnuplot";
  char script[] = "plots.gp";
  char* argv[] = {const_cast<char*>(program.c_str()), script, nullptr};
  pid_t pid = 0;
  rc = posix_spawnp(&pid, program.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    errno = rc;
    return -1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A private folder inside the output directory, removed (with what is left in it) at
// scope exit.
struct PrivateFolder {
  std::filesystem::path path;
  explicit PrivateFolder(const std::filesystem::path& dir) {
    std::string name = (dir / ".plots.XXXXXX").string();
    if (::mkdtemp(name.data()) == nullptr)
      throw Error(strf("cannot make a private folder '%s' for the plots: %s (errno %d)", name.c_str(),
                       std::strerror(errno), errno),
                  "check free space and permissions of the report directory");
    path = std::filesystem::absolute(name);  // gnuplot runs in it: its log's path must not be relative
  }
  ~PrivateFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);  // never follows a link inside it
  }
  PrivateFolder(const PrivateFolder&) = delete;
  PrivateFolder& operator=(const PrivateFolder&) = delete;
};

// Moves `name` from `work` into `dir` when it is a regular file there; true if moved.
bool move_result(const std::filesystem::path& work, const std::filesystem::path& dir,
                 const std::string& name) {
  struct stat st{};
  const std::string from = (work / name).string();
  if (::lstat(from.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  publish_file(from, (dir / name).string());
  return true;
}

}  // namespace

GnuplotResult run_gnuplot(const std::filesystem::path& dir,
                          const std::vector<std::pair<std::string, std::string>>& inputs,
                          const std::vector<std::string>& outputs) {
  GnuplotResult result;
  const PrivateFolder work(dir);
  for (const auto& [name, contents] : inputs)
    write_file_safely((work.path / name).string(), contents, "plot input");
  const int status = spawn_gnuplot(work.path);
  for (const auto& input : inputs) move_result(work.path, dir, input.first);
  move_result(work.path, dir, "plots.log");
  for (const std::string& png : outputs)
    if (move_result(work.path, dir, png)) result.drawn.push_back(png);
  if (status < 0 || status == 127)
    result.note = "gnuplot not found: plots not drawn (data and script are in plots.gp; "
                  "HINT: apt-get install gnuplot-nox, then run gnuplot plots.gp in the report directory)";
  else if (status != 0)
    result.note = strf("gnuplot failed (exit %d): see plots.log", status);
  else if (result.drawn.size() != outputs.size())
    result.note = "gnuplot drew only some of the plots: see plots.log";
  return result;
}

}  // namespace zt
