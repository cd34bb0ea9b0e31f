// The training loop's figures and errors about memory (see trainer_memory.hpp).
#include "trainer_memory.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <vector>

#include "zt/core/log.hpp"
#include "zt/core/units.hpp"
#include "zt/zero/plan.hpp"
#include "zt/offload/preflight.hpp"

namespace zt::train::detail {

// The step's comm bytes and memory figures into rec: the maximum over ranks of each (one
// all_reduce of doubles; byte counts stay exact below 2^53).
void reduce_max_over_ranks(comm::Comm& comm, const Memory& mem, const zero::StepStats& stats,
                           StepRecord& rec) {
  const zero::MemoryStats& z = stats.memory;
  std::vector<double> v = {static_cast<double>(mem.rss_bytes), static_cast<double>(mem.peak_rss_bytes),
                           static_cast<double>(stats.traffic.intra_node_bytes()),
                           static_cast<double>(stats.traffic.inter_node_bytes())};
  for (const zero::MemoryField& f : zero::kMemoryFields) v.push_back(static_cast<double>(z.*f.bytes));
  v.push_back(static_cast<double>(z.peak_total));
  for (int g = 0; g < zero::kGroupCount; ++g)
    v.push_back(static_cast<double>(stats.traffic.bytes(static_cast<zero::Group>(g))));
  const zero::OffloadTimes& o = stats.offload;
  for (const double x : {o.d2h_s, o.adam_s, o.h2d_s, o.stall_s, static_cast<double>(o.d2h_bytes),
                         static_cast<double>(o.h2d_bytes)})
    v.push_back(x);
  comm.all_reduce(v.data(), v.data(), v.size(), DType::kF64, comm::ReduceOp::kMax);
  size_t i = 0;
  const auto next = [&] { return static_cast<size_t>(v[i++]); };
  rec.rss_bytes = next();
  rec.peak_rss_bytes = next();
  rec.intra_node_bytes = next();
  rec.inter_node_bytes = next();
  zero::MemoryStats& m = rec.zero_memory;
  for (const zero::MemoryField& f : zero::kMemoryFields) m.*f.bytes = next();
  m.peak_total = next();
  for (int g = 0; g < zero::kGroupCount; ++g) rec.comm_bytes[g] = next();
  rec.offload.active = o.active;
  rec.offload.d2h_s = v[i++];
  rec.offload.adam_s = v[i++];
  rec.offload.h2d_s = v[i++];
  rec.offload.stall_s = v[i++];
  rec.offload.d2h_bytes = next();
  rec.offload.h2d_bytes = next();
}

std::string gib(double bytes) { return format_binary(static_cast<uint64_t>(bytes), BinaryUnit::kGiB, 2); }

// The error for a failed host allocation: what was being allocated (and its size when
// known), what the machine had free, and how to find a configuration that fits.
Error out_of_memory(const TrainConfig& cfg, const std::string& what) {
  rlimit as{};
  const bool limited = getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY;
  return Error(strf("out of host memory while allocating %s; MemAvailable %s (/proc/meminfo)%s, "
                    "this rank's peak RSS %s",
                    what.c_str(), gib(static_cast<double>(offload::mem_available())).c_str(),
                    limited ? strf(", address-space limit (ulimit -v) %s",
                                   gib(static_cast<double>(as.rlim_cur)).c_str()).c_str()
                            : "",
                    gib(static_cast<double>(process_memory().peak_rss_bytes)).c_str()),
               strf("`zt estimate --config <this TOML> --gpus %d` prints the memory per rank of "
                    "each ZeRO stage and whether it fits; try zero.stage = 3, more ranks, "
                    "train.recompute = true or a smaller train.micro_batch",
                    cfg.world));
}

// The model states the engine allocates per rank, from the plan it allocates from
// (zt/zero/plan.hpp): parameters, gradients, moments, hpZ secondaries and the offload
// store's host bytes (QLoRA's NF4 base aside).
double model_state_bytes(const TrainConfig& cfg, int ranks_per_node) {
  const zero::EngineOptions& o = cfg.zero;
  o.validate_experts(cfg.world, cfg.model);  // the engine's rule, before n = world / parts
  const int n = cfg.world / std::max(1, o.expert_parallel);
  const int rpn = ranks_per_node > 0 ? ranks_per_node : cfg.world;
  const bool bf16 = o.precision != "fp32";
  const zero::PlanSpace space{o.device == zero::EngineOptions::Device::kHost, bf16,
                              o.precision == "bf16-true", "host"};
  const zero::BufferPlan plan =
      zero::plan_model(cfg.model, n, o.effective_hpz(cfg.world, rpn), o, space);
  return static_cast<double>(plan.bytes().model_states());
}

}  // namespace zt::train::detail
