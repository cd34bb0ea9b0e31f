// The experts of the mixture-of-experts block on the GPU (see zt/kernels/cuda/moe.hpp):
// the permuted rows of each expert are contiguous, so every expert is three GEMMs forward
// (gate, up, down: the gate and up halves of gate_up [E, 2I, C] are each a contiguous
// [I, C] matrix) and SwiGLU runs once over all S rows. Experts that received no token are
// skipped. gpt-oss's expert biases are added per expert after each GEMM (their gradients
// are column sums of the same rows), and its clamped SwiGLU replaces SwiGLU.
#include "moe_launch.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/kernels/cuda/bias.hpp"
#include "zt/kernels/cuda/moe.hpp"
#include "zt/kernels/cuda/swiglu.hpp"

namespace zt::kernels::cuda {

namespace {

// The experts' gate: SwiGLU, or gpt-oss's clamped SwiGLU (extra.swiglu_limit > 0).
template <class T>
void gate_forward(const MoeActs<T>& acts, int64_t n, const MoeExpertExtras<T>& extra,
                  cudaStream_t stream) {
  if (extra.swiglu_limit > 0)
    swiglu_clamped_forward(acts.h, acts.g, acts.u, n, extra.swiglu_limit, extra.swiglu_alpha,
                           stream);
  else
    swiglu_forward(acts.h, acts.g, acts.u, n, stream);
}

// dg, du written over g, u (the kernels read each element before writing it).
template <class T>
void gate_backward(const MoeActs<T>& acts, const T* dh, int64_t n,
                   const MoeExpertExtras<T>& extra, cudaStream_t stream) {
  if (extra.swiglu_limit > 0)
    swiglu_clamped_backward(acts.g, acts.u, dh, acts.g, acts.u, n, extra.swiglu_limit,
                            extra.swiglu_alpha, /*accumulate=*/false, stream);
  else
    swiglu_backward(acts.g, acts.u, dh, acts.g, acts.u, n, /*accumulate=*/false, stream);
}

}  // namespace

namespace detail {

void check_moe_shape(int64_t E, int64_t k, const char* what) {
  if (E < 1 || E > kMoeMaxExperts || k < 1 || k > E)
    throw InputError(strf("%s: %lld experts, %lld per token: needs 1 <= k <= E <= %lld", what,
                          static_cast<long long>(E), static_cast<long long>(k),
                          static_cast<long long>(kMoeMaxExperts)),
                     "check the model's num_local_experts and num_experts_per_tok");
}

}  // namespace detail

template <class T>
void moe_experts_forward(Gemm& gemm, T* out, const MoeActs<T>& acts, const T* x,
                         const T* gate_up, const T* down, const MoePlan& plan, const float* w,
                         int64_t N, int64_t C, int64_t I, int64_t E, int64_t k,
                         cudaStream_t stream, const MoeExpertExtras<T>& extra) {
  const int64_t S = N * k;
  moe_gather(acts.xp, x, plan.perm, S, C, k, stream);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t r0 = plan.offsets[e], M = plan.offsets[e + 1] - r0;
    if (M == 0) continue;
    const T* gate = gate_up + e * 2 * I * C;  // [I, C]
    const T* up = gate + I * C;               // [I, C]
    linear_forward(gemm, acts.g + r0 * I, acts.xp + r0 * C, gate, M, C, I, stream);
    linear_forward(gemm, acts.u + r0 * I, acts.xp + r0 * C, up, M, C, I, stream);
    if (const T* b = extra.gate_up_bias ? extra.gate_up_bias + e * 2 * I : nullptr) {  // [2I]
      bias_forward(acts.g + r0 * I, b, M, I, stream);
      bias_forward(acts.u + r0 * I, b + I, M, I, stream);
    }
  }
  gate_forward(acts, S * I, extra, stream);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t r0 = plan.offsets[e], M = plan.offsets[e + 1] - r0;
    if (M == 0) continue;
    linear_forward(gemm, acts.y + r0 * C, acts.h + r0 * I, down + e * C * I, M, I, C, stream);
    if (extra.down_bias) bias_forward(acts.y + r0 * C, extra.down_bias + e * C, M, C, stream);
  }
  moe_combine(out, acts.y, plan.pos, w, N, C, k, /*accumulate=*/false, stream);
}

template <class T, class G>
void moe_experts_backward(Gemm& gemm, T* dx, G* dgate_up, G* ddown, float* dw, const T* dout,
                          const MoeActs<T>& acts, const T* gate_up, const T* down,
                          const MoePlan& plan, const float* w, T* scratch_rows, T* scratch_h,
                          int64_t N, int64_t C, int64_t I, int64_t E, int64_t k,
                          bool accumulate_dx, cudaStream_t stream,
                          const MoeExpertExtras<T>& extra, G* dgate_up_bias, G* ddown_bias) {
  const int64_t S = N * k;
  T* dyp = scratch_rows;  // [S, C] d loss / d y, permuted; later d loss / d xp
  T* dh = scratch_h;      // [S, I]
  moe_weight_backward(dw, dyp, dout, acts.y, plan.pos, w, S, C, k, stream);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t r0 = plan.offsets[e], M = plan.offsets[e + 1] - r0;
    if (M == 0) continue;
    G* dd = ddown ? ddown + e * C * I : nullptr;  // [C, I] (nullptr: frozen)
    linear_backward(gemm, dh + r0 * I, dd, dyp + r0 * C, acts.h + r0 * I, down + e * C * I, M, I,
                    C, /*accumulate_dx=*/false, stream);
    if (ddown_bias) bias_backward(ddown_bias + e * C, dyp + r0 * C, M, C, stream);
  }
  gate_backward(acts, dh, S * I, extra, stream);  // dg, du written over g, u
  T* dxp = dyp;  // [S, C]: dyp is no longer needed
  for (int64_t e = 0; e < E; ++e) {
    const int64_t r0 = plan.offsets[e], M = plan.offsets[e + 1] - r0;
    if (M == 0) continue;
    const T* gate = gate_up + e * 2 * I * C;  // [I, C]
    G* dgate = dgate_up ? dgate_up + e * 2 * I * C : nullptr;  // [I, C] (nullptr: frozen)
    G* dup = dgate ? dgate + I * C : nullptr;                   // [I, C]
    linear_backward(gemm, dxp + r0 * C, dgate, acts.g + r0 * I, acts.xp + r0 * C, gate, M, C, I,
                    /*accumulate_dx=*/false, stream);
    linear_backward(gemm, dxp + r0 * C, dup, acts.u + r0 * I, acts.xp + r0 * C,
                    gate + I * C, M, C, I, /*accumulate_dx=*/true, stream);
    if (G* db = dgate_up_bias ? dgate_up_bias + e * 2 * I : nullptr) {  // [2I]
      bias_backward(db, acts.g + r0 * I, M, I, stream);
      bias_backward(db + I, acts.u + r0 * I, M, I, stream);
    }
  }
  moe_combine(dx, dxp, plan.pos, nullptr, N, C, k, accumulate_dx, stream);
}

template void moe_experts_forward<float>(Gemm&, float*, const MoeActs<float>&, const float*,
                                         const float*, const float*, const MoePlan&,
                                         const float*, int64_t, int64_t, int64_t, int64_t,
                                         int64_t, cudaStream_t, const MoeExpertExtras<float>&);
template void moe_experts_forward<bf16_t>(Gemm&, bf16_t*, const MoeActs<bf16_t>&, const bf16_t*,
                                          const bf16_t*, const bf16_t*, const MoePlan&,
                                          const float*, int64_t, int64_t, int64_t, int64_t,
                                          int64_t, cudaStream_t, const MoeExpertExtras<bf16_t>&);
#define ZT_MOE_BACKWARD(T, G)                                                                  \
  template void moe_experts_backward<T, G>(Gemm&, T*, G*, G*, float*, const T*,                \
                                           const MoeActs<T>&, const T*, const T*,              \
                                           const MoePlan&, const float*, T*, T*, int64_t,      \
                                           int64_t, int64_t, int64_t, int64_t, bool,           \
                                           cudaStream_t, const MoeExpertExtras<T>&, G*, G*);
ZT_MOE_BACKWARD(float, float)
ZT_MOE_BACKWARD(bf16_t, float)
ZT_MOE_BACKWARD(bf16_t, bf16_t)
#undef ZT_MOE_BACKWARD

}  // namespace zt::kernels::cuda
