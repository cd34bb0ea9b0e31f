// Temperature sampling from the model (see generate.hpp).
#include "zt/train/generate.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "zt/core/error.hpp"

namespace zt::train {

double sample_uniform(uint64_t seed, uint64_t k) {
  // splitmix64 over (seed, k): 53 random bits -> [0, 1).
  uint64_t x = seed ^ (0x9e3779b97f4a7c15ull * (k + 1));
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) * 0x1.0p-53;
}

int32_t sample_token(std::span<const float> logits, double temperature, double u) {
  ZT_CHECK(!logits.empty() && temperature > 0.0, "sample_token needs logits and temperature > 0",
           "check sample.temperature");
  double max_logit = logits[0];
  for (const float l : logits) max_logit = std::max(max_logit, static_cast<double>(l));
  std::vector<double> p(logits.size());
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    p[i] = std::exp((static_cast<double>(logits[i]) - max_logit) / temperature);
    sum += p[i];
  }
  const double target = u * sum;
  double cum = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    cum += p[i];
    if (cum > target) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(p.size() - 1);  // u * sum rounding at the very top
}

std::vector<int32_t> generate(const LogitsFn& logits_fn, int64_t vocab, int64_t model_context,
                              std::vector<int32_t> prompt, const SampleOptions& options) {
  ZT_CHECK(!prompt.empty(), "generate needs a non-empty prompt", "set sample.prompt");
  const int64_t context = options.window > 0 ? std::min(options.window, model_context)
                                             : model_context;
  std::vector<float> logits(static_cast<size_t>(vocab));  // [V]
  std::vector<int32_t> out;
  for (int64_t k = 0; k < options.tokens; ++k) {
    if (options.stop && options.stop()) break;
    const int64_t T = std::min<int64_t>(static_cast<int64_t>(prompt.size()), context);
    const std::span<const int32_t> window(prompt.data() + prompt.size() - static_cast<size_t>(T),
                                          static_cast<size_t>(T));
    logits_fn(window, logits);
    const int32_t next = sample_token(logits, options.temperature,
                                      sample_uniform(options.seed, static_cast<uint64_t>(k)));
    prompt.push_back(next);
    out.push_back(next);
  }
  return out;
}

std::vector<int32_t> generate(model::Model<float>& model, std::vector<int32_t> prompt,
                              const SampleOptions& options) {
  const LogitsFn fn = [&model](std::span<const int32_t> window, std::span<float> out) {
    model.logits_last(window, static_cast<int64_t>(window.size()), out);
  };
  return generate(fn, model.config().vocab, model.config().context, std::move(prompt), options);
}

}  // namespace zt::train
