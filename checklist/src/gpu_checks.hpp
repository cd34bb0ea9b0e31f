#pragma once
// Shared by gpu_health.cpp (the session: NVML init, count, Xid events) and
// gpu_checks.cpp (the checks of one GPU's state).
#include <string>
#include <vector>

#include "nvml.hpp"
#include "zt/check/health.hpp"

namespace zt::check {

// Who calls NVML, for the checks it makes and the errors it names.
struct NvmlCaller {
  const Nvml* nvml = nullptr;
  int rank = 0;
  int node = 0;
  std::string host;

  HealthCheck make(const std::string& name, const std::string& subject) const;
  // True on success; otherwise sets the check's status, action and message:
  // NOT_SUPPORTED a SKIP, GPU_IS_LOST a FAIL (REBOOT), RESET_REQUIRED a FAIL (RESET_GPU),
  // anything else UNKNOWN naming rank, host, the call and a hint.
  bool ok(HealthCheck& c, nvmlReturn_t rc, const char* call) const;
};

// Raises c to `s` with action `a` when `s` is worse than what c holds.
void raise(HealthCheck& c, HealthStatus s, HealthAction a);
void add_number(HealthCheck& c, const char* key, double value);

// ECC, retired pages, row remapping, clocks and throttle reasons, temperature, power,
// PCIe link, NVLink, persistence mode of one GPU.
std::vector<HealthCheck> gpu_state_checks(const NvmlCaller& caller, nvmlDevice_t device,
                                          const std::string& subject, const HealthOptions& options);

}  // namespace zt::check
