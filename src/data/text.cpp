// Text files -> tokens (the byte tokenizer or a real one), one document per file.
#include "zt/data/text.hpp"

#include <filesystem>
#include <fstream>
#include <memory>
#include <string_view>
#include <utility>

#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/progress.hpp"
#include "zt/data/text_tokenizer.hpp"
#include "zt/data/tokenizer.hpp"

namespace zt::data {

namespace {

// Bytes read and tokenized at a time, so progress moves on a file of gigabytes.
constexpr size_t kChunk = size_t{16} << 20;

}  // namespace

TokenFile text_files_to_tokens(const std::vector<std::string>& paths, Progress* progress) {
  if (paths.empty()) throw InputError("no input text files given", "name at least one IN.txt");
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

// Where a text may be cut into pieces encoded alone (issue 36, class 6): the last
// position i in [1, text.size()) with text[i - 1] a newline and text[i] an ASCII letter or
// digit, or (a line without a newline) text[i] a space between an ASCII letter or digit
// and an ASCII letter; 0 when none. Pre-tokenizers (GPT-2's and Llama 3's regexes, a
// whitespace split) end a pre-token there, so the ids of the pieces are the ids of the
// whole where encode_is_additive says so.
size_t last_cut(std::string_view text) {
  size_t space = 0;
  for (size_t i = text.size() - 1; i >= 1; --i) {
    if (text[i - 1] == '\n' && ascii_alnum(text[i])) return i;
    if (space == 0 && text[i] == ' ' && ascii_alnum(text[i - 1]) && i + 1 < text.size() &&
        ascii_letter(text[i + 1]))
      space = i;
    if (space != 0 && text.size() - i > (size_t{1} << 20)) break;  // no newline in 1 MiB: a space
  }
  return space;
}

// Whether this tokenizer encodes a text cut by last_cut as the whole (probed on strings
// with those cuts): false for tokenizers that prepend something to every text they encode
// (SentencePiece's dummy prefix, a Prepend normalizer, add_prefix_space), whose files are
// then encoded whole, as before.
bool encode_is_additive(const TextTokenizer& tokenizer) {
  static const std::pair<const char*, const char*> kProbes[] = {
      {"Hello, world.\n", "The end of it, 42 times.\n"}, {"x = 1;\n", "y = 2"}, {"a b\n\n", "Cat"},
      {"The quick brown", " fox jumps"}, {"over 123", " lazy dogs"}, {"caf\xc3\xa9 ok", " done"}};
  for (const auto& [a, b] : kProbes) {
    std::vector<uint32_t> split = tokenizer.encode(a);
    const std::vector<uint32_t> tail = tokenizer.encode(b);
    split.insert(split.end(), tail.begin(), tail.end());
    if (split != tokenizer.encode(std::string(a) + b)) return false;
  }
  return true;
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
  const bool additive = encode_is_additive(tokenizer);
  constexpr size_t kPiece = size_t{4} << 20, kBatchBytes = size_t{64} << 20;
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
        const size_t cut = additive ? last_cut(carry) : 0;
        if (cut == 0) continue;  // no cut yet: read on (a file with none is encoded whole)
        p.text = carry.substr(0, cut);
        carry.erase(0, cut);
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
