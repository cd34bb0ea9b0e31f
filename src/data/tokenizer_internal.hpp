#pragma once
// Private to the text tokenizers (text_tokenizer.cpp, tokenizer_json*.cpp,
// tokenizer_sentencepiece.cpp): UTF-8 helpers and the BOS/EOS resolution they share.
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zt/data/text_tokenizer.hpp"

namespace zt::data {

// Bytes of the UTF-8 sequence a lead byte starts (1 for a byte that starts none).
inline size_t utf8_length(unsigned char lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return lead < 0xF8 ? 4 : 1;
}

// The code point of one well-formed UTF-8 sequence.
inline uint32_t code_point(std::string_view c) {
  const auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(c[i])); };
  switch (c.size()) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3: return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default: return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

// The UTF-8 encoding of a code point below 0x110000.
inline std::string utf8_of(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// Sets info.bos/eos/prefix/suffix from tokenizer_config.json (`config`, may be empty) over
// the defaults: `prefix`/`suffix` (a post-processor's template; BOS = the template's first
// id, EOS its last) or, with default_add_bos, BOS added. `id_of` looks a token up.
void resolve_specials(TokenizerInfo& info, std::vector<uint32_t> prefix, std::vector<uint32_t> suffix,
                      std::string_view config, const std::string& where,
                      const std::function<std::optional<uint32_t>(const std::string&)>& id_of,
                      bool default_add_bos, std::optional<uint32_t> bos = std::nullopt,
                      std::optional<uint32_t> eos = std::nullopt);

}  // namespace zt::data
