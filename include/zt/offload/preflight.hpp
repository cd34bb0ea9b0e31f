#pragma once
// Checks made before step 1, so a bad offload setup fails at start-up with a clear
// message instead of hours into a run: the NVMe directory exists, is a directory, is
// writable (not a read-only mount), and has room for what the store will write; the
// memlock limit allows the pinned buffers (CUDA builds). Failures are zt::InputError
// naming the path, the errno and a HINT.
#include <cstdint>
#include <string>

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

}  // namespace zt::offload
