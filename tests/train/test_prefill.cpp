// Chunked prefill (issue 36, class 6): kv_decoder appends a long prompt to the key/value
// cache in chunks of kPrefillChunk positions. Its logits equal the full forward's
// (Model::logits_last over the whole prompt, the independent reference) and one unchunked
// decode's within fp32 rounding, generation continues alike, and the model's scratch is
// that of a chunk, not of the prompt ([heads, T, T] scores).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "model/model_fixtures.hpp"
#include "zt/model/model.hpp"
#include "zt/train/generate.hpp"

namespace zt::train {
namespace {

using testing::max_rel_diff;

TEST(Prefill, ChunkedEqualsUnchunkedAndTheFullForward) {
  const model::Config cfg{.name = "prefill-test", .vocab = 64, .hidden = 32, .layers = 2,
                          .heads = 4, .kv_heads = 2, .intermediate = 48, .context = 2048};
  const int64_t T = 4 * static_cast<int64_t>(kPrefillChunk) + 89;  // five chunks, the last partial
  const model::ParamLayout layout(cfg);
  model::Parameters<float> p(layout);
  p.init(model::InitOptions{});
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(cfg.vocab - 1));
  std::vector<int32_t> prompt(static_cast<size_t>(T));
  for (int32_t& t : prompt) t = id(rng);
  const auto V = static_cast<size_t>(cfg.vocab);

  model::Model<float> full_model(cfg, 1, T);  // reference: the full forward over T
  p.bind(full_model);
  std::vector<float> full(V);
  full_model.logits_last(prompt, T, full);
  const size_t full_scratch = full_model.workspace_bytes();

  model::Model<float> whole(cfg, 1, 0);  // one decode of the whole prompt
  p.bind(whole);
  model::KvCache<float> whole_cache(cfg, T + 1);
  std::vector<float> unchunked(V);
  whole.decode(prompt, whole_cache, unchunked);
  const size_t unchunked_scratch = whole.workspace_bytes();

  model::Model<float> m(cfg, 1, 0);  // kv_decoder: in chunks
  p.bind(m);
  model::KvCache<float> cache(cfg, T + 1);
  const Decoder d = kv_decoder(m, cache);
  std::vector<float> chunked(V);
  d.append(prompt, chunked);
  EXPECT_EQ(cache.length, T);
  std::printf("prefill of %lld positions: chunked vs full forward %.3g, vs unchunked decode %.3g\n",
              static_cast<long long>(T), max_rel_diff(chunked, full), max_rel_diff(chunked, unchunked));
  EXPECT_LE(max_rel_diff(chunked, full), 1e-6);
  EXPECT_LE(max_rel_diff(chunked, unchunked), 1e-6);
  // The next position after the chunked prefill equals the full forward over T + 1.
  prompt.push_back(id(rng));
  d.append(std::span<const int32_t>(&prompt.back(), 1), chunked);
  full_model.logits_last(prompt, T + 1, full);
  EXPECT_LE(max_rel_diff(chunked, full), 1e-6);
  // Scratch of a chunk: the unchunked decode holds [heads, T, T] scores (T = 1113: 19.8 MB);
  // the chunked one [heads, 256, 256] (1 MB) and buffers of 256 or T positions.
  const size_t scores_TT = sizeof(float) * static_cast<size_t>(cfg.heads * T * T);
  EXPECT_GE(unchunked_scratch, scores_TT);
  std::printf("model scratch: chunked %zu bytes, unchunked decode %zu, full forward %zu\n",
              m.workspace_bytes(), unchunked_scratch, full_scratch);
  EXPECT_LT(m.workspace_bytes(), scores_TT / 8) << "unchunked " << unchunked_scratch
                                                << ", full forward " << full_scratch;
}

}  // namespace
}  // namespace zt::train
