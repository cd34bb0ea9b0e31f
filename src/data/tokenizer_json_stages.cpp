// tokenizer.json's stages around the BPE model, as the Rust `tokenizers` crate runs them
// (tokenizers/src/normalizers, pre_tokenizers, decoders): the PCRE2 regex they split with
// (UTF + UCP, JIT when available), GPT-2's byte-level alphabet, the normalizers
// (Sequence, Prepend, Replace; NFC, NFD, NFKC, NFKD by utf8proc), the pre-tokenizers (ByteLevel, Split, Metaspace) and the
// decoders. The BPE model, added tokens and post-processor are in tokenizer_json.cpp.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <unordered_map>

#include <utf8proc.h>

#include "tokenizer_internal.hpp"
#include "tokenizer_json_detail.hpp"
#include "zt/core/log.hpp"

namespace zt::data::tokjson {
namespace {

// GPT-2's pre-tokenizer regex (tokenizers' ByteLevel with use_regex).
constexpr const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// ---- byte-level alphabet (GPT-2's bytes_to_unicode) ----------------------------------

struct ByteAlphabet {
  std::string of_byte[256];                    // UTF-8 of the char standing for each byte
  std::unordered_map<uint32_t, uint8_t> byte_of;  // that char's code point -> the byte
  ByteAlphabet() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool kept = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      const uint32_t cp = kept ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + n++);
      of_byte[b] = utf8_of(cp);
      byte_of[cp] = static_cast<uint8_t>(b);
    }
  }
};

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet a;
  return a;
}

// ---- splitting -------------------------------------------------------------------------

// tokenizers' NormalizedString::split: intervals of matches and gaps, then the behavior.
std::vector<Piece> split_piece(const Piece& p, const Regex& re, Behavior behavior, bool invert) {
  struct Part { size_t b, e; bool match; };
  std::vector<Part> parts;
  size_t prev = 0;
  for (const auto& [b, e] : re.matches(p.text)) {
    if (prev != b) parts.push_back({prev, b, invert});
    parts.push_back({b, e, !invert});
    prev = e;
  }
  if (prev != p.text.size()) parts.push_back({prev, p.text.size(), invert});
  std::vector<Part> merged;
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kIsolated: merged = parts; break;
    case Behavior::kRemoved:
      for (const Part& x : parts) if (!x.match) merged.push_back(x);
      break;
    case Behavior::kMergedWithPrevious:
      for (const Part& x : parts) {
        if (x.match && !previous_match && !merged.empty()) merged.back().e = x.e;
        else merged.push_back(x);
        previous_match = x.match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->match && !previous_match && !merged.empty()) merged.back().b = it->b;
        else merged.push_back(*it);
        previous_match = it->match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
  }
  std::vector<Piece> out;
  for (const Part& x : merged)
    if (x.e > x.b) out.push_back({p.text.substr(x.b, x.e - x.b), p.at_start && x.b == 0});
  return out;
}

}  // namespace

// ---- PCRE2 ---------------------------------------------------------------------------

// Escapes `literal` so PCRE2 matches it as is (ASCII punctuation gets a backslash; other
// bytes stand for themselves).
std::string regex_escape(std::string_view literal) {
  std::string out;
  for (const char c : literal) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u)) out += '\\';
    out += c;
  }
  return out;
}

Regex::Regex(const std::string& pattern, const std::string& where, const std::string& path)
    : pattern_(pattern), where_(where), path_(path) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                        PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C, &err, &offset, nullptr);
  if (code_ == nullptr)
    bad(where, path,
        strf("is a regex PCRE2 cannot compile: %s at offset %zu", message(err).c_str(),
             static_cast<size_t>(offset)));
  // JIT is an optimisation: pcre2_match runs the JIT code where it compiled and the
  // pattern allows it ((*NO_JIT) does not), the interpreter otherwise, with the same matches.
  (void)pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
}

Regex::MatchData Regex::match_data() const {
  MatchData md(pcre2_match_data_create_from_pattern(code_, nullptr), &pcre2_match_data_free);
  if (md == nullptr) throw Error("pcre2_match_data_create_from_pattern failed", "out of memory?");
  return md;
}

std::pair<size_t, size_t> Regex::find(std::string_view s, size_t at) const {
  const MatchData md = match_data();
  return find(s, at, md.get());
}

std::pair<size_t, size_t> Regex::find(std::string_view s, size_t at, pcre2_match_data* md) const {
  constexpr size_t npos = std::string_view::npos;
  const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), at,
                             PCRE2_NO_UTF_CHECK, md, nullptr);
  if (rc == PCRE2_ERROR_NOMATCH) return {npos, npos};
  if (rc < 0) {
    std::string near;  // the text from where the search began, as JSON escapes it
    const json snippet = std::string(s.substr(at, std::min<size_t>(40, s.size() - at)));
    near = snippet.dump(-1, ' ', false, json::error_handler_t::replace);
    const std::string pat = pattern_.size() > 80 ? pattern_.substr(0, 80) + "..." : pattern_;
    throw InputError(
        strf("tokenizer '%s': %s (regex %s) failed on the text at byte %zu of a %zu-byte piece, "
             "which begins there with %s: PCRE2: %s",
             where_.c_str(), path_.c_str(), json(pat).dump(-1, ' ', false, json::error_handler_t::replace).c_str(),
             at, s.size(), near.c_str(), message(rc).c_str()),
        "the pattern backtracks too much on this text: split the input into shorter lines, or "
        "give a tokenizer whose pattern matches it");
  }
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
  return {ov[0], ov[1]};
}

std::vector<std::pair<size_t, size_t>> Regex::matches(std::string_view s) const {
  std::vector<std::pair<size_t, size_t>> out;
  size_t at = 0;
  std::optional<size_t> last_end;  // where the previous match ended
  const MatchData md = match_data();
  while (at <= s.size()) {
    const auto [b, e] = find(s, at, md.get());
    if (b == std::string_view::npos) break;
    if (e == b && last_end == e) {  // an empty match where the last one ended: one char on
      at = b + 1;
      while (at < s.size() && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80) ++at;
      continue;
    }
    out.emplace_back(b, e);
    at = e;
    last_end = e;
  }
  return out;
}

std::string Regex::message(int code) {
  PCRE2_UCHAR buf[256];
  if (pcre2_get_error_message(code, buf, sizeof buf) < 0) return strf("error %d", code);
  return reinterpret_cast<const char*>(buf);
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string out;
  size_t at = 0;
  for (size_t hit; (hit = s.find(from, at)) != std::string::npos; at = hit + from.size())
    out.append(s, at, hit - at).append(to);
  out.append(s, at, std::string::npos);
  s = std::move(out);
}

// The code points of a UTF-8 string (valid UTF-8: decoder tokens come from the vocabulary).
std::vector<std::string_view> chars_of(std::string_view s) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_length(static_cast<unsigned char>(s[i]));
    const size_t len = std::min(n, s.size() - i);
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

// ---- normalizers -----------------------------------------------------------------------

void parse_normalizer(const json& n, const std::string& where, const std::string& path,
                      std::vector<Normalizer>& out) {
  if (n.is_null()) return;
  const std::string type = string_of(member(n, "type", where, path), where, path + ".type");
  if (type == "Sequence") {
    each_part(n, "normalizers", where, path,
              [&](const json& part, const std::string& ppath) { parse_normalizer(part, where, ppath, out); });
  } else if (type == "Prepend") {
    out.push_back({Normalizer::kPrepend, string_of(member(n, "prepend", where, path), where, path + ".prepend"), {}});
  } else if (type == "Replace") {
    const json& pat = member(n, "pattern", where, path);
    if (!pat.is_object() || !pat.contains("String"))
      unsupported(where, path + ".pattern " + describe_json(pat) + " (only {\"String\": ...})");
    out.push_back({Normalizer::kReplace, string_of(pat.at("String"), where, path + ".pattern.String"),
                   string_of(member(n, "content", where, path), where, path + ".content")});
  } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    out.push_back({type == "NFC" ? Normalizer::kNfc : type == "NFD" ? Normalizer::kNfd
                   : type == "NFKC" ? Normalizer::kNfkc : Normalizer::kNfkd, {}, {}});
  } else {
    unsupported(where, path + " type \"" + type +
                           "\" (zt reads Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD)");
  }
}

// The text is valid UTF-8 here (utf8_replace_invalid ran on it), as Rust's str is in
// tokenizers; utf8proc's map is told its length, so a U+0000 inside it is kept.
void unicode_normalize(std::string& s, Normalizer::Kind form) {
  const int options = UTF8PROC_STABLE |
                      (form == Normalizer::kNfc || form == Normalizer::kNfkc ? UTF8PROC_COMPOSE
                                                                             : UTF8PROC_DECOMPOSE) |
                      (form == Normalizer::kNfkc || form == Normalizer::kNfkd ? UTF8PROC_COMPAT : 0);
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                          static_cast<utf8proc_ssize_t>(s.size()), &out,
                                          static_cast<utf8proc_option_t>(options));
  if (n < 0)
    throw Error(strf("utf8proc_map (Unicode normalization of %zu bytes): %s", s.size(),
                     utf8proc_errmsg(n)),
                n == UTF8PROC_ERROR_NOMEM ? "the machine ran out of memory; free some"
                                          : "report this text to zt's developers: it was checked as UTF-8 before");
  s.assign(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
}

// ---- pre-tokenizers --------------------------------------------------------------------

void parse_pre_tokenizer(const json& p, const std::string& where, const std::string& path,
                         std::vector<PreTokenizer>& out) {
  if (p.is_null()) return;
  const std::string type = string_of(member(p, "type", where, path), where, path + ".type");
  if (type == "Sequence") {
    each_part(p, "pretokenizers", where, path,
              [&](const json& part, const std::string& ppath) { parse_pre_tokenizer(part, where, ppath, out); });
  } else if (type == "ByteLevel") {
    PreTokenizer t{PreTokenizer::kByteLevel};
    t.add_prefix_space = bool_or(p, "add_prefix_space", true, where, path);
    t.use_regex = bool_or(p, "use_regex", true, where, path);
    if (t.use_regex) t.regex = std::make_shared<Regex>(kGpt2Regex, where, path);
    out.push_back(std::move(t));
  } else if (type == "Split") {
    PreTokenizer t{PreTokenizer::kSplit};
    const json& pat = member(p, "pattern", where, path);
    if (pat.is_object() && pat.contains("Regex"))
      t.regex = std::make_shared<Regex>(string_of(pat.at("Regex"), where, path + ".pattern.Regex"),
                                        where, path + ".pattern.Regex");
    else if (pat.is_object() && pat.contains("String"))
      t.regex = std::make_shared<Regex>(
          regex_escape(string_of(pat.at("String"), where, path + ".pattern.String")), where,
          path + ".pattern.String");
    else
      bad(where, path + ".pattern", "is " + describe_json(pat) + ", not {\"Regex\"|\"String\": ...}");
    const std::string b = string_of(member(p, "behavior", where, path), where, path + ".behavior");
    if (b == "Isolated") t.behavior = Behavior::kIsolated;
    else if (b == "Removed") t.behavior = Behavior::kRemoved;
    else if (b == "MergedWithPrevious") t.behavior = Behavior::kMergedWithPrevious;
    else if (b == "MergedWithNext") t.behavior = Behavior::kMergedWithNext;
    else unsupported(where, path + ".behavior \"" + b + "\"");
    t.invert = bool_or(p, "invert", false, where, path);
    out.push_back(std::move(t));
  } else if (type == "Metaspace") {
    PreTokenizer t{PreTokenizer::kMetaspace};
    t.replacement = string_of(member(p, "replacement", where, path), where, path + ".replacement");
    if (t.replacement.empty()) bad(where, path + ".replacement", "is empty");
    if (p.contains("prepend_scheme"))
      t.prepend_scheme = string_of(p.at("prepend_scheme"), where, path + ".prepend_scheme");
    else if (!bool_or(p, "add_prefix_space", true, where, path))
      t.prepend_scheme = "never";
    if (t.prepend_scheme != "always" && t.prepend_scheme != "first" && t.prepend_scheme != "never")
      bad(where, path + ".prepend_scheme", "is \"" + t.prepend_scheme + "\", not always, first or never");
    t.split = bool_or(p, "split", true, where, path);
    t.regex = std::make_shared<Regex>(regex_escape(t.replacement), where, path + ".replacement");
    out.push_back(std::move(t));
  } else {
    unsupported(where, path + " type \"" + type + "\" (zt reads Sequence, ByteLevel, Split, Metaspace)");
  }
}

std::vector<Piece> pre_tokenize(const PreTokenizer& t, Piece p) {
  switch (t.kind) {
    case PreTokenizer::kByteLevel: {
      if (t.add_prefix_space && (p.text.empty() || p.text[0] != ' ')) p.text.insert(0, " ");
      std::vector<Piece> parts = t.use_regex ? split_piece(p, *t.regex, Behavior::kIsolated, false)
                                             : std::vector<Piece>{p};
      const ByteAlphabet& a = byte_alphabet();
      for (Piece& q : parts) {
        std::string mapped;
        for (const char c : q.text) mapped += a.of_byte[static_cast<unsigned char>(c)];
        q.text = std::move(mapped);
      }
      return parts;
    }
    case PreTokenizer::kSplit:
      return split_piece(p, *t.regex, t.behavior, t.invert);
    case PreTokenizer::kMetaspace: {
      replace_all(p.text, " ", t.replacement);
      const bool starts = p.text.compare(0, t.replacement.size(), t.replacement) == 0;
      if (!starts && (t.prepend_scheme == "always" || (t.prepend_scheme == "first" && p.at_start)))
        p.text.insert(0, t.replacement);
      if (!t.split) return {p};
      return split_piece(p, *t.regex, Behavior::kMergedWithNext, false);
    }
  }
  return {p};
}

// ---- decoders --------------------------------------------------------------------------

void parse_decoder(const json& d, const std::string& where, const std::string& path,
                   std::vector<Decoder>& out) {
  if (d.is_null()) return;
  const std::string type = string_of(member(d, "type", where, path), where, path + ".type");
  if (type == "Sequence") {
    each_part(d, "decoders", where, path,
              [&](const json& part, const std::string& ppath) { parse_decoder(part, where, ppath, out); });
  } else if (type == "ByteLevel") {
    out.push_back({Decoder::kByteLevel});
  } else if (type == "Replace") {
    const json& pat = member(d, "pattern", where, path);
    if (!pat.is_object() || !pat.contains("String"))
      unsupported(where, path + ".pattern " + describe_json(pat) + " (only {\"String\": ...})");
    out.push_back({Decoder::kReplace, string_of(pat.at("String"), where, path + ".pattern.String"),
                   string_of(member(d, "content", where, path), where, path + ".content")});
  } else if (type == "ByteFallback") {
    out.push_back({Decoder::kByteFallback});
  } else if (type == "Fuse") {
    out.push_back({Decoder::kFuse});
  } else if (type == "Strip") {
    Decoder x{Decoder::kStrip};
    x.a = string_of(member(d, "content", where, path), where, path + ".content");
    x.start = id_of(member(d, "start", where, path), where, path + ".start");
    x.stop = id_of(member(d, "stop", where, path), where, path + ".stop");
    out.push_back(std::move(x));
  } else if (type == "Metaspace") {
    Decoder x{Decoder::kMetaspace};
    x.a = string_of(member(d, "replacement", where, path), where, path + ".replacement");
    std::string scheme = "always";
    if (d.contains("prepend_scheme")) scheme = string_of(d.at("prepend_scheme"), where, path + ".prepend_scheme");
    else if (!bool_or(d, "add_prefix_space", true, where, path)) scheme = "never";
    x.prepend = scheme != "never";
    out.push_back(std::move(x));
  } else {
    unsupported(where, path + " type \"" + type +
                           "\" (zt reads Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace)");
  }
}

std::vector<std::string> decode_chain(const Decoder& d, std::vector<std::string> tokens) {
  std::vector<std::string> out;
  switch (d.kind) {
    case Decoder::kByteLevel: {
      const ByteAlphabet& a = byte_alphabet();
      std::string bytes;
      for (const std::string& t : tokens) {
        std::string mapped;
        bool all = true;
        for (const std::string_view c : chars_of(t)) {
          const auto it = a.byte_of.find(code_point(c));
          if (it == a.byte_of.end()) { all = false; break; }
          mapped += static_cast<char>(it->second);
        }
        bytes += all ? mapped : t;
      }
      out.push_back(utf8_replace_invalid(bytes));
      return out;
    }
    case Decoder::kReplace:
      for (std::string& t : tokens) replace_all(t, d.a, d.b);
      return tokens;
    case Decoder::kByteFallback: {
      std::string pending;
      auto flush = [&] {
        if (pending.empty()) return;
        if (utf8_replace_invalid(pending) == pending) out.push_back(pending);
        else for (size_t i = 0; i < pending.size(); ++i) out.push_back("\xEF\xBF\xBD");
        pending.clear();
      };
      for (std::string& t : tokens) {
        if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
            std::isxdigit(static_cast<unsigned char>(t[3])) &&
            std::isxdigit(static_cast<unsigned char>(t[4]))) {
          pending += static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16));
        } else {
          flush();
          out.push_back(std::move(t));
        }
      }
      flush();
      return out;
    }
    case Decoder::kFuse: {
      std::string all;
      for (const std::string& t : tokens) all += t;
      out.push_back(std::move(all));
      return out;
    }
    case Decoder::kStrip:
      for (const std::string& t : tokens) {
        const std::vector<std::string_view> cs = chars_of(t);
        size_t b = 0, e = cs.size();
        while (b < d.start && b < e && cs[b] == d.a) ++b;
        size_t cut = 0;
        while (cut < d.stop && e > b && cs[e - 1] == d.a) --e, ++cut;
        std::string s;
        for (size_t i = b; i < e; ++i) s += cs[i];
        out.push_back(std::move(s));
      }
      return out;
    case Decoder::kMetaspace:
      // tokenizers' Metaspace::decode_chain: in the first token every replacement is
      // dropped (unless prepend_scheme is "never"); elsewhere each becomes a space.
      for (size_t i = 0; i < tokens.size(); ++i) {
        std::string t = tokens[i];
        replace_all(t, d.a, i == 0 && d.prepend ? "" : " ");
        out.push_back(std::move(t));
      }
      return out;
  }
  return tokens;
}

}  // namespace zt::data::tokjson
