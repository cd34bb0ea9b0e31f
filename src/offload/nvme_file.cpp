// io_uring + O_DIRECT file of one rank (see nvme_file.hpp).
#include "zt/offload/nvme_file.hpp"

#include <fcntl.h>
#include <liburing.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/log.hpp"
#include "zt/core/progress.hpp"
#include "zt/core/units.hpp"
#include "zt/offload/host_buffer.hpp"

namespace zt::offload {
namespace {

std::string errno_text(int err) { return strf("%s (errno %d)", std::strerror(err), err); }

std::string io_hint(int err) {
  if (err == ENOSPC || err == EDQUOT || err == EFBIG)
    return "the file system of offload.nvme_path is full (or over quota): free space "
           "there or point offload.nvme_path at a larger drive. Checkpoints are written "
           "elsewhere and were not touched by this failure.";
  if (err == EIO) return "the drive reported an I/O error: check dmesg and the drive's health.";
  if (err == EROFS) return "the file system became read-only (often after errors): check dmesg.";
  return "check the drive behind offload.nvme_path (dmesg, df, mount options).";
}

}  // namespace

struct NvmeFile::Impl {
  struct Pending {
    int blocks = 0;  // blocks not yet complete
    int error = 0;   // first errno seen
    uint64_t error_offset = 0;
    bool write = false;
    uint64_t offset = 0;
    size_t bytes = 0;
  };

  std::string path;
  uint64_t bytes = 0;
  Settings set;
  int fd = -1;
  bool direct = false;
  bool uring = false;
  io_uring ring{};
  int inflight = 0;
  Ticket next = 1;
  std::unordered_map<Ticket, Pending> pending;

  ~Impl() {
    if (uring) {
      // Requests still in flight (after an error) must land before their buffers go.
      while (inflight > 0) {
        io_uring_cqe* cqe = nullptr;
        if (io_uring_wait_cqe(&ring, &cqe) < 0) break;
        io_uring_cqe_seen(&ring, cqe);
        inflight -= 1;
      }
      io_uring_queue_exit(&ring);
    }
    if (fd >= 0) {
      ::close(fd);
      if (set.remove) ::unlink(path.c_str());
    }
  }

  [[noreturn]] void fail(const char* op, uint64_t offset, size_t len, int err) const {
    throw Error(strf("NVMe offload %s of %s at offset %llu of %s failed: %s", op,
                     format_size_approx(len).c_str(), static_cast<unsigned long long>(offset),
                     path.c_str(), errno_text(err).c_str()),
                io_hint(err));
  }

  // One completion: account it to its ticket.
  void complete(uint64_t data, int res) {
    const Ticket t = static_cast<Ticket>(data >> 32);
    const uint32_t want = static_cast<uint32_t>(data & 0xffffffffu);
    auto it = pending.find(t);
    ZT_CHECK(it != pending.end(), "io_uring completion of an unknown request", "a bug in NvmeFile");
    Pending& p = it->second;
    if (p.error == 0) {
      if (res < 0)
        p.error = -res;
      else if (static_cast<uint32_t>(res) != want)
        p.error = p.write ? ENOSPC : EIO;  // a short write means no room; a short read, a hole past EOF
    }
    p.blocks -= 1;
    inflight -= 1;
  }

  void reap_one() {
    io_uring_cqe* cqe = nullptr;
    int rc = 0;
    do {
      rc = io_uring_wait_cqe(&ring, &cqe);
    } while (rc == -EINTR);
    if (rc < 0) fail("io_uring_wait_cqe", 0, 0, -rc);
    complete(io_uring_cqe_get_data64(cqe), cqe->res);
    io_uring_cqe_seen(&ring, cqe);
  }

  void submit_ring() {
    int rc = 0;
    do {
      rc = io_uring_submit(&ring);
    } while (rc == -EINTR || rc == -EAGAIN);
    if (rc < 0) fail("io_uring_submit", 0, 0, -rc);
  }

  Ticket submit(bool write, uint64_t offset, void* buf, size_t len) {
    ZT_CHECK(offset % kAlign == 0 && len % kAlign == 0 &&
                 reinterpret_cast<uintptr_t>(buf) % kAlign == 0,
             "NvmeFile: unaligned request", "offsets, lengths and buffers are multiples of 4096");
    ZT_CHECK(offset + len <= bytes, "NvmeFile: request past the end of the file",
             "a bug in the store's layout");
    const Ticket t = next++;
    Pending& p = pending[t];
    p.write = write;
    p.offset = offset;
    p.bytes = len;
    auto* base = static_cast<char*>(buf);
    for (size_t done = 0; done < len;) {
      const size_t chunk = std::min<size_t>(set.block_bytes, len - done);
      if (!uring) {  // synchronous fallback
        const ssize_t r = write ? ::pwrite(fd, base + done, chunk, static_cast<off_t>(offset + done))
                                : ::pread(fd, base + done, chunk, static_cast<off_t>(offset + done));
        if (r < 0 && errno == EINTR) continue;
        if (p.error == 0 && r != static_cast<ssize_t>(chunk)) p.error = r < 0 ? errno : (write ? ENOSPC : EIO);
        done += chunk;
        continue;
      }
      if (inflight >= set.queue_depth) {
        submit_ring();
        reap_one();
      }
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      if (!sqe) {
        submit_ring();
        sqe = io_uring_get_sqe(&ring);
        ZT_CHECK(sqe != nullptr, "io_uring: no submission entry", "a bug in NvmeFile");
      }
      if (write)
        io_uring_prep_write(sqe, fd, base + done, static_cast<unsigned>(chunk), offset + done);
      else
        io_uring_prep_read(sqe, fd, base + done, static_cast<unsigned>(chunk), offset + done);
      io_uring_sqe_set_data64(sqe, (static_cast<uint64_t>(t) << 32) | chunk);
      p.blocks += 1;
      inflight += 1;
      done += chunk;
    }
    if (uring) submit_ring();
    return t;
  }

  void wait(Ticket t) {
    auto it = pending.find(t);
    ZT_CHECK(it != pending.end(), "NvmeFile::wait on an unknown ticket", "wait once per ticket");
    while (it->second.blocks > 0) reap_one();
    const Pending p = it->second;
    pending.erase(it);
    if (p.error != 0) fail(p.write ? "write" : "read", p.offset, p.bytes, p.error);
  }
};

NvmeFile::NvmeFile(std::string path, uint64_t bytes, const Settings& settings)
    : impl_(std::make_unique<Impl>()) {
  Impl& f = *impl_;
  f.path = std::move(path);
  f.bytes = round_up(bytes);
  f.set = settings;
  // A new file, never through a link (core/files.hpp): a stale one of the name is removed.
  unlink_if_there(f.path, "NVMe offload file");
  const int flags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  if (settings.direct) {
    f.fd = ::open(f.path.c_str(), flags | O_DIRECT, 0600);
    if (f.fd < 0 && errno == EINVAL) ::unlink(f.path.c_str());  // made before O_DIRECT was refused
    if (f.fd >= 0) {
      f.direct = true;
    } else if (errno == EINVAL) {
      log::warn(strf("%s: the file system refuses O_DIRECT; the NVMe offload uses buffered "
                     "I/O (page cache) there. HINT: use a local ext4/xfs NVMe drive for "
                     "offload.nvme_path.",
                     f.path.c_str()));
    }
  }
  if (f.fd < 0) f.fd = ::open(f.path.c_str(), flags, 0600);
  if (f.fd < 0) {
    const int err = errno;
    throw InputError(strf("cannot create the NVMe offload file %s: %s", f.path.c_str(),
                          errno_text(err).c_str()),
                     err == EROFS || err == EACCES || err == EPERM
                         ? "offload.nvme_path must be writable by this user (a read-only "
                           "mount or a permission problem); choose another directory."
                         : "check that offload.nvme_path exists and is a directory.");
  }
  if (f.bytes > 0) {
    int rc = EOPNOTSUPP;
    if (settings.preallocate) {
      // In pieces, so a file system that allocates slowly shows its rate (rank 0, files of
      // 1 GiB and more: every rank allocates its own file alike).
      constexpr uint64_t kPiece = uint64_t{1} << 30;
      ProgressOptions po;
      po.print = f.bytes >= kPiece && process_rank() <= 0;
      Progress progress("offload file allocation", f.bytes, ProgressUnit::kBytes, po);
      rc = 0;
      for (uint64_t at = 0; at < f.bytes && rc == 0;) {
        const uint64_t n = std::min(kPiece, f.bytes - at);
        rc = ::posix_fallocate(f.fd, static_cast<off_t>(at), static_cast<off_t>(n));
        if (rc == 0) progress.advance(n);
        at += n;
      }
      if (rc == 0) progress.finish();
    }
    if (rc == EOPNOTSUPP || rc == EINVAL) rc = ::ftruncate(f.fd, static_cast<off_t>(f.bytes)) == 0 ? 0 : errno;
    if (rc != 0) {
      const std::string what = strf("cannot reserve %s for the NVMe offload file %s: %s",
                                    format_size_approx(f.bytes).c_str(), f.path.c_str(),
                                    errno_text(rc).c_str());
      ::close(f.fd);
      f.fd = -1;
      ::unlink(f.path.c_str());
      throw InputError(what, io_hint(rc));
    }
  }
  const unsigned entries = static_cast<unsigned>(std::clamp(settings.queue_depth, 1, 4096));
  const int rc = io_uring_queue_init(entries, &f.ring, 0);
  if (rc == 0) {
    f.uring = true;
  } else {
    log::warn(strf("io_uring_queue_init failed: %s; the NVMe offload uses synchronous "
                   "pread/pwrite. HINT: a kernel >= 5.6 without io_uring disabled "
                   "(/proc/sys/kernel/io_uring_disabled, seccomp) is needed for overlap.",
                   errno_text(-rc).c_str()));
  }
}

NvmeFile::~NvmeFile() = default;

NvmeFile::Ticket NvmeFile::submit_read(uint64_t offset, void* buf, size_t bytes) {
  return impl_->submit(false, offset, buf, bytes);
}
NvmeFile::Ticket NvmeFile::submit_write(uint64_t offset, const void* buf, size_t bytes) {
  return impl_->submit(true, offset, const_cast<void*>(buf), bytes);
}
void NvmeFile::wait(Ticket t) { impl_->wait(t); }
void NvmeFile::wait_all() {
  std::vector<Ticket> ts;
  for (const auto& [t, p] : impl_->pending) ts.push_back(t);
  std::sort(ts.begin(), ts.end());
  for (Ticket t : ts) impl_->wait(t);
}
void NvmeFile::sync() {
  if (::fdatasync(impl_->fd) != 0) impl_->fail("fdatasync", 0, impl_->bytes, errno);
}
const std::string& NvmeFile::path() const { return impl_->path; }
uint64_t NvmeFile::size() const { return impl_->bytes; }
bool NvmeFile::direct() const { return impl_->direct; }
bool NvmeFile::uring() const { return impl_->uring; }

}  // namespace zt::offload
