#pragma once
// Operands checked whole where ASan does not see the accesses (private header).
//
// Under the sanitizers (ZT_SANITIZE) the GEMM kernels (cpu/linear.cpp) are compiled without
// ASan and UBSan: instrumented, Eigen's GEMM micro-kernel runs 14x slower (256x256 fp32,
// bench/results/ci-time.md "The GEMMs under the sanitizers"), and it was most of the time
// of the sanitizer tests. Those files touch no memory but their operands (and Eigen's own
// packing buffers), so each entry point checks every operand's whole extent instead: a
// buffer too short or already freed fails there, as ASan would have failed inside.
#include <cstdint>

namespace zt::kernels::cpu::detail {

#if defined(ZT_UNINSTRUMENTED_KERNEL)
// Aborts with ASan's description of the first byte of [p, p + bytes) that is not
// addressable (freed, out of its allocation, or never allocated); `kernel` and `operand`
// name it. A no-op in a build without ASan.
void expect_addressable(const void* p, int64_t bytes, const char* kernel, const char* operand);
#else
inline void expect_addressable(const void*, int64_t, const char*, const char*) {}
#endif

// n elements of T at p.
template <class T>
void expect_elements(const T* p, int64_t n, const char* kernel, const char* operand) {
  expect_addressable(p, n * static_cast<int64_t>(sizeof(T)), kernel, operand);
}

}  // namespace zt::kernels::cpu::detail
