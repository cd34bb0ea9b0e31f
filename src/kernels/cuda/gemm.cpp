// cuBLASLt matrix products with cached plans (see zt/kernels/cuda/gemm.hpp), and the
// row-major linear layer built on them.
#include "zt/kernels/cuda/gemm.hpp"

#include <cublasLt.h>

#include <map>
#include <tuple>
#include <type_traits>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/kernels/cuda/buffer.hpp"
#include "zt/kernels/cuda/check.hpp"

namespace zt::kernels::cuda {
namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kBF16: return CUDA_R_16BF;
    default: break;
  }
  throw Error(strf("Gemm: element type %s is not supported", std::string(dtype_name(t)).c_str()),
              "this is a bug in zt: the CUDA products take float or bfloat16");
}

// Largest power of two (<= 256) dividing the address: cuBLASLt picks algorithms for the
// alignment it is promised, so the alignment is part of a plan's key.
uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && (a % align) != 0) align /= 2;
  return align;
}

// Everything a plan depends on.
using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                       DType, DType, DType, uint32_t, uint32_t, uint32_t>;

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

void destroy(Plan& p) {
  // Destruction failures are ignored: this runs from a destructor.
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.d) cublasLtMatrixLayoutDestroy(p.d);
  if (p.desc) cublasLtMatmulDescDestroy(p.desc);
}

}  // namespace

struct Gemm::Impl {
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer<uint8_t> workspace;
  std::map<Key, Plan> plans;

  const Plan& plan(const Key& key);
};

const Plan& Gemm::Impl::plan(const Key& key) {
  auto it = plans.find(key);
  if (it != plans.end()) return it->second;
  const auto [ta, tb, m, n, k, lda, ldb, ldd, at, bt, dt, al_a, al_b, al_d] = key;
  Plan p;
  try {
    ZT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    ZT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa,
                                                   sizeof opa));
    ZT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb,
                                                   sizeof opb));
    // Stored shapes: A is [m, k] or (transposed) [k, m]; B is [k, n] or [n, k].
    const uint64_t a_rows = static_cast<uint64_t>(ta ? k : m), a_cols = static_cast<uint64_t>(ta ? m : k);
    const uint64_t b_rows = static_cast<uint64_t>(tb ? n : k), b_cols = static_cast<uint64_t>(tb ? k : n);
    ZT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, cuda_type(at), a_rows, a_cols, lda));
    ZT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, cuda_type(bt), b_rows, b_cols, ldb));
    ZT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, cuda_type(dt), static_cast<uint64_t>(m),
                                               static_cast<uint64_t>(n), ldd));

    cublasLtMatmulPreference_t pref = nullptr;
    ZT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = workspace.bytes();
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                &al_a, sizeof al_a);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                &al_b, sizeof al_b);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                &al_d, sizeof al_d);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                &al_d, sizeof al_d);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(handle, p.desc, p.a, p.b, p.d, p.d, pref, 1, &result,
                                          &found);
    cublasLtMatmulPreferenceDestroy(pref);
    ZT_CUBLAS_CHECK(st);
    if (found < 1)
      throw Error(strf("cuBLASLt found no algorithm for a %s x %s product m=%lld n=%lld k=%lld "
                       "(lda %lld, ldb %lld, ldd %lld; %s x %s -> %s; alignments %u/%u/%u)",
                       ta ? "T" : "N", tb ? "T" : "N", static_cast<long long>(m),
                       static_cast<long long>(n), static_cast<long long>(k),
                       static_cast<long long>(lda), static_cast<long long>(ldb),
                       static_cast<long long>(ldd), std::string(dtype_name(at)).c_str(),
                       std::string(dtype_name(bt)).c_str(), std::string(dtype_name(dt)).c_str(),
                       al_a, al_b, al_d),
                  "bf16 products need 16-byte aligned buffers and leading dimensions that are "
                  "multiples of 8 on the tensor cores; rerun with CUBLASLT_LOG_LEVEL=5");
    p.algo = result.algo;
  } catch (...) {
    destroy(p);
    throw;
  }
  return plans.emplace(key, p).first->second;
}

Gemm::Gemm(size_t workspace_bytes) : impl_(std::make_unique<Impl>()) {
  ZT_CUBLAS_CHECK(cublasLtCreate(&impl_->handle));
  impl_->workspace = DeviceBuffer<uint8_t>(workspace_bytes);
}

Gemm::~Gemm() {
  if (!impl_) return;
  for (auto& [key, plan] : impl_->plans) destroy(plan);
  if (impl_->handle) cublasLtDestroy(impl_->handle);
}

size_t Gemm::cached_plans() const { return impl_->plans.size(); }

void Gemm::matmul(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const void* A, DType a_type, int64_t lda, const void* B, DType b_type,
                  int64_t ldb, float beta, void* D, DType d_type, int64_t ldd,
                  cudaStream_t stream) {
  ZT_CHECK(m > 0 && n > 0 && k > 0,
           strf("Gemm::matmul with m=%lld n=%lld k=%lld", static_cast<long long>(m),
                static_cast<long long>(n), static_cast<long long>(k)),
           "this is a bug in the caller: empty products are skipped before the call");
  ZT_CHECK(a_type == b_type && (d_type == a_type || d_type == DType::kF32),
           "Gemm::matmul: unsupported type combination",
           "A and B share a type (f32 or bf16); D is f32 or that type");
  const Key key{trans_a, trans_b, m, n, k, lda, ldb, ldd, a_type, b_type, d_type,
                alignment(A), alignment(B), alignment(D)};
  const Plan& p = impl_->plan(key);
  ZT_CUBLAS_CHECK(cublasLtMatmul(impl_->handle, p.desc, &alpha, A, p.a, B, p.b, &beta, D, p.d,
                                 D, p.d, &p.algo, impl_->workspace.data(),
                                 impl_->workspace.bytes(), stream));
}

namespace {
template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) {
    return DType::kF32;
  } else {
    return DType::kBF16;
  }
}
}  // namespace

// Row-major X [r, c] is column-major X' [c, r] (ld c). So y = x W^T is, column-major,
// y' [out, N] = W'^T [out, in] x' [in, N] with W' = W^T stored [in, out] (ld in).
template <class T>
void linear_forward_scaled(Gemm& gemm, T* y, const T* x, const T* W, int64_t N, int64_t in,
                           int64_t out, float alpha, float beta, cudaStream_t stream) {
  if (N == 0) return;
  // y' [out, N] = alpha W'^T [out, in] x' [in, N] + beta y'
  gemm.matmul(/*trans_a=*/true, /*trans_b=*/false, out, N, in, alpha, W, dtype_of<T>(), in, x,
              dtype_of<T>(), in, beta, y, dtype_of<T>(), out, stream);
}

template <class T>
void linear_dx_scaled(Gemm& gemm, T* dx, const T* dy, const T* W, int64_t N, int64_t in,
                      int64_t out, float alpha, float beta, cudaStream_t stream) {
  if (N == 0) return;
  // dx' [in, N] = alpha W' [in, out] dy' [out, N] + beta dx'
  gemm.matmul(false, false, in, N, out, alpha, W, dtype_of<T>(), in, dy, dtype_of<T>(), out,
              beta, dx, dtype_of<T>(), in, stream);
}

template <class T>
void linear_forward(Gemm& gemm, T* y, const T* x, const T* W, int64_t N, int64_t in,
                    int64_t out, cudaStream_t stream) {
  linear_forward_scaled(gemm, y, x, W, N, in, out, 1.0f, 0.0f, stream);
}

template <class T, class G>
void linear_backward(Gemm& gemm, T* dx, G* dW, const T* dy, const T* x, const T* W, int64_t N,
                     int64_t in, int64_t out, bool accumulate_dx, cudaStream_t stream) {
  if (N == 0) return;
  if (dx) linear_dx_scaled(gemm, dx, dy, W, N, in, out, 1.0f, accumulate_dx ? 1.0f : 0.0f, stream);
  if (dW) {
    // dW' [in, out] += x' [in, N] dy'^T [N, out]
    gemm.matmul(false, true, in, out, N, 1.0f, x, dtype_of<T>(), in, dy, dtype_of<T>(), out,
                1.0f, dW, dtype_of<G>(), in, stream);
  }
}

template void linear_forward_scaled<float>(Gemm&, float*, const float*, const float*, int64_t,
                                           int64_t, int64_t, float, float, cudaStream_t);
template void linear_forward_scaled<bf16_t>(Gemm&, bf16_t*, const bf16_t*, const bf16_t*, int64_t,
                                            int64_t, int64_t, float, float, cudaStream_t);
template void linear_dx_scaled<float>(Gemm&, float*, const float*, const float*, int64_t, int64_t,
                                      int64_t, float, float, cudaStream_t);
template void linear_dx_scaled<bf16_t>(Gemm&, bf16_t*, const bf16_t*, const bf16_t*, int64_t,
                                       int64_t, int64_t, float, float, cudaStream_t);
template void linear_forward<float>(Gemm&, float*, const float*, const float*, int64_t, int64_t,
                                    int64_t, cudaStream_t);
template void linear_forward<bf16_t>(Gemm&, bf16_t*, const bf16_t*, const bf16_t*, int64_t,
                                     int64_t, int64_t, cudaStream_t);
template void linear_backward<float, float>(Gemm&, float*, float*, const float*, const float*,
                                            const float*, int64_t, int64_t, int64_t, bool,
                                            cudaStream_t);
template void linear_backward<bf16_t, float>(Gemm&, bf16_t*, float*, const bf16_t*,
                                             const bf16_t*, const bf16_t*, int64_t, int64_t,
                                             int64_t, bool, cudaStream_t);
template void linear_backward<bf16_t, bf16_t>(Gemm&, bf16_t*, bf16_t*, const bf16_t*,
                                              const bf16_t*, const bf16_t*, int64_t, int64_t,
                                              int64_t, bool, cudaStream_t);

}  // namespace zt::kernels::cuda
