#pragma once
// Work that may fail on some ranks only (a rank-0 conversion, a file write, a read of the
// data) followed by one agreement, so that no rank is left waiting in the next collective
// for a rank whose work threw. One helper for the trainer, the checkpoint writer and the
// data preparation (docs/reliability.md).
#include <mpi.h>

#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace zt::runtime {

// What one MPI_Allreduce told every rank about the work: `code` is the largest
// zt::ExitCode of the ranks whose work threw (0: it succeeded everywhere), `error` this
// rank's own exception, if it threw.
struct Agreement {
  int code = 0;
  std::exception_ptr error;

  bool failed() const { return code != 0; }
  // Throws when the work failed anywhere: this rank's own exception if it threw, else a
  // zt::Error(`elsewhere`, `hint`) with the agreed exit code. Returns when it did not fail.
  void rethrow(const std::string& elsewhere, const std::string& hint = {}) const;
  // This rank's own error message (zt::Error::message(), else what()); "" if it did not throw.
  std::string own_message() const;
};

// Runs `work` (on every rank of `comm`, or on its rank 0 alone when `rank0_only`),
// catching whatever it throws (zt::Error keeps its exit code; anything else counts as
// ExitCode::kFailed), then agrees over `comm`. With comm == MPI_COMM_NULL (serial use)
// no MPI call is made.
Agreement agree(MPI_Comm comm, const std::function<void()>& work, bool rank0_only = false);

// agree(), then rethrow(): the ranks that did not fail throw an Error pointing to the one
// that did ("rank 0 failed ..." or "another rank failed ...").
void collectively(MPI_Comm comm, const std::function<void()>& work, bool rank0_only = false);

// What every rank must hold alike before its first collective (issue 36, class 2: ranks
// launched as MPMD, `mpirun -np 1 zt train A : -np 1 zt train B`): (name, value) in order.
using Settings = std::vector<std::pair<std::string, std::string>>;

// Compares `settings` over `comm` (one MPI_Allgather of a hash; the texts only when the
// hashes differ) and returns when every rank holds the same. Else every rank throws the
// same zt::InputError (exit 2): "the ranks disagree on <what> 'NAME': rank 0 has A; ranks
// 1-3 have B", naming the first name (in rank 0's order) whose value differs. With comm ==
// MPI_COMM_NULL or one rank, nothing to compare.
void require_same(MPI_Comm comm, const Settings& settings, const std::string& what,
                  const std::string& hint);

}  // namespace zt::runtime
