#pragma once
// All CUDA kernels (namespace zt::kernels::cuda). Conventions follow the CPU reference
// (zt/kernels/cpu.hpp): row-major buffers, N = B * T rows; forward kernels WRITE their
// outputs, backward kernels ADD into gradients unless accumulate = false; every launcher
// takes a stream and checks the launch; pointers are device pointers unless a comment
// says otherwise. T = float or bf16_t, computed in fp32. See docs/cuda.md.
#include "zt/kernels/cuda/adamw.hpp"
#include "zt/kernels/cuda/attention.hpp"
#include "zt/kernels/cuda/bias.hpp"
#include "zt/kernels/cuda/buffer.hpp"
#include "zt/kernels/cuda/check.hpp"
#include "zt/kernels/cuda/convert.hpp"
#include "zt/kernels/cuda/cross_entropy.hpp"
#include "zt/kernels/cuda/dropout.hpp"
#include "zt/kernels/cuda/embedding.hpp"
#include "zt/kernels/cuda/gated_delta.hpp"
#include "zt/kernels/cuda/gemm.hpp"
#include "zt/kernels/cuda/grad_norm.hpp"
#include "zt/kernels/cuda/head_rmsnorm.hpp"
#include "zt/kernels/cuda/moe.hpp"
#include "zt/kernels/cuda/nf4.hpp"
#include "zt/kernels/cuda/output_gate.hpp"
#include "zt/kernels/cuda/precision.hpp"
#include "zt/kernels/cuda/quantize.hpp"
#include "zt/kernels/cuda/rmsnorm.hpp"
#include "zt/kernels/cuda/rope.hpp"
#include "zt/kernels/cuda/softcap.hpp"
#include "zt/kernels/cuda/swiglu.hpp"
#include "zt/kernels/cuda/types.hpp"
