// NF4 dequantization on the GPU: the entry point (the kernel is nf4.cu).
#include <cstring>

#include "nf4_launch.hpp"
#include "zt/core/error.hpp"
#include "zt/kernels/nf4.hpp"

namespace zt::kernels::cuda {

static_assert(detail::kNf4Block == nf4::kBlock && detail::kNf4StatBlock == nf4::kStatBlock);

template <class T>
void dequantize_nf4(const Nf4View& q, T* out, cudaStream_t stream) {
  ZT_CHECK(q.n >= 0, "a quantized tensor with a negative element count",
           "a bug in the caller: pass the tensor's element count");
  if (q.n == 0) return;
  detail::Nf4Tables tables;
  std::memcpy(tables.nf4, nf4::kNf4.data(), sizeof tables.nf4);
  std::memcpy(tables.map, nf4::dynamic_map().data(), sizeof tables.map);
  detail::launch_dequantize_nf4<T>(q, tables, out, stream);
}

template void dequantize_nf4<float>(const Nf4View&, float*, cudaStream_t);
template void dequantize_nf4<bf16_t>(const Nf4View&, bf16_t*, cudaStream_t);

}  // namespace zt::kernels::cuda
