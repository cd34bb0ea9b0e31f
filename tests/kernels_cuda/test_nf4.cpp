// NF4 dequantization on the GPU against the CPU's (zt/kernels/nf4.hpp), bit for bit:
// fp32 values equal, bf16 values the CPU's rounded to nearest-even; aligned chunks (the
// 128-bit path), a partial last chunk, an odd length, a misaligned output.
#include <cstring>

#include "cuda_test_util.hpp"
#include "zt/kernels/cuda/nf4.hpp"
#include "zt/kernels/nf4.hpp"

namespace zt::kernels::cuda::testing {
namespace {

class Nf4Gpu : public GpuTest {};

template <class T>
void check_dequantize(const std::vector<float>& x, size_t out_offset) {
  const auto q = nf4::quantize(x);
  std::vector<float> ref(x.size());
  nf4::dequantize(q, ref);
  DeviceBuffer<uint8_t> codes(q.codes.size()), acodes(q.absmax_codes.size());
  DeviceBuffer<float> scale(q.absmax_scale.size());
  codes.upload(q.codes);
  acodes.upload(q.absmax_codes);
  scale.upload(q.absmax_scale);
  auto out = poisoned<T>(x.size() + out_offset);
  const Nf4View view{codes.data(), acodes.data(), scale.data(), q.offset, q.n};
  dequantize_nf4<T>(view, out.data() + out_offset, nullptr);
  ZT_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<T> got = out.to_host();
  size_t diff = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t want = 0, have = 0;
    if constexpr (std::is_same_v<T, float>) {
      std::memcpy(&want, &ref[i], 4);
      std::memcpy(&have, &got[out_offset + i], 4);
    } else {
      want = zt::bf16(ref[i]).bits;
      std::memcpy(&have, &got[out_offset + i], 2);
    }
    diff += want != have;
  }
  std::printf("nf4 dequantize %s n %zu offset %zu: %zu of %zu values differ\n", type_name<T>(),
              x.size(), out_offset, diff, x.size());
  EXPECT_EQ(diff, 0u);
}

TEST_F(Nf4Gpu, DequantizeMatchesCpuBitForBit) {
  for (size_t n : {size_t{64} * 256 * 3, size_t{64} * 70 + 37, size_t{5}, size_t{1000001}}) {
    Vec xd = randn(n, 0.02);
    std::vector<float> x(xd.begin(), xd.end());
    for (size_t i = 0; i < 64 && i < n; ++i) x[i] = 0.0f;  // an all-zero block
    for (size_t offset : {size_t{0}, size_t{1}}) {
      check_dequantize<float>(x, offset);
      check_dequantize<bf16_t>(x, offset);
    }
  }
}

}  // namespace
}  // namespace zt::kernels::cuda::testing
