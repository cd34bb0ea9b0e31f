// MXFP4 dequantization (see mxfp4.hpp).
#include "mxfp4.hpp"

#include <cmath>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::ckpt {

namespace {

constexpr float kFp4[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                            -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

std::vector<float> mxfp4_dequantize(std::span<const uint8_t> blocks,
                                    std::span<const uint8_t> scales, int64_t E, int64_t R,
                                    int64_t G) {
  const int64_t K = 32 * G;
  std::vector<float> out(static_cast<size_t>(E * K * R));
  for (int64_t e = 0; e < E; ++e)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t g = 0; g < G; ++g) {
        const int64_t row = (e * R + r) * G + g;
        const int exp = static_cast<int>(scales[static_cast<size_t>(row)]) - 127;
        for (int64_t b = 0; b < 16; ++b) {
          const uint8_t byte = blocks[static_cast<size_t>(row * 16 + b)];
          const int64_t k = g * 32 + 2 * b;  // the low nibble, then the high one
          out[static_cast<size_t>((e * K + k) * R + r)] = std::ldexp(kFp4[byte & 0x0F], exp);
          out[static_cast<size_t>((e * K + k + 1) * R + r)] = std::ldexp(kFp4[byte >> 4], exp);
        }
      }
  return out;
}

void check_mxfp4_shapes(const std::string& name, const std::vector<int64_t>& shape,
                        const std::vector<int64_t>& blocks, const std::vector<int64_t>& scales,
                        const std::string& file, const std::string& config) {
  const bool fits = shape.size() == 3 && shape[1] % 32 == 0;
  const std::vector<int64_t> want_b = fits ? std::vector<int64_t>{shape[0], shape[2], shape[1] / 32, 16}
                                           : std::vector<int64_t>{};
  const std::vector<int64_t> want_s = fits ? std::vector<int64_t>{shape[0], shape[2], shape[1] / 32}
                                           : std::vector<int64_t>{};
  if (fits && blocks == want_b && scales == want_s) return;
  throw InputError(strf("MXFP4 tensors '%s_blocks' %s and '%s_scales' %s in '%s' do not make "
                        "the %s tensor '%s' that '%s' implies (blocks %s and scales %s)",
                        name.c_str(), shape_text(blocks).c_str(), name.c_str(),
                        shape_text(scales).c_str(), file.c_str(), shape_text(shape).c_str(),
                        name.c_str(), config.c_str(), shape_text(want_b).c_str(),
                        shape_text(want_s).c_str()),
                   "the scales must hold one exponent per 32 codes of the blocks; do config and "
                   "weights come from the same model?");
}

}  // namespace zt::ckpt
