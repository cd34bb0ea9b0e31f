#pragma once
// The attention's output gate on the GPU (Qwen3.5's full-attention layers: q_proj emits
// each head's query then its gate): y = att * sigmoid(gate), elementwise in fp32, the
// semantics of the CPU block's (src/model/block.cpp). The gate's gradient may land inside a
// wider buffer (q_proj's gradient [rows, 2D], the gate the second half): dgate_pitch is the
// distance between two of its rows, in elements.
#include <cstdint>

#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda {

//   y [rows, D] (written; may be att), att [rows, D], gate [rows, D]
template <class T>
void output_gate_forward(T* y, const T* att, const T* gate, int64_t rows, int64_t D,
                         cudaStream_t stream = nullptr);

// With s = sigmoid(gate): dgate = d att s (1 - s) (written, the first D of each of its rows);
// d holds dL/dy on entry and dL/d att = d s on exit.
//   d [rows, D], dgate [rows, dgate_pitch] (dgate_pitch >= D), att [rows, D], gate [rows, D]
template <class T>
void output_gate_backward(T* d, T* dgate, const T* att, const T* gate, int64_t rows, int64_t D,
                          int64_t dgate_pitch, cudaStream_t stream = nullptr);

}  // namespace zt::kernels::cuda
