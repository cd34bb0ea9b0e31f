#pragma once
// Checksums of a tensor's contents in checkpoints (docs/checkpoint-format.md).
//
// zt-xxh3 (format_version 2, what zt writes): the dataset's bytes (row-major, little-endian
// elements) cut into chunks of kXxh3ChunkBytes from its start (the last one may be
// shorter), chunk j hashed with XXH3-64 (libxxhash) seeded with j, the hashes added mod
// 2^64. Any reader with an XXH3 checks it (Python: xxhash.xxh3_64_intdigest); chunks are
// independent, so threads and ranks hash disjoint whole chunks and add their sums.
//
// zt-sum64 (format_version 1, still read):
//
//   checksum(x[0..n)) = sum over i of mix64(mix64(i) ^ bits(x[i]))   (mod 2^64)
//
// where i is the element's index in the whole (global, row-major) tensor and bits(x) the
// element's IEEE-754 bit pattern (fp32: the 32 bits, zero-extended). Each term depends on
// its index and value only, so the checksum of a tensor is the sum of the checksums of any
// slices that partition it: every rank sums the elements it writes or reads, and one
// all_reduce (unsigned 64-bit sum, wrapping) gives the whole tensor's. A changed element
// changes its term (mix64 is a bijection), so a flipped byte is caught.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

#include "zt/core/hash.hpp"

namespace zt {

// The checksum of x, whose first element has index `first` in the whole tensor: the
// definition, one element at a time (the reference of the tests).
inline uint64_t sum64(std::span<const float> x, uint64_t first = 0) {
  uint64_t s = 0;
  for (size_t k = 0; k < x.size(); ++k)
    s += mix64(mix64(first + k) ^ static_cast<uint64_t>(std::bit_cast<uint32_t>(x[k])));
  return s;
}

// The same value, computed with the widest vector unit this CPU has (AVX-512 with its
// 64-bit multiplies, AVX2, or the loop above): what checkpoints use. Chosen once, at the
// first call; ZT_CHECKSUM_ISA=scalar|avx2|avx512 forces one (an unsupported one is the
// scalar loop).
uint64_t sum64_fast(std::span<const float> x, uint64_t first = 0);
// The instruction set sum64_fast uses here: "avx512", "avx2" or "scalar".
const char* sum64_isa();

// zt-xxh3's chunk: 256 KiB (a multiple of every element size; small enough that a chunk
// a rank holds only part of costs little to read back, big enough that XXH3 runs at speed).
inline constexpr uint64_t kXxh3ChunkBytes = uint64_t{1} << 18;

// zt-xxh3's partial sum of `bytes`, which start at the boundary of chunk `first_chunk` of
// their dataset and hold whole chunks (the dataset's last chunk may end short): the sum of
// XXH3_64bits_withSeed(chunk, first_chunk + p) over the chunks p of bytes, mod 2^64.
uint64_t xxh3_sum(std::span<const std::byte> bytes, uint64_t first_chunk = 0);

}  // namespace zt
