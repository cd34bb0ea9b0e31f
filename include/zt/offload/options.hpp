#pragma once
// The offload options: where the optimizer state (fp32 master weights, exp_avg,
// exp_avg_sq) and the stage-3 parameter shards live, and how the NVMe store moves them.
// Each field mirrors one `offload.*` key (config.hpp). See docs/offload.md.
#include <cstdint>
#include <string>
#include <string_view>

namespace zt::offload {

// A home of model states. kNone: device memory (the engine's own buffers; on a CPU
// build that is host memory too). kCpu: host memory (pinned in CUDA builds). kNvme:
// one file per rank under offload.nvme_path, moved by io_uring with O_DIRECT.
enum class Home : uint8_t { kNone, kCpu, kNvme };

std::string_view home_name(Home h);  // "none", "cpu", "nvme"
// "none" / "cpu" / "nvme"; throws zt::InputError naming `key` and the valid values.
Home parse_home(std::string_view text, std::string_view key);

struct Options {
  Home optimizer = Home::kNone;  // offload.optimizer: master, exp_avg, exp_avg_sq
  Home params = Home::kNone;     // offload.params: stage-3 parameter shards (ZeRO-Infinity)
  std::string nvme_path;         // offload.nvme_path: directory of the per-rank files
  uint64_t max_host_bytes = 0;   // offload.max_host_bytes: host bytes the store may keep; 0 = no bound
  int queue_depth = 32;          // offload.queue_depth: io_uring requests in flight per rank
  int buffers = 4;               // offload.buffers: sub-group buffers of the NVMe pipeline (>= 3)
  uint64_t subgroup_bytes = 8ull << 20;  // offload.subgroup_bytes: master + m + v bytes per sub-group
  uint64_t block_bytes = 1ull << 20;     // bytes per io_uring request (not a key: fio's --bs)
  // Pin the NVMe pipeline's host buffers (CUDA builds; not a key): the engine sets it for
  // a model on a device only. A host engine's buffers feed io_uring alone: pageable.
  bool pin_buffers = true;
  // offload.pinned_bytes: bound of the engine's pinned host buffers between a device and
  // host memory (offload copies, staged collectives; pinned_pool.hpp). Unused on the host.
  uint64_t pinned_bytes = 256ull << 20;

  bool any() const { return optimizer != Home::kNone || params != Home::kNone; }
  bool uses_nvme() const { return optimizer == Home::kNvme || params == Home::kNvme; }

  // Throws zt::InputError for the first bad key: offload needs zero.stage >= 1,
  // offload.params needs stage 3, NVMe needs a path, buffers >= 3, queue depth 1..4096,
  // subgroup_bytes >= 12 KiB.
  void validate(int zero_stage) const;
};

}  // namespace zt::offload
