// Text generation: sampling rules and the decoding loop (see generate.hpp).
#include "zt/train/generate.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <utility>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::train {

double sample_uniform(uint64_t seed, uint64_t k) {
  // splitmix64 over (seed, k): 53 random bits -> [0, 1).
  uint64_t x = seed ^ (0x9e3779b97f4a7c15ull * (k + 1));
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) * 0x1.0p-53;
}

int32_t sample_token(std::span<const float> logits, const SampleOptions& o, double u) {
  ZT_CHECK(!logits.empty() && o.temperature >= 0.0 && o.top_p > 0.0 && o.top_k >= 0,
           "sample_token needs logits, temperature >= 0, top_p > 0 and top_k >= 0",
           "check the sampling options");
  if (o.temperature == 0.0)  // greedy: the first largest logit
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  const size_t V = logits.size();
  double max_logit = logits[0];
  for (const float l : logits) max_logit = std::max(max_logit, static_cast<double>(l));
  std::vector<double> p(V);  // [V] unnormalised probabilities; 0: filtered out
  for (size_t i = 0; i < V; ++i)
    p[i] = std::exp((static_cast<double>(logits[i]) - max_logit) / o.temperature);
  if (o.top_k > 0 && static_cast<size_t>(o.top_k) < V) {  // keep p >= the k-th largest
    std::vector<double> sorted = p;
    std::nth_element(sorted.begin(), sorted.begin() + (o.top_k - 1), sorted.end(),
                     std::greater<>());
    const double kth = sorted[static_cast<size_t>(o.top_k - 1)];
    for (double& x : p)
      if (x < kth) x = 0.0;
  }
  if (o.top_p < 1.0) {  // keep a token while the mass strictly above it is < top_p
    std::vector<size_t> order(V);
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
    const double total = std::accumulate(p.begin(), p.end(), 0.0);
    double above = 0.0;
    for (const size_t i : order) {
      const double pi = p[i];
      if (above >= o.top_p * total) p[i] = 0.0;
      above += pi;
    }
  }
  const double target = u * std::accumulate(p.begin(), p.end(), 0.0);
  double cum = 0.0;
  int32_t last = 0;
  for (size_t i = 0; i < V; ++i) {
    if (p[i] == 0.0) continue;
    cum += p[i];
    last = static_cast<int32_t>(i);
    if (cum > target) return last;
  }
  return last;  // u * sum rounding at the very top
}

int32_t sample_token(std::span<const float> logits, double temperature, double u) {
  ZT_CHECK(temperature > 0.0, "sample_token needs temperature > 0", "check sample.temperature");
  SampleOptions o;
  o.temperature = temperature;
  return sample_token(logits, o, u);
}

Decoder kv_decoder(model::Model<float>& model, model::KvCache<float>& cache) {
  Decoder d;
  d.vocab = model.config().vocab;
  d.capacity = cache.capacity;
  // A long prompt is prefilled in chunks of kPrefillChunk positions: each chunk's queries
  // attend the cache (the chunks before it and itself, causally), so the logits equal one
  // decode of the whole prompt within fp32 rounding, and the model's scratch is that of a
  // chunk ([heads, chunk, chunk] scores, [chunk, vocab] logits), not of the prompt.
  d.append = [&model, &cache](std::span<const int32_t> tokens, std::span<float> logits) {
    for (size_t at = 0; at < tokens.size(); at += kPrefillChunk)
      model.decode(tokens.subspan(at, std::min(kPrefillChunk, tokens.size() - at)), cache, logits);
  };
  d.reset = [&cache] { cache.length = 0; };
  return d;
}

Decoder recompute_decoder(LogitsFn logits, int64_t vocab, int64_t context) {
  auto held = std::make_shared<std::vector<int32_t>>();  // the window the model sees
  Decoder d;
  d.vocab = vocab;
  d.capacity = context;
  d.append = [held, logits = std::move(logits)](std::span<const int32_t> tokens,
                                                std::span<float> out) {
    held->insert(held->end(), tokens.begin(), tokens.end());
    logits(*held, out);
  };
  d.reset = [held] { held->clear(); };
  return d;
}

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::kLength: return "length";
    case StopReason::kStopId: return "eos";
    case StopReason::kStop: return "stop";
  }
  return "?";
}

Generation generate(const Decoder& d, std::span<const int32_t> prompt, const SampleOptions& o) {
  if (prompt.empty()) throw InputError("generation needs a non-empty prompt", "give a prompt");
  const int64_t context = o.window > 0 ? std::min(o.window, d.capacity) : d.capacity;
  std::vector<int32_t> all(prompt.begin(), prompt.end());  // prompt + generated
  std::vector<float> logits(static_cast<size_t>(d.vocab));  // [V]
  Generation g;
  if (o.tokens <= 0) return g;
  // Prefill with the prompt's last `context` tokens.
  int64_t held = std::min<int64_t>(static_cast<int64_t>(all.size()), context);
  d.reset();
  d.append(std::span<const int32_t>(all).last(static_cast<size_t>(held)), logits);
  for (int64_t k = 0;; ++k) {
    const int32_t next = sample_token(logits, o, sample_uniform(o.seed, static_cast<uint64_t>(k)));
    all.push_back(next);
    g.tokens.push_back(next);
    if (std::find(o.stop_ids.begin(), o.stop_ids.end(), next) != o.stop_ids.end()) {
      g.reason = StopReason::kStopId;
      break;
    }
    if (o.stop && o.stop(g.tokens)) {
      g.reason = StopReason::kStop;
      break;
    }
    if (k + 1 >= o.tokens) break;
    if (held < context) {
      d.append(std::span<const int32_t>(&all.back(), 1), logits);
      ++held;
    } else {  // the window is full: restart it from its last half (new token included)
      held = std::max<int64_t>(1, context / 2);
      d.reset();
      d.append(std::span<const int32_t>(all).last(static_cast<size_t>(held)), logits);
    }
  }
  return g;
}

}  // namespace zt::train
