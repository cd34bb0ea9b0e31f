// libFuzzer target: the Hugging Face shard index parser (zt::ckpt::parse_hf_index,
// model.safetensors.index.json) on arbitrary bytes. Anything it rejects must be a
// zt::InputError; every shard name it accepts must stay inside the model folder: not
// empty, no "/" or "\\", not "." or "..", no NUL (so "../../x" never reaches open()).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "zt/ckpt/hf_convert.hpp"
#include "zt/core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const zt::ckpt::HfIndex index = zt::ckpt::parse_hf_index(text, "fuzz.index.json");
    for (const auto& [tensor, shard] : index.weight_map) {
      if (shard.empty() || shard == "." || shard == "..") std::abort();
      if (shard.find_first_of(std::string("/\\\0", 3)) != std::string::npos) std::abort();
    }
  } catch (const zt::InputError&) {
  }
  return 0;
}
