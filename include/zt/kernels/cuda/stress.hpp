#pragma once
// Stress of one GPU for `zt check` (docs/checklist.md, "GPU stress"): a bf16 GEMM burn
// through cuBLASLt (the Gemm of gemm.hpp) for a set time, and an HBM bandwidth kernel
// (device-to-device copy with 128-bit loads and stores). Both run on the current device
// on a stream of their own, check what they computed, and throw zt::Error (ZT_CUDA_CHECK /
// ZT_CUBLAS_CHECK: the call, device, host and a hint) when a CUDA or cuBLAS call fails.
#include <cstdint>

namespace zt::kernels::cuda {

// D [n, n] (fp32) = A [n, n] B [n, n] (bf16, fp32 accumulation), repeated for `seconds`
// after a warm-up of a tenth of that (at most 1 s). A and B hold pseudo-random values of
// {+-0.5, +-1, +-1.5, +-2} (exact in bf16; every product and sum is exact in fp32), so
// the result is checked exactly: the first product is kept, and the last must equal it
// bit for bit everywhere; `kGemmSamples` outputs of the last are compared with the
// product computed on the host in double.
struct GemmBurn {
  int64_t n = 0;          // m = n = k
  int64_t calls = 0;      // timed products
  double seconds = 0.0;   // their GPU time (CUDA events)
  double tflops = 0.0;    // 2 n^3 calls / seconds / 1e12
  double slowest_window_tflops = 0.0;  // the slowest window of consecutive calls (~1/20 of the burn)
  int64_t checked = 0;    // outputs compared (every output against the first product, plus samples)
  int64_t wrong = 0;      // outputs that differ
};
inline constexpr int64_t kGemmBurnSize = 8192;
inline constexpr int kGemmSamples = 256;
GemmBurn gemm_burn(double seconds, int64_t n = kGemmBurnSize);

// dst = src over `bytes` (a multiple of 16, at most `max_bytes` and a quarter of the free
// memory) in 128-bit words, repeated for `seconds` (at least 10 passes) after two untimed
// passes; GB/s counts the bytes read and written: 2 * bytes * passes / time. The source is
// a pattern of the word index; afterwards every destination word is compared with it.
struct HbmBandwidth {
  uint64_t bytes = 0;     // per buffer
  int64_t passes = 0;
  double seconds = 0.0;
  double gbs = 0.0;       // 1 GB = 1e9 bytes
  int64_t wrong = 0;      // 16-byte words of the destination that differ from the pattern
};
inline constexpr uint64_t kHbmMaxBytes = uint64_t{1} << 30;
HbmBandwidth hbm_bandwidth(double seconds, uint64_t max_bytes = kHbmMaxBytes);

// Test hook (tests/checklist/test_stress_gpu.cpp, label gpu): while set, gemm_burn flips one
// bit of one output of the first product, and hbm_bandwidth one bit of one destination
// word, right before counting, so the counters are shown a wrong result (wrong == 1).
// kNone (the default) is the only value zt itself ever uses.
enum class StressFault { kNone, kGemm, kHbm };
void set_stress_fault_for_test(StressFault fault);

}  // namespace zt::kernels::cuda
