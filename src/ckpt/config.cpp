// The ckpt.* keys (see config.hpp).
#include "zt/ckpt/config.hpp"

#include "zt/core/error.hpp"

namespace zt::ckpt {

void add_ckpt_keys(config::Schema& s) {
  const CkptOptions d;
  s.add_string("ckpt.dir", d.dir, "folder of the checkpoints (step-N.h5, latest)");
  {
    auto& k = s.add_int("ckpt.every", d.every,
                        "save a checkpoint every N steps; 0: only after the last step and on "
                        "preemption");
    k.min = 0;
    k.max = 1e12;
  }
  {
    auto& k = s.add_int("ckpt.keep", d.keep, "newest complete checkpoints kept in ckpt.dir; 0: all");
    k.min = 0;
    k.max = 1e6;
  }
  s.add_string("ckpt.resume", d.resume,
               "continue from a checkpoint: none, auto (the one ckpt.dir/latest names, if any) "
               "or a path");
  s.add_string("ckpt.init_from", d.init_from,
               "start from the weights of this checkpoint (e.g. zt convert hf-to-h5 output): "
               "fresh optimizer, step 0; empty: random init");
  s.add_bool("ckpt.async", d.async,
             "copy the shards to a host snapshot and write them while training goes on");
  s.add_bool("ckpt.save_final", d.save_final, "save a checkpoint after the last step");
  s.add_bool("ckpt.overwrite", d.overwrite,
             "a run that starts fresh (no resume) may replace the checkpoints another run left "
             "in ckpt.dir; false: such a run is refused (exit 2)");
  {
    auto& k = s.add_int("ckpt.stop_after", d.stop_after,
                        "end the run after this step with a checkpoint, as a preemption would "
                        "(the schedule still spans train.steps); 0: run to train.steps");
    k.min = 0;
    k.max = 1e12;
  }
}

CkptOptions ckpt_options(const config::Config& c) {
  CkptOptions o;
  o.dir = c.get_string("ckpt.dir");
  o.every = c.get_int("ckpt.every");
  o.keep = static_cast<int>(c.get_int("ckpt.keep"));
  o.resume = c.get_string("ckpt.resume");
  o.init_from = c.get_string("ckpt.init_from");
  o.async = c.get_bool("ckpt.async");
  o.save_final = c.get_bool("ckpt.save_final");
  o.stop_after = c.get_int("ckpt.stop_after");
  o.overwrite = c.get_bool("ckpt.overwrite");
  if (o.dir.empty())
    throw InputError("ckpt.dir is empty", "name a folder, e.g. --set ckpt.dir=checkpoints");
  // resume = auto with init_from is the fine-tuning job that may be requeued: it resumes
  // from `latest` when there is one, else starts from init_from's weights. A named resume
  // path and init_from contradict each other.
  if (o.resume != "none" && o.resume != "auto" && !o.init_from.empty())
    throw InputError("ckpt.resume = \"" + o.resume + "\" and ckpt.init_from = \"" + o.init_from +
                         "\" are both set",
                     "resume continues a run (weights, optimizer, step); init_from starts a new "
                     "one from weights: choose one, or use ckpt.resume = \"auto\" with "
                     "init_from (resume when ckpt.dir has a checkpoint, else start from init_from)");
  return o;
}

}  // namespace zt::ckpt
