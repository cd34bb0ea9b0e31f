// zt-sum64 with the vector units of the CPU: the loop of checksum.hpp compiled three
// times (GCC vectorises it; AVX-512DQ multiplies 64-bit lanes), chosen at run time. Every
// version computes the same wrapping sum of the same terms, so the value is the same bit
// for bit (tests/core/test_checksum.cpp compares them with the definition).
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "zt/core/checksum.hpp"

// zt-xxh3 hashes the bytes as they lie in memory, which are the file's little-endian
// bytes only on a little-endian host (every one zt builds for).
static_assert(std::endian::native == std::endian::little, "zt-xxh3 hashes memory as little-endian bytes");

namespace zt {
namespace {

#define ZT_SUM64_BODY                                                   \
  uint64_t s = 0;                                                       \
  for (size_t k = 0; k < n; ++k) {                                      \
    uint32_t bits;                                                      \
    std::memcpy(&bits, x + k, sizeof bits);                             \
    s += mix64(mix64(first + k) ^ static_cast<uint64_t>(bits));         \
  }                                                                     \
  return s;

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,avx512dq,avx512vl"))) uint64_t sum_avx512(const float* x, size_t n,
                                                                         uint64_t first) {
  ZT_SUM64_BODY
}
__attribute__((target("avx2"))) uint64_t sum_avx2(const float* x, size_t n, uint64_t first) {
  ZT_SUM64_BODY
}
#endif
uint64_t sum_scalar(const float* x, size_t n, uint64_t first) { ZT_SUM64_BODY }
#undef ZT_SUM64_BODY

using SumFn = uint64_t (*)(const float*, size_t, uint64_t);
struct Choice {
  SumFn fn;
  const char* isa;
};

Choice choose() {
  const char* env = std::getenv("ZT_CHECKSUM_ISA");
  const std::string_view want = env ? env : "";
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl");
  const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx512 && (want.empty() || want == "avx512")) return {sum_avx512, "avx512"};
  if (avx2 && (want.empty() || want == "avx2")) return {sum_avx2, "avx2"};
#endif
  return {sum_scalar, "scalar"};
}

const Choice& chosen() {
  static const Choice c = choose();
  return c;
}

}  // namespace

uint64_t sum64_fast(std::span<const float> x, uint64_t first) {
  return chosen().fn(x.data(), x.size(), first);
}

const char* sum64_isa() { return chosen().isa; }

uint64_t xxh3_sum(std::span<const std::byte> bytes, uint64_t first_chunk) {
  uint64_t s = 0;
  for (uint64_t at = 0, j = first_chunk; at < bytes.size(); at += kXxh3ChunkBytes, ++j) {
    const size_t len = static_cast<size_t>(std::min<uint64_t>(kXxh3ChunkBytes, bytes.size() - at));
    s += XXH3_64bits_withSeed(bytes.data() + at, len, j);
  }
  return s;
}

}  // namespace zt
