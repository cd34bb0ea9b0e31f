// dlopen of NVML and its entry points (nvml.hpp).
#include "nvml.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include "zt/core/log.hpp"

namespace zt::check {
namespace {

template <typename F>
void resolve(void* handle, const char* name, F& fn, std::string& missing) {
  fn = reinterpret_cast<F>(dlsym(handle, name));
  if (fn == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(name);
}

Nvml open_nvml(const std::string& library) {
  Nvml n;
  n.library = library;
  void* h = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);  // kept open for the process
  if (h == nullptr) {
    const char* e = dlerror();
    n.why_not = strf("%s did not load: %s", library.c_str(), e ? e : "unknown dlopen error");
    return n;
  }
  std::string missing;
#define ZT_NVML_RESOLVE(fn) resolve(h, "nvml" #fn, n.fn, missing)
  ZT_NVML_RESOLVE(Init_v2);
  ZT_NVML_RESOLVE(Shutdown);
  ZT_NVML_RESOLVE(ErrorString);
  ZT_NVML_RESOLVE(SystemGetDriverVersion);
  ZT_NVML_RESOLVE(SystemGetCudaDriverVersion_v2);
  ZT_NVML_RESOLVE(DeviceGetCount_v2);
  ZT_NVML_RESOLVE(DeviceGetHandleByIndex_v2);
  ZT_NVML_RESOLVE(DeviceGetName);
  ZT_NVML_RESOLVE(DeviceGetUUID);
  ZT_NVML_RESOLVE(DeviceGetEccMode);
  ZT_NVML_RESOLVE(DeviceGetTotalEccErrors);
  ZT_NVML_RESOLVE(DeviceGetRetiredPages);
  ZT_NVML_RESOLVE(DeviceGetRetiredPagesPendingStatus);
  ZT_NVML_RESOLVE(DeviceGetRemappedRows);
  ZT_NVML_RESOLVE(DeviceGetClockInfo);
  ZT_NVML_RESOLVE(DeviceGetMaxClockInfo);
  ZT_NVML_RESOLVE(DeviceGetCurrentClocksThrottleReasons);
  ZT_NVML_RESOLVE(DeviceGetTemperature);
  ZT_NVML_RESOLVE(DeviceGetTemperatureThreshold);
  ZT_NVML_RESOLVE(DeviceGetPowerUsage);
  ZT_NVML_RESOLVE(DeviceGetEnforcedPowerLimit);
  ZT_NVML_RESOLVE(DeviceGetCurrPcieLinkGeneration);
  ZT_NVML_RESOLVE(DeviceGetMaxPcieLinkGeneration);
  ZT_NVML_RESOLVE(DeviceGetCurrPcieLinkWidth);
  ZT_NVML_RESOLVE(DeviceGetMaxPcieLinkWidth);
  ZT_NVML_RESOLVE(DeviceGetNvLinkState);
  ZT_NVML_RESOLVE(DeviceGetNvLinkErrorCounter);
  ZT_NVML_RESOLVE(DeviceGetPersistenceMode);
  ZT_NVML_RESOLVE(EventSetCreate);
  ZT_NVML_RESOLVE(DeviceRegisterEvents);
  ZT_NVML_RESOLVE(EventSetWait_v2);
  ZT_NVML_RESOLVE(EventSetFree);
#undef ZT_NVML_RESOLVE
  if (!missing.empty())
    n.why_not = strf("%s lacks %s (a driver older than 450?)", library.c_str(), missing.c_str());
  return n;
}

}  // namespace

const Nvml& load_nvml(const std::string& library) {
  static std::mutex mutex;
  static std::map<std::string, Nvml> loaded;
  const char* env = std::getenv("ZT_NVML_LIBRARY");
  const std::string path = env && *env ? env : library;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find(path);
  if (it == loaded.end()) it = loaded.emplace(path, open_nvml(path)).first;
  return it->second;
}

std::string nvml_error(const Nvml& nvml, nvmlReturn_t rc) {
  const char* name = "NVML error";
  switch (rc) {
    case NVML_ERROR_UNINITIALIZED: name = "NVML_ERROR_UNINITIALIZED"; break;
    case NVML_ERROR_INVALID_ARGUMENT: name = "NVML_ERROR_INVALID_ARGUMENT"; break;
    case NVML_ERROR_NOT_SUPPORTED: name = "NVML_ERROR_NOT_SUPPORTED"; break;
    case NVML_ERROR_NO_PERMISSION: name = "NVML_ERROR_NO_PERMISSION"; break;
    case NVML_ERROR_NOT_FOUND: name = "NVML_ERROR_NOT_FOUND"; break;
    case NVML_ERROR_INSUFFICIENT_SIZE: name = "NVML_ERROR_INSUFFICIENT_SIZE"; break;
    case NVML_ERROR_DRIVER_NOT_LOADED: name = "NVML_ERROR_DRIVER_NOT_LOADED"; break;
    case NVML_ERROR_TIMEOUT: name = "NVML_ERROR_TIMEOUT"; break;
    case NVML_ERROR_GPU_IS_LOST: name = "NVML_ERROR_GPU_IS_LOST"; break;
    case NVML_ERROR_RESET_REQUIRED: name = "NVML_ERROR_RESET_REQUIRED"; break;
    default: break;
  }
  const char* text = nvml.ErrorString ? nvml.ErrorString(rc) : nullptr;
  return strf("%s %d (%s)", name, rc, text ? text : "no description");
}

}  // namespace zt::check
