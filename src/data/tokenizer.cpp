// The byte-level tokenizer: id = byte value.
#include "zt/data/tokenizer.hpp"

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::data {

std::vector<uint32_t> ByteTokenizer::encode(std::string_view text) {
  std::vector<uint32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

namespace {
template <class Id>
std::string decode_ids(std::span<const Id> ids) {
  std::string out(ids.size(), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t id = static_cast<int64_t>(ids[i]);
    if (id < 0 || id >= static_cast<int64_t>(ByteTokenizer::kVocabSize))
      throw InputError(strf("token id %lld at position %zu is not a byte (vocab 256)",
                            static_cast<long long>(id), i),
                       "the byte tokenizer decodes ids 0..255 only; was the model trained "
                       "on a byte-level dataset?");
    out[i] = static_cast<char>(static_cast<unsigned char>(id));
  }
  return out;
}
}  // namespace

std::string ByteTokenizer::decode(std::span<const uint32_t> ids) { return decode_ids(ids); }
std::string ByteTokenizer::decode(std::span<const int32_t> ids) { return decode_ids(ids); }

std::string ByteTokenizer::printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const unsigned char c : text) {
    if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f)) {
      out += static_cast<char>(c);
    } else {
      out += strf("\\x%02x", c);
    }
  }
  return out;
}

}  // namespace zt::data
