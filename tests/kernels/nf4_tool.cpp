// nf4_tool IN.f32 OUT: quantizes the raw float32 tensor IN with zt's NF4 + double
// quantization and writes, for nf4_peer_test.py, raw little-endian files OUT.<part>:
//   codes (uint8), absmax_codes (uint8), absmax_scale (f32), offset (f32),
//   absmax (f32: the first level's absmax, before double quantization),
//   dequant (f32), map (f32 [256]: the dynamic 8-bit map).
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "zt/kernels/nf4.hpp"

namespace nf4 = zt::kernels::nf4;

template <class T>
static void put(const std::string& path, const T* data, size_t n) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n * sizeof(T)));
  if (!out) throw std::runtime_error("cannot write " + path);
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: nf4_tool IN.f32 OUT_PREFIX\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> x(bytes.size() / sizeof(float));
  std::copy(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(x.size() * sizeof(float)),
            reinterpret_cast<char*>(x.data()));
  const std::string out = argv[2];
  const auto q = nf4::quantize(x);
  std::vector<float> absmax(static_cast<size_t>(nf4::blocks_of(q.n, nf4::kBlock)));
  std::vector<uint8_t> codes(q.codes.size());
  nf4::quantize_nf4(x, codes, absmax);
  std::vector<float> y(x.size());
  nf4::dequantize(q, y);
  put(out + ".codes", q.codes.data(), q.codes.size());
  put(out + ".absmax_codes", q.absmax_codes.data(), q.absmax_codes.size());
  put(out + ".absmax_scale", q.absmax_scale.data(), q.absmax_scale.size());
  put(out + ".offset", &q.offset, 1);
  put(out + ".absmax", absmax.data(), absmax.size());
  put(out + ".dequant", y.data(), y.size());
  put(out + ".map", nf4::dynamic_map().data(), nf4::dynamic_map().size());
  return 0;
}
