// Hugging Face tokenizer.json: the BPE model (tokenizers/src/models/bpe), its added tokens
// and post-processor template, and the tokenizer that runs normalizers -> added tokens ->
// pre-tokenizers -> BPE to encode and the decoders to decode, as the Rust `tokenizers`
// crate does. The normalizers, pre-tokenizers and decoders are in tokenizer_json_stages.cpp;
// JSON is nlohmann-json through parse_json_strict.
#include <algorithm>
#include <cstring>
#include <map>
#include <queue>
#include <unordered_map>

#include "tokenizer_internal.hpp"
#include "tokenizer_json_detail.hpp"
#include "zt/core/error.hpp"
#include "zt/core/json.hpp"
#include "zt/core/log.hpp"

namespace zt::data {
namespace {

using namespace tokjson;

// ---- the tokenizer ---------------------------------------------------------------------

struct AddedToken {
  uint32_t id;
  std::string content;
  bool special, normalized;
};

class JsonTokenizer final : public TextTokenizer {
 public:
  JsonTokenizer(std::string_view text, std::string_view config, const std::string& where) {
    const json j = parse_json_strict(text, "tokenizer '" + where + "'", kHint);
    if (!j.is_object()) bad(where, "the file", "is " + describe_json(j) + ", not an object");
    // Ids are dense: each below the number of tokens (so a file cannot make zt allocate
    // for ids it does not hold).
    const json& model = member(j, "model", where, "(root)");
    const json* added = j.contains("added_tokens") ? &j.at("added_tokens") : nullptr;
    id_bound_ = (model.contains("vocab") ? model.at("vocab").size() : 0) + (added ? added->size() : 0);
    parse_model(model, where);
    if (j.contains("added_tokens")) parse_added(j.at("added_tokens"), where);
    if (j.contains("normalizer")) parse_normalizer(j.at("normalizer"), where, "normalizer", normalizers_);
    if (j.contains("pre_tokenizer"))
      parse_pre_tokenizer(j.at("pre_tokenizer"), where, "pre_tokenizer", pre_tokenizers_);
    if (j.contains("decoder")) parse_decoder(j.at("decoder"), where, "decoder", decoders_);
    has_decoder_ = j.contains("decoder") && !j.at("decoder").is_null();

    info_.kind = "tokenizer.json";
    info_.name = info_.kind + ":" + where;  // load_tokenizer names it by its folder
    info_.vocab_size = static_cast<uint32_t>(id_to_token_.size());
    std::vector<uint32_t> prefix, suffix;
    if (j.contains("post_processor")) parse_template(j.at("post_processor"), where, "post_processor", prefix, suffix);
    resolve_specials(info_, prefix, suffix, config, where,
                     [this](const std::string& token) -> std::optional<uint32_t> {
                       const auto a = added_ids_.find(token);
                       if (a != added_ids_.end()) return a->second;
                       const auto v = vocab_.find(token);
                       if (v != vocab_.end()) return v->second;
                       return std::nullopt;
                     },
                     /*default_add_bos=*/false);
  }

  std::vector<uint32_t> encode(std::string_view raw) const override {
    const std::string text = utf8_replace_invalid(raw);
    std::vector<uint32_t> ids;
    // 1. added tokens matched on the raw text; 2. the rest normalized, then added tokens
    // matched on the normalized text; 3. the rest pre-tokenized and run through BPE.
    for_each_segment(text, raw_added_, true, [&](Piece seg, std::optional<uint32_t> added) {
      if (added) { ids.push_back(*added); return; }
      normalize(seg.text);
      for_each_segment(seg.text, normalized_added_, seg.at_start,
                       [&](Piece piece, std::optional<uint32_t> added2) {
                         if (added2) { ids.push_back(*added2); return; }
                         std::vector<Piece> words{std::move(piece)};
                         for (const PreTokenizer& t : pre_tokenizers_) {
                           std::vector<Piece> next;
                           for (Piece& w : words)
                             for (Piece& q : pre_tokenize(t, std::move(w))) next.push_back(std::move(q));
                           words = std::move(next);
                         }
                         for (const Piece& w : words)
                           if (!w.text.empty()) bpe(w.text, ids);
                       });
    });
    return ids;
  }

  std::string decode(std::span<const uint32_t> ids) const override {
    std::vector<std::string> tokens;
    for (const uint32_t id : ids) {
      if (id >= id_to_token_.size() || !has_token_[id])
        throw InputError(strf("token id %u is not in the tokenizer's vocabulary (%zu ids)", id,
                              id_to_token_.size()),
                         "decode ids made by this tokenizer");
      if (special_[id]) continue;
      tokens.push_back(id_to_token_[id]);
    }
    if (!has_decoder_) {
      std::string s;
      for (size_t i = 0; i < tokens.size(); ++i) {
        if (i) s += ' ';
        s += tokens[i];
      }
      return s;
    }
    for (const Decoder& d : decoders_) tokens = decode_chain(d, std::move(tokens));
    std::string s;
    for (const std::string& t : tokens) s += t;
    return s;
  }

 private:
  void parse_model(const json& m, const std::string& where) {
    const std::string type = m.contains("type") ? string_of(m.at("type"), where, "model.type") : "BPE";
    if (type != "BPE") unsupported(where, "model.type \"" + type + "\" (zt reads BPE)");
    if (m.contains("dropout") && !m.at("dropout").is_null() &&
        !(m.at("dropout").is_number() && m.at("dropout").get<double>() == 0.0))
      unsupported(where, "model.dropout " + describe_json(m.at("dropout")) + " (BPE dropout is random)");
    byte_fallback_ = bool_or(m, "byte_fallback", false, where, "model");
    fuse_unk_ = bool_or(m, "fuse_unk", false, where, "model");
    ignore_merges_ = bool_or(m, "ignore_merges", false, where, "model");
    auto opt_string = [&](const char* key) -> std::string {
      if (!m.contains(key) || m.at(key).is_null()) return {};
      return string_of(m.at(key), where, std::string("model.") + key);
    };
    unk_token_ = opt_string("unk_token");
    prefix_ = opt_string("continuing_subword_prefix");
    suffix_ = opt_string("end_of_word_suffix");

    const json& vocab = member(m, "vocab", where, "model");
    if (!vocab.is_object()) bad(where, "model.vocab", "is " + describe_json(vocab) + ", not an object");
    for (const auto& [token, id] : vocab.items()) {
      const std::string path = "model.vocab[" + json(token).dump(-1, ' ', false, json::error_handler_t::replace) + "]";
      const uint32_t i = id_of(id, where, path);
      vocab_[token] = i;
      set_token(i, token, where, path);
    }
    const json& merges = member(m, "merges", where, "model");
    if (!merges.is_array()) bad(where, "model.merges", "is " + describe_json(merges) + ", not an array");
    for (size_t r = 0; r < merges.size(); ++r) {
      const json& e = merges[r];
      const std::string path = "model.merges[" + std::to_string(r) + "]";
      std::string a, b;
      if (e.is_string()) {  // "a b" (tokenizers < 0.20)
        const std::string s = e.get<std::string>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
          bad(where, path, "is " + describe_json(e) + ", not two tokens separated by one space");
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (e.is_array() && e.size() == 2) {  // ["a", "b"]
        a = string_of(e[0], where, path + "[0]");
        b = string_of(e[1], where, path + "[1]");
      } else {
        bad(where, path, "is " + describe_json(e) + ", not a pair of tokens");
      }
      const auto ia = vocab_.find(a), ib = vocab_.find(b);
      if (ia == vocab_.end() || ib == vocab_.end())
        bad(where, path, "names a token that is not in model.vocab");
      std::string merged = a;
      merged += (!prefix_.empty() && b.compare(0, prefix_.size(), prefix_) == 0) ? b.substr(prefix_.size()) : b;
      const auto im = vocab_.find(merged);
      if (im == vocab_.end()) bad(where, path, "makes a token that is not in model.vocab");
      merges_[pair_key(ia->second, ib->second)] = {static_cast<uint32_t>(r), im->second};
    }
    if (!unk_token_.empty()) {
      const auto u = vocab_.find(unk_token_);
      if (u == vocab_.end()) bad(where, "model.unk_token", "is not in model.vocab");
      unk_id_ = u->second;
    }
  }

  // As tokenizers' AddedVocabulary::add_tokens loads them (the declared ids are not used;
  // Hugging Face warns where they differ): in list order, a token whose content model.vocab
  // or an earlier added token holds takes that id (a later duplicate's flags win), any
  // other the next id: the vocabulary's size, then one past the largest added id.
  void parse_added(const json& list, const std::string& where) {
    if (!list.is_array()) bad(where, "added_tokens", "is " + describe_json(list) + ", not an array");
    std::map<uint32_t, AddedToken> by_id;  // tokenizers' added_tokens_map_r
    const auto vocab_size = static_cast<uint32_t>(vocab_.size());
    std::optional<uint32_t> max_added;
    size_t moved = 0;
    std::string first_moved;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string path = "added_tokens[" + std::to_string(i) + "]";
      const json& t = list[i];
      AddedToken a;
      const uint32_t declared = id_of(member(t, "id", where, path), where, path + ".id");
      a.content = string_of(member(t, "content", where, path), where, path + ".content");
      if (a.content.empty()) bad(where, path + ".content", "is empty");
      a.special = bool_or(t, "special", false, where, path);
      a.normalized = bool_or(t, "normalized", !a.special, where, path);
      for (const char* flag : {"single_word", "lstrip", "rstrip"})
        if (bool_or(t, flag, false, where, path))
          unsupported(where, path + "." + flag + " true (added token \"" + a.content + "\")");
      if (const auto e = added_ids_.find(a.content); e != added_ids_.end()) {
        a.id = e->second;
      } else if (const auto v = vocab_.find(a.content); v != vocab_.end()) {
        a.id = v->second;
      } else {
        a.id = !max_added ? vocab_size : *max_added >= vocab_size ? *max_added + 1 : vocab_size;
        set_token(a.id, a.content, where, path + ".id");
      }
      if (a.id != declared && moved++ == 0)
        first_moved = strf("%s (\"%s\": declared %u, given %u)", path.c_str(), a.content.c_str(), declared, a.id);
      added_ids_[a.content] = a.id;
      max_added = std::max(max_added.value_or(0), a.id);
      by_id[a.id] = a;
    }
    if (moved > 0)
      log::warn(strf("tokenizer '%s': %zu added token%s not given the id the file declares, as "
                     "Hugging Face tokenizers assigns them; the first: %s",
                     where.c_str(), moved, moved == 1 ? " is" : "s are", first_moved.c_str()));
    std::vector<AddedToken> raw, normalized;
    for (const auto& [id, a] : by_id) {
      special_[id] = a.special;
      (a.normalized ? normalized : raw).push_back(a);
    }
    raw_added_ = added_regexes(raw, where);
    normalized_added_ = added_regexes(normalized, where);
  }

  // Leftmost-longest matching (tokenizers' aho-corasick, MatchKind::LeftmostLongest):
  // alternations of the literals, longest first, so the first alternative that matches at
  // the leftmost position is the longest. PCRE2 compiles at most 64 KiB of code per
  // pattern (about 1,500 tokens), so the literals go into patterns of at most
  // kAddedPatternBytes each and the matcher takes the leftmost, then longest, of theirs.
  static constexpr size_t kAddedPatternBytes = 16 * 1024;

  std::vector<std::unique_ptr<Regex>> added_regexes(std::vector<AddedToken> tokens,
                                                    const std::string& where) {
    std::stable_sort(tokens.begin(), tokens.end(), [](const AddedToken& x, const AddedToken& y) {
      return x.content.size() > y.content.size();
    });
    std::vector<std::unique_ptr<Regex>> out;
    std::string pattern;
    auto flush = [&] {
      if (pattern.empty()) return;
      out.push_back(std::make_unique<Regex>(
          pattern, where, strf("added_tokens (pattern %zu of their literals)", out.size() + 1)));
      pattern.clear();
    };
    for (const AddedToken& t : tokens) {
      const std::string literal = regex_escape(t.content);
      if (!pattern.empty() && pattern.size() + 1 + literal.size() > kAddedPatternBytes) flush();
      if (!pattern.empty()) pattern += '|';
      pattern += literal;
    }
    flush();
    return out;
  }

  // Calls f(piece, id) for each added token in `text` (id set) and each run between them.
  template <class F>
  void for_each_segment(const std::string& text, const std::vector<std::unique_ptr<Regex>>& res,
                        bool at_start, F&& f) const {
    constexpr size_t npos = std::string::npos;
    std::vector<std::pair<size_t, size_t>> next(res.size(), {0, 0});  // each pattern's next match
    std::vector<bool> searched(res.size(), false);
    size_t prev = 0;
    while (!res.empty()) {
      size_t b = npos, e = npos;
      for (size_t r = 0; r < res.size(); ++r) {
        if (!searched[r] || (next[r].first != npos && next[r].first < prev)) {
          next[r] = res[r]->find(text, prev);
          searched[r] = true;
        }
        const auto [rb, re] = next[r];
        if (rb != npos && (rb < b || (rb == b && re > e))) b = rb, e = re;
      }
      if (b == npos) break;
      if (b > prev) f(Piece{text.substr(prev, b - prev), at_start && prev == 0}, std::nullopt);
      f(Piece{}, added_ids_.at(text.substr(b, e - b)));
      prev = e;
    }
    if (prev < text.size()) f(Piece{text.substr(prev), at_start && prev == 0}, std::nullopt);
  }

  void normalize(std::string& s) const {
    for (const Normalizer& n : normalizers_) {
      if (n.kind == Normalizer::kPrepend) {
        if (!s.empty()) s.insert(0, n.a);
      } else if (n.kind == Normalizer::kReplace) {
        replace_all(s, n.a, n.b);
      } else {
        unicode_normalize(s, n.kind);
      }
    }
  }

  void parse_template(const json& p, const std::string& where, const std::string& path,
                      std::vector<uint32_t>& prefix, std::vector<uint32_t>& suffix) {
    if (p.is_null()) return;
    const std::string type = string_of(member(p, "type", where, path), where, path + ".type");
    if (type == "Sequence") {
      each_part(p, "processors", where, path, [&](const json& part, const std::string& ppath) {
        parse_template(part, where, ppath, prefix, suffix);
      });
      return;
    }
    if (type == "ByteLevel") return;  // offsets only
    if (type != "TemplateProcessing")
      unsupported(where, path + " type \"" + type + "\" (zt reads TemplateProcessing, ByteLevel, Sequence)");
    const json& single = member(p, "single", where, path);
    const json& specials = member(p, "special_tokens", where, path);
    if (!single.is_array()) bad(where, path + ".single", "is not an array");
    bool seen_sequence = false;
    for (size_t i = 0; i < single.size(); ++i) {
      const json& item = single[i];
      const std::string ipath = path + ".single[" + std::to_string(i) + "]";
      if (item.is_object() && item.contains("Sequence")) {
        seen_sequence = true;
      } else if (item.is_object() && item.contains("SpecialToken")) {
        const std::string name = string_of(member(item.at("SpecialToken"), "id", where, ipath + ".SpecialToken"),
                                           where, ipath + ".SpecialToken.id");
        const json& st = member(specials, name.c_str(), where, path + ".special_tokens");
        const json& ids = member(st, "ids", where, path + ".special_tokens." + name);
        if (!ids.is_array()) bad(where, path + ".special_tokens." + name + ".ids", "is not an array");
        for (const json& id : ids) (seen_sequence ? suffix : prefix).push_back(id_of(id, where, path + ".special_tokens." + name + ".ids"));
      } else {
        bad(where, ipath, "is " + describe_json(item) + ", not {\"Sequence\"|\"SpecialToken\": ...}");
      }
    }
  }

  static uint64_t pair_key(uint32_t a, uint32_t b) { return (uint64_t{a} << 32) | b; }

  void set_token(uint32_t id, const std::string& token, const std::string& where, const std::string& path) {
    if (id >= id_bound_)
      bad(where, path, strf("is id %u, not below the number of tokens (%zu): ids must be dense", id, id_bound_));
    if (id >= id_to_token_.size()) {
      id_to_token_.resize(id + 1);
      has_token_.resize(id + 1, false);
      special_.resize(id + 1, false);
    }
    id_to_token_[id] = token;
    has_token_[id] = true;
  }

  // tokenizers' BPE::tokenize: merge_word + Word::merge_all (a heap of (rank, position)).
  void bpe(const std::string& word, std::vector<uint32_t>& ids) const {
    if (ignore_merges_) {
      const auto it = vocab_.find(word);
      if (it != vocab_.end()) { ids.push_back(it->second); return; }
    }
    struct Symbol { uint32_t c; int prev, next; size_t len; };
    std::vector<Symbol> sym;
    bool unk = false;  // an unknown pending: unk_len bytes of unk_id_
    size_t unk_len = 0;
    auto add = [&](uint32_t c, size_t len) {
      const int n = static_cast<int>(sym.size());
      if (n > 0) sym.back().next = n;
      sym.push_back({c, n - 1, -1, len});
    };
    const std::vector<std::string_view> cs = chars_of(word);
    for (size_t i = 0; i < cs.size(); ++i) {
      std::string s(cs[i]);
      const size_t byte_len = s.size();
      if (i > 0 && !prefix_.empty()) s = prefix_ + s;
      if (i + 1 == cs.size() && !suffix_.empty()) s += suffix_;
      const auto it = vocab_.find(s);
      if (it != vocab_.end()) {
        if (unk) add(*unk_id_, unk_len);
        unk = false;
        add(it->second, byte_len);
        continue;
      }
      if (byte_fallback_) {
        std::vector<uint32_t> bytes;
        for (const char b : s) {
          const auto bt = vocab_.find(strf("<0x%02X>", static_cast<unsigned char>(b)));
          if (bt == vocab_.end()) break;
          bytes.push_back(bt->second);
        }
        if (bytes.size() == s.size()) {
          for (const uint32_t b : bytes) add(b, 1);
          continue;
        }
      }
      if (unk_id_) {
        if (unk && fuse_unk_) {
          unk_len += byte_len;
        } else {
          if (unk) add(*unk_id_, unk_len);
          unk = true;
          unk_len = byte_len;
        }
      }
    }
    if (unk) add(*unk_id_, unk_len);

    struct Merge { int pos; uint32_t rank, new_id; };
    auto worse = [](const Merge& x, const Merge& y) {  // the heap's top: lowest rank, then position
      return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos;
    };
    std::priority_queue<Merge, std::vector<Merge>, decltype(worse)> queue(worse);
    auto lookup = [&](uint32_t a, uint32_t b) -> const std::pair<uint32_t, uint32_t>* {
      const auto it = merges_.find(pair_key(a, b));
      return it == merges_.end() ? nullptr : &it->second;
    };
    for (size_t i = 0; i + 1 < sym.size(); ++i)
      if (const auto* m = lookup(sym[i].c, sym[i + 1].c))
        queue.push({static_cast<int>(i), m->first, m->second});
    while (!queue.empty()) {
      const Merge top = queue.top();
      queue.pop();
      Symbol& cur = sym[static_cast<size_t>(top.pos)];
      if (cur.len == 0 || cur.next == -1) continue;
      const int next_pos = cur.next;
      const Symbol right = sym[static_cast<size_t>(next_pos)];
      const auto* m = lookup(cur.c, right.c);
      if (m == nullptr || m->second != top.new_id) continue;  // an expired entry
      cur.c = top.new_id;
      cur.len += right.len;
      cur.next = right.next;
      sym[static_cast<size_t>(next_pos)].len = 0;
      if (right.next > -1 && static_cast<size_t>(right.next) < sym.size())
        sym[static_cast<size_t>(right.next)].prev = top.pos;
      if (cur.prev >= 0)
        if (const auto* pm = lookup(sym[static_cast<size_t>(cur.prev)].c, cur.c))
          queue.push({cur.prev, pm->first, pm->second});
      if (cur.next >= 0 && static_cast<size_t>(cur.next) < sym.size())
        if (const auto* nm = lookup(cur.c, sym[static_cast<size_t>(cur.next)].c))
          queue.push({top.pos, nm->first, nm->second});
    }
    for (const Symbol& s : sym)
      if (s.len != 0) ids.push_back(s.c);
  }

  std::unordered_map<std::string, uint32_t> vocab_;
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> merges_;  // (a, b) -> (rank, id)
  std::unordered_map<std::string, uint32_t> added_ids_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_token_, special_;
  std::vector<std::unique_ptr<Regex>> raw_added_, normalized_added_;
  std::vector<Normalizer> normalizers_;
  std::vector<PreTokenizer> pre_tokenizers_;
  std::vector<Decoder> decoders_;
  bool has_decoder_ = false;
  bool byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false;
  std::string unk_token_, prefix_, suffix_;
  std::optional<uint32_t> unk_id_;
  size_t id_bound_ = 0;
};

}  // namespace

std::unique_ptr<TextTokenizer> tokenizer_from_json(std::string_view tokenizer_json,
                                                   std::string_view tokenizer_config,
                                                   const std::string& where) {
  return std::make_unique<JsonTokenizer>(tokenizer_json, tokenizer_config, where);
}

}  // namespace zt::data
