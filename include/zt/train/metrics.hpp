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

#include "zt/comm/comm.hpp"
#include "zt/train/preference.hpp"
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
// The peak FLOP/s per rank MFU divides by: train.peak_tflops when > 0, else the measured
// CPU peak averaged over comm's ranks (collective then).
double peak_flops_per_rank(double peak_tflops, comm::Comm& comm);

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
  // DPO / ORPO: TRL's metrics of the step's pairs and (when evaluated) the held-out ones.
  std::optional<PairMetrics> pairs, eval_pairs;
  // Instruction data (a loss mask): the targets the step trained on, all ranks (the
  // tokens the loss is the mean over); unset for text, where every token is one.
  std::optional<int64_t> trained_tokens;
  // Offload phase times of the step (zero::OffloadTimes), the maximum over ranks of each;
  // in the step line and the JSON only when offload is on.
  zero::OffloadTimes offload;
  // Mixture of experts: the step's routing over every block, micro-batch and rank (tokens
  // per expert, max/mean imbalance, the load-balancing loss); in the step line and JSON.
  std::optional<zero::RouterStep> router;
};

// A checkpoint saved by the loop (on every rank; the figures are rank 0's).
struct CheckpointRecord {
  int64_t step = 0;       // steps done when it was taken
  std::string path;       // the published file
  uint64_t bytes = 0;     // bytes written, all ranks
  double seconds = 0;     // the write (ckpt.async: in the background)
  double stall_s = 0;     // training held up by it
  bool background = false;  // ckpt.async
};

// The step for people. Short (the default, about 100 columns):
//   "step    10/200 | loss 2.3456 | lr 1.00e-03 | gnorm  0.812 clip |   12345 tok/s | MFU  1.2% | 0.123 s"
// ("clip": the gradients were clipped; "skip": the step took no update); verbose
// (log.verbose): also the trained tokens, memory, comm bytes, engine memory and offload
// phases: "step    10/200 | loss 2.3456 | lr 1.00e-03 | grad norm  0.812 | ... | mem ...".
std::string step_line(const StepRecord& r, int64_t steps, bool verbose = false);
// The step as one JSON object on one line (log.metrics; docs/training.md lists the keys).
std::string step_json(const StepRecord& r);
// {"step": S, "checkpoint": {"path", "bytes", "seconds", "stall_s", "background"}}
// (report.hpp lists the records of a metrics file).
std::string checkpoint_json(const CheckpointRecord& c);

// The log.metrics file: one step_json line per step, written by rank 0 (issue 20).
// Never through a symlink (refused: exit 2). A fresh run (first_step 0) creates it and
// refuses an existing non-empty file unless `replace` (ckpt.overwrite): it may be another
// run's. A resumed run keeps the lines of steps <= first_step (the file is rewritten the
// safe way, core/files.hpp; lines of steps past the checkpoint, and a line cut short by a
// kill, are dropped) and appends after them; a line that is not a metrics record is
// refused (not zt's file). Throws zt::InputError naming log.metrics and the file.
class MetricsFile {
 public:
  MetricsFile() = default;
  ~MetricsFile();
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;

  void open(const std::string& path, int64_t first_step, bool replace);
  bool is_open() const { return fd_ >= 0; }
  void write(const StepRecord& r);  // one line, flushed to the kernel; throws zt::Error
  void write_line(const std::string& json);  // another record (report.hpp), one line

 private:
  std::string path_;
  int fd_ = -1;
};


}  // namespace zt::train
