// libFuzzer target: the SentencePiece tokenizer.model loader (libsentencepiece through
// zt::data::tokenizer_from_sentencepiece) on arbitrary bytes, then an encode and decode of
// a fixed text with Unicode, digits, emoji and an invalid byte. Anything rejected must be
// a zt::Error; ids of an accepted model must be < vocab_size.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "zt/core/error.hpp"
#include "zt/data/text_tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view proto(reinterpret_cast<const char*>(data), size);
  try {
    const auto t = zt::data::tokenizer_from_sentencepiece(proto, "", "fuzz.model");
    const std::vector<uint32_t> ids = t->encode("Hello w\xc3\xb6rld 123\r\n\xf0\x9f\x98\x80 \xff end");
    for (const uint32_t id : ids)
      if (id >= t->info().vocab_size) std::abort();
    (void)t->decode(ids);
  } catch (const zt::Error&) {
    // rejected with a message: fine
  }
  return 0;
}
