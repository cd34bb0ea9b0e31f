#pragma once
// What every part of the ZeRO engine (engine_impl.hpp) reads and none changes: the
// options, the memory space, the communicator groups, the partition, and the ordering of
// compute after collectives. Set once at construction; the parts hold a reference.
#include <cstddef>

#include "groups.hpp"
#include "memory.hpp"
#include "zt/zero/options.hpp"
#include "zt/zero/partition.hpp"

namespace zt::zero::detail {

struct EngineContext {
  const EngineOptions& opt;
  Space& mem;
  Groups& groups;
  const Partition& part;
  size_t qblock;  // qwZ / qgZ block (elements)
  // Operations compute waited for on the device, not yet checked on the host
  // (Engine::Impl::check_retired waits for them at the end of a pass).
  Handles& retired;
  // Compute queued from now on runs after `ops`: on the device without blocking the host
  // (the handles go to `retired`), on the host by waiting.
  void compute_waits_for(Handles& ops) const { mem.order_compute_after(ops, retired); }
};

}  // namespace zt::zero::detail
