#pragma once
// Shared by the checkpoint tests: a small training configuration through the real
// schema (tiny's shape cut down, short sequences), the shipped corpus in memory, the
// communicators of a run (support/mpi_fixtures.hpp), and bitwise comparisons.
#include <mpi.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "support/mpi_fixtures.hpp"
#include "zt/ckpt/checkpoint.hpp"
#include "zt/comm/mpi_comm.hpp"
#include "zt/core/config.hpp"
#include "zt/data/corpus.hpp"
#include "zt/data/text.hpp"
#include "zt/runtime/runtime.hpp"
#include "zt/train/config.hpp"
#include "zt/zero/engine.hpp"

namespace zt::ckpt::testing {

using zt::testing::Comms;
using zt::testing::make_comms;
using zt::testing::world_rank;
using zt::testing::world_size;

// `zt train` keys for a small, fast run; `extra` appended (later keys win).
inline train::TrainConfig small_config(int world, std::vector<std::string> extra) {
  std::vector<std::string> sets = {
      "model.hidden=64",   "model.layers=2",      "model.intermediate=160", "model.context=32",
      "train.seq_len=32",  "train.micro_batch=1", "train.global_batch=12",  "train.steps=40",
      "train.warmup=5",    "train.lr=3e-3",       "eval.every=0",           "eval.batches=1",
      "sample.tokens=0",   "train.peak_tflops=1"};
  sets.insert(sets.end(), extra.begin(), extra.end());
  const config::Schema schema = train::train_schema();
  train::TrainConfig t = train::resolve(config::load(schema, "", sets), world);
  t.data_path = "tinyshakespeare (in memory)";
  return t;
}

// The /state a run of `t` saves after `step` steps (the trainer's fields; the engine's
// own, world size, stage, hpZ, are ckpt::save's).
inline TrainState train_state(const train::TrainConfig& t, int64_t step) {
  return train::train_state_of(t, step, step * t.tokens_per_step());
}

inline const data::TokenFile& corpus() {
  static const data::TokenFile data = data::text_files_to_tokens({data::find_shipped_corpus()});
  return data;
}


// `steps` optimizer steps of `engine` (of run `t`) on fixed pseudo-random batches of
// this rank, from the stream `seed` (an LCG: tokens and targets in [0, 256)), lr 1e-3.
inline void train_fixed_batches(zero::Engine& engine, const train::TrainConfig& t, uint64_t seed,
                                int steps) {
  const int64_t B = t.micro_batch, T = t.seq_len;
  std::vector<int32_t> tokens(static_cast<size_t>(B * T)), targets(tokens.size());
  uint64_t s = seed;
  for (int step = 0; step < steps; ++step) {
    for (int64_t m = 0; m < t.accum; ++m) {
      for (size_t i = 0; i < tokens.size(); ++i) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        tokens[i] = static_cast<int32_t>((s >> 33) % 256);
        targets[i] = static_cast<int32_t>((s >> 13) % 256);
      }
      engine.micro_step(tokens, targets, B, T, false, 1.0 / static_cast<double>(t.accum));
    }
    engine.step(1e-3);
  }
}

// A fresh folder (rank 0 removes and creates it; everyone waits).
inline std::string fresh_dir(const std::string& name) {
  const std::string dir = (std::filesystem::current_path() / name).string();
  if (world_rank() == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return dir;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
inline bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace zt::ckpt::testing
