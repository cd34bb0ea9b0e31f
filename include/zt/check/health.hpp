#pragma once
// Node health (docs/checklist.md, "Node health"): GPU health through NVML loaded at run
// time, NIC health from sysfs, each a named check with a status, its numbers and, when it
// fails, the action an operator takes. The node leader runs them for its whole node.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace zt::check {

// PASS/WARN/FAIL as gates; SKIP: not applicable or not available here (no NVML, no
// NVLink); UNKNOWN: the check could not run (an NVML call failed): the node cannot be
// called healthy.
enum class HealthStatus : uint8_t { kPass, kWarn, kFail, kSkip, kUnknown };
std::string_view health_status_name(HealthStatus s);

// What an operator (or slurm/prolog.sh) does about a check that did not pass, from the
// mildest: watch it; reseat or replace a cable; reset the GPU; reboot the node; take the
// node out of service for repair.
enum class HealthAction : uint8_t { kNone, kMonitor, kCheckCable, kResetGpu, kReboot, kDrain };
std::string_view health_action_name(HealthAction a);  // "", MONITOR, CHECK_CABLE, ...

struct HealthCheck {
  std::string name;     // gpu.ecc, gpu.remap, nic.state ... (docs/checklist.md's table)
  int node = 0;
  std::string host;
  std::string subject;  // "GPU 3 (NVIDIA H100 80GB HBM3)", "mlx5_0 port 1", "node"
  HealthStatus status = HealthStatus::kPass;
  HealthAction action = HealthAction::kNone;
  std::string message;  // one line with the numbers
  std::vector<std::pair<std::string, double>> numbers;
};

// "gpu.ecc GPU 3 (...) on host: FAIL [RESET_GPU] — message".
std::string health_line(const HealthCheck& c);

struct HealthOptions {
  int gpus_per_node = -1;             // expected GPUs; -1: from Slurm's env, else not checked
  std::string sysfs_root = "/";       // where sys/class/infiniband and dev/kmsg are read
  std::string nvml_library = "libnvidia-ml.so.1";  // $ZT_NVML_LIBRARY overrides (tests)
  double max_temperature_margin_c = 5.0;  // WARN closer than this to the slowdown temperature
};

// GPU health of this host through NVML: begin() loads NVML, runs every check that looks
// at a state and registers for Xid events; finish() (after the stress and the sweep)
// adds the Xid events seen since begin() and the kernel's Xid lines, then shuts NVML down.
// Never throws for a missing library or driver (a SKIP, or UNKNOWN when GPUs are expected).
class GpuHealth {
 public:
  GpuHealth(const HealthOptions& options, int rank, int node, std::string host);
  ~GpuHealth();
  GpuHealth(const GpuHealth&) = delete;
  GpuHealth& operator=(const GpuHealth&) = delete;
  std::vector<HealthCheck> begin();
  std::vector<HealthCheck> finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The expected GPU count: options.gpus_per_node when >= 0, else $SLURM_GPUS_ON_NODE,
// else -1 (not checked). SLURM_GPUS_ON_NODE holding anything but a whole number in
// [0, 1023] is -1 too, with *why_not naming the variable and its value (gpu.count UNKNOWN).
int expected_gpus(const HealthOptions& options, std::string* why_not = nullptr);

// InfiniBand/RoCE ports under <root>/sys/class/infiniband: state, physical state, rate
// and the error counters. read_nic_counters is the snapshot; nic_health judges one
// snapshot (state, phys_state, rate against the node's best) and the growth from
// `before` to `after`.
struct NicPort {
  std::string device;  // mlx5_0
  std::string port;    // 1
  std::string state;       // "4: ACTIVE"
  std::string phys_state;  // "5: LinkUp"
  std::string rate;        // "400 Gb/sec (4X NDR)"
  std::string link_layer;  // InfiniBand, Ethernet
  std::vector<std::pair<std::string, uint64_t>> counters;  // name -> value
  // What could not be read (each names its file and why): the port's facts (state,
  // phys_state, rate, link_layer, the ports folder) and its error counters. A check with
  // something here says UNKNOWN, never PASS.
  std::vector<std::string> unreadable_facts, unreadable_counters;
};
std::vector<NicPort> read_nic_ports(const std::string& root);
std::vector<HealthCheck> nic_health(const std::vector<NicPort>& before,
                                    const std::vector<NicPort>& after, int node,
                                    const std::string& host);

// Xid lines ("NVRM: Xid (PCI:0000:1b:00): 79, ...") in the kernel log <root>/dev/kmsg,
// read without blocking; {} when it cannot be read (the reason in *why_not).
std::vector<std::string> kernel_xid_lines(const std::string& root, std::string* why_not);

}  // namespace zt::check
