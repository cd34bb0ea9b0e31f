#pragma once
// How much memory this process can still allocate, for checks made before a big
// allocation (issue 36, class 6): exit 2 with the bytes instead of the OOM killer or a
// bad_alloc. Used by zt generate's cache check and the converters.
#include <cstdint>
#include <string>

namespace zt {

// MemAvailable of /proc/meminfo in bytes; 0 where unavailable.
uint64_t mem_available();

// The smallest of MemAvailable, the room under this process's cgroup v2 memory.max
// (memory.max - memory.current) and the room under the address-space limit (ulimit -v,
// less what is mapped now); `text` names each that applies, for a message.
struct MemoryRoom {
  uint64_t bytes = 0;  // 0: none known (nothing is refused)
  std::string text;    // e.g. "MemAvailable 19.2G (/proc/meminfo), 824.5M left under ..."
};
MemoryRoom memory_room();

// Throws zt::InputError (exit 2) when `need` bytes exceed memory_room(): "WHAT needs about
// N bytes (SIZE: DETAIL); LIMITS", with `hint`.
void require_memory(double need, const std::string& what, const std::string& detail, const std::string& hint);

}  // namespace zt
