// The stateless, resumable sampler (see sampler.hpp for the definition).
#include "zt/data/sampler.hpp"

#include "zt/core/error.hpp"
#include "zt/core/hash.hpp"
#include "zt/core/log.hpp"

namespace zt::data {
namespace {


// Per-epoch key: depends on the seed and the epoch only.
uint64_t epoch_key(uint64_t seed, uint64_t epoch) { return mix64(seed ^ mix64(epoch ^ 0x5eedull)); }

}  // namespace

Split split_tail(size_t num_tokens, double eval_fraction) {
  ZT_CHECK(eval_fraction >= 0.0 && eval_fraction < 1.0,
           strf("eval_fraction %g outside [0, 1)", eval_fraction),
           "data.eval_fraction is the share of tokens held out at the end of the file");
  const size_t eval = static_cast<size_t>(eval_fraction * static_cast<double>(num_tokens));
  Split s;
  s.train = {0, num_tokens - eval};
  s.eval = {num_tokens - eval, num_tokens};
  return s;
}

Split split_tail_rows(size_t num_tokens, size_t row_len, double eval_fraction, size_t group) {
  ZT_CHECK(eval_fraction >= 0.0 && eval_fraction < 1.0 && row_len > 0 && group > 0 && num_tokens % row_len == 0,
           strf("eval_fraction %g, %zu tokens in rows of %zu", eval_fraction, num_tokens, row_len),
           "data.eval_fraction is the share of rows held out at the end of the file");
  const size_t rows = num_tokens / row_len;
  const size_t eval = static_cast<size_t>(eval_fraction * static_cast<double>(rows)) / group * group * row_len;
  Split s;
  s.train = {0, num_tokens - eval};
  s.eval = {num_tokens - eval, num_tokens};
  return s;
}

Split split_of(const TokenFile& f, double eval_fraction) {
  if (f.loss_mask.empty()) return split_tail(f.tokens.size(), eval_fraction);
  return split_tail_rows(f.tokens.size(), f.row_len, eval_fraction, f.pairs || !f.labels.empty() ? 2 : 1);
}

uint64_t permute(uint64_t index, uint64_t n, uint64_t key) {
  ZT_CHECK(index < n && n <= (1ull << 62), strf("permute(%llu, %llu)",
                                                static_cast<unsigned long long>(index),
                                                static_cast<unsigned long long>(n)),
           "index must be below n");
  if (n == 1) return 0;
  // A balanced Feistel network on 2*half bits (2^(2 half) >= n) is a bijection of
  // [0, 2^(2 half)); cycle walking (re-applying it until the value is < n) restricts it
  // to a bijection of [0, n). The domain is < 4n, so the walk is short.
  int bits = 1;
  while ((1ull << bits) < n) ++bits;
  if (bits % 2) ++bits;
  const int half = bits / 2;
  const uint64_t mask = (1ull << half) - 1;
  uint64_t x = index;
  do {
    uint64_t left = x >> half, right = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      const uint64_t f = mix64(key ^ mix64(right ^ (round << 56))) & mask;
      const uint64_t next_right = left ^ f;
      left = right;
      right = next_right;
    }
    x = (left << half) | right;
  } while (x >= n);
  return x;
}

Sampler::Sampler(Range range, size_t seq_len, size_t global_batch, uint64_t seed)
    : range_(range), seq_len_(seq_len), global_batch_(global_batch), seed_(seed), stride_(seq_len) {
  ZT_CHECK(seq_len > 0 && global_batch > 0 && range.end >= range.begin,
           "sampler needs seq_len > 0, global_batch > 0", "check train.seq_len and the batch");
  const size_t len = range.size();
  if (len < global_batch * seq_len + 1)
    throw InputError(strf("the training range holds %zu tokens, fewer than one global batch "
                          "of %zu sequences x %zu tokens (+1) needs",
                          len, global_batch, seq_len),
                     "use a larger dataset, or lower train.global_batch or train.seq_len");
  windows_ = (len - 1) / seq_len;
  slack_ = (len - 1) - windows_ * seq_len;
  if (windows_ > global_batch) {  // give up one window: each epoch's shift spans seq_len
    windows_ -= 1;
    slack_ += seq_len;
  }
}

Sampler Sampler::rows(Range range, size_t seq_len, size_t global_batch, uint64_t seed) {
  const size_t row = seq_len + 1;
  const size_t n = range.size() / row;  // whole rows
  if (n < global_batch)
    throw InputError(strf("the training range holds %zu rows of %zu tokens, fewer than one "
                          "global batch of %zu sequences",
                          n, row, global_batch),
                     "use more instruction data, or lower train.global_batch");
  // The token-window constructor over n * seq_len + 1 tokens gives n windows and the
  // checks; rows then take stride seq_len + 1 and no shift.
  Sampler s({range.begin, range.begin + n * seq_len + 1}, seq_len, global_batch, seed);
  s.range_ = range;
  s.windows_ = n;
  s.slack_ = 0;
  s.stride_ = row;
  return s;
}

size_t Sampler::start(uint64_t step, size_t j) const {
  ZT_CHECK(j < global_batch_, strf("sequence %zu of a global batch of %zu", j, global_batch_),
           "j = (micro * world + rank) * micro_batch + i must stay below global_batch");
  const uint64_t per_epoch = windows_ / global_batch_;  // E >= 1
  const uint64_t epoch = step / per_epoch;
  const uint64_t position = (step % per_epoch) * global_batch_ + j;  // < E * global_batch <= W
  const uint64_t key = epoch_key(seed_, epoch);
  const uint64_t window = permute(position, windows_, key);
  const uint64_t shift = mix64(key ^ 0x5b1f7ull) % (slack_ + 1);
  return range_.begin + static_cast<size_t>(shift + window * stride_);
}

EvalWindows::EvalWindows(Range range, size_t seq_len, size_t stride)
    : range_(range), seq_len_(seq_len), stride_(stride ? stride : seq_len) {
  ZT_CHECK(seq_len > 0 && stride_ >= seq_len, "seq_len must be > 0", "check train.seq_len");
  if (range.size() < seq_len + 1)
    throw InputError(strf("the held-out eval range holds %zu tokens, fewer than one sequence "
                          "of %zu tokens (+1)",
                          range.size(), seq_len),
                     "raise data.eval_fraction, lower train.seq_len, or use a larger dataset");
  windows_ = (range.size() - (stride_ == seq_len ? 1 : 0)) / stride_;
}

}  // namespace zt::data
