#pragma once
// Saving and loading a ZeRO engine's training state (docs/checkpoint-format.md). Every
// function is collective over `comm` (the engine's ranks, as an MPI communicator for
// parallel HDF5): each rank writes and reads only its own shards (Engine::owned), so
// no rank gathers the model, and any world size, stage or hpZ setting loads any file.
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zt/ckpt/format.hpp"
#include "zt/zero/engine.hpp"

namespace zt::ckpt {

struct SaveResult {
  std::string path;     // the published step-N.h5
  double seconds = 0;   // write + publish
  uint64_t bytes = 0;   // tensor bytes written (all ranks)
};

// Writes the engine's parameters and AdamW moments with `state` into
// DIR/step-<state.step>.h5 (through .tmp, fsync, rename; then `latest`; keeps the `keep`
// newest). On failure removes the .tmp and throws zt::Error naming the path (the
// previous checkpoint and `latest` stay).
SaveResult save(zero::Engine& engine, MPI_Comm comm, const std::string& dir, const TrainState& state,
                int keep, uint64_t rng_seed);

// ckpt.async: start() copies this rank's shards into a host snapshot (the only time
// training waits) and a background thread writes and publishes them while training goes
// on, over a private duplicate of `comm`. Needs MPI_THREAD_MULTIPLE (runtime::Options::
// thread_multiple); only the writer thread calls HDF5 meanwhile. One save at a time:
// start() first waits for the previous one.
class AsyncSaver {
 public:
  explicit AsyncSaver(MPI_Comm comm);  // collective (duplicates comm); checks the thread level
  ~AsyncSaver();                       // waits for a write in flight (errors are logged)
  AsyncSaver(const AsyncSaver&) = delete;
  AsyncSaver& operator=(const AsyncSaver&) = delete;

  // Allocates the snapshot for `engine`'s shards and touches its pages on a helper thread
  // (beside training), so the first save's stall is the copy alone. Optional.
  void prepare(zero::Engine& engine);
  // Returns the stall: seconds spent waiting for the previous save plus copying.
  double start(zero::Engine& engine, const std::string& dir, const TrainState& state, int keep,
               uint64_t rng_seed);
  // Waits for the write in flight; its result (rethrows its error). nullopt: none.
  std::optional<SaveResult> wait();
  bool busy() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Resumes: parameters, moments and the step count into the engine (then after_load);
// returns /state. Refuses weights-only files, other model shapes, damaged files
// (zt::InputError naming file and dataset). Warnings (context, rope_theta...) go to `warnings`.
TrainState load(zero::Engine& engine, MPI_Comm comm, const std::string& path,
                std::vector<std::string>* warnings = nullptr);

// Parameters only (ckpt.init_from): the optimizer stays fresh, the step count 0.
void load_weights(zero::Engine& engine, MPI_Comm comm, const std::string& path,
                  std::vector<std::string>* warnings = nullptr);

// The file ckpt.resume names: "none" -> ""; "auto" -> the one DIR/latest names, or ""
// when there is none; anything else is a path. Same answer on every rank (rank 0 reads
// the folder).
std::string resolve_resume(MPI_Comm comm, const std::string& resume, const std::string& dir);

}  // namespace zt::ckpt
