#pragma once
// Element types of the CUDA kernels. Activations and weights are T = float or bf16_t
// (__nv_bfloat16: the same bits as zt::bf16, round-to-nearest-even conversions); every
// kernel computes in fp32 and accumulates in fp32 (or double where noted).
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace zt::kernels::cuda {

using bf16_t = __nv_bfloat16;

}  // namespace zt::kernels::cuda
