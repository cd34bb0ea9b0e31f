// Checks on the files a user names (see files.hpp).
#include "zt/core/files.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <regex>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/outputs.hpp"

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

void refuse_system_folder(const std::string& dir, std::string_view what) {
  static const char* const kSystem[] = {
      "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32",
      "/lost+found", "/media", "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys",
      "/usr", "/usr/bin", "/usr/include", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libexec",
      "/usr/local", "/usr/local/bin", "/usr/local/lib", "/usr/sbin", "/usr/share", "/usr/src",
      "/var", "/var/cache", "/var/lib", "/var/log", "/var/run", "/var/spool"};
  if (dir.empty()) return;
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(dir, ec);
  if (ec) return;
  std::string resolved = std::filesystem::weakly_canonical(abs, ec).string();
  if (ec) resolved = abs.lexically_normal().string();
  while (resolved.size() > 1 && resolved.back() == '/') resolved.pop_back();
  for (const char* sys : kSystem)
    if (resolved == sys)
      throw InputError(strf("%.*s = '%s' is the system folder '%s': zt does not write its files "
                            "among the system's",
                            static_cast<int>(what.size()), what.data(), dir.c_str(), sys),
                       "name a folder of your own (e.g. under your home or a scratch file system)");
}

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
  // A folder is opened through a symbolic link (ckpt.dir may be one, as mkdir -p allows);
  // a file never is.
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY | O_NOFOLLOW) | O_CLOEXEC);
  if (fd < 0) fail_errno("fsync", "open", path, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && !(directory && (err == EINVAL || err == EROFS))) fail_errno("fsync", "fsync", path, err);
}

void publish_file(const std::string& tmp, const std::string& final_path, int tmp_fd) {
  if (tmp_fd < 0)
    fsync_path(tmp, false);
  else if (::fsync(tmp_fd) != 0)
    fail_errno("fsync", "fsync", tmp, errno);
  // rename() replaces a symlink at final_path itself; it never writes through it.
  if (::rename(tmp.c_str(), final_path.c_str()) != 0)
    fail_errno("publish", ("rename to '" + final_path + "' of").c_str(), tmp, errno);
  fsync_path(folder_of(final_path), true);
}

// ---- Staging files and their removal on a signal -------------------------------------

namespace {

// The live SafeFile temporaries, for the signal handler: lock-free slots of C strings
// (owned by their SafeFile, cleared before it frees them).
constexpr int kStagingSlots = 64;
std::atomic<const char*> g_staging[kStagingSlots];

void register_staging(const char* path) {
  for (auto& slot : g_staging) {
    const char* none = nullptr;
    if (slot.compare_exchange_strong(none, path)) return;
  }  // all slots busy: that file is only removed by its destructor
}
void unregister_staging(const char* path) {
  for (auto& slot : g_staging) {
    const char* mine = path;
    if (slot.compare_exchange_strong(mine, nullptr)) return;
  }
}

// Holds SIGTERM, SIGINT and SIGHUP for its lifetime (this thread), so a file created and
// registered inside it is never left behind by a signal landing between the two.
class FatalSignalsHeld {
 public:
  FatalSignalsHeld() {
    sigset_t held;
    sigemptyset(&held);
    for (const int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&held, sig);
    ok_ = ::pthread_sigmask(SIG_BLOCK, &held, &old_) == 0;
  }
  ~FatalSignalsHeld() {
    if (ok_) ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);  // a held signal arrives now
  }
  FatalSignalsHeld(const FatalSignalsHeld&) = delete;
  FatalSignalsHeld& operator=(const FatalSignalsHeld&) = delete;

 private:
  sigset_t old_;
  bool ok_ = false;
};

std::atomic<int> g_child{0};
std::atomic<const char*> g_stage_folder{nullptr};

// Removes the files of `dir` and then `dir` with system calls only (getdents64).
void remove_folder_in_handler(const char* dir) {
  const int fd = ::open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  alignas(8) char buf[4096];
  for (long n; (n = ::syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0;)
    for (long at = 0; at < n;) {
      const auto* d = reinterpret_cast<const struct dirent64*>(buf + at);
      at += d->d_reclen;
      if (std::strcmp(d->d_name, ".") != 0 && std::strcmp(d->d_name, "..") != 0) ::unlinkat(fd, d->d_name, 0);
    }
  ::close(fd);
  ::rmdir(dir);
}

extern "C" void remove_staging_and_die(int sig) {
  if (const int child = g_child.exchange(0); child > 0) {
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);  // it writes no more into the folder removed next
  }
  if (const char* dir = g_stage_folder.exchange(nullptr)) remove_folder_in_handler(dir);
  for (auto& slot : g_staging) {
    const char* p = slot.exchange(nullptr);
    if (p != nullptr) ::unlink(p);  // async-signal-safe
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

bool process_alive(long pid) {
  if (pid <= 0) return true;  // not a pid: never taken for a dead one
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

}  // namespace

std::string staging_suffix() {
  return ".tmp." + process_host() + "." + std::to_string(::getpid());
}

int remove_stale_staging(const std::string& path) {
  const std::filesystem::path p(path);
  const std::string base = p.filename().string();
  const std::string dir = folder_of(path);
  int removed = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with(base + ".tmp.")) continue;
    const std::string shown = (p.parent_path() / name).string();  // as the user named it
    const std::string rest = name.substr(base.size() + 5);  // <host>.<pid>
    const size_t dot = rest.rfind('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 >= rest.size() ||
        rest.find_first_not_of("0123456789", dot + 1) != std::string::npos)
      continue;
    const std::string host = rest.substr(0, dot);
    const long pid = std::strtol(rest.c_str() + dot + 1, nullptr, 10);
    if (host != process_host()) {
      log::warn(strf("'%s' is the staging file of a zt process on host %s (pid %ld): left "
                     "alone; remove it if that process is gone",
                     shown.c_str(), host.c_str(), pid));
      continue;
    }
    if (pid == ::getpid() || process_alive(pid)) continue;
    struct stat st{};
    if (::lstat(e.path().c_str(), &st) != 0 || S_ISDIR(st.st_mode)) continue;
    if (::unlink(e.path().c_str()) == 0) {
      ++removed;
      log::warn(strf("removed '%s', the staging file of a zt process (pid %ld on this host) that "
                     "no longer runs (%.2f MB)",
                     shown.c_str(), pid, static_cast<double>(st.st_size) / 1e6));
    }
  }
  return removed;
}

void set_signal_child(int pid) { g_child.store(pid); }
void set_signal_staging_folder(const char* path) { g_stage_folder.store(path); }

void remove_staging_on_signals() {
  struct sigaction sa{};
  sa.sa_handler = remove_staging_and_die;
  sigemptyset(&sa.sa_mask);
  for (const int sig : {SIGTERM, SIGINT, SIGHUP})
    if (::sigaction(sig, &sa, nullptr) != 0)
      throw Error(strf("sigaction(%d) failed: %s", sig, std::strerror(errno)),
                  "a signal would leave the .tmp staging files behind");
}

SafeFile::SafeFile(std::string path, std::string_view what, std::string tmp_suffix)
    : path_(std::move(path)), what_(what) {
  if (tmp_suffix.empty()) {
    remove_stale_staging(path_);
    tmp_suffix = staging_suffix();
  }
  tmp_ = path_ + tmp_suffix;
  const FatalSignalsHeld held;  // created and registered as one step for the signal handler
  fd_ = create_exclusive(tmp_, what_);
  register_staging(tmp_.c_str());
}

SafeFile::~SafeFile() {
  unregister_staging(tmp_.c_str());
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
  ZT_CHECK(fd_ >= 0, "SafeFile::write after commit", "");
  write_all(fd_, data, n, tmp_, what_);
}

void SafeFile::commit() {
  ZT_CHECK(fd_ >= 0, "SafeFile::commit twice", "");
  // fsync through the descriptor this object created: the file written, whatever the
  // name points to by now.
  publish_file(tmp_, path_, fd_);
  unregister_staging(tmp_.c_str());
  committed_ = true;
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail_errno(what_, "close", path_, errno);
}

void write_file_safely(const std::string& path, std::string_view contents, std::string_view what) {
  SafeFile f(path, what);
  f.write(contents);
  f.commit();
}

ReadFile::ReadFile(const std::string& path, std::string_view what, std::string_view hint,
                   bool allow_empty)
    : path_(path), what_(what), hint_(hint) {
  const std::string name = what_ + " '" + path + "'";
  if (path.empty()) throw InputError(what_ + " is an empty path", hint_);
  // O_NONBLOCK: opening a FIFO without a writer (or a tty) returns at once; fstat says what
  // it is. O_NOCTTY: a terminal named as input never becomes the controlling one.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd_ < 0) {
    const int err = errno;
    throw InputError(strf("%s: %s (errno %d)", name.c_str(),
                          err == ENOENT ? "not found" : std::strerror(err), err),
                     hint_);
  }
  struct stat st{};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    throw InputError(strf("%s: fstat failed: %s (errno %d)", name.c_str(), std::strerror(err), err), hint_);
  }
  if (!S_ISREG(st.st_mode) || (!allow_empty && st.st_size == 0)) {
    ::close(fd_);
    fd_ = -1;
    if (!S_ISREG(st.st_mode))
      throw InputError(strf("%s is %s, not a regular file", name.c_str(), kind_of(st.st_mode)), hint_);
    throw InputError(name + " is empty", hint_);
  }
  size_ = static_cast<uint64_t>(st.st_size);
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags >= 0) ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
}

ReadFile::~ReadFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::string ReadFile::read_all() {
  std::string text;
  text.reserve(static_cast<size_t>(size_));
  char buf[1 << 16];
  while (true) {
    const ssize_t got = ::read(fd_, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int err = errno;
      throw InputError(strf("reading %s '%s' failed: %s (errno %d)", what_.c_str(), path_.c_str(),
                            std::strerror(err), err),
                       hint_);
    }
    if (got == 0) return text;
    text.append(buf, static_cast<size_t>(got));
  }
}

void require_regular_file(const std::string& path, std::string_view what, std::string_view hint,
                          bool allow_empty) {
  const ReadFile f(path, what, hint, allow_empty);
}

std::string read_regular_file(const std::string& path, std::string_view what,
                              std::string_view hint, bool allow_empty) {
  ReadFile f(path, what, hint, allow_empty);
  return f.read_all();
}

// ---- FolderLock ---------------------------------------------------------------------

std::string lock_holder_text() {
  static const std::string text = [] {
    char when[64] = "?";
    const std::time_t now = std::time(nullptr);
    struct tm utc{};
    if (::gmtime_r(&now, &utc) != nullptr) std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &utc);
    std::string command = "?";
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) command = exe.filename().string();
    return strf("%s on host %s, pid %ld, started %s", command.c_str(), process_host().c_str(),
                static_cast<long>(::getpid()), when);
  }();
  return text;
}

FolderLock::FolderLock(const std::string& dir, std::string_view what, std::string_view hint)
    : FolderLock(dir, (std::filesystem::path(dir) / "zt.lock").string(), dir, what, hint) {}

FolderLock FolderLock::beside(const std::string& file, std::string_view what, std::string_view hint) {
  if (file.empty()) throw InputError(std::string(what) + " is an empty path", "name the file to write");
  return FolderLock(folder_of(file), file + ".lock", file, what, hint);
}

FolderLock::FolderLock(const std::string& dir, std::string lock_path, const std::string& subject,
                       std::string_view what, std::string_view hint)
    : dir_(dir), path_(std::move(lock_path)) {
  const std::string name = std::string(what) + " '" + subject + "'";
  if (dir.empty()) throw InputError(std::string(what) + " is an empty path", "name a folder");
  std::error_code ec, is_dir_ec;
  made_dir_ = std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir, is_dir_ec))
    throw InputError(strf("%s: it is not a folder and cannot be made one%s%s", name.c_str(),
                          ec ? ": " : "", ec ? ec.message().c_str() : ""),
                     "name a folder (it is created when missing) on a writable file system");
  for (int attempt = 0; attempt < 100; ++attempt) {
    // Created and registered as one step for the signal handler, as SafeFile's staging
    // file is (a signal in between would leave a lock file naming a dead run). A signal
    // held here arrives when this attempt ends: at most ~1 s later, while a refusal
    // waits for the holder's line.
    const FatalSignalsHeld signals_held;
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd_ < 0) {
      const int err = errno;
      if (err == ELOOP)
        throw InputError(name + ": its lock file '" + path_ + "' is a symbolic link",
                         "remove that link (zt never writes through one)");
      fail_errno(what, "open lock file", path_, err);
    }
    struct flock fl{};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    int rc = ::fcntl(fd_, F_OFD_SETLK, &fl);
    if (rc != 0 && errno == EINVAL) rc = ::fcntl(fd_, F_SETLK, &fl);  // a kernel without OFD locks
    if (rc != 0) {
      const int err = errno;
      if (err == EAGAIN || err == EACCES) {
        // The holder writes its text just after it locks: wait up to 1 s for the whole
        // line (it ends with a newline), so the refusal names who holds it.
        std::string holder;
        for (int wait = 0; wait < 100; ++wait) {
          char buf[512] = {};
          const ssize_t got = ::pread(fd_, buf, sizeof buf - 1, 0);
          holder = got > 0 ? std::string(buf, static_cast<size_t>(got)) : "";
          if (holder.ends_with('\n')) break;
          ::usleep(10000);
        }
        while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
        ::close(fd_);
        fd_ = -1;
        throw InputError(strf("%s is in use by another zt process: %s (lock file '%s')",
                              name.c_str(), holder.empty() ? "it has not yet said who it is" : holder.c_str(),
                              path_.c_str()),
                         std::string(hint));
      }
      ::close(fd_);
      fd_ = -1;
      if (err == ENOLCK || err == ENOSYS || err == EOPNOTSUPP) {
        log::warn(strf("%s: its file system does not lock files (fcntl: %s, errno %d): another "
                       "zt run writing there at the same time would not be noticed",
                       name.c_str(), std::strerror(err), err));
        return;
      }
      fail_errno(what, "lock (fcntl F_SETLK)", path_, err);
    }
    // The file locked must still be the one named zt.lock: a holder that just ended
    // unlinked it, and a third run may have made a new one.
    struct stat held{}, named{};
    if (::fstat(fd_, &held) == 0 && ::lstat(path_.c_str(), &named) == 0 &&
        held.st_dev == named.st_dev && held.st_ino == named.st_ino) {
      char buf[512] = {};
      const ssize_t got = ::pread(fd_, buf, sizeof buf - 1, 0);
      if (got > 0) {
        taken_over_ = std::string(buf, static_cast<size_t>(got));
        while (!taken_over_.empty() && taken_over_.back() == '\n') taken_over_.pop_back();
      }
      const std::string mine = lock_holder_text() + "\n";
      if (::ftruncate(fd_, 0) != 0) fail_errno(what, "ftruncate", path_, errno);
      if (::pwrite(fd_, mine.data(), mine.size(), 0) != static_cast<ssize_t>(mine.size()))
        fail_errno(what, "write", path_, errno);
      ::fsync(fd_);  // best effort: the lock itself is in the kernel, the text only informs
      register_staging(path_.c_str());  // a fatal signal (remove_staging_on_signals) removes it too
      return;
    }
    ::close(fd_);
    fd_ = -1;
  }
  throw Error(name + ": its lock file '" + path_ + "' kept being replaced while zt locked it",
              "another program is creating and removing that file; stop it");
}

FolderLock::~FolderLock() {
  if (fd_ < 0) return;
  unregister_staging(path_.c_str());
  ::unlink(path_.c_str());  // still held: a run waiting on this file rechecks the name
  ::close(fd_);
  if (made_dir_) ::rmdir(dir_.c_str());  // only when empty (a run that saved nothing)
}

void require_output_folder(const std::string& path, std::string_view what) {
  if (path.empty())
    throw InputError(std::string(what) + ": an empty path", "name the file to write");
  const std::string dir = folder_of(path);
  const std::string name = std::string(what) + " '" + path + "'";
  require_output_dir(dir, "the folder of " + name,
                     "create the folder first (mkdir -p '" + dir + "') or write elsewhere",
                     OutputDir::kFolderOfAFile);
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw InputError(strf("%s is %s; it would be replaced by a file", name.c_str(),
                          kind_of(st.st_mode)),
                     "name a new file (or an existing regular file to replace)");
}

}  // namespace zt
