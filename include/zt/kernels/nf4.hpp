#pragma once
// NF4 with double quantization: how QLoRA stores frozen base weights (Dettmers et al.
// 2023, "QLoRA: Efficient Finetuning of Quantized LLMs", section 3), in the layout
// bitsandbytes uses (quantize_4bit with quant_type "nf4", blocksize 64,
// compress_statistics), so a quantized tensor means the same thing in both.
//
// A tensor x [n] (flat, row-major) is stored as
//   codes        [ceil(n / 2)]         uint8  two 4-bit indices into kNf4 per byte: element
//                                             2j in the high nibble, 2j + 1 in the low one
//                                             (an odd n pads the last low nibble with 0)
//   absmax_codes [blocks]              uint8  blocks = ceil(n / 64); block b's absmax c1[b]
//                                             as an index into dynamic_map() of
//                                             (c1[b] - offset) / c2[b / 256]
//   absmax_scale [ceil(blocks / 256)]  float  c2: max |c1 - offset| over 256 blocks
//   offset                             float  the mean of all c1 (centres them, so the
//                                             signed 8-bit map is used on both sides)
// That is 0.5 + 1/64 + 4/(64 * 256) bytes per element: 4.127 bits.
//
// Quantizing one level (NF4 over 64 elements, then 8 bits over 256 absmax values) is the
// same rule with a different code book and block: c = max |v| over the block,
// y = v * (1 / max(c, 1e-38)) in float, clamped to [-1, 1], and the code is the nearest
// level, a tie going to the lower one (the midpoints of adjacent levels computed in
// float, as bitsandbytes' reference path). Dequantizing: c1' = map[absmax_code] * c2 +
// offset, then x' = kNf4[code] * c1' (float, each operation rounded once: no FMA).
#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace zt::kernels::nf4 {

inline constexpr int64_t kBlock = 64;       // elements per NF4 absmax
inline constexpr int64_t kStatBlock = 256;  // absmax values per 8-bit scale

// The 16 NF4 levels: quantiles of N(0, 1) normalised to [-1, 1], with an exact 0 (the
// QLoRA paper, appendix E).
inline constexpr std::array<float, 16> kNf4 = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
    -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
    0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
    0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f};

// The signed dynamic 8-bit map (Dettmers 2016, "8-Bit Approximations for Parallelism in
// Deep Learning"; bitsandbytes' default 8-bit code), sorted: for e = 0..6, the 2^e
// midpoints of 0.1..1 cut into 2^e equal steps, times 10^(e-6), with both signs; plus 0
// and 1. Each level is computed in double and rounded once to float (bitsandbytes
// evaluates the same formula in float32: 72 of its 256 levels differ from these by one
// ulp; the format stays the same, a reader uses its own map).
const std::array<float, 256>& dynamic_map();

struct Quantized {
  int64_t n = 0;                    // elements
  std::vector<uint8_t> codes;       // [ceil(n / 2)]
  std::vector<uint8_t> absmax_codes;  // [ceil(n / 64)]
  std::vector<float> absmax_scale;  // [ceil(ceil(n / 64) / 256)]
  float offset = 0.0f;
};

inline constexpr int64_t blocks_of(int64_t n, int64_t block) { return (n + block - 1) / block; }

// Bytes a quantized tensor of n elements takes (codes, absmax codes, scales, offset).
inline constexpr int64_t quantized_bytes(int64_t n) {
  const int64_t blocks = blocks_of(n, kBlock);
  return (n + 1) / 2 + blocks + 4 * blocks_of(blocks, kStatBlock) + 4;
}

// The first level of the nested quantization alone: codes [ceil(n / 2)] and the float
// absmax of each 64-element block, absmax [ceil(n / 64)].
void quantize_nf4(std::span<const float> x, std::span<uint8_t> codes, std::span<float> absmax);

// Blockwise 8-bit quantization of v [m] over dynamic_map(): codes [m], absmax
// [ceil(m / block)].
void quantize_dynamic(std::span<const float> v, int64_t block, std::span<uint8_t> codes,
                      std::span<float> absmax);

// Both levels. x must be finite (a non-finite element is an error naming its index).
Quantized quantize(std::span<const float> x);

// The absmax values c1' [ceil(n / 64)] the stored statistics decode to.
std::vector<float> decode_absmax(const Quantized& q);

// out [q.n] = the dequantized tensor.
void dequantize(const Quantized& q, std::span<float> out);

}  // namespace zt::kernels::nf4
