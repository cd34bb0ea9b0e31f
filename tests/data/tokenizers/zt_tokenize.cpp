// zt_tokenize: zt's side of the tokenizer parity test (tokenizer_parity_test.py) and of
// the throughput benchmark (bench/tokenizer/run_vs_hf.py).
//
//   zt_tokenize TOKENIZER CORPUS
//     Splits CORPUS's bytes at '\n' into cases and adds the whole corpus as the last case,
//     encodes each (encode_batch on 2 threads) and decodes the ids back. Prints JSON:
//       {"info": {name, kind, vocab_size, hash, bos, eos, prefix, suffix},
//        "cases": [{"ids": [...], "decoded_hex": "..."}]}
//   zt_tokenize --bench TOKENIZER CORPUS THREADS RUNS
//     Cuts CORPUS into documents at blank lines ("\n\n"); each run encodes all of them with
//     encode_batch on THREADS threads, after one warm-up run. Prints JSON:
//       {"seconds": [RUNS wall times], "docs": D, "bytes": B, "tokens": T, "ids_hash": H}
//     ids_hash: FNV-1a 64 over the ids as decimal text joined by ' ' and documents by
//     '\n', which the peer computes the same way (both sides encode alike).
// TOKENIZER is a folder or file, as for `zt convert text-to-tokens --tokenizer`.
// Exit 0, or 1 with the error on stderr (2: usage).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "zt/core/hash.hpp"
#include "zt/data/text_tokenizer.hpp"

namespace {

std::string read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(std::string("cannot read ") + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int parity(const zt::data::TextTokenizer& tok, const std::string& corpus) {
  std::vector<std::string> cases;
  std::stringstream lines(corpus);
  for (std::string line; std::getline(lines, line, '\n');) cases.push_back(line);
  cases.push_back(corpus);
  const auto ids = zt::data::encode_batch(tok, cases, 2);
  nlohmann::json out;
  const zt::data::TokenizerInfo& i = tok.info();
  out["info"] = {{"name", i.name}, {"kind", i.kind}, {"vocab_size", i.vocab_size},
                 {"hash", i.hash}, {"prefix", i.prefix}, {"suffix", i.suffix}};
  out["info"]["bos"] = i.bos ? nlohmann::json(*i.bos) : nlohmann::json();
  out["info"]["eos"] = i.eos ? nlohmann::json(*i.eos) : nlohmann::json();
  out["cases"] = nlohmann::json::array();
  for (const auto& v : ids) {
    std::string hex;
    for (const unsigned char c : tok.decode(v)) {
      char b[3];
      std::snprintf(b, sizeof b, "%02x", c);
      hex += b;
    }
    out["cases"].push_back({{"ids", v}, {"decoded_hex", hex}});
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

int bench(const zt::data::TextTokenizer& tok, const std::string& corpus, int threads, int runs) {
  std::vector<std::string> docs;
  for (size_t at = 0; at < corpus.size();) {
    size_t cut = corpus.find("\n\n", at);
    if (cut == std::string::npos) cut = corpus.size();
    docs.push_back(corpus.substr(at, cut - at));
    at = cut + 2;
  }
  std::vector<std::vector<uint32_t>> ids = zt::data::encode_batch(tok, docs, threads);  // warm-up
  std::string seconds;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    ids = zt::data::encode_batch(tok, docs, threads);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r) seconds += ", ";
    seconds += std::to_string(s);
  }
  size_t tokens = 0;
  std::string text;
  for (size_t d = 0; d < ids.size(); ++d) {
    if (d) text += '\n';
    for (size_t i = 0; i < ids[d].size(); ++i) {
      if (i) text += ' ';
      text += std::to_string(ids[d][i]);
    }
    tokens += ids[d].size();
  }
  std::printf("{\"seconds\": [%s], \"docs\": %zu, \"bytes\": %zu, \"tokens\": %zu, \"ids_hash\": \"%016llx\"}\n",
              seconds.c_str(), docs.size(), corpus.size(), tokens,
              static_cast<unsigned long long>(zt::fnv1a(text)));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool is_bench = argc == 6 && std::strcmp(argv[1], "--bench") == 0;
  if (argc != 3 && !is_bench) {
    std::fprintf(stderr, "usage: zt_tokenize TOKENIZER CORPUS\n"
                         "       zt_tokenize --bench TOKENIZER CORPUS THREADS RUNS\n");
    return 2;
  }
  try {
    const int a = is_bench ? 2 : 1;
    const auto tok = zt::data::load_tokenizer(argv[a]);
    const std::string corpus = read_file(argv[a + 1]);
    return is_bench ? bench(*tok, corpus, std::stoi(argv[4]), std::stoi(argv[5])) : parity(*tok, corpus);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zt_tokenize: %s\n", e.what());
    return 1;
  }
}
