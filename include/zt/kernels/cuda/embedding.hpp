#pragma once
// Token embedding on the GPU (same semantics as zt/kernels/embedding.hpp).
#include <cstdint>

#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda {

// out[n, :] = weight[tokens[n], :]
//   out    [N, C]  T (written)
//   tokens [N]     int32, device
//   weight [V, C]  T
//   bad    [1]     int32, device, nullable: a token outside [0, V) writes a row of zeros
//                  and atomicMin's its position n into *bad (set *bad to INT32_MAX first;
//                  the CPU kernel throws instead, which a kernel cannot).
template <class T>
void embedding_forward(T* out, const int32_t* tokens, const T* weight, int64_t N, int64_t V,
                       int64_t C, int32_t* bad, cudaStream_t stream = nullptr);

// dweight[tokens[n], :] += dout[n, :]   (atomicAdd: rows sharing a token add in any order)
//   dweight [V, C] G = float or bf16_t (accumulated)
//   dout    [N, C] T
//   tokens  [N]    (valid: checked by the forward)
template <class T, class G>
void embedding_backward(G* dweight, const T* dout, const int32_t* tokens, int64_t N, int64_t C,
                        cudaStream_t stream = nullptr);

}  // namespace zt::kernels::cuda
