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
