#pragma once
// The gather schedule of the ZeRO engine (stage 3; engine_gather.cpp): the parameter
// gathers in flight, one per gather slot, the slots' buffers, and the hpZ secondary
// shards they fill. Epochs and the pump rule: engine_impl.hpp.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine_context.hpp"
#include "zt/core/dtype.hpp"
#include "zt/zero/plan.hpp"

namespace zt::zero::detail {

class GatherSchedule {
 public:
  // send(u, slot): prepares the send buffer of u's primary gather into `slot` and returns
  // this rank's fp32 shard [shard] to send; with bf16 weights it fills send_half(u, slot)
  // instead (the return value is then unused).
  using Send = std::function<const float*(int unit, int slot)>;
  // half: the compute weights are bf16 (gathers move bf16; the secondaries hold bf16).
  GatherSchedule(const EngineContext& ctx, const BufferPlan& plan, bool half, Send send);

  void begin_pass(const std::vector<int>& order);  // the use order of the pass
  // The full unit of use `position` (its gather completed; compute waits for it), of the
  // compute dtype; then the gathers of the next zero.prefetch uses start.
  const void* use(size_t position, int64_t epoch);
  void release(size_t position);  // after the use: its slot is free
  // The after_use rule for gathers: advance those stamped <= epoch (not in their last phase).
  void pump(int64_t epoch);
  bool idle() const { return fifo_.empty(); }
  // After the parameters change (a step, a load): the next primary gathers refill them.
  void invalidate_secondaries() { std::fill(secondary_valid_.begin(), secondary_valid_.end(), 0); }

  // The slot buffers, for the send range of a bf16 primary gather, and for idle work (no
  // gather in flight: slot 0 is free).
  float* slot_full(int slot) { return full_[static_cast<size_t>(slot)].data(); }  // [max_padded]
  bf16* slot_half(int slot) { return half_[static_cast<size_t>(slot)].data(); }   // [max_padded]
  bf16* send_half(int u, int slot);  // [shard] this rank's place in slot_half(slot)
  int slots() const { return static_cast<int>(jobs_.size()); }
  size_t secondary_bytes() const;
  size_t buffer_bytes() const;  // the gather buffers
  size_t comm_bytes() const;    // the qwZ buffers

 private:
  // A gather of one unit for one position of the use order (job i uses gather slot i).
  struct Job {
    bool busy = false;        // slot holds a gathered or gathering unit
    int pos = -1;             // position in the use order
    int unit = -1;
    bool from_secondary = false;
    const float* src = nullptr;  // primary, fp32: this rank's shard
    int phase = 0;            // phase in flight; == phases when complete
    int phases = 1;
    int64_t stamp = 0;
    Handles handles;
  };
  int acquire();
  void start(size_t position, int64_t epoch);
  void advance(Job& job, int64_t epoch);  // wait this phase, start the next
  int complete(size_t position, int64_t epoch);  // returns its slot
  void finish(Job& job, int slot);
  void start_phase(Job& job, int slot);

  const EngineContext& c_;
  const bool half_weights_;
  Send send_;
  const std::vector<int>* order_ = nullptr;
  size_t started_ = 0;             // positions below this have had their gather started
  std::vector<Job> jobs_;          // one per gather slot
  std::vector<int> fifo_;          // busy gather slots in start order
  std::vector<int> pos_slot_;      // gather slot of each position of the order, or -1
  std::vector<int> primary_pos_;   // per unit: position of its running primary gather, or -1
  std::vector<Buf<float>> full_;   // fp32 compute: per slot [max_padded]
  std::vector<Buf<bf16>> half_;    // bf16 compute: per slot [max_padded] (instead of full_)
  std::vector<Buf<uint8_t>> q_;    // qwZ: per slot [packed(max_padded)]
  std::vector<Buf<float>> secondary_;      // hpZ, fp32 compute: per unit [secondary]
  std::vector<Buf<bf16>> secondary_half_;  // hpZ, bf16 compute: per unit [secondary]
  std::vector<uint8_t> secondary_valid_;   // per unit: holds the current parameters
};

}  // namespace zt::zero::detail
