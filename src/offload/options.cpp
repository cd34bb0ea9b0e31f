// The offload options: names of the homes and validation (see options.hpp).
#include "zt/offload/options.hpp"

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"

namespace zt::offload {

std::string_view home_name(Home h) {
  switch (h) {
    case Home::kNone: return "none";
    case Home::kCpu: return "cpu";
    case Home::kNvme: return "nvme";
  }
  return "?";
}

Home parse_home(std::string_view text, std::string_view key) {
  if (text == "none") return Home::kNone;
  if (text == "cpu") return Home::kCpu;
  if (text == "nvme") return Home::kNvme;
  throw InputError(strf("%.*s = '%.*s' is not a home of model states", static_cast<int>(key.size()),
                        key.data(), static_cast<int>(text.size()), text.data()),
                   "valid values: none (device memory), cpu (host memory), nvme (files "
                   "under offload.nvme_path).");
}

void Options::validate(int zero_stage) const {
  if (optimizer != Home::kNone && zero_stage < 1)
    throw InputError(strf("offload.optimizer = %s needs zero.stage >= 1 (zero.stage = %d)",
                          std::string(home_name(optimizer)).c_str(), zero_stage),
                     "offload moves this rank's optimizer shard; stage 0 has no shard. Set "
                     "zero.stage = 1, 2 or 3, or offload.optimizer = none.");
  if (params != Home::kNone && zero_stage != 3)
    throw InputError(strf("offload.params = %s needs zero.stage = 3 (zero.stage = %d)",
                          std::string(home_name(params)).c_str(), zero_stage),
                     "only stage 3 shards the parameters; set zero.stage = 3 or "
                     "offload.params = none.");
  if (uses_nvme() && nvme_path.empty())
    throw InputError("offload.nvme_path is empty but an offload home is nvme",
                     "set offload.nvme_path to a directory on a local NVMe drive, e.g. "
                     "--set offload.nvme_path=/local/scratch/zt-offload.");
  if (buffers < 3)
    throw InputError(strf("offload.buffers = %d is below 3", buffers),
                     "the NVMe pipeline reads sub-group k+1 while k is updated and k-1 is "
                     "written back: it needs at least 3 buffers.");
  if (queue_depth < 1 || queue_depth > 4096)
    throw InputError(strf("offload.queue_depth = %d is outside 1..4096", queue_depth),
                     "8 to 64 requests in flight saturate most NVMe drives.");
  if (subgroup_bytes < 12 * 4096)
    throw InputError(strf("offload.subgroup_bytes = %s is below 48K",
                          format_size(subgroup_bytes).c_str()),
                     "a sub-group holds master + m + v (12 bytes per element) in 4 KiB "
                     "aligned pieces; use at least 48K (default 8M).");
  if (pinned_bytes < 64 * 1024)
    throw InputError(strf("offload.pinned_bytes = %s is below 64K", format_size(pinned_bytes).c_str()),
                     "it bounds the pinned host buffers between a GPU and host memory; the "
                     "default is 256M.");
  if (block_bytes < 4096 || block_bytes % 4096 != 0)
    throw InputError(strf("offload block size %llu is not a multiple of 4096",
                          static_cast<unsigned long long>(block_bytes)),
                     "O_DIRECT needs 4 KiB aligned requests.");
}

}  // namespace zt::offload
