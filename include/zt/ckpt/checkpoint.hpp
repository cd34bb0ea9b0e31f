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
#include "zt/ckpt/io.hpp"
#include "zt/zero/engine.hpp"

namespace zt::ckpt {

// ckpt.async in place: step() reaching units the writer had not yet written.
struct UpdateGuardStats {
  double copy_seconds = 0;    // copying them on reach (host copy at memory bandwidth)
  uint64_t copied_bytes = 0;  // bytes copied on reach
  int copy_failures = 0;      // copies not allocated (std::bad_alloc): waited instead
  double waited = 0;          // waiting: for the writer (copy failures) or a read in flight
};

struct SaveResult {
  std::string path;     // the published step-N.h5
  double seconds = 0;   // write + publish
  uint64_t bytes = 0;   // tensor bytes written (all ranks)
  // ckpt.async without a snapshot: what step()'s guard did, on this rank, for units the
  // save had not yet written (part of training's stall; zeros for the other saves).
  UpdateGuardStats update_guard;
};

// Writes the engine's parameters and AdamW moments with `state` into
// DIR/step-<state.step>.h5 (through .tmp, fsync, rename; then `latest`; keeps the `keep`
// newest). On failure removes the .tmp and throws zt::Error naming the path (the
// previous checkpoint and `latest` stay).
SaveResult save(zero::Engine& engine, MPI_Comm comm, const std::string& dir, const TrainState& state,
                int keep, uint64_t rng_seed);

// ckpt.async: a background thread writes and publishes this rank's shards while training
// goes on, over a private duplicate of `comm`. Needs MPI_THREAD_MULTIPLE (runtime::
// Options::thread_multiple); only the writer thread calls HDF5 meanwhile. One save at a
// time: start() first waits for the previous one.
// Where the engine's state lives on the host in place (Engine::owned_in_place: the CPU
// path without offload) there is no snapshot: the writer reads the engine's own shards,
// which forward and backward never change (units are written in the optimizer's order).
// The engine's update guard runs before AdamW changes a unit: one the save has not yet
// written and checksummed is copied there (copy on reach, at memory bandwidth) and the
// writer reads the copy, freed at the unit's release; where the copy cannot be allocated
// step() waits for the release instead. SaveResult::update_guard has the figures. Else
// (device state, offload, bf16-true) start() copies the shards into a host snapshot (the
// only time training waits). The engine must outlive the save (wait() first).
class AsyncSaver {
 public:
  explicit AsyncSaver(MPI_Comm comm);  // collective (duplicates comm); checks the thread level
  ~AsyncSaver();                       // waits for a write in flight (errors are logged)
  AsyncSaver(const AsyncSaver&) = delete;
  AsyncSaver& operator=(const AsyncSaver&) = delete;

  // Allocates the snapshot for `engine`'s shards and touches its pages on a helper thread
  // (beside training), so the first save's stall is the copy alone; nothing for state
  // saved in place. Optional.
  void prepare(zero::Engine& engine);
  // Returns the stall: seconds spent waiting for the previous save plus copying (in
  // place: plus setting up; step()'s copies and waits come later, in update_guard).
  double start(zero::Engine& engine, const std::string& dir, const TrainState& state, int keep,
               uint64_t rng_seed);
  // Waits for the write in flight; its result (rethrows its error). nullopt: none.
  std::optional<SaveResult> wait();
  bool busy() const;
  // Tests: the writer sleeps this long before it writes, so the optimizer reaches units
  // not yet written (the guard's wait is exercised).
  void delay_writes_for_tests(double seconds);
  // Tests: every copy on reach fails as if not allocated (the guard waits for the writer).
  void fail_reach_copies_for_tests(bool fail);
  // Tests: bytes of copies on reach not yet freed (0 once a save's units are released).
  uint64_t reach_copy_bytes_held_for_tests() const;

 private:
  void start_in_place(zero::Engine& engine, const std::string& dir, const TrainState& state, int keep,
                      uint64_t rng_seed);
  void launch(WriteContents c, const std::string& dir, int keep);

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

// A multimodal import's carried part (group /hf_carried) of the file at `path`, read by
// rank 0 (the rank that writes it into each checkpoint): nullptr on the other ranks and for
// a file without one. A damaged group fails on every rank (zt::InputError on rank 0).
std::shared_ptr<const HfCarried> read_carried(MPI_Comm comm, const std::string& path);

// The file ckpt.resume names: "none" -> ""; "auto" -> the one DIR/latest names, or ""
// when there is none; anything else as resolve_checkpoint (publish.hpp) reads it (a file,
// or a ckpt.dir's `latest`). Same answer on every rank (rank 0 reads the folder).
std::string resolve_resume(MPI_Comm comm, const std::string& resume, const std::string& dir);
// The file ckpt.init_from names ("" for none), as resolve_checkpoint reads it; every rank
// gets rank 0's answer.
std::string resolve_init_from(MPI_Comm comm, const std::string& init_from);

}  // namespace zt::ckpt
