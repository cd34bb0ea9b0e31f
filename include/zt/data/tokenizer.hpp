#pragma once
// The built-in byte-level tokenizer of the embedded default: token id = byte value.
// Vocabulary 256, name "bytes". Lossless for any input (UTF-8 text becomes its bytes).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zt::data {

struct ByteTokenizer {
  static constexpr uint32_t kVocabSize = 256;
  static constexpr std::string_view kName = "bytes";

  static std::vector<uint32_t> encode(std::string_view text);
  // Ids must be < 256 (throws zt::InputError naming the first bad id otherwise).
  static std::string decode(std::span<const uint32_t> ids);
  static std::string decode(std::span<const int32_t> ids);
  // Decoded bytes made safe for a terminal: printable ASCII, newlines and tabs as they
  // are, every other byte as \xNN (a byte-level model can emit any byte).
  static std::string printable(std::string_view text);
};

}  // namespace zt::data
