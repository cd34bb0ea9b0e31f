#pragma once
// Checks made before step 1, so a bad offload setup fails at start-up with a clear
// message instead of hours into a run: the NVMe directory exists, is a directory, is
// writable (not a read-only mount), and has room for what the store will write; the
// memlock limit allows the pinned buffers (CUDA builds). Failures are zt::InputError
// naming the path, the errno and a HINT.
#include <cstdint>
#include <string>

#include "zt/core/memory.hpp"

namespace zt::offload {

// The per-rank file under dir: "<dir>/zt-offload-rank<R>.bin".
std::string nvme_file_path(const std::string& dir, int rank);

// Throws zt::InputError when `dir` is missing, not a directory, not writable, or has
// less than `bytes` available (statvfs f_bavail; an existing file of that name counts
// as free space since it is rewritten). Returns the bytes available.
uint64_t preflight_nvme(const std::string& dir, const std::string& file, uint64_t bytes);

// Whether RLIMIT_MEMLOCK allows `bytes` of page-locked memory (unlimited: yes). When it
// does not, warns (naming ulimit -l) and returns false: the caller uses pageable memory.
bool preflight_memlock(uint64_t bytes);

// MemAvailable of /proc/meminfo in bytes; 0 where unavailable (zt/core/memory.hpp).
using zt::mem_available;
// RLIMIT_MEMLOCK's soft limit in bytes; UINT64_MAX when unlimited or unknown.
uint64_t memlock_limit();

// The host memory an engine with offloaded state will hold on this rank (before any of it
// is allocated), for the preflight below.
struct HostNeed {
  uint64_t state = 0;         // the store: resident master + m + v, or the NVMe pipeline
  uint64_t params = 0;        // stage-3 parameter shards in host memory (offload.params = cpu)
  uint64_t grads = 0;         // fp32 gradient copies from a device (sub-groups, owned elements)
  uint64_t staging = 0;       // other host staging (one unit's parameter shard)
  uint64_t pinned = 0;        // the pinned pool's bound (offload.pinned_bytes); 0: no pinning
  int ranks_on_node = 1;      // ranks sharing this node's MemAvailable
  uint64_t total() const { return state + params + grads + staging + pinned; }
};

// Refuses (zt::InputError, exit 2) an offload setup the host cannot hold, before it is
// allocated, instead of letting the OOM killer end the run: need.total() x ranks_on_node
// above `available` (MemAvailable; 0 = unknown, not checked), or need.pinned above
// `memlock` (RLIMIT_MEMLOCK). The message gives the three numbers (needed, MemAvailable,
// memlock limit) and what to change.
void preflight_host_memory(const HostNeed& need, uint64_t available, uint64_t memlock);
// The same with this machine's MemAvailable and memlock limit.
void preflight_host_memory(const HostNeed& need);

}  // namespace zt::offload
