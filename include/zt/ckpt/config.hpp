#pragma once
// The ckpt.* configuration keys of `zt train` (docs/training.md) and their values.
#include <cstdint>
#include <string>

#include "zt/core/config.hpp"

namespace zt::ckpt {

struct CkptOptions {
  std::string dir = "checkpoints";  // ckpt.dir
  int64_t every = 0;                // save every N steps; 0: only at the end / preemption
  int keep = 2;                     // newest complete checkpoints kept (0: all)
  std::string resume = "none";      // "none", "auto" (from DIR/latest if any), or a path
  std::string init_from;            // weights-only start (params; fresh optimizer; step 0)
  bool async = false;               // write from a host snapshot in the background
  bool save_final = true;           // save after the last step
  int64_t stop_after = 0;           // end the run after this step with a checkpoint; 0: no
  bool overwrite = false;           // a fresh run may replace another run's checkpoints in dir
};

void add_ckpt_keys(config::Schema& s);
// Reads the keys; throws zt::InputError naming the key for contradictory values
// (ckpt.resume and ckpt.init_from both set).
CkptOptions ckpt_options(const config::Config& c);

}  // namespace zt::ckpt
