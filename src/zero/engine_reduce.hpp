#pragma once
// The reduce schedule of the ZeRO engine (engine_reduce.cpp): the gradient reductions in
// flight, one per reduce slot, and the slots' buffers (stages 2-3: the micro-step's
// full-unit gradient; bf16 and qgZ staging). Epochs and the pump rule: engine_impl.hpp.
#include <cstdint>
#include <functional>
#include <vector>

#include "engine_context.hpp"
#include "zt/core/dtype.hpp"
#include "zt/zero/plan.hpp"

namespace zt::zero::detail {

class ReduceSchedule {
 public:
  // done(u, own): unit u's reduction is complete; own [shard] is this rank's reduced part
  // (in mem; stages 0-1: inside the full gradient reduced in place).
  using Done = std::function<void(int unit, float* own)>;
  ReduceSchedule(const EngineContext& ctx, const BufferPlan& plan, int units, Done done);

  // Stages 2-3: unit u's gradient buffer for this use (a slot, zeroed when newly taken;
  // held until grad_ready).
  float* unit_buffer(int u);
  // Stages 2-3, grad_ready: the reduction of u's gradient buffer starts.
  void start_unit(int u, int64_t epoch);
  // Stages 0-1, last micro-step: the reduction of grad (the unit's full gradient) starts.
  void start_full(int u, float* grad, int64_t epoch);
  // The after_use rule for reductions: advance those stamped <= epoch, complete those in
  // their last phase.
  void pump(int64_t epoch);
  void complete_all();
  bool idle() const { return fifo_.empty(); }
  size_t grad_bytes() const;  // the gradient buffers
  size_t comm_bytes() const;  // the bf16 and qgZ buffers

 private:
  // A gradient reduction of one unit (job i uses reduce slot i: at stages 2-3 its
  // full-unit gradient buffer, and its staging buffers).
  struct Job {
    bool busy = false;        // slot held (buffer in use by the backward or the job)
    bool running = false;     // reduction started, not yet complete
    int unit = -1;
    float* grad = nullptr;    // [padded] the unit's full gradient (in `mem`), reduced in place
    int phase = 0;
    int phases = 1;
    int64_t stamp = 0;
    Handles handles;
  };
  int acquire();
  void start(int u, int slot, float* grad, int64_t epoch);
  void advance(Job& job, int slot, int64_t epoch);
  void complete(int slot);
  void start_phase(Job& job, int slot);
  float* finish(Job& job, int slot);  // returns own (see Done)

  const EngineContext& c_;
  Done done_;
  std::vector<Job> jobs_;       // one per reduce slot
  std::vector<int> fifo_;       // running reduce slots in start order
  std::vector<int> grad_slot_;  // per unit: reduce slot holding its gradient, or -1
  std::vector<Buf<float>> grad_buf_;        // stages 2-3: per slot [max_padded]
  std::vector<Buf<bf16>> half_;             // bf16 reduce: per slot [max_padded]
  std::vector<Buf<uint8_t>> qsend_, qrecv_;  // qgZ: per slot [packed(max_padded)]
};

}  // namespace zt::zero::detail
