// libFuzzer target: the tokenizer.json loader and encoder (zt::data::tokenizer_from_json)
// on arbitrary bytes. The input is TOKENIZER_JSON \0 TOKENIZER_CONFIG \0 TEXT (missing
// parts are empty). Anything the loader rejects must be a zt::Error (InputError for a bad
// file); a tokenizer it accepts must encode any TEXT to ids < vocab_size (or fail with a
// zt::Error, e.g. PCRE2's match limit) and decode those ids.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "zt/core/error.hpp"
#include "zt/data/text_tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::string_view parts[3];
  for (int i = 0; i < 3; ++i) {
    const size_t cut = i < 2 ? in.find('\0') : std::string_view::npos;
    parts[i] = in.substr(0, cut);
    in = cut == std::string_view::npos ? std::string_view() : in.substr(cut + 1);
  }
  try {
    const auto t = zt::data::tokenizer_from_json(parts[0], parts[1], "fuzz.json");
    const zt::data::TokenizerInfo& info = t->info();
    for (const uint32_t id : info.prefix)
      if (id >= info.vocab_size) std::abort();
    const std::vector<uint32_t> ids = t->encode(parts[2]);
    for (const uint32_t id : ids)
      if (id >= info.vocab_size) std::abort();
    (void)t->decode(ids);
  } catch (const zt::Error&) {
    // rejected with a message: fine
  }
  return 0;
}
