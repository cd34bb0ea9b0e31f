// The one gnuplot runner (see gnuplot.hpp).
#include "zt/core/gnuplot.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/log.hpp"

namespace zt {
namespace {

// The program to run as an absolute path, resolved in zt's own working folder ("" when
// there is none): $ZT_GNUPLOT or gnuplot; a name without '/' is looked up in PATH.
std::string resolve_program(std::string* shown) {
  const char* chosen = std::getenv("ZT_GNUPLOT");
  const std::string name = chosen != nullptr && *chosen != '\0' ? chosen : "gnuplot";
  *shown = chosen != nullptr && *chosen != '\0' ? " (ZT_GNUPLOT='" + name + "')" : "";
  const auto runnable = [](const std::filesystem::path& p) {
    struct stat st{};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  std::error_code ec;
  if (name.find('/') != std::string::npos) {
    const std::filesystem::path p = std::filesystem::absolute(name, ec);
    return !ec && runnable(p) ? p.string() : std::string();
  }
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env != nullptr ? path_env : "/usr/bin:/bin";
  for (size_t start = 0; start <= path.size();) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    const std::string folder = end > start ? path.substr(start, end - start) : ".";
    const std::filesystem::path p = std::filesystem::absolute(std::filesystem::path(folder) / name, ec);
    if (!ec && runnable(p)) return p.string();
    start = end + 1;
  }
  return {};
}

// Runs `program plots.gp` in the folder `work`, stdout and stderr into plots.log there;
// the child gets SIGKILL when zt dies. Returns its exit status, or -1 with errno set when
// it could not be started.
int spawn_gnuplot(const std::string& program, const std::filesystem::path& work) {
  const std::string log = (work / "plots.log").string(), work_dir = work.string();
  char script[] = "plots.gp";
  char* argv[] = {const_cast<char*>(program.c_str()), script, nullptr};
  const pid_t parent = ::getpid();
  const pid_t pid = ::vfork();
  if (pid < 0) return -1;
  if (pid == 0) {  // the child: system calls only, then exec
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(126);
    if (::chdir(work_dir.c_str()) != 0) ::_exit(126);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0666);
    if (fd < 0 || ::dup2(fd, 1) < 0 || ::dup2(fd, 2) < 0) ::_exit(126);
    ::execv(program.c_str(), argv);
    ::_exit(127);
  }
  set_signal_child(pid);
  int status = 0;
  int rc = 0;
  while ((rc = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {}
  set_signal_child(0);
  if (rc < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// "<prefix><host>.<pid>." of this process's staging folders.
std::string stage_prefix() { return ".zt-stage." + process_host() + "."; }

// Removes staging folders of this host whose process no longer runs.
void remove_stale_stages(const std::filesystem::path& dir) {
  const std::string prefix = stage_prefix();
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid <= 0 || pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) continue;
    std::error_code rm;
    std::filesystem::remove_all(e.path(), rm);  // never follows a link inside it
    if (!rm) log::warn("removed '" + e.path().string() + "', the staging folder of a zt process that no longer runs");
  }
}

}  // namespace

StagingFolder::StagingFolder(const std::filesystem::path& dir) : dir_(dir) {
  remove_stale_stages(dir);
  std::string name = (dir / (stage_prefix() + std::to_string(::getpid()) + ".XXXXXX")).string();
  if (::mkdtemp(name.data()) == nullptr)
    throw Error(strf("mkdtemp('%s') failed for the staging folder: %s (errno %d)", name.c_str(),
                     std::strerror(errno), errno),
                "check free space and permissions of the report directory");
  path_ = std::filesystem::absolute(name);  // gnuplot runs in it: its log's path must not be relative
  set_signal_staging_folder(path_.c_str());
}

StagingFolder::~StagingFolder() {
  set_signal_staging_folder(nullptr);
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);  // never follows a link inside it
}

std::vector<std::string> StagingFolder::publish_all() const {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(path_)) {
    struct stat st{};
    if (::lstat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    names.push_back(e.path().filename().string());
  }
  for (const std::string& n : names) publish_file((path_ / n).string(), (dir_ / n).string());
  return names;
}

bool png_complete(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (b.size() < 8 || b.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) return false;
  for (size_t at = 8; at + 12 <= b.size();) {
    const auto u = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(b[k])); };
    const uint64_t length = (u(at) << 24) | (u(at + 1) << 16) | (u(at + 2) << 8) | u(at + 3);
    const uint64_t next = at + 12 + length;
    if (next > b.size()) return false;
    if (b.compare(at + 4, 4, "IEND") == 0) return next == b.size();
    at = next;
  }
  return false;
}

GnuplotResult draw_in(const std::filesystem::path& work,
                      const std::vector<std::pair<std::string, std::string>>& inputs,
                      const std::vector<std::string>& outputs) {
  GnuplotResult result;
  for (const auto& [name, contents] : inputs)
    write_file_safely((work / name).string(), contents, "plot input");
  std::string shown;
  const std::string program = resolve_program(&shown);
  const int status = program.empty() ? -1 : spawn_gnuplot(program, work);
  size_t incomplete = 0;
  for (const std::string& png : outputs) {
    const std::filesystem::path p = work / png;
    if (png_complete(p.string())) {
      result.drawn.push_back(png);
    } else {
      std::error_code ec;
      if (std::filesystem::remove(p, ec)) ++incomplete;
    }
  }
  if (program.empty() || status == 127)
    result.note = "gnuplot not found" + shown + ": plots not drawn (data and script are in plots.gp; "
                  "HINT: apt-get install gnuplot-nox or set ZT_GNUPLOT to its path, then run "
                  "gnuplot plots.gp in the report directory)";
  else if (status != 0)
    result.note = strf("gnuplot failed (exit %d): see plots.log", status);
  else if (result.drawn.size() != outputs.size())
    result.note = strf("gnuplot drew only %zu of the %zu plots%s: see plots.log", result.drawn.size(),
                       outputs.size(), incomplete ? strf(" (%zu incomplete, left out: a full disk?)", incomplete).c_str() : "");
  return result;
}

GnuplotResult run_gnuplot(const std::filesystem::path& dir,
                          const std::vector<std::pair<std::string, std::string>>& inputs,
                          const std::vector<std::string>& outputs) {
  const StagingFolder work(dir);
  GnuplotResult result = draw_in(work.path(), inputs, outputs);
  work.publish_all();
  return result;
}

}  // namespace zt
