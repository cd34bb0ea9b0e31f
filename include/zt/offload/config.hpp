#pragma once
// The offload.* configuration keys: their schema and their mapping onto offload::Options
// (the training loop adds these keys to its schema, as it adds zero.*).
#include "zt/core/config.hpp"
#include "zt/offload/options.hpp"

namespace zt::offload {

// offload.optimizer, offload.params, offload.nvme_path, offload.max_host_bytes,
// offload.queue_depth, offload.buffers, offload.subgroup_bytes.
void add_offload_keys(config::Schema& schema);

// Options from a resolved configuration. Throws zt::InputError for a bad home name or
// size string (validate() checks the rest against the ZeRO stage).
Options offload_options(const config::Config& config);

}  // namespace zt::offload
