// Text files -> byte tokens, one document per file.
#include "zt/data/text.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/data/tokenizer.hpp"

namespace zt::data {

TokenFile text_files_to_tokens(const std::vector<std::string>& paths) {
  if (paths.empty()) throw InputError("no input text files given", "name at least one IN.txt");
  TokenFile out;
  out.vocab_size = ByteTokenizer::kVocabSize;
  out.tokenizer = std::string(ByteTokenizer::kName);
  for (const std::string& path : paths) {
    require_regular_file(path, "input text file",
                         "name a text file (relative paths are from the current directory)");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError("cannot read input text file '" + path + "'", "check its permissions");
    std::stringstream text;
    text << in.rdbuf();
    const std::string bytes = text.str();
    if (bytes.empty())
      throw InputError("input text file '" + path + "' is empty (an empty corpus)",
                       "give a text file with at least one byte");
    out.doc_starts.push_back(out.tokens.size());
    const std::vector<uint32_t> ids = ByteTokenizer::encode(bytes);
    out.tokens.insert(out.tokens.end(), ids.begin(), ids.end());
  }
  if (out.doc_starts.size() == 1) out.doc_starts.clear();  // one document: no boundaries
  return out;
}

TokenFile convert_text_to_tokens(const std::vector<std::string>& inputs, const std::string& output,
                                 const WriteOptions& options) {
  TokenFile f = text_files_to_tokens(inputs);
  write_token_file(output, f, options);
  return f;
}

}  // namespace zt::data
