// Token embedding: forward lookup and backward scatter-add.
#include "zt/kernels/embedding.hpp"

#include <algorithm>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::kernels::cpu {

template <class T>
void embedding_forward(T* out, const int32_t* tokens, const T* weight, int64_t N, int64_t V,
                       int64_t C) {
  // out [N, C], tokens [N], weight [V, C]
  for (int64_t n = 0; n < N; ++n) {
    const int32_t tok = tokens[n];
    if (tok < 0 || tok >= V) {
      throw InputError(strf("token id %d at position %lld is outside the vocabulary [0, %lld)",
                            tok, static_cast<long long>(n), static_cast<long long>(V)),
                       "the data was tokenized for a different vocabulary; check the "
                       "model's vocab size against the tokenizer.");
    }
    std::copy_n(weight + static_cast<int64_t>(tok) * C, C, out + n * C);
  }
}

template <class T>
void embedding_backward(T* dweight, const T* dout, const int32_t* tokens, int64_t N, int64_t C) {
  // dweight [V, C] (accumulated), dout [N, C], tokens [N] (checked by the forward)
  // Serial over rows: two positions with the same token add into the same row.
  for (int64_t n = 0; n < N; ++n) {
    T* dst = dweight + static_cast<int64_t>(tokens[n]) * C;  // [C]
    const T* src = dout + n * C;                              // [C]
    for (int64_t c = 0; c < C; ++c) dst[c] += src[c];
  }
}

template void embedding_forward<float>(float*, const int32_t*, const float*, int64_t, int64_t,
                                       int64_t);
template void embedding_forward<double>(double*, const int32_t*, const double*, int64_t, int64_t,
                                        int64_t);
template void embedding_backward<float>(float*, const float*, const int32_t*, int64_t, int64_t);
template void embedding_backward<double>(double*, const double*, const int32_t*, int64_t,
                                         int64_t);

}  // namespace zt::kernels::cpu
