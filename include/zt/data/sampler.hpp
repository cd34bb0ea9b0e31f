#pragma once
// Which tokens each rank trains on: a stateless, resumable sampler.
//
// Train/eval split. The held-out evaluation set is the TAIL of the token file: the last
// floor(eval_fraction * num_tokens) tokens (data.eval_fraction, default 0.1). Training
// only ever reads the head.
//
// Windows. A range of n tokens is cut into W non-overlapping windows of seq_len tokens
// (window k starts at shift + k * seq_len). A training sequence is one window plus the
// next token: inputs = tokens[s, s + seq_len), targets = tokens[s + 1, s + seq_len].
//
// The global batch of optimizer step `step` holds global_batch sequences, numbered
// j = 0 .. global_batch-1. An epoch is E = floor(W / global_batch) steps; step s is in
// epoch e = s / E at position p = (s mod E) * global_batch + j. Its window is perm_e(p),
// where perm_e is a pseudo-random permutation of [0, W) keyed by (seed, e) (a 4-round
// Feistel network with cycle walking), and all windows of epoch e share one shift, a
// hash of (seed, e) in [0, slack]. So a step never straddles two epochs, the sequences
// of one step are distinct non-overlapping windows, no window repeats within an epoch,
// and start(step, j) is a pure function of (seed, step, j): any step can be recomputed
// without replaying the ones before it (exact resume), and no state is kept.
//
// Ranks. Data-parallel rank r of `world`, micro-step m (of accum per step), element i of
// its micro-batch (of micro_batch) takes j = (m * world + r) * micro_batch + i. The
// ranks' slices of a step are disjoint, and their union is the same global batch for any
// (world, micro_batch, accum) with the same global_batch: 1 rank with micro_batch 2b sees
// exactly the sequences that 2 ranks with micro_batch b see.
//
// Rows (instruction data, zt convert sft-to-tokens: the file is rows of row_len =
// seq_len + 1 tokens, examples never crossing a row). The windows are the whole rows
// (window k starts at k * row_len, no shift: a sequence is one row's seq_len inputs and
// seq_len targets), the eval tail is whole rows, and everything else is as above.
#include <cstddef>
#include <cstdint>

#include "zt/data/token_file.hpp"

namespace zt::data {

struct Range {
  size_t begin = 0;  // first token
  size_t end = 0;    // one past the last token
  size_t size() const { return end - begin; }
};

struct Split {
  Range train;
  Range eval;
};

// Head for training, tail of floor(eval_fraction * num_tokens) tokens for evaluation.
// eval_fraction in [0, 1) (zt::Error otherwise); 0 gives an empty eval range.
Split split_tail(size_t num_tokens, double eval_fraction);

// The same over rows of row_len tokens: the tail is floor(eval_fraction * rows) rows,
// rounded down to whole groups of `group` rows (2: the pairs of a pair file, the examples
// of a KTO file), so that no group is split between the two ranges.
Split split_tail_rows(size_t num_tokens, size_t row_len, double eval_fraction, size_t group = 1);
// The split of a token file: split_tail for text, split_tail_rows for rows (groups of 2
// for pair and KTO files). The one rule the trainer and the run's banner use.
Split split_of(const TokenFile& file, double eval_fraction);

// A pseudo-random permutation of [0, n), keyed: the bijection the sampler uses.
// Pure function; O(1) expected per call.
uint64_t permute(uint64_t index, uint64_t n, uint64_t key);

// Index j within the global batch of element i of rank `rank`'s micro-step `micro`.
inline size_t batch_index(int micro, int rank, int world, size_t micro_batch, size_t i) {
  return (static_cast<size_t>(micro) * static_cast<size_t>(world) + static_cast<size_t>(rank)) *
             micro_batch +
         i;
}

class Sampler {
 public:
  // range must hold at least global_batch windows: global_batch * seq_len + 1 tokens
  // (zt::InputError otherwise). When it holds more, one window is given up so that each
  // epoch's shift can range over a whole seq_len.
  Sampler(Range range, size_t seq_len, size_t global_batch, uint64_t seed);
  // Rows: windows are the rows of seq_len + 1 tokens of a row-aligned range (rows >=
  // global_batch, zt::InputError otherwise).
  static Sampler rows(Range range, size_t seq_len, size_t global_batch, uint64_t seed);

  size_t windows() const { return windows_; }  // W
  uint64_t steps_per_epoch() const { return windows_ / global_batch_; }  // E
  size_t seq_len() const { return seq_len_; }
  size_t global_batch() const { return global_batch_; }

  // First token (absolute index in the file) of sequence j of step `step`.
  // The sequence reads tokens [start, start + seq_len] (seq_len + 1 of them).
  size_t start(uint64_t step, size_t j) const;

  // The same, addressed by (micro-step, rank, element): start(step, batch_index(...)).
  size_t start(uint64_t step, int micro, int rank, int world, size_t micro_batch,
               size_t i) const {
    return start(step, batch_index(micro, rank, world, micro_batch, i));
  }

 private:
  Range range_;
  size_t seq_len_;
  size_t global_batch_;
  uint64_t seed_;
  size_t windows_;  // W
  size_t slack_;    // the largest shift
  size_t stride_;   // seq_len, or seq_len + 1 for rows
};

// Fixed evaluation windows over the eval range: sequence e of the eval set starts at
// range.begin + (e mod W) * seq_len. The eval set of one evaluation is sequences
// [0, eval_batches * global_batch), split across ranks like a training step.
class EvalWindows {
 public:
  // stride: seq_len, or seq_len + 1 for rows (a row-aligned range). zt::InputError when
  // the range holds no sequence.
  EvalWindows(Range range, size_t seq_len, size_t stride = 0);
  size_t windows() const { return windows_; }
  size_t start(size_t e) const { return range_.begin + (e % windows_) * stride_; }

 private:
  Range range_;
  size_t seq_len_;
  size_t stride_;
  size_t windows_;
};

}  // namespace zt::data
