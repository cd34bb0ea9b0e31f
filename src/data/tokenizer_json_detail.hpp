#pragma once
// Private to tokenizer_json.cpp (the BPE model, added tokens, post-processor) and
// tokenizer_json_stages.cpp (the normalizers, pre-tokenizers and decoders around it): the
// tokenizer.json field readers, the PCRE2 regex, and the stages' parsed forms.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "zt/core/error.hpp"
#include "zt/core/json.hpp"

namespace zt::data::tokjson {

using json = nlohmann::json;

inline constexpr const char* kHint =
    "give the tokenizer.json of a Hugging Face model (BPE); docs/finetune.md lists what zt "
    "reads";

[[noreturn]] inline void unsupported(const std::string& where, const std::string& what) {
  throw InputError("tokenizer '" + where + "': " + what + " is not supported by zt", kHint);
}

[[noreturn]] inline void bad(const std::string& where, const std::string& field, const std::string& what) {
  throw InputError("tokenizer '" + where + "': " + field + " " + what, kHint);
}

inline const json& member(const json& obj, const char* key, const std::string& where,
                          const std::string& path) {
  if (!obj.is_object()) bad(where, path, "is " + describe_json(obj) + ", not an object");
  const auto it = obj.find(key);
  if (it == obj.end()) bad(where, path + "." + key, "is missing");
  return *it;
}

inline std::string string_of(const json& v, const std::string& where, const std::string& path) {
  if (!v.is_string()) bad(where, path, "is " + describe_json(v) + ", not a string");
  return v.get<std::string>();
}

inline bool bool_or(const json& obj, const char* key, bool fallback, const std::string& where,
                    const std::string& path) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_boolean())
    bad(where, path + "." + key, "is " + describe_json(*it) + ", not true or false");
  return it->get<bool>();
}

// Calls parse(part, its path) for each element of the array obj[key] (a "Sequence").
template <class F>
void each_part(const json& obj, const char* key, const std::string& where, const std::string& path,
               F&& parse) {
  const json& list = member(obj, key, where, path);
  const std::string lpath = path + "." + key;
  if (!list.is_array()) bad(where, lpath, "is " + describe_json(list) + ", not an array");
  for (size_t i = 0; i < list.size(); ++i) parse(list[i], lpath + "[" + std::to_string(i) + "]");
}

inline uint32_t id_of(const json& v, const std::string& where, const std::string& path) {
  if (!v.is_number_unsigned() || v.get<uint64_t>() >= (uint64_t{1} << 31))
    bad(where, path, "is " + describe_json(v) + ", not a token id (an integer in [0, 2^31))");
  return static_cast<uint32_t>(v.get<uint64_t>());
}

// ---- PCRE2 ---------------------------------------------------------------------------

// Escapes `literal` so PCRE2 matches it as is (ASCII punctuation gets a backslash; other
// bytes stand for themselves).
std::string regex_escape(std::string_view literal);

class Regex {
 public:
  // `where`: the tokenizer file, `path`: the field the pattern came from (both for errors).
  Regex(const std::string& pattern, const std::string& where, const std::string& path);
  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // The matches [begin, end) of `s`, left to right, as Oniguruma's find_iter gives them to
  // tokenizers' split: empty matches included, except one right where the previous match
  // ended (so `x*` on "ab" is (0,0) (1,1) (2,2)). The input is valid UTF-8.
  std::vector<std::pair<size_t, size_t>> matches(std::string_view s) const;
  // The leftmost match of `s` at or after byte `at`; {npos, npos} when there is none.
  std::pair<size_t, size_t> find(std::string_view s, size_t at) const;

 private:
  using MatchData = std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)>;
  MatchData match_data() const;
  std::pair<size_t, size_t> find(std::string_view s, size_t at, pcre2_match_data* md) const;
  static std::string message(int code);
  pcre2_code* code_ = nullptr;
  std::string pattern_, where_, path_;
};

// ---- the stages (tokenizer_json_stages.cpp) --------------------------------------------

struct Piece {
  std::string text;
  bool at_start = false;  // begins at offset 0 of the input (Metaspace prepend_scheme "first")
};

enum class Behavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext };

void replace_all(std::string& s, std::string_view from, std::string_view to);

// The code points of a UTF-8 string (valid UTF-8: decoder tokens come from the vocabulary).
std::vector<std::string_view> chars_of(std::string_view s);

struct Normalizer {
  enum Kind { kPrepend, kReplace, kNfc, kNfd, kNfkc, kNfkd } kind;
  std::string a, b;  // prepend: a; replace: a -> b
};

// s (valid UTF-8) in Unicode normal form NFC, NFD, NFKC or NFKD (utf8proc, as tokenizers'
// normalizers of those names: Rust's unicode-normalization; Debian's utf8proc 2.6 has
// Unicode 13's tables, the crate a newer Unicode: text in scripts added since may differ).
void unicode_normalize(std::string& s, Normalizer::Kind form);

void parse_normalizer(const json& n, const std::string& where, const std::string& path,
                      std::vector<Normalizer>& out);

struct PreTokenizer {
  enum Kind { kByteLevel, kSplit, kMetaspace } kind;
  bool add_prefix_space = false, use_regex = true;  // ByteLevel
  std::shared_ptr<Regex> regex;                     // ByteLevel (use_regex), Split, Metaspace (split)
  Behavior behavior = Behavior::kIsolated;          // Split
  bool invert = false;                              // Split
  std::string replacement;                          // Metaspace
  std::string prepend_scheme = "always";            // Metaspace
  bool split = false;                               // Metaspace
};

void parse_pre_tokenizer(const json& p, const std::string& where, const std::string& path,
                         std::vector<PreTokenizer>& out);
std::vector<Piece> pre_tokenize(const PreTokenizer& t, Piece p);

struct Decoder {
  enum Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace } kind;
  std::string a, b;       // Replace: a -> b; Strip: a = content; Metaspace: a = replacement
  size_t start = 0, stop = 0;  // Strip
  bool prepend = true;         // Metaspace: prepend_scheme != never
};

void parse_decoder(const json& d, const std::string& where, const std::string& path,
                   std::vector<Decoder>& out);
std::vector<std::string> decode_chain(const Decoder& d, std::vector<std::string> tokens);

}  // namespace zt::data::tokjson
