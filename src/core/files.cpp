// Checks on the files a user names (see files.hpp).
#include "zt/core/files.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

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

}  // namespace

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

void require_output_folder(const std::string& path, std::string_view what) {
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
