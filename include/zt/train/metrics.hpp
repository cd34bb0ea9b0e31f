#pragma once
// What the training loop measures: memory, throughput, MFU.
//
// MFU (model FLOPs utilisation, PaLM convention, Chowdhery et al. 2022, appendix B):
//   MFU = tokens_per_s * flops_per_token / (ranks * peak_flops_per_rank)
// with flops_per_token = 6 N + 12 L H Q T from zt::model::Config::flops_per_token (the
// model's FLOPs only: activation recompute is not counted).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "zt/zero/stats.hpp"

namespace zt::train {

struct Memory {
  size_t rss_bytes = 0;       // resident set size now (VmRSS)
  size_t peak_rss_bytes = 0;  // high-water mark (VmHWM)
};
Memory process_memory();  // from /proc/self/status; zeros where unavailable

// Peak fp32 FLOP/s of this rank's CPU threads, measured: the fastest of at least 20
// timed [256 x 512] x [512 x 512]^T GEMMs (0.3 s of them) through the model's own linear
// kernel (Eigen). The fastest single call approaches the uncontended rate even on a
// loaded machine. This is an achievable peak, not the vendor's nominal one.
double measure_cpu_peak_flops();

double mfu(double tokens_per_s, double flops_per_token, int ranks, double peak_flops_per_rank);

// One optimizer step, as the loop reports it.
struct StepRecord {
  int64_t step = 0;          // optimizer steps done (1 after the first)
  double loss = 0;           // mean training loss of the step's global batch (nats)
  double lr = 0;             // learning rate used by this step
  double grad_norm = 0;      // global gradient norm before clipping
  double clip_coef = 1;      // factor applied to the gradients (1: not clipped)
  bool skipped = false;      // NaN/Inf loss or gradient: no update (see train.max_bad_steps)
  double step_time_s = 0;    // wall time of the step (compute + comm + optimizer)
  double tokens_per_s = 0;   // tokens of the global batch / step_time_s
  double mfu = 0;            // see metrics.hpp
  int64_t tokens_seen = 0;   // training tokens consumed so far, all ranks
  size_t rss_bytes = 0;      // resident memory, max over ranks
  size_t peak_rss_bytes = 0; // peak resident memory, max over ranks
  // Bytes this rank sent during the step, per engine communicator (world, node, cross,
  // hpz), and split by the links they cross; the maximum over ranks of each figure.
  uint64_t comm_bytes[zero::kGroupCount] = {};
  uint64_t intra_node_bytes = 0;
  uint64_t inter_node_bytes = 0;
  // The engine's memory by category after the step (with its peak so far), maximum over
  // ranks of each field.
  zero::MemoryStats zero_memory;
  std::optional<double> eval_loss;  // held-out loss, averaged over ranks, when evaluated
};

// The step for people: "step    10/200 | loss 2.3456 | lr 1.00e-03 | grad norm  0.812 | ...".
std::string step_line(const StepRecord& r, int64_t steps);
// The step as one JSON object on one line (log.metrics; docs/training.md lists the keys).
std::string step_json(const StepRecord& r);


}  // namespace zt::train
