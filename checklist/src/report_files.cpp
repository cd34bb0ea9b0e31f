// The report directory: created up front (bad path = exit 2), then report.json and
// report.md written without ever following a symlink inside it.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "zt/check/report_writer.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::check {
namespace {

// Closes a file descriptor on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

[[noreturn]] void io_fail(const std::filesystem::path& dir, const std::string& name,
                          const char* what, int err) {
  throw Error(strf("cannot write %s in report directory %s: %s: %s", name.c_str(),
                   dir.c_str(), what, std::strerror(err)),
              "check free space and permissions of the report directory; a directory named " +
                  name + " there blocks the report");
}

// Writes `text` to dir/name through a temporary file and renameat.
void write_file_in(int dir_fd, const std::filesystem::path& dir, const std::string& name,
                   const std::string& text) {
  const std::string tmp = "." + name + ".tmp." + std::to_string(::getpid());
  // Mode 0666: the user's umask decides, as for any file a tool creates.
  Fd fd(::openat(dir_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666));
  if (fd.fd < 0) io_fail(dir, name, "openat(temporary file)", errno);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd.fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::unlinkat(dir_fd, tmp.c_str(), 0);
      io_fail(dir, name, "write", err);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.fd) != 0) {
    const int err = errno;
    ::unlinkat(dir_fd, tmp.c_str(), 0);
    io_fail(dir, name, "fsync", err);
  }
  // renameat replaces a symlink at `name` itself; it never writes through it.
  if (::renameat(dir_fd, tmp.c_str(), dir_fd, name.c_str()) != 0) {
    const int err = errno;
    ::unlinkat(dir_fd, tmp.c_str(), 0);
    io_fail(dir, name, "renameat", err);
  }
}

}  // namespace

std::filesystem::path prepare_report_dir(const std::string& dir) {
  const std::string hint = "give --report a directory you can write to; it is created if missing";
  if (dir.empty()) throw InputError("--report needs a directory name", hint);
  const std::filesystem::path path(dir);
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec)
    throw InputError("cannot create report directory '" + dir + "': " + ec.message(), hint);
  if (!std::filesystem::is_directory(path, ec))
    throw InputError("report path '" + dir + "' exists and is not a directory", hint);
  if (::access(path.c_str(), W_OK | X_OK) != 0)
    throw InputError("report directory '" + dir + "' is not writable: " + std::strerror(errno), hint);
  return path;
}

void write_report_files(const Report& report, const std::filesystem::path& dir) {
  Fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.fd < 0) io_fail(dir, "report.json", "open(directory)", errno);
  write_file_in(dir_fd.fd, dir, "report.json", report_json(report).dump(2) + "\n");
  write_file_in(dir_fd.fd, dir, "report.md", report_markdown(report));
}

}  // namespace zt::check
