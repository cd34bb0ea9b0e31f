#pragma once
// gpt-oss's MXFP4 expert weights (the published checkpoints: `*_blocks` U8 [E, R, G, 16],
// two 4-bit codes per byte, low nibble first, and `*_scales` U8 [E, R, G], one exponent
// per 32 codes), dequantized at import exactly as transformers 5.24's
// convert_moe_packed_tensors: code c -> FP4_VALUES[c] (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their
// negatives) times 2^(scale - 127), rows [E, R, 32 G] then transposed to [E, 32 G, R]: the
// tensor transformers holds (gate_up_proj [E, C, 2I], down_proj [E, I, C]). Every value is
// exact in fp32 and bf16 (two significant bits); 6 x 2^128 is inf, as in transformers.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace zt::ckpt {

// The dequantized tensor [E, 32 G, R] from blocks [E, R, G, 16] and scales [E, R, G].
std::vector<float> mxfp4_dequantize(std::span<const uint8_t> blocks,
                                    std::span<const uint8_t> scales, int64_t E, int64_t R,
                                    int64_t G);

// Throws zt::InputError (naming `file`, the tensors and config.json) unless blocks and
// scales fit a tensor of shape `shape` [E, K, R] (transformers' layout): blocks
// [E, R, K / 32, 16], scales [E, R, K / 32], both U8.
void check_mxfp4_shapes(const std::string& name, const std::vector<int64_t>& shape,
                        const std::vector<int64_t>& blocks, const std::vector<int64_t>& scales,
                        const std::string& file, const std::string& config);

}  // namespace zt::ckpt
