// A test double of libnvidia-ml: exports the NVML entry points zt calls
// (checklist/src/nvml.hpp) and answers from the scenario file named by
// $ZT_FAKE_NVML_SCENARIO (JSON): {"gpus": N, "default": {field: value}, "gpu": {"3":
// {field: value}}, "driver": "...", "cuda": 12040, "init": 0}. Every field has a healthy
// H100 default (below); a scenario names only what it breaks. zt loads it through
// $ZT_NVML_LIBRARY, exactly as it loads the real library (dlopen + dlsym by name).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nvml_abi.hpp"

namespace {

using nlohmann::json;

const json kHealthy = {
    {"name", "NVIDIA H100 80GB HBM3"}, {"ecc_mode", 1}, {"ecc_pending", 1},
    {"volatile_uncorrected", 0}, {"aggregate_uncorrected", 0},
    {"retired_supported", false}, {"retired_pending", 0}, {"retired_sbe", 0}, {"retired_dbe", 0},
    {"remap_corrected", 0}, {"remap_uncorrected", 0}, {"remap_pending", 0}, {"remap_failure", 0},
    {"sm", 1980}, {"sm_max", 1980}, {"mem", 2619}, {"mem_max", 2619}, {"throttle", 0},
    {"temp", 41}, {"slowdown", 87}, {"shutdown", 92}, {"power_mw", 120000}, {"limit_mw", 700000},
    {"gen", 5}, {"gen_max", 5}, {"width", 16}, {"width_max", 16},
    {"nvlinks", 18}, {"nvlink_down", json::array()}, {"nvlink_replay", 0}, {"nvlink_recovery", 0},
    {"nvlink_crc_flit", 0}, {"nvlink_crc_data", 0}, {"persistence", 1}, {"xids", json::array()},
    {"error", json::object()}};  // {"nvmlDeviceGetX": code}: that call fails on this GPU

struct Fake {
  json top;
  std::vector<json> gpus;
  std::vector<std::pair<size_t, unsigned long long>> events;  // pending Xid events
  bool loaded = false;
};

Fake& fake() {
  static Fake f;
  if (f.loaded) return f;
  f.loaded = true;
  const char* path = std::getenv("ZT_FAKE_NVML_SCENARIO");
  std::ifstream in(path ? path : "");
  if (!in) {
    std::fprintf(stderr, "fake_nvml: ZT_FAKE_NVML_SCENARIO '%s' not readable\n", path ? path : "");
    std::abort();
  }
  f.top = json::parse(in);
  const int n = f.top.value("gpus", 8);
  for (int i = 0; i < n; ++i) {
    json g = kHealthy;
    if (f.top.contains("default")) g.update(f.top["default"]);
    const std::string key = std::to_string(i);
    if (f.top.contains("gpu") && f.top["gpu"].contains(key)) g.update(f.top["gpu"][key]);
    for (const json& x : g["xids"]) f.events.emplace_back(static_cast<size_t>(i), x.get<unsigned long long>());
    f.gpus.push_back(g);
  }
  return f;
}

size_t index_of(nvmlDevice_t d) { return reinterpret_cast<size_t>(d) - 1; }
const json& gpu(nvmlDevice_t d) { return fake().gpus.at(index_of(d)); }
// A forced error for this call on this GPU, else success.
nvmlReturn_t forced(nvmlDevice_t d, const char* call) {
  const json& e = gpu(d)["error"];
  return e.contains(call) ? e[call].get<int>() : NVML_SUCCESS;
}
template <typename T>
nvmlReturn_t answer(nvmlDevice_t d, const char* call, const char* field, T* out) {
  if (const nvmlReturn_t rc = forced(d, call); rc != NVML_SUCCESS) return rc;
  *out = gpu(d)[field].get<T>();
  return NVML_SUCCESS;
}

}  // namespace

#define ZT_EXPORT extern "C" __attribute__((visibility("default")))

ZT_EXPORT nvmlReturn_t nvmlInit_v2() { return fake().top.value("init", 0); }
ZT_EXPORT nvmlReturn_t nvmlShutdown() { return NVML_SUCCESS; }
ZT_EXPORT const char* nvmlErrorString(nvmlReturn_t rc) {
  return rc == NVML_ERROR_NOT_SUPPORTED ? "Not Supported" : rc == NVML_ERROR_GPU_IS_LOST ? "GPU is lost" : "Unknown Error";
}
ZT_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* out, unsigned n) {
  std::snprintf(out, n, "%s", fake().top.value("driver", "550.54.15").c_str());
  return NVML_SUCCESS;
}
ZT_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* v) {
  *v = fake().top.value("cuda", 12040);
  return NVML_SUCCESS;
}
ZT_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* n) {
  *n = static_cast<unsigned>(fake().gpus.size());
  return NVML_SUCCESS;
}
ZT_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t* d) {
  if (i >= fake().gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *d = reinterpret_cast<nvmlDevice_t>(static_cast<size_t>(i) + 1);
  return NVML_SUCCESS;
}
ZT_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* out, unsigned n) {
  std::snprintf(out, n, "%s", gpu(d)["name"].get<std::string>().c_str());
  return forced(d, "nvmlDeviceGetName");
}
ZT_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* out, unsigned n) {
  std::snprintf(out, n, "GPU-fake-%zu", index_of(d));
  return NVML_SUCCESS;
}
ZT_EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t d, nvmlEnableState_t* cur, nvmlEnableState_t* pend) {
  if (const nvmlReturn_t rc = answer(d, "nvmlDeviceGetEccMode", "ecc_mode", cur); rc != NVML_SUCCESS) return rc;
  return answer(d, "nvmlDeviceGetEccMode", "ecc_pending", pend);
}
ZT_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int type, int counter, unsigned long long* v) {
  if (type != NVML_MEMORY_ERROR_TYPE_UNCORRECTED) return NVML_ERROR_INVALID_ARGUMENT;
  return answer(d, "nvmlDeviceGetTotalEccErrors",
                counter == NVML_VOLATILE_ECC ? "volatile_uncorrected" : "aggregate_uncorrected", v);
}
ZT_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t d, int cause, unsigned* count, unsigned long long*) {
  if (!gpu(d)["retired_supported"].get<bool>()) return NVML_ERROR_NOT_SUPPORTED;
  const unsigned have = gpu(d)[cause == 1 ? "retired_dbe" : "retired_sbe"].get<unsigned>();
  const bool fits = *count >= have;
  *count = have;
  return fits ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
}
ZT_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t d, nvmlEnableState_t* p) {
  if (!gpu(d)["retired_supported"].get<bool>()) return NVML_ERROR_NOT_SUPPORTED;
  return answer(d, "nvmlDeviceGetRetiredPagesPendingStatus", "retired_pending", p);
}
ZT_EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned* c, unsigned* u, unsigned* p, unsigned* f) {
  if (const nvmlReturn_t rc = forced(d, "nvmlDeviceGetRemappedRows"); rc != NVML_SUCCESS) return rc;
  *c = gpu(d)["remap_corrected"];
  *u = gpu(d)["remap_uncorrected"];
  *p = gpu(d)["remap_pending"];
  *f = gpu(d)["remap_failure"];
  return NVML_SUCCESS;
}
ZT_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned* v) {
  return answer(d, "nvmlDeviceGetClockInfo", type == NVML_CLOCK_MEM ? "mem" : "sm", v);
}
ZT_EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t d, int type, unsigned* v) {
  return answer(d, "nvmlDeviceGetMaxClockInfo", type == NVML_CLOCK_MEM ? "mem_max" : "sm_max", v);
}
ZT_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long* v) {
  return answer(d, "nvmlDeviceGetCurrentClocksThrottleReasons", "throttle", v);
}
ZT_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int, unsigned* v) {
  return answer(d, "nvmlDeviceGetTemperature", "temp", v);
}
ZT_EXPORT nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t d, int type, unsigned* v) {
  return answer(d, "nvmlDeviceGetTemperatureThreshold",
                type == NVML_TEMPERATURE_THRESHOLD_SLOWDOWN ? "slowdown" : "shutdown", v);
}
ZT_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned* v) {
  return answer(d, "nvmlDeviceGetPowerUsage", "power_mw", v);
}
ZT_EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned* v) {
  return answer(d, "nvmlDeviceGetEnforcedPowerLimit", "limit_mw", v);
}
ZT_EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned* v) {
  return answer(d, "nvmlDeviceGetCurrPcieLinkGeneration", "gen", v);
}
ZT_EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t d, unsigned* v) {
  return answer(d, "nvmlDeviceGetMaxPcieLinkGeneration", "gen_max", v);
}
ZT_EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned* v) {
  return answer(d, "nvmlDeviceGetCurrPcieLinkWidth", "width", v);
}
ZT_EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t d, unsigned* v) {
  return answer(d, "nvmlDeviceGetMaxPcieLinkWidth", "width_max", v);
}
ZT_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned link, nvmlEnableState_t* s) {
  if (link >= gpu(d)["nvlinks"].get<unsigned>()) return NVML_ERROR_INVALID_ARGUMENT;
  *s = NVML_FEATURE_ENABLED;
  for (const json& down : gpu(d)["nvlink_down"])
    if (down.get<unsigned>() == link) *s = NVML_FEATURE_DISABLED;
  return forced(d, "nvmlDeviceGetNvLinkState");
}
ZT_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t d, unsigned, int counter, unsigned long long* v) {
  const char* fields[] = {"nvlink_replay", "nvlink_recovery", "nvlink_crc_flit", "nvlink_crc_data"};
  return answer(d, "nvmlDeviceGetNvLinkErrorCounter", fields[counter & 3], v);
}
ZT_EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, nvmlEnableState_t* v) {
  return answer(d, "nvmlDeviceGetPersistenceMode", "persistence", v);
}
ZT_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  *set = reinterpret_cast<nvmlEventSet_t>(&fake());
  return NVML_SUCCESS;
}
ZT_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t, unsigned long long, nvmlEventSet_t) {
  return NVML_SUCCESS;
}
ZT_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t, nvmlEventData_t* e, unsigned) {
  Fake& f = fake();
  if (f.events.empty()) return NVML_ERROR_TIMEOUT;
  std::memset(e, 0, sizeof *e);
  e->device = reinterpret_cast<nvmlDevice_t>(f.events.front().first + 1);
  e->eventType = kNvmlEventTypeXidCriticalError;
  e->eventData = f.events.front().second;
  f.events.erase(f.events.begin());
  return NVML_SUCCESS;
}
ZT_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t) { return NVML_SUCCESS; }
