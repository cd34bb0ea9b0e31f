// The offload.* configuration keys (see config.hpp).
#include "zt/offload/config.hpp"

#include "zt/core/units.hpp"

namespace zt::offload {

void add_offload_keys(config::Schema& s) {
  const Options d;
  s.add_string("offload.optimizer", std::string("none"),
               "home of the fp32 master weights, exp_avg and exp_avg_sq: none (device), cpu "
               "(host memory), nvme (files under offload.nvme_path); zero.stage >= 1")
      .choices = {"none", "cpu", "nvme"};
  s.add_string("offload.params", std::string("none"),
               "home of the stage-3 parameter shards (ZeRO-Infinity): none, cpu, nvme; "
               "zero.stage = 3")
      .choices = {"none", "cpu", "nvme"};
  s.add_string("offload.nvme_path", std::string(""),
               "directory of the per-rank offload files (rank-R.zt-offload), on a local NVMe drive");
  s.add_string("offload.max_host_bytes", std::string("0"),
               "host bytes the offload store may keep resident (size string, e.g. 2G); 0 = no bound");
  {
    auto& k = s.add_int("offload.queue_depth", d.queue_depth, "io_uring requests in flight per rank");
    k.min = 1;
    k.max = 4096;
  }
  {
    auto& k = s.add_int("offload.buffers", d.buffers,
                        "sub-group buffers of the NVMe pipeline (read k+1, update k, write k-1): "
                        ">= 3");
    k.min = 3;
    k.max = 1024;
  }
  s.add_string("offload.subgroup_bytes", format_size(d.subgroup_bytes),
               "master + exp_avg + exp_avg_sq bytes per sub-group of the pipelined step "
               "(size string)");
  s.add_string("offload.pinned_bytes", format_size(d.pinned_bytes),
               "bound of the pinned host buffers between the GPU and host memory (offload "
               "copies of gradient and parameter sub-groups, MPI staging; size string); within "
               "the memlock limit (ulimit -l); at least 2 sub-groups of fp32 "
               "(offload.subgroup_bytes * 2 / 3)");
}

Options offload_options(const config::Config& c) {
  Options o;
  o.optimizer = parse_home(c.get_string("offload.optimizer"), "offload.optimizer");
  o.params = parse_home(c.get_string("offload.params"), "offload.params");
  o.nvme_path = c.get_string("offload.nvme_path");
  o.max_host_bytes = parse_size(c.get_string("offload.max_host_bytes"));
  o.queue_depth = static_cast<int>(c.get_int("offload.queue_depth"));
  o.buffers = static_cast<int>(c.get_int("offload.buffers"));
  o.subgroup_bytes = parse_size(c.get_string("offload.subgroup_bytes"));
  o.pinned_bytes = parse_size(c.get_string("offload.pinned_bytes"));
  return o;
}

}  // namespace zt::offload
