#pragma once
// Shared by the checkpoint tests: a small training configuration through the real
// schema (tiny's shape cut down, short sequences), the shipped corpus in memory, the
// communicators of a run (simulated nodes for hpZ), and bitwise comparisons.
#include <mpi.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "zt/comm/mpi_comm.hpp"
#include "zt/core/config.hpp"
#include "zt/data/corpus.hpp"
#include "zt/data/text.hpp"
#include "zt/runtime/runtime.hpp"
#include "zt/train/config.hpp"

namespace zt::ckpt::testing {

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

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

inline const data::TokenFile& corpus() {
  static const data::TokenFile data = data::text_files_to_tokens({data::find_shipped_corpus()});
  return data;
}

// World (a duplicate of MPI_COMM_WORLD) and, with ranks_per_node > 0, simulated nodes.
struct Comms {
  std::unique_ptr<runtime::Runtime> rt;
  std::unique_ptr<comm::Comm> world, node, cross;
  MPI_Comm mpi = MPI_COMM_WORLD;
};
inline Comms make_comms(int ranks_per_node) {
  Comms c;
  if (ranks_per_node > 0) {
    c.rt = std::make_unique<runtime::Runtime>(runtime::Options{ranks_per_node});
    c.world = comm::make_mpi_comm(c.rt->world());
    c.node = comm::make_mpi_comm(c.rt->node());
    c.cross = comm::make_mpi_comm(c.rt->cross());
    c.mpi = c.rt->world();
  } else {
    c.world = comm::make_mpi_comm(MPI_COMM_WORLD);
  }
  return c;
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
