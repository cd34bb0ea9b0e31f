// The cuBLASLt functions zt calls (gemm.cpp, check.cpp), resolved from libcublasLt at their
// first call instead of linked: libcublasLt.so.13 (541 MB) costs every start of a
// CUDA-built zt ~25,400 page faults and ~0.06 s of CPU in the loader's relocations,
// including the CPU-only runs (`zt estimate`, `zt train` on the CPU, every CLI test) that
// never make a GPU product (bench/results/ci-time.md, "CI time, 2026-11-28, 420c689").
//
// Each definition below has the signature cublasLt.h declares (a mismatch does not compile:
// two C functions of one name) and forwards to the library's. They are hidden: never in the
// dynamic symbol table, so the library's own calls cannot land here. Loading is checked: a
// library that does not load, or lacks a function, throws zt::Error naming it, with the fix.
#include <cublasLt.h>
#include <dlfcn.h>

#include <array>
#include <cstdlib>
#include <string>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

// Every function zt calls; all are resolved at the first call of any, so a missing one
// fails there (a cublasLtCreate), never later in a destructor's Destroy.
#define ZT_CUBLASLT_FUNCTIONS(X)                                                        \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetStatusString) X(cublasLtMatmul)      \
  X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) \
  X(cublasLtMatmulDescSetAttribute) X(cublasLtMatmulPreferenceCreate)                    \
  X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute)             \
  X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)

namespace zt::kernels::cuda {
namespace {

#define ZT_CUBLASLT_INDEX(FN) k_##FN,
enum Function { ZT_CUBLASLT_FUNCTIONS(ZT_CUBLASLT_INDEX) kFunctions };
#undef ZT_CUBLASLT_INDEX

// libcublasLt.so.<major of the headers zt was built with>; ZT_CUBLASLT_LIB names another
// file (a library outside the loader's path, or a test of the failure).
void* cublaslt_function(int index) {
  static const std::array<void*, kFunctions> table = [] {
    const char* env = std::getenv("ZT_CUBLASLT_LIB");
    const std::string lib =
        env && *env ? std::string(env) : strf("libcublasLt.so.%d", CUBLAS_VER_MAJOR);
    void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      throw Error(strf("cuBLASLt (the GPU matrix products) did not load: %s",
                       e ? e : (lib + ": unknown dlopen error").c_str()),
                  strf("install CUDA %d's cuBLAS (the toolkit's lib folder, or pip's "
                       "nvidia-cublas) and put the folder holding %s on LD_LIBRARY_PATH; "
                       "`ldconfig -p | grep cublasLt` lists what the loader finds",
                       CUBLAS_VER_MAJOR, lib.c_str()));
    }
    std::array<void*, kFunctions> t{};
    const char* names[] = {
#define ZT_CUBLASLT_NAME(FN) #FN,
        ZT_CUBLASLT_FUNCTIONS(ZT_CUBLASLT_NAME)
#undef ZT_CUBLASLT_NAME
    };
    for (int i = 0; i < kFunctions; ++i) {
      dlerror();
      t[i] = dlsym(h, names[i]);
      if (!t[i]) {
        const char* e = dlerror();
        throw Error(strf("%s has no %s: %s", lib.c_str(), names[i],
                         e ? e : "dlsym returned null"),
                    strf("the libcublasLt found is older than the CUDA %d headers zt was "
                         "built with: put a libcublasLt.so.%d of that CUDA or newer first on "
                         "LD_LIBRARY_PATH",
                         CUBLAS_VER_MAJOR, CUBLAS_VER_MAJOR));
      }
    }
    return t;
  }();
  return table[index];
}

}  // namespace
}  // namespace zt::kernels::cuda

// RET FN PARAMS: the signature as cublasLt.h declares it; ARGS: the parameters' names.
#define ZT_CUBLASLT_FORWARD(RET, FN, PARAMS, ARGS)                                   \
  extern "C" __attribute__((visibility("hidden"))) RET FN PARAMS {                   \
    return reinterpret_cast<decltype(&FN)>(                                          \
        ::zt::kernels::cuda::cublaslt_function(::zt::kernels::cuda::k_##FN)) ARGS;  \
  }

ZT_CUBLASLT_FORWARD(cublasStatus_t, cublasLtCreate, (cublasLtHandle_t * h), (h))
ZT_CUBLASLT_FORWARD(cublasStatus_t, cublasLtDestroy, (cublasLtHandle_t h), (h))
ZT_CUBLASLT_FORWARD(const char*, cublasLtGetStatusString, (cublasStatus_t s), (s))
ZT_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmul,
                    (cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void* alpha,
                     const void* A, cublasLtMatrixLayout_t a, const void* B,
                     cublasLtMatrixLayout_t b, const void* beta, const void* C,
                     cublasLtMatrixLayout_t c, void* D, cublasLtMatrixLayout_t d,
                     const cublasLtMatmulAlgo_t* algo, void* ws, size_t ws_bytes,
                     cudaStream_t stream),
                    (h, desc, alpha, A, a, B, b, beta, C, c, D, d, algo, ws, ws_bytes, stream))
ZT_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,
                    (cublasLtHandle_t h, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                     cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                     cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref,
                     int requested, cublasLtMatmulHeuristicResult_t results[], int* found),
                    (h, desc, a, b, c, d, pref, requested, results, found))
ZT_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulDescCreate,
                    (cublasLtMatmulDesc_t * desc, cublasComputeType_t compute,
                     cudaDataType_t scale),
                    (desc, compute, scale))
ZT_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t desc),
                    (desc))
ZT_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulDescSetAttribute,
                    (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                     const void* buf, size_t size),
                    (desc, attr, buf, size))
ZT_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulPreferenceCreate,
                    (cublasLtMatmulPreference_t * pref), (pref))
ZT_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulPreferenceDestroy,
                    (cublasLtMatmulPreference_t pref), (pref))
ZT_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,
                    (cublasLtMatmulPreference_t pref,
                     cublasLtMatmulPreferenceAttributes_t attr, const void* buf, size_t size),
                    (pref, attr, buf, size))
ZT_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatrixLayoutCreate,
                    (cublasLtMatrixLayout_t * layout, cudaDataType type, uint64_t rows,
                     uint64_t cols, int64_t ld),
                    (layout, type, rows, cols, ld))
ZT_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t l),
                    (l))
