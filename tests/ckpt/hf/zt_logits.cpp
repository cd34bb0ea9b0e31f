// zt_logits: zt's own answer for one checkpoint and one token sequence, as JSON, for
// tests/ckpt/hf/hf_peer_test.py to set beside Hugging Face transformers.
//
//   zt_logits CKPT TOKENS NEW
//     CKPT    a zt checkpoint (training or weights-only), read with zt::ckpt::read_full
//     TOKENS  comma-separated token ids t0,...,t(T-1)
//     NEW     how many tokens to generate greedily after TOKENS
//
// Prints {"vocab": V, "logits": [[V floats] x T], "kv_logits": (same), "loss": x,
//         "greedy": [NEW ids], "argmax": [NEW ids], "kv_greedy": [NEW ids]}:
//   logits[i]  the logits of position i given t0..ti (Model::logits_last on each prefix)
//   kv_logits  the same from Model::decode with a key/value cache: t0 alone, then one
//              token at a time (the path of `zt generate`)
//   loss       Model::loss: mean cross-entropy of t1..t(T-1) given the previous tokens
//              (with experts: over all T positions, the last without a target, so the
//              load-balancing loss covers the T rows transformers routes; also "aux", the
//              load-balancing loss, and "tokens_per_expert")
//   greedy     zt::train::generate (zt's sampler) at a temperature so small that it picks
//              the argmax; checked here against the argmax of each step's logits.
//   kv_greedy  the same through the cache (train::kv_decoder: the prompt prefilled, then
//              one token at a time), as `zt generate` runs
// Exit 0 on success, 1 with a message on stderr otherwise.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "zt/ckpt/serial.hpp"
#include "zt/model/model.hpp"
#include "zt/train/generate.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: zt_logits CKPT TOKENS NEW\n");
    return 2;
  }
  try {
    const zt::ckpt::FullCheckpoint ck = zt::ckpt::read_full(argv[1]);
    const zt::model::Config& cfg = ck.header.config;
    std::vector<int32_t> tokens;
    std::stringstream ss(argv[2]);
    for (std::string item; std::getline(ss, item, ',');) tokens.push_back(std::stoi(item));
    const int64_t T = static_cast<int64_t>(tokens.size());
    const int64_t n_new = std::stoll(argv[3]);
    if (T < 2 || T + n_new > cfg.context) {
      std::fprintf(stderr, "zt_logits: need 2 <= tokens and tokens + NEW <= context %lld\n",
                   static_cast<long long>(cfg.context));
      return 1;
    }

    zt::model::Model<float> model(cfg, 1, cfg.context);
    for (int u = 0; u < static_cast<int>(ck.params.size()); ++u)
      model.bind_unit(u, ck.params[static_cast<size_t>(u)], {});

    nlohmann::json out;
    out["vocab"] = cfg.vocab;
    std::vector<float> row(static_cast<size_t>(cfg.vocab));
    nlohmann::json logits = nlohmann::json::array();
    for (int64_t i = 1; i <= T; ++i) {
      model.logits_last(std::span<const int32_t>(tokens.data(), static_cast<size_t>(i)), i, row);
      logits.push_back(row);
    }
    out["logits"] = std::move(logits);
    zt::model::KvCache<float> cache(cfg, T);
    nlohmann::json kv_logits = nlohmann::json::array();
    for (int64_t i = 0; i < T; ++i) {
      model.decode(std::span<const int32_t>(&tokens[static_cast<size_t>(i)], 1), cache, row);
      kv_logits.push_back(row);
    }
    out["kv_logits"] = std::move(kv_logits);

    std::vector<int32_t> targets(tokens.begin() + 1, tokens.end());
    if (cfg.moe()) {
      // Every position routed, the last without a target: transformers' loss (the
      // load-balancing loss over all T rows with output_router_logits) and its aux loss.
      targets.push_back(-1);
      out["loss"] = model.loss(tokens, targets, 1, T);
      out["aux"] = model.router_stats().aux;
      out["tokens_per_expert"] = model.router_stats().tokens;
    } else {
      out["loss"] = model.loss(std::span<const int32_t>(tokens.data(), targets.size()), targets,
                               1, T - 1);
    }

    zt::train::SampleOptions opt;
    opt.tokens = n_new;
    opt.temperature = 1e-30;  // exp((l - max) / 1e-30) underflows to 0 for every l < max
    opt.seed = 1;
    const zt::train::LogitsFn fn = [&](std::span<const int32_t> window, std::span<float> o) {
      model.logits_last(window, static_cast<int64_t>(window.size()), o);
    };
    const std::vector<int32_t> greedy =
        zt::train::generate(zt::train::recompute_decoder(fn, cfg.vocab, cfg.context), tokens, opt)
            .tokens;
    // The same by argmax, so a sampler that stopped picking the maximum is caught here.
    std::vector<int32_t> seq = tokens;
    for (int64_t k = 0; k < n_new; ++k) {
      model.logits_last(seq, static_cast<int64_t>(seq.size()), row);
      int32_t best = 0;
      for (int32_t v = 1; v < static_cast<int32_t>(row.size()); ++v)
        if (row[static_cast<size_t>(v)] > row[static_cast<size_t>(best)]) best = v;
      seq.push_back(best);
    }
    out["greedy"] = greedy;
    // `zt generate`'s path: the prompt prefilled into a cache (Gated DeltaNet: the chunked
    // rule), then one token at a time (the recurrent rule).
    zt::model::KvCache<float> gen_cache(cfg, T + n_new);
    out["kv_greedy"] = zt::train::generate(zt::train::kv_decoder(model, gen_cache), tokens, opt).tokens;
    out["argmax"] = std::vector<int32_t>(seq.begin() + T, seq.end());
    std::printf("%s\n", out.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zt_logits: %s\n", e.what());
    return 1;
  }
}
