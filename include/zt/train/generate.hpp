#pragma once
// Text generation from a trained model: temperature sampling with a fixed seed.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "zt/model/model.hpp"

namespace zt::train {

struct SampleOptions {
  int64_t tokens = 100;      // new tokens to generate
  double temperature = 1.0;  // logits are divided by it (> 0)
  uint64_t seed = 0;         // token k uses the uniform u_k = hash(seed, k) in [0, 1)
  int64_t window = 0;        // the model sees at most this many last tokens; 0: its context.
                             // Set it to the training seq_len: positions beyond it were
                             // never trained and give garbage.
  // Asked before each token; true ends the sample there (a stop request: SIGTERM during
  // the sample). With the ZeRO engine it must answer alike on every rank.
  std::function<bool()> stop;
};

// The token whose cumulative softmax(logits / temperature) probability first exceeds u
// (inverse-CDF sampling; computed in double). u in [0, 1).
int32_t sample_token(std::span<const float> logits, double temperature, double u);

// The uniform in [0, 1) used for generated token k (a pure function of seed and k).
double sample_uniform(uint64_t seed, uint64_t k);

// Appends options.tokens sampled tokens to `prompt` and returns only the new ones. The
// model sees the last `window` tokens at each step.
std::vector<int32_t> generate(model::Model<float>& model, std::vector<int32_t> prompt,
                              const SampleOptions& options);

// The same with any model behind a function: logits(window, out) writes the logits of
// the window's last position into out ([vocab]); `context` is the model's longest
// sequence. With the ZeRO engine every rank calls this (logits_last is collective).
using LogitsFn = std::function<void(std::span<const int32_t> window, std::span<float> out)>;
std::vector<int32_t> generate(const LogitsFn& logits, int64_t vocab, int64_t context,
                              std::vector<int32_t> prompt, const SampleOptions& options);

}  // namespace zt::train
