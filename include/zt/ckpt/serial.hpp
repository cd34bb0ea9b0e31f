#pragma once
// Serial (single-process, no MPI needed) helpers over the checkpoint format, for
// converters (`zt convert h5-to-hf / hf-to-h5`), tools and tests. The files are the same
// as the collective writer's (docs/checkpoint-format.md).
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "zt/ckpt/format.hpp"
#include "zt/model/config.hpp"
#include "zt/model/model.hpp"

namespace zt::ckpt {

struct WeightsOptions {
  std::string source_dtype;  // "" = attribute absent; e.g. "bf16" for a converted model
  // Called with the temporary file's path after the checkpoint is written, before it is
  // renamed into place: what else the file holds (a multimodal folder's carried part).
  std::function<void(const std::string&)> also_write;
};

// Writes a weights-only checkpoint (contents "weights": /params, /state with step 0)
// atomically: PATH.tmp, fsync, rename to PATH, fsync the folder. `units[u]` is unit u's
// whole flat buffer (ParamLayout order, numel elements). Throws zt::Error naming the path.
void write_weights_only(const std::string& path, const model::Config& cfg,
                        std::span<const std::vector<float>> units,
                        const WeightsOptions& options = {});
void write_weights_only(const std::string& path, const model::Config& cfg,
                        const model::Parameters<float>& params, const WeightsOptions& options = {});

// A whole checkpoint in memory. Per unit, flat (ParamLayout order).
struct FullCheckpoint {
  Header header;
  std::vector<std::vector<float>> params;      // [units][numel]
  std::vector<std::vector<float>> exp_avg;     // empty for a weights-only file
  std::vector<std::vector<float>> exp_avg_sq;  // empty for a weights-only file
  std::optional<TrainState> state;             // training files only
};

// Reads every tensor of a checkpoint (the model is the file's own), verifying every
// checksum. Throws zt::InputError naming the file and the dataset at fault. params_only:
// /params alone (exp_avg, exp_avg_sq and state stay empty; /optim and /state are not
// read), as an export needs.
FullCheckpoint read_full(const std::string& path, bool params_only = false);

// The root attributes only.
Header read_header(const std::string& path);

}  // namespace zt::ckpt
