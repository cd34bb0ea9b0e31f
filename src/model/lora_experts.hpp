#pragma once
// LoRA on the experts of a mixture-of-experts block (private to zt_model), as PEFT's
// ParamWrapper (peft/tuners/lora/layer.py) adapts a 3-D parameter W [E, out, in]: one
// rank-r adapter per expert, held in two 2-D tensors
//   A [E*r, in]   row e*r + k is row k of expert e's A_e [r, in]
//   B [out, r*E]  column k*E + e is column k of expert e's B_e [out, r]
// (PEFT reshapes A to [E, r, in] and B to [out, r, E]) and
//   W'_e = W_e + scale * B_e A_e.
// PEFT runs the experts on W' (a parametrisation of the parameter); so does zt: the model
// merges each targeted stack into a scratch before the experts' kernels (forward and
// backward) and turns the kernels' gradient of W' into the adapters':
//   dA_e += scale * B_e^T dW'_e,   dB_e += scale * dW'_e A_e^T.
#include <cstdint>

namespace zt::model::detail {

// W [E, out, in] += scale * B_e A_e for every expert e (each element's sum over r in
// double, rounded once). A [E*r, in], B [out, r*E] as above.
template <class T>
void add_expert_delta(T* W, const T* A, const T* B, int64_t E, int64_t out, int64_t in,
                      int64_t r, double scale);

// The adapters' gradients from dW [E, out, in] (d loss / d W'):
//   dA [E*r, in] += scale * B_e^T dW_e,  dB [out, r*E] += scale * dW_e A_e^T.
template <class T>
void expert_delta_backward(T* dA, T* dB, const T* dW, const T* A, const T* B, int64_t E,
                           int64_t out, int64_t in, int64_t r, double scale);

}  // namespace zt::model::detail
