#pragma once
// The part of NVML's C ABI that zt calls, declared from NVIDIA's documented interface
// (NVML API Reference, nvml.h of driver 450+): no nvml.h ships with the CUDA toolkit
// here (/usr/local/cuda/include has none), and zt never links libnvidia-ml: it is
// dlopened at run time (nvml.cpp), so a host without the driver is a named SKIP.
// tests/checklist/fake_nvml.cpp exports these same entry points from a scenario file.
// Values and layouts below are NVIDIA's; tests/checklist/nvml_abi_test.py compares every one
// with NVIDIA's nvml.h (PyPI's nvidia-nvml-dev).
#include <cstdint>

extern "C" {

typedef int nvmlReturn_t;
enum : int {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_UNKNOWN = 999,
};

typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;

typedef int nvmlEnableState_t;  // NVML_FEATURE_DISABLED 0, NVML_FEATURE_ENABLED 1
enum : int { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 };

// nvmlMemoryErrorType_t, nvmlEccCounterType_t
enum : int { NVML_MEMORY_ERROR_TYPE_CORRECTED = 0, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1 };
enum : int { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 };
// nvmlPageRetirementCause_t
enum : int { NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
             NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1 };
// nvmlClockType_t
enum : int { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };
// nvmlTemperatureSensors_t, nvmlTemperatureThresholds_t
enum : int { NVML_TEMPERATURE_GPU = 0 };
enum : int { NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1 };
// nvmlNvLinkErrorCounter_t
enum : int { NVML_NVLINK_ERROR_DL_REPLAY = 0, NVML_NVLINK_ERROR_DL_RECOVERY = 1,
             NVML_NVLINK_ERROR_DL_CRC_FLIT = 2, NVML_NVLINK_ERROR_DL_CRC_DATA = 3 };
constexpr unsigned NVML_NVLINK_MAX_LINKS = 36;  // nvml.h of CUDA 13 (18 before): absent links answer INVALID_ARGUMENT

// nvmlClocksThrottleReason* bits (nvmlDeviceGetCurrentClocksThrottleReasons).
constexpr unsigned long long kThrottleGpuIdle = 0x1ULL;
constexpr unsigned long long kThrottleSwPowerCap = 0x4ULL;
constexpr unsigned long long kThrottleHwSlowdown = 0x8ULL;
constexpr unsigned long long kThrottleSwThermal = 0x20ULL;
constexpr unsigned long long kThrottleHwThermal = 0x40ULL;
constexpr unsigned long long kThrottleHwPowerBrake = 0x80ULL;

// nvmlEventTypeXidCriticalError; nvmlEventData_t as of driver 450 (nvmlEventSetWait_v2).
constexpr unsigned long long kNvmlEventTypeXidCriticalError = 0x8ULL;
typedef struct {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the Xid
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;

constexpr unsigned NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;  // enough for every name
constexpr unsigned NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80;
constexpr unsigned NVML_DEVICE_UUID_BUFFER_SIZE = 80;

}  // extern "C"
