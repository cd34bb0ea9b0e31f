// libFuzzer target: the safetensors header parser (zt::ckpt::parse_safetensors_header),
// the entry point of `zt convert hf-to-h5` for every shard, on arbitrary bytes taken as
// a whole file. Anything it rejects must be a zt::InputError; what it accepts must be
// consistent: the tensors, sorted by offset, tile the data buffer exactly and each one's
// byte count is its element count times its element size.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "zt/ckpt/safetensors.hpp"
#include "zt/core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const zt::ckpt::StHeader h = zt::ckpt::parse_safetensors_header(bytes, size, "fuzz.safetensors");
    if (h.data_start != 8 + h.header_len || h.data_start + h.data_size != size) std::abort();
    uint64_t at = 0;
    for (const zt::ckpt::StTensor& t : h.tensors) {
      if (t.begin != at || t.end < t.begin) std::abort();
      const uint64_t elems = static_cast<uint64_t>(t.numel());
      if (t.nbytes() != elems * zt::ckpt::st_dtype_size(t.dtype)) std::abort();
      if (h.find(t.name) != &t) std::abort();
      at = t.end;
    }
    if (at != h.data_size) std::abort();
  } catch (const zt::InputError&) {
  }
  return 0;
}
