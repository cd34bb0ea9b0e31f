// Text files -> tokens (the byte tokenizer or a real one), one document per file.
#include "zt/data/text.hpp"

#include <filesystem>
#include <algorithm>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>
#include <string_view>
#include <utility>

#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/log.hpp"
#include "zt/core/progress.hpp"
#include "zt/data/text_tokenizer.hpp"
#include "zt/data/tokenizer.hpp"

namespace zt::data {

namespace {

// Bytes read and tokenized at a time, so progress moves on a file of gigabytes.
constexpr size_t kChunk = size_t{16} << 20;
// The converters' memory (require_convert_memory): at most one 4-byte id per input byte,
// held three times over while the vector grows (its old and its doubled storage); a
// tokenizer.json or SentencePiece encode needs up to 64 bytes per byte of the text it
// encodes (58 measured: TinyLlama's form, a 50 MB line read whole).
constexpr double kIdBytesPerByte = 12, kEncodeBytesPerByte = 64;

}  // namespace

TokenFile text_files_to_tokens(const std::vector<std::string>& paths, Progress* progress) {
  if (paths.empty()) throw InputError("no input text files given", "name at least one IN.txt");
  require_convert_memory("text-to-tokens", paths, kIdBytesPerByte, [](double, double) { return 96.0 * (1 << 20); },
                         "12 bytes per input byte for the token ids as they grow, 96 MiB of reading");
  TokenFile out;
  out.vocab_size = ByteTokenizer::kVocabSize;
  out.tokenizer = std::string(ByteTokenizer::kName);
  for (const std::string& path : paths) {
    require_regular_file(path, "input text file",
                         "name a text file (relative paths are from the current directory)");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError("cannot read input text file '" + path + "'", "check its permissions");
    const size_t start = out.tokens.size();
    out.doc_starts.push_back(start);
    // The byte tokenizer maps each byte alone, so chunks tokenize as the whole file does.
    std::string chunk(kChunk, '\0');
    while (in) {
      in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      const size_t got = static_cast<size_t>(in.gcount());
      if (got == 0) break;
      const std::vector<uint32_t> ids = ByteTokenizer::encode(std::string_view(chunk.data(), got));
      out.tokens.insert(out.tokens.end(), ids.begin(), ids.end());
      if (progress) progress->advance(got, ids.size());
    }
    if (in.bad())
      throw InputError("cannot read input text file '" + path + "'", "check the file and its disk");
    if (out.tokens.size() == start)
      throw InputError("input text file '" + path + "' is empty (an empty corpus)",
                       "give a text file with at least one byte");
  }
  if (out.doc_starts.size() == 1) out.doc_starts.clear();  // one document: no boundaries
  return out;
}

namespace {

bool ascii_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
bool ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// How a text may be cut into pieces encoded alone (issue 36, class 6), for this tokenizer:
//   kNone   nowhere: each file is encoded whole.
//   kJoin   at a newline before an ASCII letter or digit, or at a space between an ASCII
//           letter/digit and a letter: pre-tokenizers (GPT-2's and Llama 3's regexes, a
//           whitespace split) end a pre-token there (byte-level BPE).
//   kSpace  at a space between an ASCII letter/digit and a letter, the space left out of
//           both pieces: a tokenizer that writes its own '▁' before every text it encodes
//           (SentencePiece's dummy prefix, a Prepend('▁') normalizer, Metaspace with
//           prepend_scheme first) gives the continuation the '▁' the space would have
//           become, and with no vocabulary piece holding '▁' after its first character
//           (SentencePiece's split_by_whitespace, TinyLlama's) no token crosses it.
enum class Cuts { kNone, kJoin, kSpace };

// A cut: the piece is text[0, end), the rest starts at text[next].
struct Cut {
  size_t end = 0, next = 0;
};

// Whether position i of `text` is a cut of kind `cuts` (a newline cut or a space cut).
std::optional<Cut> cut_at(std::string_view text, size_t i, Cuts cuts, bool* newline = nullptr) {
  if (cuts == Cuts::kNone || i == 0 || i >= text.size()) return std::nullopt;
  if (cuts == Cuts::kJoin && text[i - 1] == '\n' && ascii_alnum(text[i])) {
    if (newline) *newline = true;
    return Cut{i, i};
  }
  if (text[i] == ' ' && ascii_alnum(text[i - 1]) && i + 1 < text.size() && ascii_letter(text[i + 1])) {
    if (newline) *newline = false;
    return Cut{i, cuts == Cuts::kSpace ? i + 1 : i};
  }
  return std::nullopt;
}

// The last cut of `text` (kJoin: a newline cut, or after 1 MiB without one the last
// space cut); nullopt when none.
std::optional<Cut> last_cut(std::string_view text, Cuts cuts) {
  std::optional<Cut> space;
  for (size_t i = text.size() - 1; i >= 1; --i) {
    bool newline = false;
    if (const auto c = cut_at(text, i, cuts, &newline)) {
      if (newline || cuts == Cuts::kSpace) return c;
      if (!space) space = c;
    }
    if (space && text.size() - i > (size_t{1} << 20)) break;  // no newline in 1 MiB: a space
  }
  return space;
}

// The cuts this tokenizer's encode is additive at: for every cut of every probe text,
// the ids of the two pieces joined equal the ids of the whole (kJoin tried first, then
// kSpace); kNone when neither holds at every probed cut.
Cuts probe_cuts(const TextTokenizer& tokenizer) {
  static const char* const kProbes[] = {
      "Hello, world.\nThe end of it, 42 times.\n", "x = 1;\ny = 2", "a b\n\nCat",
      "The quick brown fox jumps over 123 lazy dogs; caf\xc3\xa9 ok done.",
      "Sphinx of black quartz, judge my vow: pack my box with five dozen liquor jugs.",
      "ROMEO:\nBut soft, what light through yonder window breaks? It is the east, and Juliet "
      "is the sun. Arise fair sun and kill the envious moon 7 times a day"};
  for (const Cuts cuts : {Cuts::kJoin, Cuts::kSpace}) {
    bool ok = true;
    for (const std::string_view text : kProbes) {
      const std::vector<uint32_t> whole = tokenizer.encode(text);
      for (size_t i = 1; ok && i < text.size(); ++i) {
        const auto c = cut_at(text, i, cuts);
        if (!c) continue;
        std::vector<uint32_t> split = tokenizer.encode(text.substr(0, c->end));
        const std::vector<uint32_t> tail = tokenizer.encode(text.substr(c->next));
        split.insert(split.end(), tail.begin(), tail.end());
        ok = split == whole;
      }
      if (!ok) break;
    }
    if (ok) return cuts;
  }
  return Cuts::kNone;
}

// A piece of an input file, encoded alone; `last` ends its document.
struct Piece {
  std::string text;
  bool last = false;
};

}  // namespace

TokenFile text_files_to_tokens(const std::vector<std::string>& paths, const TextTokenizer& tokenizer,
                               Progress* progress) {
  if (paths.empty()) throw InputError("no input text files given", "name at least one IN.txt");
  const TokenizerInfo& info = tokenizer.info();
  if (!info.eos)
    throw InputError("tokenizer '" + info.name + "' has no EOS token, which separates documents",
                     "set eos_token in the tokenizer_config.json beside the tokenizer");
  TokenFile out;
  out.vocab_size = info.vocab_size;
  out.tokenizer = info.name;
  out.tokenizer_hash = info.hash;
  out.tokenizer_path = info.path;
  // Pieces of about kPiece bytes (cut by last_cut), kBatchBytes of them encoded at a
  // time on all hardware threads: memory follows those, not the files (a tokenizer.json
  // encode needs about 33 bytes per byte of its text).
  const Cuts cuts = probe_cuts(tokenizer);
  log::info("text-to-tokens: tokenizer '" + info.name + "': " +
            (cuts == Cuts::kJoin    ? "files read in pieces cut at a newline or a space before a letter"
             : cuts == Cuts::kSpace ? "files read in pieces cut at a space before a letter, the space left to "
                                      "the '\u2581' it writes before every text"
                                    : "each file read whole (its encode is not additive at such cuts)"));
  constexpr size_t kPiece = size_t{4} << 20, kBatchBytes = size_t{64} << 20;
  // What is encoded at once: pieces, one per thread (at most a batch's); whole files, the
  // largest or a batch of smaller ones. Plus the batch's text and ids.
  const double threads = std::max(1u, std::thread::hardware_concurrency());
  const double at_once = std::min<double>(kBatchBytes / kPiece, threads) * kPiece;
  require_convert_memory(
      "text-to-tokens", paths, kIdBytesPerByte,
      [&](double total, double largest) {
        const double encoded = cuts == Cuts::kNone ? std::max(largest, std::min<double>(total, kBatchBytes))
                                                   : std::min(total, at_once);
        return kEncodeBytesPerByte * encoded + 2.0 * std::min<double>(total, kBatchBytes);
      },
      cuts == Cuts::kNone ? "12 bytes per input byte for the token ids as they grow, 64 per byte encoded at "
                            "once (files read whole: the largest or a 64 MiB batch), 2 per byte of a batch"
                          : "12 bytes per input byte for the token ids as they grow, 64 per byte encoded at "
                            "once (a 4 MiB piece per thread), 2 per byte of a 64 MiB batch");
  const std::string hint = "name a text file (relative paths are from the current directory)";
  size_t next = 0;
  std::ifstream in;
  std::string carry;  // read from the current file, not yet in a piece
  bool doc_open = false;
  while (next < paths.size() || in.is_open()) {
    std::vector<Piece> pieces;
    size_t bytes = 0;
    while (bytes < kBatchBytes && (next < paths.size() || in.is_open())) {
      if (!in.is_open()) {
        const std::string& path = paths[next++];
        require_regular_file(path, "input text file", hint);
        in.open(path, std::ios::binary);
        if (!in) throw InputError("cannot read input text file '" + path + "'", "check its permissions");
        if (in.peek() == std::char_traits<char>::eof())
          throw InputError("input text file '" + path + "' is empty (an empty corpus)",
                           "give a text file with at least one byte");
        carry.clear();
      }
      const size_t had = carry.size();
      carry.resize(had + kPiece);
      in.read(carry.data() + had, static_cast<std::streamsize>(kPiece));
      carry.resize(had + static_cast<size_t>(in.gcount()));
      if (in.bad())
        throw InputError("cannot read input text file '" + paths[next - 1] + "'", "check the file and its disk");
      Piece p;
      if (in.eof()) {  // the file's end: all that is left
        in.close();
        in.clear();
        p.text = std::move(carry);
        carry = std::string();
        p.last = true;
      } else {
        const std::optional<Cut> cut = last_cut(carry, cuts);
        if (!cut) continue;  // no cut yet: read on (a file with none is encoded whole)
        p.text = carry.substr(0, cut->end);
        carry.erase(0, cut->next);
        bytes += cut->next - cut->end;  // the space a kSpace cut leaves out
      }
      bytes += p.text.size();
      pieces.push_back(std::move(p));
    }
    std::vector<std::vector<uint32_t>> ids(pieces.size());
    for_each_parallel(pieces.size(), 0, [&](size_t i) {
      ids[i] = tokenizer.encode(pieces[i].text);
      std::string().swap(pieces[i].text);
    });
    for (size_t i = 0; i < ids.size(); ++i) {
      const size_t before = out.tokens.size();
      if (!doc_open) {
        out.doc_starts.push_back(out.tokens.size());
        out.tokens.insert(out.tokens.end(), info.prefix.begin(), info.prefix.end());
        doc_open = true;
      }
      out.tokens.insert(out.tokens.end(), ids[i].begin(), ids[i].end());
      std::vector<uint32_t>().swap(ids[i]);
      if (pieces[i].last) {
        out.tokens.insert(out.tokens.end(), info.suffix.begin(), info.suffix.end());
        if (out.tokens.size() == out.doc_starts.back() || out.tokens.back() != *info.eos)
          out.tokens.push_back(*info.eos);
        doc_open = false;
      }
      if (progress) progress->advance(0, out.tokens.size() - before);
    }
    if (progress) progress->advance(bytes, 0);
  }
  if (out.doc_starts.size() == 1) out.doc_starts.clear();
  return out;
}

TokenFile convert_text_to_tokens(const std::vector<std::string>& inputs, const std::string& output,
                                 const WriteOptions& options, const std::string& tokenizer) {
  // Load the tokenizer first: a bad --tokenizer is reported before any file is read.
  const std::unique_ptr<TextTokenizer> tok = tokenizer.empty() ? nullptr : load_tokenizer(tokenizer);
  // Progress over the input bytes; the end line comes after the file is written.
  uint64_t total = 0;
  for (const std::string& path : inputs) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec) total += size;
  }
  Progress progress("text-to-tokens", total, ProgressUnit::kBytes);
  progress.count_items(0, "tokens");
  TokenFile f = tok ? text_files_to_tokens(inputs, *tok, &progress)
                    : text_files_to_tokens(inputs, &progress);
  write_token_file(output, f, options);
  progress.finish();
  return f;
}

}  // namespace zt::data
