// Work, then one agreement over the ranks (see agree.hpp).
#include "zt/runtime/agree.hpp"

#include "zt/core/error.hpp"
#include "zt/runtime/mpi_check.hpp"

namespace zt::runtime {

void Agreement::rethrow(const std::string& elsewhere, const std::string& hint) const {
  if (error) std::rethrow_exception(error);
  if (code != 0) throw Error(elsewhere, hint, static_cast<ExitCode>(code));
}

std::string Agreement::own_message() const {
  if (!error) return {};
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return e.message();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

Agreement agree(MPI_Comm comm, const std::function<void()>& work, bool rank0_only) {
  int rank = 0;
  if (comm != MPI_COMM_NULL) ZT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  Agreement a;
  if (!rank0_only || rank == 0) {
    try {
      work();
    } catch (const Error& e) {
      a.code = static_cast<int>(e.exit_code());
      a.error = std::current_exception();
    } catch (...) {  // std::filesystem_error, bad_alloc, ...: still tell the others
      a.code = static_cast<int>(ExitCode::kFailed);
      a.error = std::current_exception();
    }
  }
  if (comm != MPI_COMM_NULL)
    ZT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &a.code, 1, MPI_INT, MPI_MAX, comm));
  return a;
}

void collectively(MPI_Comm comm, const std::function<void()>& work, bool rank0_only) {
  agree(comm, work, rank0_only)
      .rethrow(rank0_only ? "rank 0 failed (its message above says why)"
                          : "another rank failed (its message above says why)");
}

}  // namespace zt::runtime
