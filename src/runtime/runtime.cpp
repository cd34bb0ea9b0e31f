#include "zt/runtime/runtime.hpp"

#include <array>
#include <cstdlib>
#include <exception>
#include <string>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/runtime/mpi_check.hpp"

namespace zt::runtime {

void mpi_fail(const char* call, int rc, const char* file, int line) {
  std::array<char, MPI_MAX_ERROR_STRING> text{};
  int len = 0;
  if (MPI_Error_string(rc, text.data(), &len) != MPI_SUCCESS) len = 0;
  std::string detail = len > 0 ? std::string(text.data(), static_cast<size_t>(len))
                               : "MPI error code " + std::to_string(rc);
  fail_call(call, detail,
            "check that every rank reached the same collective with the same count and type; "
            "rerun with OMPI_MCA_btl_base_verbose=100 or I_MPI_DEBUG=5 for transport detail",
            file, line);
}

Runtime::Runtime(const Options& options) {
  int initialized = 0;
  ZT_MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized) {
#ifdef OPEN_MPI
    // HDF5's MPI-IO driver reads and writes at explicit offsets (MPI_File_*_at) and never
    // uses a shared file pointer, yet Open MPI 4.1's OMPIO queries every sharedfp component
    // at each MPI_File_open, and the lockedfile component's query aborts the process
    // ("*** buffer overflow detected ***", exit 134) for file paths of ~230 characters or
    // more (issue 36, class 3; a plain MPI_File_open does it too). Without that component
    // OMPIO picks sm (one node) or individual, which take any path. A user's own
    // OMPI_MCA_sharedfp wins.
    ::setenv("OMPI_MCA_sharedfp", "^lockedfile", /*overwrite=*/0);
#endif
    int provided = 0;
    const int wanted = options.thread_multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED;
    ZT_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, wanted, &provided));
    owns_mpi_ = true;
    if (provided < wanted)
      throw Error("MPI provides thread level " + std::to_string(provided) +
                      ", below MPI_THREAD_MULTIPLE, which background checkpoints need",
                  "set ckpt.async = false, or use an MPI built with thread support");
  }
  ZT_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  ZT_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &world_));
  ZT_MPI_CHECK(MPI_Comm_rank(world_, &topo_.world_rank));
  ZT_MPI_CHECK(MPI_Comm_size(world_, &topo_.world_size));

  std::array<char, MPI_MAX_PROCESSOR_NAME> name{};
  int name_len = 0;
  ZT_MPI_CHECK(MPI_Get_processor_name(name.data(), &name_len));
  topo_.host.assign(name.data(), static_cast<size_t>(name_len));
  set_process_identity(topo_.world_rank, topo_.host);
  try {
    require_same(world_, options.same_on_every_rank, options.same_what, options.same_hint);
  } catch (...) {
    ZT_MPI_CHECK(MPI_Comm_free(&world_));
    throw;
  }

  // Physical node: ranks sharing memory.
  MPI_Comm shared = MPI_COMM_NULL;
  ZT_MPI_CHECK(MPI_Comm_split_type(world_, MPI_COMM_TYPE_SHARED, topo_.world_rank,
                                   MPI_INFO_NULL, &shared));
  int shared_rank = 0, shared_size = 1;
  ZT_MPI_CHECK(MPI_Comm_rank(shared, &shared_rank));
  ZT_MPI_CHECK(MPI_Comm_size(shared, &shared_size));

  // Index of the physical node: its leader (lowest world rank, shared rank 0) counts
  // the leaders before it and tells the rest of the node.
  int is_leader = shared_rank == 0 ? 1 : 0;
  int leaders_before = 0;  // physical nodes whose leader has a lower world rank
  ZT_MPI_CHECK(MPI_Exscan(&is_leader, &leaders_before, 1, MPI_INT, MPI_SUM, world_));
  if (topo_.world_rank == 0) leaders_before = 0;
  int phys_node = leaders_before;
  // Every rank of a node takes its leader's count.
  ZT_MPI_CHECK(MPI_Bcast(&phys_node, 1, MPI_INT, 0, shared));

  int color = phys_node;
  if (options.ranks_per_node > 0) {
    const int k = options.ranks_per_node;
    if (shared_size % k != 0) {
      ZT_MPI_CHECK(MPI_Comm_free(&shared));
      ZT_MPI_CHECK(MPI_Comm_free(&world_));
      throw InputError(strf("--ranks-per-node %d does not divide the %d ranks on host %s", k,
                            shared_size, topo_.host.c_str()),
                       "choose a ranks-per-node that divides the ranks launched on each host");
    }
    // Simulated nodes: K consecutive local ranks of each physical node.
    const int sub_per_phys = shared_size / k;
    // Number simulated nodes globally: all simulated nodes of earlier physical nodes first.
    int subs_before = 0;
    int my_subs = is_leader ? sub_per_phys : 0;
    ZT_MPI_CHECK(MPI_Exscan(&my_subs, &subs_before, 1, MPI_INT, MPI_SUM, world_));
    if (topo_.world_rank == 0) subs_before = 0;
    ZT_MPI_CHECK(MPI_Bcast(&subs_before, 1, MPI_INT, 0, shared));
    color = subs_before + shared_rank / k;
    topo_.simulated = true;
  }
  ZT_MPI_CHECK(MPI_Comm_free(&shared));

  ZT_MPI_CHECK(MPI_Comm_split(world_, color, topo_.world_rank, &node_));
  ZT_MPI_CHECK(MPI_Comm_rank(node_, &topo_.local_rank));
  ZT_MPI_CHECK(MPI_Comm_size(node_, &topo_.local_size));
  topo_.node = color;
  int max_node = color;
  ZT_MPI_CHECK(MPI_Allreduce(&color, &max_node, 1, MPI_INT, MPI_MAX, world_));
  topo_.node_count = max_node + 1;
  ZT_MPI_CHECK(MPI_Comm_split(world_, topo_.local_rank, topo_.world_rank, &cross_));
  for (MPI_Comm c : {world_, node_, cross_}) ZT_MPI_CHECK(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));

  // Device binding: rank-per-GPU by local rank. With physical nodes only; simulated
  // nodes on one host still spread ranks over that host's devices.
  visible_devices_ = cuda_device_count();
  if (visible_devices_ > 0) {
    device_ = (options.ranks_per_node > 0 ? shared_rank : topo_.local_rank) % visible_devices_;
    cuda_set_device(device_);
  }
  liveness_ = std::make_unique<Liveness>(world_);
}

Runtime::~Runtime() {
  // Unwinding from an error: leave MPI as it is. MPI_Comm_free and MPI_Finalize are
  // collective and would wait for ranks that may never come; main() ends the job with
  // MPI_Abort instead (src/apps/main.cpp).
  if (std::uncaught_exceptions() > 0) return;
  liveness_.reset();
  // Destructors must not throw; report and carry on.
  for (MPI_Comm* c : {&cross_, &node_, &world_})
    if (*c != MPI_COMM_NULL && MPI_Comm_free(c) != MPI_SUCCESS) log::warn("MPI_Comm_free failed");
  if (owns_mpi_) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && MPI_Finalize() != MPI_SUCCESS) log::warn("MPI_Finalize failed");
  }
}

std::string Runtime::mpi_library_version() {
  std::array<char, MPI_MAX_LIBRARY_VERSION_STRING> v{};
  int len = 0;
  ZT_MPI_CHECK(MPI_Get_library_version(v.data(), &len));
  std::string s(v.data(), static_cast<size_t>(len));
  const size_t nl = s.find_first_of("\n,");
  return nl == std::string::npos ? s : s.substr(0, nl);
}

void Runtime::abort(int exit_code) const {
  MPI_Abort(world_ != MPI_COMM_NULL ? world_ : MPI_COMM_WORLD, exit_code);
  std::abort();  // MPI_Abort does not return; this satisfies [[noreturn]].
}

}  // namespace zt::runtime
