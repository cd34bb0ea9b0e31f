#pragma once
// The training loop, data parallel through the ZeRO engine (zt/zero/engine.hpp; stage 0
// of the engine is plain DDP, the default). Each optimizer step is
//   for each of `accum` micro-steps: engine.micro_step on micro_batch sequences of this
//     rank's slice of the global batch (gradients accumulate, scaled by 1/accum, and are
//     reduced over ranks as the stage prescribes; instruction data with a loss mask:
//     scaled by the micro-batch's share of the step's unmasked targets, so the loss is the
//     mean over all of them however the batch is split, trainer.cpp train_step)
//   engine.step(lr): global gradient norm, clipping to train.grad_clip, AdamW with lr from
//     the warm-up + cosine schedule, re-gathers
// so the update equals that of one process running the whole global batch. Evaluation and
// the final sample also run through the engine (collective: every rank takes part).
#include <cstdint>
#include <mpi.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "zt/comm/comm.hpp"
#include "zt/data/token_file.hpp"
#include "zt/train/config.hpp"
#include "zt/train/metrics.hpp"
#include "zt/zero/stats.hpp"

namespace zt::train {

struct TrainHooks {
  std::function<void(const StepRecord&)> on_step;  // every step, every rank
  // Every rank, after the resume and before the first step to run (first_step: the steps
  // done so far); not called when nothing is left to train.
  std::function<void(int64_t first_step)> on_start;
  // Every rank, after each checkpoint is written (ckpt.async: when the background write
  // is collected).
  std::function<void(const CheckpointRecord&)> on_checkpoint;
};

struct TrainResult {
  std::vector<StepRecord> steps;
  std::vector<int32_t> sample;        // generated tokens (rank 0; empty elsewhere)
  std::string sample_text;            // sample.prompt + the decoded sample (rank 0)
  double peak_flops_per_rank = 0;     // used for MFU
  int64_t params = 0;                 // parameter count
  std::string engine;                 // Engine::describe() of rank 0's engine
  int64_t first_step = 0;             // steps done before this run (resumed from a checkpoint)
  bool stopped = false;               // ended early: preemption signal or ckpt.stop_after
  bool nothing_left = false;          // resumed at or past train.steps: no step was run
  int stop_signal = 0;                // the signal that preempted it (0: none / stop_after)
  std::string checkpoint;             // the last checkpoint written ("" if none)
  // Steps that took no update at the end of the run (NaN/Inf, or no target in the batch):
  // the run did not train at its end and must not exit 0 (issue 36, class 7).
  int64_t skipped_at_end = 0;
  int64_t no_target_steps = 0;        // steps skipped for having no target (masked data)
};

// The communicators of this rank's node and of its peers on other nodes (runtime's
// node() / cross()), for hierarchical collectives and hpZ; both null: one node.
struct NodeComms {
  comm::Comm* node = nullptr;
  comm::Comm* cross = nullptr;
  // The MPI communicator of the training comm's ranks, for checkpoints (parallel HDF5);
  // MPI_COMM_NULL: no checkpoint is read or written (ckpt.* keys that need one are refused).
  MPI_Comm mpi = MPI_COMM_NULL;
  // The engine's world when it is not the training comm (comm.backend = nccl: node and
  // cross above are then NCCL communicators too); null: the engine uses the training comm.
  comm::Comm* engine_world = nullptr;
};

// Trains cfg.model on `data` over `comm` (its ranks are the data-parallel ranks;
// cfg.world must equal comm.size()). cfg.data_path only names the data in messages.
// Throws zt::InputError when the data does not fit the configuration (vocabulary,
// too few tokens for a global batch or an eval sequence).
// Throws zt::InputError for zero.* options that do not fit the ranks (before any
// collective, alike on every rank).
TrainResult train(const TrainConfig& cfg, comm::Comm& comm, const data::TokenFile& data,
                  const TrainHooks& hooks = {}, const NodeComms& nodes = {});

}  // namespace zt::train
