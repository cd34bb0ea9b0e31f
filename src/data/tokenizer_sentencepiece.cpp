// SentencePiece tokenizer.model through libsentencepiece (Llama 2, TinyLlama, Mistral).
#include <sentencepiece_processor.h>

#include "tokenizer_internal.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::data {
namespace {

class SentencePieceTokenizer final : public TextTokenizer {
 public:
  SentencePieceTokenizer(std::string_view proto, std::string_view config, const std::string& where) {
    const auto status = sp_.LoadFromSerializedProto(proto);
    if (!status.ok())
      throw InputError("tokenizer '" + where + "': SentencePiece cannot load it: " + status.ToString(),
                       "give the tokenizer.model of a SentencePiece model (Llama 2, TinyLlama, "
                       "Mistral), or a folder holding tokenizer.json");
    info_.kind = "sentencepiece";
    info_.vocab_size = static_cast<uint32_t>(sp_.GetPieceSize());
    auto id = [&](int v) -> std::optional<uint32_t> {
      if (v < 0 || v >= sp_.GetPieceSize()) return std::nullopt;
      return static_cast<uint32_t>(v);
    };
    resolve_specials(
        info_, {}, {}, config, where,
        [this](const std::string& token) -> std::optional<uint32_t> {
          const int v = sp_.PieceToId(token);
          if (v == sp_.unk_id() && token != sp_.IdToPiece(v)) return std::nullopt;
          return static_cast<uint32_t>(v);
        },
        /*default_add_bos=*/true, id(sp_.bos_id()), id(sp_.eos_id()));
  }

  std::vector<uint32_t> encode(std::string_view text) const override {
    std::vector<int> ids;
    const auto status = sp_.Encode(text, &ids);
    if (!status.ok())
      throw Error("SentencePiece Encode failed: " + status.ToString(), "report the input that fails");
    return {ids.begin(), ids.end()};
  }

  std::string decode(std::span<const uint32_t> ids) const override {
    std::vector<int> v;
    v.reserve(ids.size());
    for (const uint32_t id : ids) {
      if (id >= info_.vocab_size)
        throw InputError(strf("token id %u is not in the tokenizer's vocabulary (%u ids)", id, info_.vocab_size),
                         "decode ids made by this tokenizer");
      v.push_back(static_cast<int>(id));
    }
    std::string text;
    const auto status = sp_.Decode(v, &text);
    if (!status.ok())
      throw Error("SentencePiece Decode failed: " + status.ToString(), "report the ids that fail");
    return text;
  }

 private:
  sentencepiece::SentencePieceProcessor sp_;
};

}  // namespace

std::unique_ptr<TextTokenizer> tokenizer_from_sentencepiece(std::string_view model_proto,
                                                            std::string_view tokenizer_config,
                                                            const std::string& where) {
  return std::make_unique<SentencePieceTokenizer>(model_proto, tokenizer_config, where);
}

}  // namespace zt::data
