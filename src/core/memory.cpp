// The memory this process can still allocate (see zt/core/memory.hpp).
#include "zt/core/memory.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"

namespace zt {
namespace {

// The first number of a file (0 and false when unreadable or not a number: "max").
bool read_number(const std::string& path, uint64_t& v) {
  std::ifstream in(path);
  return static_cast<bool>(in >> v);
}

}  // namespace

uint64_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream fields(line.substr(13));
      uint64_t kib = 0;
      fields >> kib;
      return kib * 1024;
    }
  return 0;
}

MemoryRoom memory_room() {
  MemoryRoom r;
  const auto take = [&](uint64_t bytes, const std::string& text) {
    if (r.bytes == 0 || bytes < r.bytes) r.bytes = bytes;
    r.text += (r.text.empty() ? "" : ", ") + text;
  };
  if (const uint64_t avail = mem_available()) take(avail, "MemAvailable " + format_size_approx(avail) + " (/proc/meminfo)");
  // cgroup v2: /proc/self/cgroup holds "0::/PATH"; its limit is /sys/fs/cgroup/PATH/memory.max.
  std::ifstream cg("/proc/self/cgroup");
  std::string line;
  while (std::getline(cg, line))
    if (line.rfind("0::", 0) == 0) {
      const std::string dir = "/sys/fs/cgroup" + line.substr(3);
      uint64_t max = 0, current = 0;
      if (read_number(dir + "/memory.max", max) && read_number(dir + "/memory.current", current)) {
        const uint64_t room = max > current ? max - current : 0;
        take(room, format_size_approx(room) + " left under the cgroup's memory.max " + format_size_approx(max) +
                       " (" + dir + ")");
      }
    }
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    long pages = 0;  // the address space mapped now: /proc/self/statm's first field
    if (std::FILE* statm = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(statm, "%ld", &pages) != 1) pages = 0;
      std::fclose(statm);
    }
    const uint64_t mapped = static_cast<uint64_t>(pages) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    const uint64_t room = as.rlim_cur > mapped ? as.rlim_cur - mapped : 0;
    take(room, format_size_approx(room) + " left under the address-space limit (ulimit -v " +
                   format_size_approx(static_cast<uint64_t>(as.rlim_cur)) + ")");
  }
  return r;
}

void require_memory(double need, const std::string& what, const std::string& detail, const std::string& hint) {
  const MemoryRoom room = memory_room();
  if (room.bytes == 0 || need <= static_cast<double>(room.bytes)) return;
  throw InputError(strf("%s needs about %.0f bytes (%s%s%s); %s", what.c_str(), need,
                        format_size_approx(static_cast<uint64_t>(need)).c_str(), detail.empty() ? "" : ": ",
                        detail.c_str(), room.text.c_str()),
                   hint);
}

}  // namespace zt
