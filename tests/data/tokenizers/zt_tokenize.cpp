// zt_tokenize: zt's side of the tokenizer parity test (tokenizer_parity_test.py).
//
//   zt_tokenize TOKENIZER CORPUS
//
// Loads TOKENIZER (a folder or file, as `zt convert text-to-tokens --tokenizer`), splits
// CORPUS's bytes at '\n' into cases and adds the whole corpus as the last case, encodes
// each (encode_batch on 2 threads) and decodes the ids back. Prints JSON:
//   {"info": {name, kind, vocab_size, hash, bos, eos, prefix, suffix},
//    "cases": [{"ids": [...], "decoded_hex": "..."}]}
// Exit 0, or 1 with the error on stderr.
#include <cstdio>
#include <exception>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "zt/data/text_tokenizer.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: zt_tokenize TOKENIZER CORPUS\n");
    return 2;
  }
  try {
    const auto tok = zt::data::load_tokenizer(argv[1]);
    std::ifstream in(argv[2], std::ios::binary);
    if (!in) throw std::runtime_error(std::string("cannot read ") + argv[2]);
    std::ostringstream ss;
    ss << in.rdbuf();
    const std::string corpus = ss.str();
    std::vector<std::string> cases;
    std::stringstream lines(corpus);
    for (std::string line; std::getline(lines, line, '\n');) cases.push_back(line);
    cases.push_back(corpus);
    const auto ids = zt::data::encode_batch(*tok, cases, 2);

    nlohmann::json out;
    const zt::data::TokenizerInfo& i = tok->info();
    out["info"] = {{"name", i.name}, {"kind", i.kind}, {"vocab_size", i.vocab_size},
                   {"hash", i.hash}, {"prefix", i.prefix}, {"suffix", i.suffix}};
    out["info"]["bos"] = i.bos ? nlohmann::json(*i.bos) : nlohmann::json();
    out["info"]["eos"] = i.eos ? nlohmann::json(*i.eos) : nlohmann::json();
    out["cases"] = nlohmann::json::array();
    for (const auto& v : ids) {
      std::string hex;
      for (const unsigned char c : tok->decode(v)) {
        char b[3];
        std::snprintf(b, sizeof b, "%02x", c);
        hex += b;
      }
      out["cases"].push_back({{"ids", v}, {"decoded_hex", hex}});
    }
    std::printf("%s\n", out.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zt_tokenize: %s\n", e.what());
    return 1;
  }
}
