#pragma once
// Text generation: one sampling loop over any model that decodes incrementally (a
// Decoder), used by `zt generate` (a KV-cached Model) and by the sample after training
// (the ZeRO engine, which recomputes each step's window: its units may be sharded).
//
// Each token: logits / temperature, then top-k, then top-p (Hugging Face's order and
// rules), then inverse-CDF sampling with the uniform u_k = sample_uniform(seed, k);
// temperature 0 is greedy (the first largest logit, as torch.argmax).
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "zt/model/model.hpp"

namespace zt::train {

struct SampleOptions {
  int64_t tokens = 100;      // new tokens to generate (at most)
  double temperature = 1.0;  // logits are divided by it (> 0); 0: greedy
  uint64_t seed = 0;         // token k uses the uniform u_k = sample_uniform(seed, k)
  int64_t window = 0;        // the model sees at most this many last tokens; 0: its context.
                             // When the window is full, it restarts from its last half.
                             // Set it to the training seq_len: positions beyond it were
                             // never trained and give garbage.
  int64_t top_k = 0;         // keep the k most likely tokens (ties kept); 0: all
  double top_p = 1.0;        // keep the most likely tokens until their mass reaches top_p
  std::vector<int32_t> stop_ids;  // generation ends after one of these (kept, as HF does)
  // Generation ends when this returns true for the tokens generated so far (stop strings,
  // a stop request); it is asked after every token.
  std::function<bool(std::span<const int32_t> generated)> stop;
};

// The next token from logits ([vocab]) under options' temperature, top_k and top_p, with
// the uniform u in [0, 1) (computed in double).
int32_t sample_token(std::span<const float> logits, const SampleOptions& options, double u);
// Temperature only (no top-k / top-p).
int32_t sample_token(std::span<const float> logits, double temperature, double u);

// The uniform in [0, 1) used for generated token k (a pure function of seed and k).
double sample_uniform(uint64_t seed, uint64_t k);

// A model that decodes one sequence incrementally: append(tokens, logits) adds tokens
// after those it holds and writes the logits of the last one ([vocab]); reset() forgets
// them all. It holds at most `capacity` positions.
struct Decoder {
  int64_t vocab = 0;
  int64_t capacity = 0;
  std::function<void(std::span<const int32_t> tokens, std::span<float> logits)> append;
  std::function<void()> reset;
};

// Positions a kv_decoder passes to Model::decode at once (a longer prompt goes in chunks).
inline constexpr size_t kPrefillChunk = 256;

// A Model with a key/value cache of `capacity` positions (<= its context); appends
// longer than kPrefillChunk run in chunks.
Decoder kv_decoder(model::Model<float>& model, model::KvCache<float>& cache);

// Any model behind a function that computes the logits of a window's last position
// (logits(window, out)) from scratch: each append recomputes the whole held window.
// With the ZeRO engine every rank calls this (logits_last is collective).
using LogitsFn = std::function<void(std::span<const int32_t> window, std::span<float> out)>;
Decoder recompute_decoder(LogitsFn logits, int64_t vocab, int64_t context);

enum class StopReason { kLength, kStopId, kStop };
const char* stop_reason_name(StopReason r);  // "length", "eos", "stop"

struct Generation {
  std::vector<int32_t> tokens;  // the new tokens only
  StopReason reason = StopReason::kLength;
};

// Generates after `prompt` (not empty): prefill with its last `window` tokens, then one
// token per step.
Generation generate(const Decoder& decoder, std::span<const int32_t> prompt,
                    const SampleOptions& options);

}  // namespace zt::train
