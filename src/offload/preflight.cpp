// Start-up checks of the offload homes (see preflight.hpp).
#include "zt/offload/preflight.hpp"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"

namespace zt::offload {

std::string nvme_file_path(const std::string& dir, int rank) {
  return strf("%s/zt-offload-rank%d.bin", dir.c_str(), rank);
}

uint64_t preflight_nvme(const std::string& dir, const std::string& file, uint64_t bytes) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    const int err = errno;
    throw InputError(strf("offload.nvme_path = %s: %s (errno %d)", dir.c_str(), std::strerror(err), err),
                     "create the directory on a local NVMe drive (mkdir -p) or point "
                     "offload.nvme_path at an existing one.");
  }
  if (!S_ISDIR(st.st_mode))
    throw InputError(strf("offload.nvme_path = %s is not a directory (errno %d, ENOTDIR)", dir.c_str(), ENOTDIR),
                     "offload.nvme_path names the directory that holds the per-rank files.");
  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) != 0) {
    const int err = errno;
    throw InputError(strf("offload.nvme_path = %s: statvfs failed: %s (errno %d)", dir.c_str(),
                          std::strerror(err), err),
                     "check the mount behind offload.nvme_path.");
  }
  if ((vfs.f_flag & ST_RDONLY) != 0 || ::access(dir.c_str(), W_OK) != 0) {
    const int err = (vfs.f_flag & ST_RDONLY) != 0 ? EROFS : errno;
    throw InputError(strf("offload.nvme_path = %s is not writable: %s (errno %d)", dir.c_str(),
                          std::strerror(err), err),
                     "it is a read-only mount or this user may not write there; choose a "
                     "writable directory on a local drive.");
  }
  uint64_t avail = static_cast<uint64_t>(vfs.f_bavail) * static_cast<uint64_t>(vfs.f_frsize);
  struct stat fst {};
  if (::stat(file.c_str(), &fst) == 0 && S_ISREG(fst.st_mode))
    avail += static_cast<uint64_t>(fst.st_blocks) * 512u;  // rewritten in place
  if (avail < bytes)
    throw InputError(strf("offload.nvme_path = %s has %s available but this rank's offload file "
                          "needs %s (errno %d, ENOSPC)",
                          dir.c_str(), format_size_approx(avail).c_str(),
                          format_size_approx(bytes).c_str(), ENOSPC),
                     "free space there, use a larger drive, or offload less (offload.params "
                     "= none, or more ranks per model). `zt estimate` gives the bytes per rank.");
  return avail;
}

bool preflight_memlock(uint64_t bytes) {
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_MEMLOCK, &rl) != 0) return false;
  if (rl.rlim_cur == RLIM_INFINITY || static_cast<uint64_t>(rl.rlim_cur) >= bytes) return true;
  log::warn(strf("the memlock limit (%s) is below the %s of pinned offload buffers: they fall "
                 "back to pageable memory (slower host<->device copies). HINT: raise it (ulimit "
                 "-l unlimited; in Slurm, PropagateResourceLimits / --propagate=MEMLOCK).",
                 format_size_approx(static_cast<uint64_t>(rl.rlim_cur)).c_str(),
                 format_size_approx(bytes).c_str()));
  return false;
}

}  // namespace zt::offload
