#pragma once
// Atomic publication of checkpoints in ckpt.dir (docs/checkpoint-format.md):
//   step-N.h5.tmp -> written -> fsync -> rename to step-N.h5 -> fsync the folder ->
//   latest.tmp ("step-N.h5") -> fsync -> rename to latest -> fsync the folder -> prune.
// Rank 0 does the file-system work; with a communicator every rank learns the outcome
// and throws the same zt::Error (naming the path and errno). comm may be MPI_COMM_NULL
// (a single process).
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "zt/core/files.hpp"

namespace zt::ckpt {

std::string step_file_name(int64_t step);  // "step-N.h5"

// Before the first step: can ckpt.dir be written? Rank 0 checks, every rank throws the
// same zt::InputError (exit 2) naming ckpt.dir and the path when it is a system folder
// (refuse_system_folder: /, /usr, /etc, ...), when it exists and is not a
// folder, when the nearest existing folder above it is a file (or the path runs through
// one), or when that folder is read-only (a read-only mount, or no write permission).
// Creates nothing: a run that never saves leaves no folder behind.
void preflight_dir(MPI_Comm comm, const std::string& dir);

// A run that starts fresh (nothing resumed: ckpt.resume = none, or auto without
// `latest`) must not overwrite another run's checkpoints: unless `overwrite`
// (ckpt.overwrite), throws zt::InputError (exit 2, on every rank alike) when dir holds a
// `latest` or any step-N.h5, naming the folder, what is there, and the choices (resume,
// another ckpt.dir, ckpt.overwrite = true).
void refuse_fresh_run_over(MPI_Comm comm, const std::string& dir, const std::string& resume,
                           bool overwrite);

// The run's exclusive lock on ckpt.dir (FolderLock, issue 36 class 1), taken by rank 0
// (which creates the folder) for the whole run; every rank learns the verdict: another
// live run there is zt::InputError (exit 2) on every rank naming its host, pid and start
// time; a lock left by a run that died is taken over with a warning naming it. Returns
// the lock on rank 0 (hold it until the end), null on the others.
std::unique_ptr<FolderLock> lock_dir(MPI_Comm comm, const std::string& dir);

// A checkpoint being written: DIR/step-N.h5.tmp.<host>.<pid> (rank 0's host and pid: unique
// to the run), and on rank 0 the descriptor it was created with (fsynced through it).
struct Staging {
  std::string path;
  int fd = -1;
};

// Creates ckpt.dir if needed and a fresh, empty staging file (O_EXCL|O_NOFOLLOW; a stale
// file or symlink of that name is unlinked, never followed). bytes_needed > 0: refuses
// (zt::Error, ENOSPC) when the folder's file system has less free space than that, before
// anything is written.
Staging begin_publish(MPI_Comm comm, const std::string& dir, int64_t step,
                      uint64_t bytes_needed = 0);

// After the staging file is written and closed by the writers: fsync it through rank 0's
// descriptor, rename to step-N.h5, fsync the folder, point `latest` at it (the same way),
// then keep only the `keep` newest step-*.h5 (never the one `latest` names; keep <= 0
// keeps all) and remove (naming them) the staging files of saves that did not finish.
// Returns the final path.
std::string finish_publish(MPI_Comm comm, const std::string& dir, int64_t step, int keep,
                           Staging& staging);

// After a failed write: removes the staging file (best effort); `latest` and the older
// files are untouched.
void abandon_publish(MPI_Comm comm, Staging& staging);

// The checkpoint `latest` in dir names: its path, or "" when dir has no `latest`. Throws
// zt::InputError when `latest` names something that is not a complete checkpoint file.
// Reads the file system on the calling rank only.
std::string read_latest(const std::string& dir);

// The one meaning of a checkpoint argument (ckpt.resume = PATH, ckpt.init_from, zt
// generate --weights and --base, h5-to-hf's CKPT and --base): a file is itself (its
// header says what it holds); a folder with `latest` (a ckpt.dir) is the checkpoint
// `latest` names; a Hugging Face folder (config.json) is itself where `hf_folder` (the
// argument takes one: --weights), else refused with the hf-to-h5 command that converts
// it. zt::InputError (exit 2) naming `what` and the path otherwise (not found, a folder
// with neither), the hint listing what the argument takes. The calling rank reads.
std::string resolve_checkpoint(const std::string& arg, std::string_view what, bool hf_folder = false);

}  // namespace zt::ckpt
