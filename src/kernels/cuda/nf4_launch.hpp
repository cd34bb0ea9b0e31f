#pragma once
// Internal: the NF4 dequantization launcher (nf4.cu, compiled as C++17 by nvcc) and its
// code books, filled by the C++20 entry point (nf4.cpp) from zt/kernels/nf4.hpp.
#include "zt/kernels/cuda/nf4.hpp"

namespace zt::kernels::cuda::detail {

inline constexpr int kNf4Block = 64;       // = nf4::kBlock (checked in nf4.cpp)
inline constexpr int kNf4StatBlock = 256;  // = nf4::kStatBlock

// The two code books, passed to the kernel by value (1088 bytes of parameters) and copied
// to shared memory, where lookups with divergent indices are cheap.
struct Nf4Tables {
  float nf4[16];   // NF4 levels
  float map[256];  // the dynamic 8-bit map
};

template <class T>
void launch_dequantize_nf4(const Nf4View& q, const Nf4Tables& tables, T* out,
                           cudaStream_t stream);

}  // namespace zt::kernels::cuda::detail
