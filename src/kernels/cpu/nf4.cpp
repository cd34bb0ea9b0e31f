// NF4 + double quantization (the format and the rounding rules are in nf4.hpp).
// Built with -ffp-contract=off (src/kernels/CMakeLists.txt): dequantizing is
// map * c2 + offset in two rounded operations, never one FMA, as bitsandbytes computes it.
#include "zt/kernels/nf4.hpp"

#include <algorithm>
#include <cmath>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::kernels::nf4 {
namespace {

// The midpoints of adjacent levels, in float: a value above mids[i] is nearer level i + 1.
template <size_t N>
std::array<float, N - 1> midpoints(const std::array<float, N>& levels) {
  std::array<float, N - 1> mids{};
  for (size_t i = 0; i + 1 < N; ++i) mids[i] = (levels[i] + levels[i + 1]) / 2.0f;
  return mids;
}

// The index of the level nearest y (y in [-1, 1]); a tie goes to the lower level.
template <size_t M>
uint8_t nearest(const std::array<float, M>& mids, float y) {
  // The first midpoint >= y: every midpoint before it is < y.
  return static_cast<uint8_t>(std::lower_bound(mids.begin(), mids.end(), y) - mids.begin());
}

// One level of quantization: v [m] in blocks of `block` -> codes [m], absmax [blocks].
template <size_t N, class Store>
void quantize_blocks(std::span<const float> v, int64_t block, const std::array<float, N>& levels,
                     std::span<float> absmax, Store store) {
  const auto mids = midpoints(levels);
  const int64_t m = static_cast<int64_t>(v.size());
  const int64_t blocks = blocks_of(m, block);
  ZT_CHECK(static_cast<int64_t>(absmax.size()) == blocks,
           strf("absmax holds %zu values, %lld blocks of %lld", absmax.size(),
                static_cast<long long>(blocks), static_cast<long long>(block)),
           "size it with blocks_of(n, block)");
#pragma omp parallel for schedule(static) if (m >= (int64_t{1} << 16))
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * block, end = std::min(m, begin + block);
    float c = 0.0f;
    for (int64_t i = begin; i < end; ++i) c = std::max(c, std::fabs(v[i]));
    absmax[b] = c;
    const float inv = 1.0f / std::max(c, 1e-38f);
    for (int64_t i = begin; i < end; ++i)
      store(i, nearest(mids, std::clamp(v[i] * inv, -1.0f, 1.0f)));
  }
}

void require_finite(std::span<const float> x) {
  for (size_t i = 0; i < x.size(); ++i)
    if (!std::isfinite(x[i]))
      throw InputError(strf("NF4 quantization: element %zu of %zu is %g", i, x.size(),
                            static_cast<double>(x[i])),
                       "the weights hold a non-finite value; quantize a finite model "
                       "(check the file it came from)");
}

}  // namespace

const std::array<float, 256>& dynamic_map() {
  static const std::array<float, 256> map = [] {
    std::array<float, 256> levels{};
    size_t k = 0;
    for (int e = 0; e <= 6; ++e) {
      const int steps = 1 << e;
      const double scale = std::pow(10.0, e - 6);
      for (int j = 0; j < steps; ++j) {
        const double mid = 0.1 + 0.9 * (2.0 * j + 1.0) / (2.0 * steps);
        const float level = static_cast<float>(scale * mid);
        levels[k++] = level;
        levels[k++] = -level;
      }
    }
    levels[k++] = 0.0f;
    levels[k++] = 1.0f;
    std::sort(levels.begin(), levels.end());
    return levels;
  }();
  return map;
}

void quantize_nf4(std::span<const float> x, std::span<uint8_t> codes, std::span<float> absmax) {
  const int64_t n = static_cast<int64_t>(x.size());
  ZT_CHECK(static_cast<int64_t>(codes.size()) == (n + 1) / 2,
           strf("codes hold %zu bytes for %lld elements", codes.size(), static_cast<long long>(n)),
           "two 4-bit codes per byte: size it (n + 1) / 2");
  if (n % 2) codes.back() = 0;  // the pad nibble
  // Blocks are 64 elements, so a byte never straddles two threads' blocks.
  quantize_blocks(x, kBlock, kNf4, absmax, [&](int64_t i, uint8_t q) {
    uint8_t& byte = codes[static_cast<size_t>(i / 2)];
    byte = i % 2 ? static_cast<uint8_t>((byte & 0xF0) | q) : static_cast<uint8_t>(q << 4);
  });
}

void quantize_dynamic(std::span<const float> v, int64_t block, std::span<uint8_t> codes,
                      std::span<float> absmax) {
  ZT_CHECK(codes.size() == v.size(), strf("%zu codes for %zu values", codes.size(), v.size()),
           "one 8-bit code per value");
  quantize_blocks(v, block, dynamic_map(), absmax,
                  [&](int64_t i, uint8_t q) { codes[static_cast<size_t>(i)] = q; });
}

Quantized quantize(std::span<const float> x) {
  require_finite(x);
  Quantized q;
  q.n = static_cast<int64_t>(x.size());
  const int64_t blocks = blocks_of(q.n, kBlock);
  q.codes.resize(static_cast<size_t>((q.n + 1) / 2));
  std::vector<float> absmax(static_cast<size_t>(blocks));  // c1 [blocks]
  quantize_nf4(x, q.codes, absmax);

  // Double quantization: centre the absmax values on their mean, then 8 bits each.
  double sum = 0;
  for (float c : absmax) sum += c;
  q.offset = blocks > 0 ? static_cast<float>(sum / static_cast<double>(blocks)) : 0.0f;
  std::vector<float> centred(absmax.size());  // c1 - offset [blocks]
  for (size_t b = 0; b < absmax.size(); ++b) centred[b] = absmax[b] - q.offset;
  q.absmax_codes.resize(absmax.size());
  q.absmax_scale.resize(static_cast<size_t>(blocks_of(blocks, kStatBlock)));
  quantize_dynamic(centred, kStatBlock, q.absmax_codes, q.absmax_scale);
  return q;
}

std::vector<float> decode_absmax(const Quantized& q) {
  const int64_t blocks = blocks_of(q.n, kBlock);
  ZT_CHECK(static_cast<int64_t>(q.absmax_codes.size()) == blocks &&
               static_cast<int64_t>(q.absmax_scale.size()) == blocks_of(blocks, kStatBlock),
           strf("%zu absmax codes and %zu scales for %lld elements", q.absmax_codes.size(),
                q.absmax_scale.size(), static_cast<long long>(q.n)),
           "the quantized tensor is inconsistent (truncated or of another shape)");
  const auto& map = dynamic_map();
  std::vector<float> absmax(static_cast<size_t>(blocks));  // c1' [blocks]
  for (int64_t b = 0; b < blocks; ++b) {
    const float scaled = map[q.absmax_codes[b]] * q.absmax_scale[b / kStatBlock];
    absmax[b] = scaled + q.offset;
  }
  return absmax;
}

void dequantize(const Quantized& q, std::span<float> out) {
  ZT_CHECK(static_cast<int64_t>(out.size()) == q.n &&
               static_cast<int64_t>(q.codes.size()) == (q.n + 1) / 2,
           strf("out holds %zu values, the tensor %lld (%zu code bytes)", out.size(),
                static_cast<long long>(q.n), q.codes.size()),
           "size out to the quantized tensor's element count");
  const std::vector<float> absmax = decode_absmax(q);
  const int64_t blocks = static_cast<int64_t>(absmax.size());
#pragma omp parallel for schedule(static) if (q.n >= (int64_t{1} << 16))
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kBlock, end = std::min(q.n, begin + kBlock);
    for (int64_t i = begin; i < end; ++i) {
      const uint8_t byte = q.codes[static_cast<size_t>(i / 2)];
      out[static_cast<size_t>(i)] = kNf4[i % 2 ? byte & 0x0F : byte >> 4] * absmax[b];
    }
  }
}

}  // namespace zt::kernels::nf4
