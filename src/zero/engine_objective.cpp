// The engine's side of the preference objectives (DPO, ORPO; docs/finetune.md): the
// model's per-row objective and adapter switch, and a forward pass of per-row log-probs
// run like eval_loss (stage 3 gathers each unit; collective).
#include "engine_impl.hpp"
#include "zt/zero/engine.hpp"

namespace zt::zero {

void Engine::set_row_objective(model::RowObjective objective) {
  impl_->model.set_row_objective(std::move(objective));
}

void Engine::set_adapters_enabled(bool on) { impl_->model.set_adapters_enabled(on); }

void Engine::row_logps(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
                       int64_t T, std::span<const int32_t> positions, std::span<double> logp,
                       std::span<int64_t> count) {
  Impl& e = *impl_;
  e.offload.flush_checkout();
  e.begin_pass(Impl::Mode::kEval, e.eval_order);
  try {
    e.model.row_logps(tokens, targets, B, T, positions, logp, count);
    e.end_pass();
  } catch (...) {
    e.abandon_pass();
    throw;
  }
  e.note_peak();
}

}  // namespace zt::zero
