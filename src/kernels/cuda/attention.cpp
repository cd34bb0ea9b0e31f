// The attention path per shape (cuDNN's fused SDPA or zt's own kernel) and the launchers
// that follow it. See zt/kernels/cuda/attention.hpp.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <type_traits>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/kernels/cuda/attention.hpp"

namespace zt::kernels::cuda {

namespace {
// Keep equal to detail::dispatch_head_dim (attention_common.cuh).
const std::vector<int64_t> kHeadDims = {16, 32, 48, 64, 80, 96, 100, 112, 128, 256};

// ZT_ATTENTION=zt forces zt's kernel; unset, "" or "auto" lets the shape decide.
bool forced_zt() {
  const char* env = std::getenv("ZT_ATTENTION");
  if (!env || !*env || std::strcmp(env, "auto") == 0 || std::strcmp(env, "cudnn") == 0)
    return false;
  if (std::strcmp(env, "zt") == 0) return true;
  throw InputError(strf("ZT_ATTENTION=%s", env),
                   "ZT_ATTENTION is auto (cuDNN where it takes the shape, the default) or zt "
                   "(zt's own attention kernel for every shape)");
}

// The shape rules of cuDNN's fused SDPA as zt uses it (bf16 in, fp32 statistics).
bool cudnn_takes(bool bf16, int64_t D) { return bf16 && D % 8 == 0 && D <= 128; }

// Packed examples (positions) run on zt's kernel: zt does not hand cuDNN's SDPA the
// example boundaries (its padding / ragged masks would need per-example offsets). Asked
// only where cuDNN would otherwise run; said once per process.
bool packed_on_zt(const int32_t* pos) {
  if (!pos) return false;
  static std::once_flag said;
  std::call_once(said, [] {
    log::info("attention: batches of packed examples (positions reset at example "
              "boundaries) run on zt's attention kernel, not cuDNN's fused SDPA");
  });
  return true;
}
}  // namespace

const std::vector<int64_t>& attention_head_dims() { return kHeadDims; }

bool attention_head_dim_supported(int64_t D) {
  return std::find(kHeadDims.begin(), kHeadDims.end(), D) != kHeadDims.end();
}

const char* attention_path_name(AttentionPath p) {
  return p == AttentionPath::kCudnn ? "cudnn" : "zt";
}

#if !defined(ZT_HAVE_CUDNN_FRONTEND)
namespace detail {
std::string cudnn_attention_load(size_t* version) {
  *version = 0;
  return "cuDNN not built in: the build found no cudnn_frontend.h (python3 -m pip install "
         "nvidia-cudnn-frontend, then reconfigure)";
}
bool cudnn_attention_shape_failed(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t) {
  return true;
}
bool cudnn_attention_forward(bf16_t*, float*, const bf16_t*, const bf16_t*, const bf16_t*,
                             int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                             cudaStream_t) {
  return false;
}
bool cudnn_attention_backward(bf16_t*, bf16_t*, bf16_t*, const bf16_t*, const bf16_t*,
                              const bf16_t*, const bf16_t*, const bf16_t*, const float*, int64_t,
                              int64_t, int64_t, int64_t, int64_t, int64_t, cudaStream_t) {
  return false;
}
}  // namespace detail
#endif

bool cudnn_attention_available() {
  size_t version = 0;
  return detail::cudnn_attention_load(&version).empty();
}

std::string attention_backend_summary(bool bf16, int64_t D) {
  size_t version = 0;
  const std::string why = detail::cudnn_attention_load(&version);
  if (!why.empty()) return "zt (" + why + ")";
  const std::string ver = strf("cuDNN %zu.%zu.%zu", version / 10000, version / 100 % 100,
                               version % 100);
  if (forced_zt()) return "zt (ZT_ATTENTION=zt; " + ver + " loaded)";
  if (!bf16) return "zt (fp32: cuDNN's fused attention is used for bf16 only; " + ver + " loaded)";
  if (!cudnn_takes(bf16, D))
    return strf("zt (head dim %lld is not a multiple of 8 up to 128; %s loaded)",
                static_cast<long long>(D), ver.c_str());
  return strf("cudnn (%s fused SDPA; bf16, head dim %lld)", ver.c_str(), static_cast<long long>(D));
}

AttentionPath attention_path(bool bf16, int64_t B, int64_t Tn, int64_t H, int64_t G,
                             int64_t D, int64_t window) {
  if (!cudnn_takes(bf16, D) || forced_zt() || !cudnn_attention_available() ||
      detail::cudnn_attention_shape_failed(B, Tn, H, G, D, window))
    return AttentionPath::kZt;
  return AttentionPath::kCudnn;
}

template <class T>
void attention_forward(T* out, float* lse, const T* q, const T* k, const T* v, int64_t B,
                       int64_t Tn, int64_t H, int64_t G, int64_t D, cudaStream_t stream,
                       const int32_t* pos, int64_t window, const T* sink, double softcap) {
  if constexpr (std::is_same_v<T, bf16_t>) {
    // cuDNN's fused SDPA takes neither sinks nor a soft-cap: those run on zt's kernel.
    const bool cudnn = !sink && softcap <= 0 && B > 0 && Tn > 0 &&
                       attention_path(true, B, Tn, H, G, D, window) == AttentionPath::kCudnn;
    if (cudnn && !packed_on_zt(pos) &&
        detail::cudnn_attention_forward(out, lse, q, k, v, B, Tn, H, G, D, window, stream))
      return;
  }
  attention_forward_zt<T>(out, lse, q, k, v, B, Tn, H, G, D, stream, pos, window, sink, softcap);
}

template <class T>
void attention_backward(T* dq, T* dk, T* dv, float* delta, const T* dout, const T* out,
                        const T* q, const T* k, const T* v, const float* lse, int64_t B,
                        int64_t Tn, int64_t H, int64_t G, int64_t D, bool accumulate,
                        cudaStream_t stream, const int32_t* pos, int64_t window,
                        const T* sink, float* dsink, double softcap) {
  if constexpr (std::is_same_v<T, bf16_t>) {
    if (!pos && !sink && softcap <= 0 && !accumulate && B > 0 && Tn > 0 &&
        attention_path(true, B, Tn, H, G, D, window) == AttentionPath::kCudnn &&
        detail::cudnn_attention_backward(dq, dk, dv, dout, out, q, k, v, lse, B, Tn, H, G, D,
                                         window, stream))
      return;
  }
  attention_backward_zt<T>(dq, dk, dv, delta, dout, out, q, k, v, lse, B, Tn, H, G, D,
                           accumulate, stream, pos, window, sink, dsink, softcap);
}

template void attention_forward<float>(float*, float*, const float*, const float*, const float*,
                                       int64_t, int64_t, int64_t, int64_t, int64_t,
                                       cudaStream_t, const int32_t*, int64_t, const float*, double);
template void attention_forward<bf16_t>(bf16_t*, float*, const bf16_t*, const bf16_t*,
                                        const bf16_t*, int64_t, int64_t, int64_t, int64_t, int64_t,
                                        cudaStream_t, const int32_t*, int64_t, const bf16_t*, double);
template void attention_backward<float>(float*, float*, float*, float*, const float*,
                                        const float*, const float*, const float*, const float*,
                                        const float*, int64_t, int64_t, int64_t, int64_t, int64_t,
                                        bool, cudaStream_t, const int32_t*, int64_t,
                                        const float*, float*, double);
template void attention_backward<bf16_t>(bf16_t*, bf16_t*, bf16_t*, float*, const bf16_t*,
                                         const bf16_t*, const bf16_t*, const bf16_t*,
                                         const bf16_t*, const float*, int64_t, int64_t, int64_t,
                                         int64_t, int64_t, bool, cudaStream_t, const int32_t*,
                                         int64_t, const bf16_t*, float*, double);

}  // namespace zt::kernels::cuda
