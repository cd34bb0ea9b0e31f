// Write bandwidth of a directory (the checkpoint or offload directory): `bytes` written
// with O_DIRECT from an aligned buffer, or buffered and then fsync'ed where the file
// system refuses O_DIRECT (tmpfs, some overlay file systems). The file is removed after.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "zt/check/stages.hpp"
#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/log.hpp"

namespace zt::check {
namespace {

constexpr size_t kAlign = 4096;               // O_DIRECT alignment (covers 512 B and 4K sectors)
constexpr size_t kChunk = size_t{8} << 20;    // bytes per write() call

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

}  // namespace

IoBandwidth measure_io_write(const std::string& dir, uint64_t bytes, const std::string& tag) {
  using Clock = std::chrono::steady_clock;
  IoBandwidth r;
  if (dir.empty()) {
    r.note = "skipped: no --io-dir";
    return r;
  }
  const std::string path = dir + "/.zt-check-io." + tag + "." + std::to_string(::getpid());
  void* raw = nullptr;
  if (posix_memalign(&raw, kAlign, kChunk) != 0) {
    r.note = "error: cannot allocate an aligned buffer";
    return r;
  }
  std::unique_ptr<void, FreeDeleter> buffer(raw);  // [kChunk] bytes, aligned
  std::memset(raw, 0x5a, kChunk);
  const uint64_t total = (bytes + kAlign - 1) / kAlign * kAlign;  // whole aligned blocks

  bool direct = true;
  // A new file, never through a link (core/files.hpp): a stale one of the name is removed.
  try {
    unlink_if_there(path, "--io-dir probe");
  } catch (const Error& e) {
    r.note = "error: " + e.message();
    return r;
  }
  constexpr int kNew = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::open(path.c_str(), kNew | O_DIRECT, 0600);
  if (fd < 0 && errno == EINVAL) {
    direct = false;
    ::unlink(path.c_str());  // some file systems create the file before refusing O_DIRECT
    fd = ::open(path.c_str(), kNew, 0600);
  }
  if (fd < 0) {
    r.note = strf("error: cannot create %s: %s", path.c_str(), std::strerror(errno));
    return r;
  }
  const Clock::time_point t0 = Clock::now();
  uint64_t done = 0;
  std::string error;
  while (done < total && error.empty()) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, total - done));
    const ssize_t w = ::write(fd, raw, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EINVAL && direct && done == 0) {
      // O_DIRECT accepted at open but refused at write: start again buffered.
      ::close(fd);
      direct = false;
      fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);  // ours, just made
      if (fd < 0) error = strf("reopen: %s", std::strerror(errno));
      continue;
    }
    if (w <= 0) error = strf("write: %s", w < 0 ? std::strerror(errno) : "wrote nothing");
    else done += static_cast<uint64_t>(w);
  }
  if (error.empty() && ::fsync(fd) != 0) error = strf("fsync: %s", std::strerror(errno));
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (fd >= 0) ::close(fd);
  ::unlink(path.c_str());
  if (!error.empty()) {
    r.note = "error: " + error + " in " + dir;
    return r;
  }
  r.ran = true;
  r.bytes = done;
  r.write_gbs = seconds > 0.0 ? static_cast<double>(done) / seconds / 1e9 : 0.0;
  r.note = direct ? "O_DIRECT" : "buffered + fsync (O_DIRECT refused)";
  return r;
}

}  // namespace zt::check
