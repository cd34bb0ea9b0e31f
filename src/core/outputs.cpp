// Where a command writes (see outputs.hpp).
#include "zt/core/outputs.hpp"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <regex>

#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/log.hpp"

namespace zt {

namespace fs = std::filesystem;

void require_output_dir(const std::string& dir, std::string_view what, std::string_view hint,
                        OutputDir kind) {
  const bool file_folder = kind == OutputDir::kFolderOfAFile;
  const std::string subject = std::string(what) + " = '" + dir + "'";
  const auto refuse = [&](const std::string& why) { throw InputError(subject + ": " + why, std::string(hint)); };
  if (dir.empty()) refuse("an empty path");
  if (!file_folder) refuse_system_folder(dir, what);
  // A dangling symbolic link: mkdir -p says "File exists"; say what it is.
  struct stat link{};
  struct stat target{};
  if (::lstat(dir.c_str(), &link) == 0 && S_ISLNK(link.st_mode) && ::stat(dir.c_str(), &target) != 0) {
    const int err = errno;
    std::error_code ec;
    const std::string to = fs::read_symlink(dir, ec).string();
    throw InputError(subject + strf(": it is a symbolic link to '%s', which %s (errno %d)", to.c_str(),
                                    err == ENOENT ? "does not exist" : std::strerror(err), err),
                     "make the link's target a folder (mkdir -p on it), remove the link, or name "
                     "another folder");
  }
  // The folder itself, else the nearest existing folder above it (where it would be made).
  fs::path p(dir);
  std::string probe = dir;
  while (true) {
    struct stat st{};
    if (::stat(probe.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode))
        refuse(probe == dir ? "it exists and is not a folder"
                            : "'" + probe + "' above it is a file, not a folder");
      break;
    }
    const int err = errno;
    if (err != ENOENT && err != ENOTDIR) refuse(strf("'%s': %s (errno %d)", probe.c_str(), std::strerror(err), err));
    if (probe == dir && err == ENOENT && file_folder) refuse(strf("it does not exist (errno %d)", err));
    if (p.empty() || p == p.root_path()) break;
    p = p.parent_path();
    probe = p.empty() ? "." : p.string();
  }
  struct statvfs vfs{};
  if (::statvfs(probe.c_str(), &vfs) == 0 && (vfs.f_flag & ST_RDONLY) != 0)
    refuse(strf("'%s' is on a read-only file system: %s (errno %d)", probe.c_str(), std::strerror(EROFS), EROFS));
  if (::access(probe.c_str(), W_OK | X_OK) != 0) {
    const int err = errno;
    refuse(strf("'%s' is not writable: %s (errno %d)", probe.c_str(), std::strerror(err), err));
  }
}

namespace {

struct Place {
  fs::path resolved;  // absolute, `.`, `..` and links resolved as far as the path exists
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
};

Place place_of(const std::string& path) {
  Place p;
  std::error_code ec;
  const fs::path abs = fs::absolute(path, ec);
  p.resolved = ec ? fs::path(path).lexically_normal() : fs::weakly_canonical(abs, ec);
  if (ec) p.resolved = abs.lexically_normal();
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0) {
    p.exists = true;
    p.dev = st.st_dev;
    p.ino = st.st_ino;
  }
  return p;
}

bool same_place(const Place& a, const Place& b) {
  if (a.exists && b.exists) return a.dev == b.dev && a.ino == b.ino;
  return a.resolved == b.resolved;
}

// The first component of `inner` below the folder `outer`, or "" when it is not below it.
std::string name_below(const Place& outer, const Place& inner) {
  const fs::path rel = inner.resolved.lexically_relative(outer.resolved);
  if (rel.empty() || rel == ".") return "";
  const std::string first = rel.begin()->string();
  return first == ".." ? "" : first;
}

std::string named(const PathUse& u) { return u.key + " = '" + u.path + "'"; }

}  // namespace

void refuse_collisions(const std::vector<PathUse>& uses) {
  std::vector<Place> places;
  for (const PathUse& u : uses) places.push_back(place_of(u.path));
  for (size_t i = 0; i < uses.size(); ++i)
    for (size_t j = 0; j < uses.size(); ++j) {
      const PathUse& a = uses[i];
      const PathUse& b = uses[j];
      if (i == j || a.path.empty() || b.path.empty() || (!a.output && !b.output)) continue;
      if (i < j && same_place(places[i], places[j]))
        throw InputError(
            strf("%s and %s are the same %s: %s", named(a).c_str(), named(b).c_str(),
                 a.owns.empty() && b.owns.empty() ? "file" : "place",
                 a.output && b.output ? "both would write it"
                                      : "writing it would destroy what is being read"),
            "give " + a.key + " and " + b.key + " paths of their own");
      // b inside the folder a, at a name a owns.
      if (a.owns.empty() || (!b.output && b.read_first && a.output)) continue;
      const std::string name = name_below(places[i], places[j]);
      if (name.empty() || !std::regex_match(name, std::regex(a.owns))) continue;
      throw InputError(
          strf("%s lies in %s, at '%s', a name that folder %s: %s", named(b).c_str(), named(a).c_str(),
               name.c_str(), a.output ? "holds for its own files" : "is read from",
               a.output && b.output ? "both would write it"
                   : a.output      ? "the run would overwrite or delete what it reads"
                                   : "the output would be written among the inputs being read"),
          "name " + b.key + " outside " + a.key + " (e.g. beside it)");
    }
}

}  // namespace zt
