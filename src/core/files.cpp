// Checks on the files a user names (see files.hpp).
#include "zt/core/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt {

namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

constexpr const char* kWriteHint =
    "check that the folder exists, is writable and has free space";

[[noreturn]] void fail_errno(std::string_view what, const char* op, const std::string& path,
                             int err) {
  throw Error(strf("%.*s: %s '%s' failed: %s (errno %d)", static_cast<int>(what.size()),
                   what.data(), op, path.c_str(), std::strerror(err), err),
              kWriteHint);
}

std::string folder_of(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

}  // namespace

void require_new_output(const std::string& path, std::string_view what,
                        const std::vector<std::string>& inputs, bool force) {
  const std::string name = std::string(what) + " '" + path + "'";
  struct stat out{};
  if (::stat(path.c_str(), &out) != 0) return;  // nothing there (or unreadable: the write says)
  for (const std::string& input : inputs) {
    struct stat in{};
    if (::stat(input.c_str(), &in) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino)
      throw InputError(strf("%s is the input '%s': writing it would destroy what is being read",
                            name.c_str(), input.c_str()),
                       "name an output that is not one of the inputs");
  }
  if (!force)
    throw InputError(name + " already exists",
                     "pass --force to replace it, or name another output");
}

int create_exclusive(const std::string& path, std::string_view what) {
  unlink_if_there(path, what);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) fail_errno(what, "create", path, errno);
  return fd;
}

void unlink_if_there(const std::string& path, std::string_view what) {
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    fail_errno(what, "lstat", path, errno);
  }
  if (S_ISDIR(st.st_mode))
    throw Error(strf("%.*s: '%s' is a folder where zt writes a file", static_cast<int>(what.size()),
                     what.data(), path.c_str()),
                "remove or rename that folder");
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) fail_errno(what, "unlink", path, errno);
}

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) fail_errno("fsync", "open", path, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && !(directory && (err == EINVAL || err == EROFS))) fail_errno("fsync", "fsync", path, err);
}

void publish_file(const std::string& tmp, const std::string& final_path) {
  fsync_path(tmp, false);
  // rename() replaces a symlink at final_path itself; it never writes through it.
  if (::rename(tmp.c_str(), final_path.c_str()) != 0)
    fail_errno("publish", ("rename to '" + final_path + "' of").c_str(), tmp, errno);
  fsync_path(folder_of(final_path), true);
}

SafeFile::SafeFile(std::string path, std::string_view what, std::string tmp_suffix)
    : path_(std::move(path)), tmp_(path_ + tmp_suffix), what_(what) {
  fd_ = create_exclusive(tmp_, what_);
}

SafeFile::~SafeFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());  // best effort: the error that led here matters
}

void write_all(int fd, const void* data, size_t n, const std::string& path, std::string_view what) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail_errno(what, "write", path, w < 0 ? errno : ENOSPC);
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void SafeFile::write(const void* data, size_t n) {
  ZT_CHECK(fd_ >= 0, "SafeFile::write after close_fd", "");
  write_all(fd_, data, n, tmp_, what_);
}

void SafeFile::close_fd() {
  if (fd_ < 0) return;
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail_errno(what_, "close", tmp_, errno);
}

void SafeFile::commit() {
  close_fd();
  publish_file(tmp_, path_);
  committed_ = true;
}

void write_file_safely(const std::string& path, std::string_view contents, std::string_view what) {
  SafeFile f(path, what);
  f.write(contents);
  f.commit();
}

void require_regular_file(const std::string& path, std::string_view what, std::string_view hint,
                          bool allow_empty) {
  const std::string name = std::string(what) + " '" + path + "'";
  if (path.empty()) throw InputError(std::string(what) + " is an empty path", std::string(hint));
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    throw InputError(strf("%s: %s (errno %d)", name.c_str(),
                          err == ENOENT ? "not found" : std::strerror(err), err),
                     std::string(hint));
  }
  if (!S_ISREG(st.st_mode))
    throw InputError(strf("%s is %s, not a regular file", name.c_str(), kind_of(st.st_mode)),
                     std::string(hint));
  if (!allow_empty && st.st_size == 0)
    throw InputError(name + " is empty", std::string(hint));
}

std::string read_regular_file(const std::string& path, std::string_view what,
                              std::string_view hint, bool allow_empty) {
  require_regular_file(path, what, hint, allow_empty);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw InputError(strf("cannot open %.*s '%s': %s", static_cast<int>(what.size()), what.data(),
                          path.c_str(), std::strerror(errno)),
                     std::string(hint));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad())
    throw InputError(strf("reading %.*s '%s' failed", static_cast<int>(what.size()), what.data(),
                          path.c_str()),
                     std::string(hint));
  return text.str();
}

void require_output_folder(const std::string& path, std::string_view what) {
  if (path.empty())
    throw InputError(std::string(what) + ": an empty path", "name the file to write");
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? "." : parent.string();
  const std::string name = std::string(what) + " '" + path + "'";
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0) {
    const int err = errno;
    throw InputError(strf("%s: its folder '%s' %s (errno %d)", name.c_str(), dir.c_str(),
                          err == ENOENT ? "does not exist" : std::strerror(err), err),
                     "create the folder first (mkdir -p '" + dir + "') or write elsewhere");
  }
  if (!S_ISDIR(st.st_mode))
    throw InputError(strf("%s: '%s' is %s, not a folder", name.c_str(), dir.c_str(),
                          kind_of(st.st_mode)),
                     "name an output inside an existing folder");
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw InputError(strf("%s is %s; it would be replaced by a file", name.c_str(),
                          kind_of(st.st_mode)),
                     "name a new file (or an existing regular file to replace)");
}

}  // namespace zt
