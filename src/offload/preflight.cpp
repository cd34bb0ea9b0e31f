// Start-up checks of the offload homes (see preflight.hpp).
#include "zt/offload/preflight.hpp"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

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
  const uint64_t limit = memlock_limit();
  if (limit >= bytes) return true;
  log::warn(strf("the memlock limit (%s) is below the %s of pinned offload buffers: they fall "
                 "back to pageable memory (slower host<->device copies). HINT: raise it (ulimit "
                 "-l unlimited; in Slurm, PropagateResourceLimits / --propagate=MEMLOCK).",
                 format_size_approx(limit).c_str(),
                 format_size_approx(bytes).c_str()));
  return false;
}

uint64_t memlock_limit() {
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    return std::numeric_limits<uint64_t>::max();
  return static_cast<uint64_t>(rl.rlim_cur);
}

void preflight_host_memory(const HostNeed& need, uint64_t available, uint64_t memlock) {
  const uint64_t node_need = need.total() * static_cast<uint64_t>(std::max(need.ranks_on_node, 1));
  const bool short_ram = available > 0 && node_need > available;
  const bool short_lock = need.pinned > memlock;
  if (!short_ram && !short_lock) return;
  const auto sz = [](uint64_t b) { return format_size_approx(b); };
  const std::string lock = memlock == std::numeric_limits<uint64_t>::max() ? "unlimited" : sz(memlock);
  std::string parts = strf("optimizer state %s", sz(need.state).c_str());
  if (need.params) parts += strf(", parameter shards %s", sz(need.params).c_str());
  if (need.grads) parts += strf(", gradient copies %s", sz(need.grads).c_str());
  if (need.staging) parts += strf(", staging %s", sz(need.staging).c_str());
  if (need.pinned) parts += strf(", pinned pool %s", sz(need.pinned).c_str());
  std::string hint;
  if (short_ram)
    hint += "the offloaded state does not fit in host memory: offload.optimizer = nvme keeps "
            "only offload.buffers sub-groups of it in host memory (offload.params = nvme the "
            "same for the shards); or use more nodes (fewer ranks per node), or a smaller "
            "model. ";
  if (short_lock)
    hint += "the pinned pool exceeds the memlock limit: lower offload.pinned_bytes to at most "
            "the limit (it bounds the pinned buffers; it must hold two sub-groups of fp32, "
            "offload.subgroup_bytes * 2 / 3, and smaller means more waiting on copies), or "
            "raise the limit (ulimit -l unlimited; in Slurm "
            "PropagateResourceLimits / --propagate=MEMLOCK; in Docker --ulimit memlock=-1).";
  throw InputError(
      strf("host memory for the offloaded state: needed %s on this rank (%s) x %d rank%s on "
           "this node = %s; MemAvailable %s (/proc/meminfo); memlock limit %s (RLIMIT_MEMLOCK, "
           "ulimit -l) for a pinned pool of %s",
           sz(need.total()).c_str(), parts.c_str(), std::max(need.ranks_on_node, 1),
           need.ranks_on_node > 1 ? "s" : "", sz(node_need).c_str(),
           available ? sz(available).c_str() : "unknown", lock.c_str(), sz(need.pinned).c_str()),
      hint);
}

void preflight_host_memory(const HostNeed& need) {
  preflight_host_memory(need, mem_available(), memlock_limit());
}

}  // namespace zt::offload
