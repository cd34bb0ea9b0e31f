// The checks of one GPU's state through NVML (gpu_checks.hpp); the rules and actions
// are docs/checklist.md's "Node health" table.
// Every verdict is tagged `// rule: <name>`; tests/checklist/health_rules_test.py has one
// scenario through the NVML double per rule (and per Xid of gpu_health.cpp's table).
#include "gpu_checks.hpp"

#include "zt/core/log.hpp"

namespace zt::check {

HealthCheck NvmlCaller::make(const std::string& name, const std::string& subject) const {
  HealthCheck c;
  c.name = name;
  c.node = node;
  c.host = host;
  c.subject = subject;
  return c;
}

bool NvmlCaller::ok(HealthCheck& c, nvmlReturn_t rc, const char* call) const {
  if (rc == NVML_SUCCESS) return true;
  const std::string err = nvml_error(*nvml, rc);
  if (rc == NVML_ERROR_NOT_SUPPORTED) {
    c.status = HealthStatus::kSkip;  // rule: nvml_not_supported
    c.message = strf("not supported on this GPU (%s)", call);
  } else if (rc == NVML_ERROR_GPU_IS_LOST) {
    raise(c, HealthStatus::kFail, HealthAction::kReboot);  // rule: nvml_gpu_lost
    c.message = strf("%s: %s: the GPU fell off the bus", call, err.c_str());
  } else if (rc == NVML_ERROR_RESET_REQUIRED) {
    raise(c, HealthStatus::kFail, HealthAction::kResetGpu);  // rule: nvml_reset_required
    c.message = strf("%s: %s", call, err.c_str());
  } else {
    raise(c, HealthStatus::kUnknown, HealthAction::kNone);  // rule: nvml_error
    c.message = strf("[rank %d on %s] %s: %s. HINT: check the driver (nvidia-smi -q) and that "
                     "this user may query the GPU",
                     rank, host.c_str(), call, err.c_str());
  }
  return false;
}

namespace {

// Severity for raising: SKIP < PASS < WARN < UNKNOWN < FAIL.
int severity(HealthStatus s) {
  switch (s) {
    case HealthStatus::kSkip: return 0;
    case HealthStatus::kPass: return 1;
    case HealthStatus::kWarn: return 2;
    case HealthStatus::kUnknown: return 3;
    case HealthStatus::kFail: return 4;
  }
  return 0;
}

const char* on_off(nvmlEnableState_t s) { return s == NVML_FEATURE_ENABLED ? "on" : "off"; }

HealthCheck ecc(const NvmlCaller& k, nvmlDevice_t d, const std::string& subject) {
  const Nvml& n = *k.nvml;
  HealthCheck c = k.make("gpu.ecc", subject);
  nvmlEnableState_t current = 0, pending = 0;
  unsigned long long volatile_dbe = 0, aggregate_dbe = 0;
  if (!k.ok(c, n.DeviceGetEccMode(d, &current, &pending), "nvmlDeviceGetEccMode")) return c;
  if (current != NVML_FEATURE_ENABLED) {
    raise(c, HealthStatus::kWarn, HealthAction::kMonitor);  // rule: ecc_off
    c.message = strf("ECC is off (pending %s): errors in memory go unnoticed", on_off(pending));
    return c;
  }
  if (!k.ok(c, n.DeviceGetTotalEccErrors(d, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &volatile_dbe),
            "nvmlDeviceGetTotalEccErrors(uncorrected, volatile)") ||
      !k.ok(c, n.DeviceGetTotalEccErrors(d, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC, &aggregate_dbe),
            "nvmlDeviceGetTotalEccErrors(uncorrected, aggregate)"))
    return c;
  add_number(c, "volatile_uncorrected", static_cast<double>(volatile_dbe));
  add_number(c, "aggregate_uncorrected", static_cast<double>(aggregate_dbe));
  c.message = strf("ECC on. uncorrectable errors: %llu since the last reset, %llu over the GPU's life",
                   volatile_dbe, aggregate_dbe);
  if (volatile_dbe > 0) raise(c, HealthStatus::kFail, HealthAction::kResetGpu);  // rule: ecc_volatile
  else if (aggregate_dbe > 0) raise(c, HealthStatus::kWarn, HealthAction::kMonitor);  // rule: ecc_aggregate
  if (pending != current) {
    raise(c, HealthStatus::kWarn, HealthAction::kReboot);  // rule: ecc_mode_pending
    c.message += strf("; ECC mode %s is pending a reboot", on_off(pending));
  }
  return c;
}

HealthCheck retired_pages(const NvmlCaller& k, nvmlDevice_t d, const std::string& subject) {
  const Nvml& n = *k.nvml;
  HealthCheck c = k.make("gpu.retired_pages", subject);
  nvmlEnableState_t pending = 0;
  if (!k.ok(c, n.DeviceGetRetiredPagesPendingStatus(d, &pending), "nvmlDeviceGetRetiredPagesPendingStatus")) {
    if (c.status == HealthStatus::kSkip) c.message += ": this GPU remaps rows instead (gpu.row_remap)";
    return c;
  }
  unsigned counts[2] = {0, 0};
  for (int cause : {NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
                    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR}) {
    unsigned count = 0;  // count 0 and no buffer: NVML answers the count
    nvmlReturn_t rc = n.DeviceGetRetiredPages(d, cause, &count, nullptr);
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) rc = NVML_SUCCESS;
    if (!k.ok(c, rc, "nvmlDeviceGetRetiredPages")) return c;
    counts[cause] = count;
  }
  const unsigned total = counts[0] + counts[1];
  add_number(c, "single_bit", counts[0]);
  add_number(c, "double_bit", counts[1]);
  add_number(c, "pending", pending == NVML_FEATURE_ENABLED ? 1 : 0);
  c.message = strf("%u pages retired (%u single-bit, %u double-bit)%s", total, counts[0], counts[1],
                   pending == NVML_FEATURE_ENABLED ? "; a retirement is pending: reset the GPU" : "");
  if (pending == NVML_FEATURE_ENABLED) raise(c, HealthStatus::kFail, HealthAction::kResetGpu);  // rule: retired_pending
  if (total >= 60) {  // NVIDIA's replacement threshold for retired pages
    raise(c, HealthStatus::kFail, HealthAction::kDrain);  // rule: retired_60
    c.message += " (60 or more: replace the GPU)";
  } else if (counts[1] > 0) {
    raise(c, HealthStatus::kWarn, HealthAction::kMonitor);  // rule: retired_double_bit
  }
  return c;
}

HealthCheck row_remap(const NvmlCaller& k, nvmlDevice_t d, const std::string& subject) {
  HealthCheck c = k.make("gpu.row_remap", subject);
  unsigned corrected = 0, uncorrected = 0, pending = 0, failure = 0;
  if (!k.ok(c, k.nvml->DeviceGetRemappedRows(d, &corrected, &uncorrected, &pending, &failure),
            "nvmlDeviceGetRemappedRows"))
    return c;
  add_number(c, "correctable_rows", corrected);
  add_number(c, "uncorrectable_rows", uncorrected);
  add_number(c, "pending", pending);
  add_number(c, "failure", failure);
  c.message = strf("%u rows remapped (%u for correctable, %u for uncorrectable errors), pending %s, failure %s",
                   corrected + uncorrected, corrected, uncorrected, pending ? "yes" : "no", failure ? "yes" : "no");
  if (failure) {
    raise(c, HealthStatus::kFail, HealthAction::kDrain);  // rule: remap_failure
    c.message += ": a row could not be remapped, replace the GPU";
  } else if (pending) {
    raise(c, HealthStatus::kFail, HealthAction::kResetGpu);  // rule: remap_pending
    c.message += ": reset the GPU to apply the remap";
  }
  return c;
}

HealthCheck clocks(const NvmlCaller& k, nvmlDevice_t d, const std::string& subject) {
  const Nvml& n = *k.nvml;
  HealthCheck c = k.make("gpu.clocks", subject);
  unsigned sm = 0, sm_max = 0, mem = 0, mem_max = 0;
  unsigned long long reasons = 0;
  if (!k.ok(c, n.DeviceGetClockInfo(d, NVML_CLOCK_SM, &sm), "nvmlDeviceGetClockInfo(SM)") ||
      !k.ok(c, n.DeviceGetMaxClockInfo(d, NVML_CLOCK_SM, &sm_max), "nvmlDeviceGetMaxClockInfo(SM)") ||
      !k.ok(c, n.DeviceGetClockInfo(d, NVML_CLOCK_MEM, &mem), "nvmlDeviceGetClockInfo(MEM)") ||
      !k.ok(c, n.DeviceGetMaxClockInfo(d, NVML_CLOCK_MEM, &mem_max), "nvmlDeviceGetMaxClockInfo(MEM)") ||
      !k.ok(c, n.DeviceGetCurrentClocksThrottleReasons(d, &reasons), "nvmlDeviceGetCurrentClocksThrottleReasons"))
    return c;
  add_number(c, "sm_mhz", sm);
  add_number(c, "sm_max_mhz", sm_max);
  add_number(c, "mem_mhz", mem);
  add_number(c, "mem_max_mhz", mem_max);
  add_number(c, "throttle_reasons", static_cast<double>(reasons));
  std::string why;
  const auto reason = [&](unsigned long long bit, const char* name, HealthStatus s, HealthAction a) {
    if ((reasons & bit) == 0) return;
    why += strf("%s%s", why.empty() ? "" : ", ", name);
    raise(c, s, a);
  };
  reason(kThrottleHwSlowdown, "HW slowdown", HealthStatus::kFail, HealthAction::kDrain);  // rule: clocks_hw_slowdown
  reason(kThrottleHwThermal, "HW thermal slowdown", HealthStatus::kFail, HealthAction::kDrain);  // rule: clocks_hw_thermal
  reason(kThrottleHwPowerBrake, "HW power brake", HealthStatus::kFail, HealthAction::kDrain);  // rule: clocks_hw_power_brake
  reason(kThrottleSwThermal, "SW thermal slowdown", HealthStatus::kWarn, HealthAction::kMonitor);  // rule: clocks_sw_thermal
  reason(kThrottleSwPowerCap, "SW power cap", HealthStatus::kPass, HealthAction::kNone);  // rule: clocks_sw_power_cap
  reason(kThrottleGpuIdle, "idle", HealthStatus::kPass, HealthAction::kNone);  // rule: clocks_idle
  c.message = strf("SM %u of %u MHz, memory %u of %u MHz; throttled by: %s", sm, sm_max, mem, mem_max,
                   why.empty() ? "nothing" : why.c_str());
  return c;
}

HealthCheck temperature(const NvmlCaller& k, nvmlDevice_t d, const std::string& subject, double margin) {
  const Nvml& n = *k.nvml;
  HealthCheck c = k.make("gpu.temperature", subject);
  unsigned t = 0, slowdown = 0, shutdown = 0;
  if (!k.ok(c, n.DeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &t), "nvmlDeviceGetTemperature") ||
      !k.ok(c, n.DeviceGetTemperatureThreshold(d, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, &slowdown),
            "nvmlDeviceGetTemperatureThreshold(SLOWDOWN)") ||
      !k.ok(c, n.DeviceGetTemperatureThreshold(d, NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, &shutdown),
            "nvmlDeviceGetTemperatureThreshold(SHUTDOWN)"))
    return c;
  add_number(c, "celsius", t);
  add_number(c, "slowdown_celsius", slowdown);
  add_number(c, "shutdown_celsius", shutdown);
  c.message = strf("%u C, slowdown at %u C, shutdown at %u C", t, slowdown, shutdown);
  if (t >= slowdown) raise(c, HealthStatus::kFail, HealthAction::kDrain);  // rule: temperature_slowdown
  else if (t + margin >= slowdown) raise(c, HealthStatus::kWarn, HealthAction::kMonitor);  // rule: temperature_near_slowdown
  return c;
}

HealthCheck power(const NvmlCaller& k, nvmlDevice_t d, const std::string& subject) {
  const Nvml& n = *k.nvml;
  HealthCheck c = k.make("gpu.power", subject);
  unsigned mw = 0, limit = 0;
  if (!k.ok(c, n.DeviceGetPowerUsage(d, &mw), "nvmlDeviceGetPowerUsage") ||
      !k.ok(c, n.DeviceGetEnforcedPowerLimit(d, &limit), "nvmlDeviceGetEnforcedPowerLimit"))
    return c;
  add_number(c, "watts", mw / 1000.0);
  add_number(c, "limit_watts", limit / 1000.0);
  c.message = strf("%.0f W of a %.0f W limit", mw / 1000.0, limit / 1000.0);
  // 5% above its cap
  if (mw > limit + limit / 20) raise(c, HealthStatus::kWarn, HealthAction::kMonitor);  // rule: power_over_cap
  return c;
}

HealthCheck pcie(const NvmlCaller& k, nvmlDevice_t d, const std::string& subject) {
  const Nvml& n = *k.nvml;
  HealthCheck c = k.make("gpu.pcie", subject);
  unsigned gen = 0, gen_max = 0, width = 0, width_max = 0;
  if (!k.ok(c, n.DeviceGetCurrPcieLinkGeneration(d, &gen), "nvmlDeviceGetCurrPcieLinkGeneration") ||
      !k.ok(c, n.DeviceGetMaxPcieLinkGeneration(d, &gen_max), "nvmlDeviceGetMaxPcieLinkGeneration") ||
      !k.ok(c, n.DeviceGetCurrPcieLinkWidth(d, &width), "nvmlDeviceGetCurrPcieLinkWidth") ||
      !k.ok(c, n.DeviceGetMaxPcieLinkWidth(d, &width_max), "nvmlDeviceGetMaxPcieLinkWidth"))
    return c;
  add_number(c, "gen", gen);
  add_number(c, "gen_max", gen_max);
  add_number(c, "width", width);
  add_number(c, "width_max", width_max);
  c.message = strf("gen%u x%u, max gen%u x%u", gen, width, gen_max, width_max);
  if (width < width_max) {
    raise(c, HealthStatus::kFail, HealthAction::kDrain);  // rule: pcie_narrow
    c.message += ": the link trained narrower than it can (reseat the GPU or its riser)";
  } else if (gen < gen_max) {
    // An idle GPU lowers its link speed to save power: a WARN, not a FAIL.
    raise(c, HealthStatus::kWarn, HealthAction::kMonitor);  // rule: pcie_generation
    c.message += ": below its generation (normal while idle; under load it is a bad link)";
  }
  return c;
}

HealthCheck nvlink(const NvmlCaller& k, nvmlDevice_t d, const std::string& subject) {
  const Nvml& n = *k.nvml;
  HealthCheck c = k.make("gpu.nvlink", subject);
  unsigned up = 0, links = 0;
  std::string down;
  unsigned long long totals[4] = {0, 0, 0, 0};  // replay, recovery, crc flit, crc data
  for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
    nvmlEnableState_t state = 0;
    const nvmlReturn_t rc = n.DeviceGetNvLinkState(d, link, &state);
    // Links this GPU does not have answer NOT_SUPPORTED or INVALID_ARGUMENT.
    if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_INVALID_ARGUMENT) continue;
    if (!k.ok(c, rc, "nvmlDeviceGetNvLinkState")) return c;
    ++links;
    if (state != NVML_FEATURE_ENABLED) {
      down += strf("%s%u", down.empty() ? "" : ",", link);
      continue;
    }
    ++up;
    for (int counter = 0; counter < 4; ++counter) {
      unsigned long long v = 0;
      const nvmlReturn_t crc = n.DeviceGetNvLinkErrorCounter(d, link, counter, &v);
      if (crc == NVML_ERROR_NOT_SUPPORTED) continue;
      if (!k.ok(c, crc, "nvmlDeviceGetNvLinkErrorCounter")) return c;
      totals[counter] += v;
    }
  }
  if (links == 0) {
    c.status = HealthStatus::kSkip;  // rule: nvlink_none
    c.message = "no NVLink on this GPU";
    return c;
  }
  add_number(c, "links", links);
  add_number(c, "up", up);
  add_number(c, "replay", static_cast<double>(totals[0]));
  add_number(c, "recovery", static_cast<double>(totals[1]));
  add_number(c, "crc_flit", static_cast<double>(totals[2]));
  add_number(c, "crc_data", static_cast<double>(totals[3]));
  c.message = strf("%u of %u links up; errors: replay %llu, recovery %llu, CRC flit %llu, CRC data %llu",
                   up, links, totals[0], totals[1], totals[2], totals[3]);
  if (!down.empty()) {
    raise(c, HealthStatus::kFail, HealthAction::kResetGpu);  // rule: nvlink_down
    c.message += "; down: link " + down;
  } else if (totals[1] > 0 || totals[3] > 0) {
    raise(c, HealthStatus::kWarn, HealthAction::kMonitor);  // rule: nvlink_recovery_crc_data
  }
  return c;
}

HealthCheck persistence(const NvmlCaller& k, nvmlDevice_t d, const std::string& subject) {
  HealthCheck c = k.make("gpu.persistence", subject);
  nvmlEnableState_t mode = 0;
  if (!k.ok(c, k.nvml->DeviceGetPersistenceMode(d, &mode), "nvmlDeviceGetPersistenceMode")) return c;
  add_number(c, "enabled", mode == NVML_FEATURE_ENABLED ? 1 : 0);
  c.message = strf("persistence mode %s", on_off(mode));
  if (mode != NVML_FEATURE_ENABLED) {
    raise(c, HealthStatus::kWarn, HealthAction::kMonitor);  // rule: persistence_off
    c.message += " (each job pays the driver's start-up; enable nvidia-persistenced)";
  }
  return c;
}

}  // namespace

void raise(HealthCheck& c, HealthStatus s, HealthAction a) {
  if (severity(s) > severity(c.status) || (s == c.status && a > c.action)) {
    c.status = s;
    c.action = a;
  }
}

void add_number(HealthCheck& c, const char* key, double value) { c.numbers.emplace_back(key, value); }

std::vector<HealthCheck> gpu_state_checks(const NvmlCaller& caller, nvmlDevice_t device,
                                          const std::string& subject, const HealthOptions& options) {
  return {ecc(caller, device, subject),         retired_pages(caller, device, subject),
          row_remap(caller, device, subject),   clocks(caller, device, subject),
          temperature(caller, device, subject, options.max_temperature_margin_c),
          power(caller, device, subject),       pcie(caller, device, subject),
          nvlink(caller, device, subject),      persistence(caller, device, subject)};
}

}  // namespace zt::check
