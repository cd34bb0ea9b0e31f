#pragma once
// Small deterministic hashes for counter-based randomness (init, sampler, LoRA dropout):
// results are pure functions of their inputs, so any sharding or resume reproduces them
// exactly. mix64 and counter_uniform also compile for the GPU (nvcc), so the CUDA dropout
// kernel draws the CPU's masks from this one definition.
#include <cstdint>
#include <string_view>

#if defined(__CUDACC__)
#define ZT_HOST_DEVICE __host__ __device__
#else
#define ZT_HOST_DEVICE
#endif

namespace zt {

// splitmix64's finaliser (with its golden-ratio increment): a bijective 64-bit mix.
ZT_HOST_DEVICE constexpr uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Uniform in (0, 1] from the top 53 bits of a hash.
ZT_HOST_DEVICE constexpr double unit_interval(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 1.0) * 0x1.0p-53;
}

// The uniform in (0, 1] at counter i of a counter-based stream (model::init_stream makes
// one from a seed and a tensor name): a pure function, on the host and the GPU alike.
ZT_HOST_DEVICE constexpr double counter_uniform(uint64_t stream, int64_t i) {
  return unit_interval(mix64(stream ^ mix64(static_cast<uint64_t>(i))));
}

// FNV-1a, 64 bit, over the bytes of s.
constexpr uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char ch : s) {
    h ^= static_cast<unsigned char>(ch);
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace zt
