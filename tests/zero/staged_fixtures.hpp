#pragma once
// The host-staged space's test cases (test helper): one case of the engine and the engine
// of a case on a given device, shared by test_staged.cpp and test_staged_precision.cpp.
#include <string>

#include "zero_fixtures.hpp"

namespace zt::zero::testing {

struct StagedCase {
  std::string name;
  int stage;
  int rpn;      // simulated ranks per node (0: one node)
  int hpz;      // zero.hpz_partition_size (0: ranks per node, 1: off)
  bool qw = false, qg = false;
  DType reduce = DType::kF32;
  std::string precision = "fp32";  // train.precision
};

// The engine of case c on `device`. The host-memory control communicator carries the
// engine's host values on the staged (device-like) path.
inline Engine make_engine(const StagedCase& c, EngineOptions::Device device,
                          const model::Config& cfg, const Hyper& h, Comms& comms) {
  EngineOptions o = engine_options(h, c.stage);
  o.hpz_partition_size = c.hpz;
  o.quantize_weights = c.qw;
  o.quantize_grads = c.qg;
  o.reduce_dtype = c.reduce;
  o.device = device;
  o.precision = c.precision;
  return Engine(cfg, *comms.world, comms.node.get(), comms.cross.get(), o, h.init,
                comms.world.get());
}

}  // namespace zt::zero::testing
