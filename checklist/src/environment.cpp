// The environment section: per-rank facts gathered to every rank, versions and
// libfabric providers from rank 0, and the warnings they call for.
#include "zt/check/environment.hpp"

#include <dlfcn.h>
#include <hdf5.h>
#include <rdma/fabric.h>
#include <sys/resource.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <set>

#include "cuda_facts.hpp"
#include "zt/comm/nccl_comm.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"

namespace zt::check {
namespace {

constexpr size_t kNameBytes = 64;          // host and device names, truncated
constexpr uint64_t kMinShmBytes = uint64_t{1} << 30;

int64_t memlock_limit() {
  struct rlimit lim {};
  if (getrlimit(RLIMIT_MEMLOCK, &lim) != 0) return 0;
  if (lim.rlim_cur == RLIM_INFINITY) return -1;
  return static_cast<int64_t>(lim.rlim_cur);
}

uint64_t shm_size() {
  struct statvfs st {};
  if (statvfs("/dev/shm", &st) != 0) return 0;
  return static_cast<uint64_t>(st.f_blocks) * static_cast<uint64_t>(st.f_frsize);
}

std::string hdf5_version() {
  unsigned maj = 0, min = 0, rel = 0;
  if (H5get_libversion(&maj, &min, &rel) < 0) return "unknown (H5get_libversion failed)";
  return strf("%u.%u.%u", maj, min, rel);
}

// libfabric, loaded when asked for rather than linked. Debian's libfabric depends on the
// PSM libraries, and libinfinipath's constructor takes over SIGTERM and SIGINT while it
// calibrates (0.1-0.4 s) before main: linked, it made a stop request in a zt process's
// first moments end the rank with exit 1 and no message (docs/reliability.md, signals).
// Loaded here, only `zt check` pays for it; MPI_Init's own dlopen of it leaves the
// process's handlers alone.
struct Libfabric {
  uint32_t (*version)() = nullptr;
  int (*getinfo)(uint32_t, const char*, const char*, uint64_t, const struct fi_info*,
                 struct fi_info**) = nullptr;
  void (*freeinfo)(struct fi_info*) = nullptr;
  const char* (*strerror)(int) = nullptr;
  std::string why_not;  // empty when every entry point loaded
};

const Libfabric& libfabric() {
  static const Libfabric lib = [] {
    Libfabric l;
    void* h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);  // kept open for the process
    if (h == nullptr) {
      const char* e = dlerror();
      l.why_not = strf("libfabric.so.1 did not load: %s", e ? e : "unknown dlopen error");
      return l;
    }
    l.version = reinterpret_cast<decltype(l.version)>(dlsym(h, "fi_version"));
    l.getinfo = reinterpret_cast<decltype(l.getinfo)>(dlsym(h, "fi_getinfo"));
    l.freeinfo = reinterpret_cast<decltype(l.freeinfo)>(dlsym(h, "fi_freeinfo"));
    l.strerror = reinterpret_cast<decltype(l.strerror)>(dlsym(h, "fi_strerror"));
    if (!l.version || !l.getinfo || !l.freeinfo || !l.strerror)
      l.why_not = "libfabric.so.1 lacks fi_version/fi_getinfo/fi_freeinfo/fi_strerror";
    return l;
  }();
  return lib;
}

std::string libfabric_version() {
  const Libfabric& fi = libfabric();
  if (!fi.why_not.empty()) return "not found (" + fi.why_not + ")";
  const uint32_t v = fi.version();
  return strf("%u.%u", FI_MAJOR(v), FI_MINOR(v));
}

}  // namespace

// Distinct prov_name of every fabric interface fi_getinfo reports, sorted.
std::vector<std::string> libfabric_providers(std::vector<std::string>* warnings) {
  const Libfabric& fi = libfabric();
  if (!fi.why_not.empty()) {
    warnings->push_back(fi.why_not + "; install libfabric1 to list the fabric providers");
    return {};
  }
  struct fi_info* info = nullptr;
  const int rc = fi.getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), nullptr, nullptr,
                            0, nullptr, &info);
  if (rc == -FI_ENODATA) return {};
  if (rc != 0) {
    warnings->push_back(strf("fi_getinfo failed: %s", fi.strerror(-rc)));
    return {};
  }
  std::set<std::string> names;
  for (const struct fi_info* i = info; i != nullptr; i = i->next)
    if (i->fabric_attr != nullptr && i->fabric_attr->prov_name != nullptr)
      names.insert(i->fabric_attr->prov_name);
  fi.freeinfo(info);
  return {names.begin(), names.end()};
}

namespace {

void copy_name(const std::string& from, uint8_t* to) {
  std::memset(to, 0, kNameBytes);
  std::memcpy(to, from.data(), std::min(from.size(), kNameBytes - 1));
}

std::string read_name(const uint8_t* from) {
  const char* c = reinterpret_cast<const char*>(from);
  return std::string(c, strnlen(c, kNameBytes));
}

// Rank 0 asks libfabric (fi_getinfo can be slow); every rank gets its answer, so the
// report is the same everywhere. Wire format: lines; a line "!text" is a warning.
std::vector<std::string> providers_from_rank0(comm::Comm& control,
                                              std::vector<std::string>* warnings) {
  std::string text;
  if (control.rank() == 0) {
    std::vector<std::string> w;
    for (const std::string& p : libfabric_providers(&w)) text += p + "\n";
    for (const std::string& x : w) text += "!" + x + "\n";
  }
  int64_t length = static_cast<int64_t>(text.size());
  control.broadcast(&length, 1, DType::kI64, 0);
  text.resize(static_cast<size_t>(length));
  if (length > 0) control.broadcast(text.data(), text.size(), DType::kU8, 0);
  std::vector<std::string> providers;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end - start);
    if (!line.empty() && line[0] == '!') warnings->push_back(line.substr(1));
    else if (!line.empty()) providers.push_back(line);
    start = end + 1;
  }
  return providers;
}

}  // namespace

RankInfo local_rank_info(const runtime::Runtime& runtime) {
  const runtime::Topology& t = runtime.topology();
  RankInfo r;
  r.rank = t.world_rank;
  r.host = t.host;
  r.node = t.node;
  r.local_rank = t.local_rank;
  r.device = runtime.device();
  r.visible_gpus = runtime.visible_devices();
  r.device_name = runtime.device() >= 0 ? query_cuda(runtime.device()).device_name : "";
  r.memlock_bytes = memlock_limit();
  r.shm_bytes = shm_size();
  return r;
}

std::vector<std::string> environment_warnings(const std::vector<RankInfo>& ranks) {
  std::vector<std::string> w;
  // Group per host: a limit is usually the same on every rank of a host.
  std::map<std::string, const RankInfo*> first_on_host;
  std::map<std::string, int> ranks_on_host;
  for (const RankInfo& r : ranks) {
    first_on_host.emplace(r.host, &r);
    ++ranks_on_host[r.host];
  }
  for (const auto& [host, r] : first_on_host) {
    if (r->memlock_bytes >= 0)
      w.push_back(strf("host %s: memlock limit is %s, not unlimited; RDMA transports (InfiniBand, "
                       "EFA, RoCE) pin memory. HINT: ulimit -l unlimited, or set memlock in "
                       "/etc/security/limits.conf and Slurm's PropagateResourceLimits",
                       host.c_str(), format_size(static_cast<uint64_t>(r->memlock_bytes)).c_str()));
    if (r->shm_bytes < kMinShmBytes)
      w.push_back(strf("host %s: /dev/shm is %s (under 1G); NCCL and MPI use it between ranks of "
                       "a node. HINT: in containers pass --shm-size=8g or --ipc=host",
                       host.c_str(), format_size(r->shm_bytes).c_str()));
    if (r->visible_gpus > 0 && ranks_on_host[host] > r->visible_gpus)
      w.push_back(strf("host %s: %d ranks share %d GPUs; zt runs one rank per GPU",
                       host.c_str(), ranks_on_host[host], r->visible_gpus));
  }
  return w;
}

Environment collect_environment(const runtime::Runtime& runtime, comm::Comm& control) {
  ZT_CHECK(control.memory() == comm::Memory::kHost, "control comm must use host memory",
           "pass an MpiComm as the control comm");
  const int n = control.size();
  const RankInfo mine = local_rank_info(runtime);

  // Numbers: [n][6] = node, local_rank, device, visible_gpus, memlock, shm.
  constexpr size_t kFields = 6;
  std::array<int64_t, kFields> my_numbers = {mine.node, mine.local_rank, mine.device,
                                             mine.visible_gpus, mine.memlock_bytes,
                                             static_cast<int64_t>(mine.shm_bytes)};
  std::vector<int64_t> numbers(kFields * static_cast<size_t>(n));
  control.all_gather(my_numbers.data(), numbers.data(), kFields, DType::kI64);
  // Names: [n][2][kNameBytes] = host, device name.
  std::vector<uint8_t> my_names(2 * kNameBytes);
  copy_name(mine.host, my_names.data());
  copy_name(mine.device_name, my_names.data() + kNameBytes);
  std::vector<uint8_t> names(2 * kNameBytes * static_cast<size_t>(n));
  control.all_gather(my_names.data(), names.data(), 2 * kNameBytes, DType::kU8);

  Environment env;
  for (int r = 0; r < n; ++r) {
    const int64_t* num = numbers.data() + kFields * static_cast<size_t>(r);
    const uint8_t* name = names.data() + 2 * kNameBytes * static_cast<size_t>(r);
    RankInfo info;
    info.rank = r;
    info.host = read_name(name);
    info.device_name = read_name(name + kNameBytes);
    info.node = static_cast<int>(num[0]);
    info.local_rank = static_cast<int>(num[1]);
    info.device = static_cast<int>(num[2]);
    info.visible_gpus = static_cast<int>(num[3]);
    info.memlock_bytes = num[4];
    info.shm_bytes = static_cast<uint64_t>(num[5]);
    env.ranks.push_back(info);
  }
  env.warnings = environment_warnings(env.ranks);

  const CudaFacts cuda = query_cuda(runtime.device());
  const std::string nccl = comm::nccl_version();
  env.versions = {{"mpi", runtime::Runtime::mpi_library_version()},
                  {"nccl", nccl.empty() ? "not built with CUDA" : nccl},
                  {"cuda_driver", cuda.driver_version},
                  {"cuda_runtime", cuda.runtime_version},
                  {"hdf5", hdf5_version()},
                  {"libfabric", libfabric_version()}};
  env.cuda = cuda.summary;
  env.fabric_providers = providers_from_rank0(control, &env.warnings);
  return env;
}

}  // namespace zt::check
