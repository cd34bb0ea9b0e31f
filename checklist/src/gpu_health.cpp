// GPU health through NVML (include/zt/check/health.hpp): one named check per concern per
// GPU, the verdict rules of docs/checklist.md ("Node health"). Every NVML call's return
// is looked at: NOT_SUPPORTED makes that check a SKIP, GPU_IS_LOST / RESET_REQUIRED a
// FAIL, any other error UNKNOWN with rank, host, call and a hint.
#include <optional>
#include <string>

#include "gpu_checks.hpp"
#include "node_files.hpp"
#include "zt/check/health.hpp"
#include "zt/core/log.hpp"

namespace zt::check {

struct GpuHealth::State {
  HealthOptions options;
  NvmlCaller caller;
  bool initialized = false;
  nvmlEventSet_t events = nullptr;
  std::vector<nvmlDevice_t> devices;
  std::vector<std::string> subjects;  // [gpu] "GPU i (name)"
  std::string skip_reason;            // set when NVML is not usable here

  HealthCheck make(const std::string& name, const std::string& subject) const {
    return caller.make(name, subject);
  }
  bool ok(HealthCheck& c, nvmlReturn_t rc, const char* call) const { return caller.ok(c, rc, call); }
};

namespace {

// Xids that mean the hardware, with what to do (NVIDIA's Xid catalog); others are WARN.
HealthAction xid_action(unsigned long long xid, HealthStatus* status) {
  *status = HealthStatus::kFail;
  switch (xid) {
    case 79: return HealthAction::kReboot;      // fell off the bus
    case 48: case 63: case 64: case 94: case 95:  // DBE, row remap event/failure, contained/uncontained ECC
      return HealthAction::kResetGpu;
    case 74: return HealthAction::kResetGpu;    // NVLink error
    case 92: return HealthAction::kMonitor;     // high single-bit ECC rate
    case 119: case 120: return HealthAction::kReboot;  // GSP errors
    default: *status = HealthStatus::kWarn; return HealthAction::kMonitor;
  }
}

}  // namespace

int expected_gpus(const HealthOptions& options, std::string* why_not) {
  if (options.gpus_per_node >= 0) return options.gpus_per_node;
  std::string why;
  const std::optional<uint64_t> v = env_whole_number("SLURM_GPUS_ON_NODE", 1023, &why);
  if (why_not != nullptr) *why_not = why;
  return v ? static_cast<int>(*v) : -1;
}

GpuHealth::GpuHealth(const HealthOptions& options, int rank, int node, std::string host)
    : state_(std::make_unique<State>()) {
  state_->options = options;
  state_->caller.rank = rank;
  state_->caller.node = node;
  state_->caller.host = std::move(host);
}

GpuHealth::~GpuHealth() {
  // Best effort at teardown: a failure here changes no verdict.
  if (state_->events != nullptr) state_->caller.nvml->EventSetFree(state_->events);
  if (state_->initialized) state_->caller.nvml->Shutdown();
}

std::vector<HealthCheck> GpuHealth::begin() {
  State& s = *state_;
  std::vector<HealthCheck> out;
  std::string expected_why_not;
  const int expected = expected_gpus(s.options, &expected_why_not);
  HealthCheck lib = s.make("gpu.nvml", "node");
  s.caller.nvml = &load_nvml(s.options.nvml_library);
  const Nvml& n = *s.caller.nvml;
  if (!n.why_not.empty()) {
    s.skip_reason = n.why_not;
  } else if (const nvmlReturn_t rc = n.Init_v2(); rc != NVML_SUCCESS) {
    s.skip_reason = "nvmlInit_v2: " + nvml_error(n, rc);
  }
  if (!s.skip_reason.empty()) {
    // No NVML: nothing to check unless GPUs are (or may be) expected here, then the node
    // is unknown.
    lib.status = expected > 0 || !expected_why_not.empty() ? HealthStatus::kUnknown : HealthStatus::kSkip;
    if (!expected_why_not.empty()) s.skip_reason += "; " + expected_why_not;
    lib.message = strf("%s%s", s.skip_reason.c_str(),
                       expected > 0 ? strf(" (%d GPUs expected: is the NVIDIA driver loaded?)", expected).c_str()
                                    : " (no GPU health checked)");
    out.push_back(lib);
    return out;
  }
  s.initialized = true;
  char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  int cuda = 0;
  if (s.ok(lib, n.SystemGetDriverVersion(driver, sizeof driver), "nvmlSystemGetDriverVersion") &&
      s.ok(lib, n.SystemGetCudaDriverVersion_v2(&cuda), "nvmlSystemGetCudaDriverVersion_v2")) {
    lib.message = strf("driver %s, CUDA %d.%d (%s)", driver, cuda / 1000, (cuda % 1000) / 10, n.library.c_str());
    add_number(lib, "cuda_driver_version", cuda);
  }
  out.push_back(lib);

  HealthCheck count = s.make("gpu.count", "node");
  unsigned found = 0;
  if (s.ok(count, n.DeviceGetCount_v2(&found), "nvmlDeviceGetCount_v2")) {
    add_number(count, "found", found);
    add_number(count, "expected", expected);
    if (!expected_why_not.empty()) {
      raise(count, HealthStatus::kUnknown, HealthAction::kNone);
      count.message = strf("%u GPUs; expected count unknown: %s (give --gpus-per-node, or fix the job's --gpus)",
                           found, expected_why_not.c_str());
    } else if (expected < 0) {
      count.message = strf("%u GPUs (no expected count: give --gpus-per-node, or run under Slurm with --gpus)", found);
    } else if (static_cast<int>(found) < expected) {
      raise(count, HealthStatus::kFail, HealthAction::kDrain);
      count.message = strf("%u GPUs, %d expected: %d missing", found, expected, expected - static_cast<int>(found));
    } else if (static_cast<int>(found) > expected) {
      raise(count, HealthStatus::kWarn, HealthAction::kMonitor);
      count.message = strf("%u GPUs, more than the %d expected", found, expected);
    } else {
      count.message = strf("%u GPUs, as expected", found);
    }
  }
  out.push_back(count);

  if (n.EventSetCreate(&s.events) != NVML_SUCCESS) s.events = nullptr;  // gpu.xid says so at finish
  for (unsigned i = 0; i < found; ++i) {
    HealthCheck dev = s.make("gpu.device", strf("GPU %u", i));
    nvmlDevice_t d = nullptr;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    char uuid[NVML_DEVICE_UUID_BUFFER_SIZE] = {};
    if (!s.ok(dev, n.DeviceGetHandleByIndex_v2(i, &d), "nvmlDeviceGetHandleByIndex_v2") ||
        !s.ok(dev, n.DeviceGetName(d, name, sizeof name), "nvmlDeviceGetName") ||
        !s.ok(dev, n.DeviceGetUUID(d, uuid, sizeof uuid), "nvmlDeviceGetUUID")) {
      out.push_back(dev);
      continue;
    }
    const std::string subject = strf("GPU %u (%s)", i, name);
    s.devices.push_back(d);
    s.subjects.push_back(subject);
    dev.subject = subject;
    dev.message = uuid;
    if (s.events != nullptr) {
      const nvmlReturn_t rc = n.DeviceRegisterEvents(d, kNvmlEventTypeXidCriticalError, s.events);
      if (rc != NVML_SUCCESS && rc != NVML_ERROR_NOT_SUPPORTED) s.ok(dev, rc, "nvmlDeviceRegisterEvents");
    }
    out.push_back(dev);
    for (HealthCheck& c : gpu_state_checks(s.caller, d, subject, s.options)) out.push_back(std::move(c));
  }
  return out;
}

std::vector<HealthCheck> GpuHealth::finish() {
  State& s = *state_;
  std::vector<HealthCheck> out;
  if (!s.initialized) return out;
  const Nvml& n = *s.caller.nvml;
  HealthCheck xid = s.make("gpu.xid", "node");
  if (s.events == nullptr) {
    xid.status = HealthStatus::kSkip;
    xid.message = "nvmlEventSetCreate failed: Xid events not watched";
  } else {
    std::string seen;
    int events = 0;
    for (int guard = 0; guard < 1024; ++guard) {
      nvmlEventData_t e{};
      const nvmlReturn_t rc = n.EventSetWait_v2(s.events, &e, 0);
      if (rc == NVML_ERROR_TIMEOUT) break;  // no more events
      if (!s.ok(xid, rc, "nvmlEventSetWait_v2")) break;
      ++events;
      size_t gpu = 0;
      while (gpu < s.devices.size() && s.devices[gpu] != e.device) ++gpu;
      HealthStatus st;
      const HealthAction a = xid_action(e.eventData, &st);
      raise(xid, st, a);
      seen += strf("%sXid %llu on %s", seen.empty() ? "" : ", ", e.eventData,
                   gpu < s.subjects.size() ? s.subjects[gpu].c_str() : "an unknown GPU");
    }
    add_number(xid, "events", events);
    if (xid.status != HealthStatus::kUnknown)
      xid.message = events == 0 ? "no Xid event during the check" : seen;
  }
  out.push_back(xid);

  HealthCheck kernel = s.make("gpu.kernel_xid", "node");
  std::string why_not;
  const std::vector<std::string> lines = kernel_xid_lines(s.options.sysfs_root, &why_not);
  if (!why_not.empty()) {
    kernel.status = HealthStatus::kSkip;
    kernel.message = why_not;
  } else {
    add_number(kernel, "lines", static_cast<double>(lines.size()));
    if (lines.empty()) {
      kernel.message = "no Xid line in the kernel log";
    } else {
      raise(kernel, HealthStatus::kWarn, HealthAction::kMonitor);
      kernel.message = strf("%zu Xid lines in the kernel log since boot; last: %s", lines.size(),
                            lines.back().c_str());
    }
  }
  out.push_back(kernel);
  return out;
}

}  // namespace zt::check
