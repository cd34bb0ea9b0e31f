// Validation of CheckOptions, before any rank starts a collective (include/zt/check/options.hpp).
#include "zt/check/options.hpp"

#include <algorithm>
#include <string>

#include "zt/check/bandwidth.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"

namespace zt::check {
namespace {

void check_gate_size(const Thresholds& t, CheckOp op, const char* key, uint64_t size,
                     const std::vector<uint64_t>& sweep) {
  if (std::find(sweep.begin(), sweep.end(), size) != sweep.end()) return;
  std::string sizes;
  for (uint64_t s : sweep) {
    if (!sizes.empty()) sizes += ' ';
    sizes += format_size(s);
  }
  throw InputError(strf("thresholds file %s: %s.%s = %s is not a size of the sweep (%s)",
                        t.source.c_str(), std::string(check_op_name(op)).c_str(), key,
                        format_size(size).c_str(), sizes.c_str()),
                   "gates look at single sizes of the sweep: change --min-bytes/--max-bytes/"
                   "--step-factor or the gate's size");
}

}  // namespace

void validate_options(const CheckOptions& o) {
  if (o.ops.empty())
    throw InputError("no operation to run", "give --ops all or a list such as all_reduce");
  if (o.min_bytes < 1)
    throw InputError("--min-bytes must be at least 1", "the sweep starts at 8 by default");
  if (o.max_bytes < o.min_bytes)
    throw InputError(strf("--max-bytes %s is smaller than --min-bytes %s",
                          format_size(o.max_bytes).c_str(), format_size(o.min_bytes).c_str()),
                     "give a max-bytes >= min-bytes");
  if (o.step_factor < 2)
    throw InputError(strf("--step-factor must be at least 2 (got %llu)",
                          static_cast<unsigned long long>(o.step_factor)),
                     "the sweep multiplies the size by this factor each step; 2 is the default");
  if (o.iters < 1)
    throw InputError(strf("--iters must be at least 1 (got %d)", o.iters),
                     "20 timed iterations per size is the default");
  if (o.warmup < 0)
    throw InputError(strf("--warmup cannot be negative (got %d)", o.warmup),
                     "5 warm-up iterations per size is the default");
  if (o.root < 0)
    throw InputError(strf("--root cannot be negative (got %d)", o.root), "the default root is 0");
  if (o.dtype == DType::kU8)
    throw InputError("zt check does not verify uint8 (its pattern needs a negative sentinel)",
                     "use float, double, bfloat16, half, int8, int32 or int64");
  if (o.redop == comm::ReduceOp::kAvg)
    throw InputError("zt check verifies sum, max and min reductions, not avg",
                     "use --op sum, max or min");
  if (!(o.burn_seconds >= 0.0 && o.burn_seconds <= kMaxBurnSeconds))  // NaN fails too
    throw InputError(strf("--burn-seconds must be in [0, %.0f] (got %g)", kMaxBurnSeconds, o.burn_seconds),
                     "seconds of GEMM burn per GPU: 30 for --tier full, 5 for quick, 0 turns the stress off");
  if (o.thresholds) {
    const std::vector<uint64_t> sweep = sweep_of(o);
    for (const OpThresholds& t : o.thresholds->ops) {
      if (t.busbw) check_gate_size(*o.thresholds, t.op, "size", t.busbw->size, sweep);
      if (t.latency) check_gate_size(*o.thresholds, t.op, "latency_size", t.latency->size, sweep);
    }
  }
}

std::vector<uint64_t> sweep_of(const CheckOptions& o) {
  return sweep_sizes(o.min_bytes, o.max_bytes, o.step_factor);
}

comm::ReduceOp parse_check_redop(std::string_view name) {
  if (name == "sum") return comm::ReduceOp::kSum;
  if (name == "max") return comm::ReduceOp::kMax;
  if (name == "min") return comm::ReduceOp::kMin;
  throw InputError("unknown or unsupported reduction '" + std::string(name) + "'",
                   "use --op sum, max or min (the ones whose result zt check can verify exactly)");
}

}  // namespace zt::check
