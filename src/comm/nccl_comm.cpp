// NcclComm: the Comm interface over NCCL and device memory (CUDA builds only).
//
// Bootstrap: rank 0 of the MPI communicator makes the ncclUniqueId, MPI_Bcast sends it,
// every rank calls ncclCommInitRank. Each comm owns a CUDA stream, created blocking with
// respect to the legacy default stream, so work the caller put on the default stream
// before an operation runs before it. Every collective is enqueued on that stream and a
// CUDA event recorded after it; Request::wait polls the event and
// ncclCommGetAsyncError, and past the timeout aborts the communicator (ncclCommAbort)
// and throws, naming rank, host and operation. Every context registers its abort and every
// request registers itself as in flight (zt/comm/device_wait.hpp), so a failure aborts
// every communicator of the process and the device wait (wait_ready) tests every launch
// against the timeout while the host waits for compute that waits on NCCL.
//
// A caller computing on a stream of its own (the ZeRO engine's device space) orders the
// two with events instead: order_after(compute) makes every later launch wait on the
// device for the compute queued before it, and Request::order_before(compute) makes
// compute wait for one launch without blocking the host (wait() later still polls,
// so errors and timeouts surface as before).
//
// Send and receive: NCCL needs the two sides of a ring step in one group, or a rank
// blocked in its receive never reaches its send. So isend/irecv only queue the
// operation; the queue is launched as one ncclGroupStart/End group when any of its
// requests is first waited on or tested, or before the next collective or barrier.
#include "zt/comm/nccl_comm.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <vector>

#include "describe.hpp"
#include "zt/comm/device_wait.hpp"
#include "mpi_types.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/runtime/mpi_check.hpp"

namespace zt::comm {
namespace {

constexpr const char* kNcclHint =
    "rerun with NCCL_DEBUG=INFO (and NCCL_DEBUG_SUBSYS=INIT,NET) for NCCL's own log; check "
    "that every rank has its own GPU (one rank per GPU), CUDA_VISIBLE_DEVICES, and that "
    "all ranks called the same operations in the same order";

int current_device() {
  int d = -1;
  if (cudaGetDevice(&d) != cudaSuccess) d = -1;
  return d;
}

// "device D, host H" plus the world rank when the runtime has not set the identity
// (otherwise the error's "[rank R on HOST]" prefix names it).
std::string where_detail() {
  std::string s = strf("device %d, host %s", current_device(), process_host().c_str());
  int world_rank = -1;
  if (process_rank() < 0 && detail::mpi_is_live() &&
      MPI_Comm_rank(MPI_COMM_WORLD, &world_rank) == MPI_SUCCESS)
    s += strf(", world rank %d", world_rank);
  return s;
}

[[noreturn]] void cuda_fail(const char* call, cudaError_t rc, const char* file, int line) {
  fail_call(call, strf("%s (%s)", cudaGetErrorString(rc), where_detail().c_str()),
            "check the GPU with nvidia-smi, that CUDA_VISIBLE_DEVICES gives this rank a "
            "device, and rerun with CUDA_LAUNCH_BLOCKING=1 to find the failing call",
            file, line);
}

[[noreturn]] void nccl_fail(const char* call, ncclResult_t rc, const char* file, int line) {
  fail_call(call, strf("%s (%s)", ncclGetErrorString(rc), where_detail().c_str()), kNcclHint,
            file, line);
}

}  // namespace
}  // namespace zt::comm

#define ZT_CUDA_CHECK(call)                                                        \
  do {                                                                             \
    const cudaError_t zt_cuda_rc_ = (call);                                        \
    if (zt_cuda_rc_ != cudaSuccess)                                                \
      ::zt::comm::cuda_fail(#call, zt_cuda_rc_, __FILE__, __LINE__);               \
  } while (0)

#define ZT_NCCL_CHECK(call)                                                        \
  do {                                                                             \
    const ncclResult_t zt_nccl_rc_ = (call);                                       \
    if (zt_nccl_rc_ != ncclSuccess)                                                \
      ::zt::comm::nccl_fail(#call, zt_nccl_rc_, __FILE__, __LINE__);               \
  } while (0)

namespace zt::comm {
namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kF32: return ncclFloat32;
    case DType::kF64: return ncclFloat64;
    case DType::kBF16: return ncclBfloat16;
    case DType::kF16: return ncclFloat16;
    case DType::kI8: return ncclInt8;
    case DType::kU8: return ncclUint8;
    case DType::kI32: return ncclInt32;
    case DType::kI64: return ncclInt64;
  }
  throw Error(strf("unknown dtype %d", static_cast<int>(t)), "this is a bug in zt");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAvg: return ncclAvg;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  return ncclSum;
}

// A send or receive waiting to be launched in the next group.
struct P2P {
  bool is_send;
  void* buf;
  size_t count;
  DType dtype;
  int peer;
};

// Event recorded after one launch (a collective, or a group of sends and receives).
struct Launch {
  cudaEvent_t event = nullptr;
  bool launched = false;
  ~Launch() {
    if (event != nullptr && cudaEventDestroy(event) != cudaSuccess)
      log::warn("cudaEventDestroy failed");
  }
};

// One NCCL communicator with its stream and the MPI communicator it was bootstrapped
// from (kept for split() where NCCL has no ncclCommSplit). Shared by the comm and its
// in-flight requests.
class NcclContext {
 public:
  NcclContext(MPI_Comm owned_bootstrap, ncclComm_t comm, int device)
      : bootstrap(owned_bootstrap), nccl(comm), device_(device) {
    ZT_NCCL_CHECK(ncclCommUserRank(nccl, &rank));
    ZT_NCCL_CHECK(ncclCommCount(nccl, &size));
    ZT_CUDA_CHECK(cudaStreamCreate(&stream));
    ZT_CUDA_CHECK(cudaMalloc(&barrier_word, sizeof(int32_t)));
    ZT_CUDA_CHECK(cudaMemsetAsync(barrier_word, 0, sizeof(int32_t), stream));
    abort_id_ = register_abort([this] { abort(); });
  }

  ~NcclContext() {
    if (after_event != nullptr && cudaEventDestroy(after_event) != cudaSuccess)
      log::warn("cudaEventDestroy failed");
    unregister_abort(abort_id_);
    // After an abort (of any communicator of the process) nothing waits on the device.
    if (!aborted && !communicators_aborted()) {
      try {
        wait_stream(stream, "destroying an NCCL communicator");
      } catch (const std::exception& e) {
        log::warn(e.what());
      }
      if (ncclCommDestroy(nccl) != ncclSuccess) log::warn("ncclCommDestroy failed");
    }
    if (cudaFree(barrier_word) != cudaSuccess) log::warn("cudaFree failed");
    if (cudaStreamDestroy(stream) != cudaSuccess) log::warn("cudaStreamDestroy failed");
    if (bootstrap != MPI_COMM_NULL && detail::mpi_is_live() && MPI_Comm_free(&bootstrap) != MPI_SUCCESS)
      log::warn("MPI_Comm_free failed");
  }
  NcclContext(const NcclContext&) = delete;
  NcclContext& operator=(const NcclContext&) = delete;

  int device() const { return device_; }

  void check_usable() const {
    if (aborted)
      throw Error(strf("nccl communicator (rank %d of %d) was aborted after an earlier failure",
                       rank, size),
                  "the first error on this rank says what went wrong; the job should end");
  }

  // order_after: launches wait, on the device, for the caller's stream (null: none).
  void set_after(cudaStream_t s) {
    if (s != nullptr && after_event == nullptr)
      ZT_CUDA_CHECK(cudaEventCreateWithFlags(&after_event, cudaEventDisableTiming));
    after = s;
  }
  // Before a launch: this comm's stream waits for the work queued on the caller's stream
  // so far (one event, re-recorded: a wait captures the record before it).
  void wait_for_caller() {
    if (after == nullptr) return;
    ZT_CUDA_CHECK(cudaEventRecord(after_event, after));
    ZT_CUDA_CHECK(cudaStreamWaitEvent(stream, after_event, 0));
  }

  // Records a fresh event on the stream after the work just enqueued.
  std::shared_ptr<Launch> record() {
    auto l = std::make_shared<Launch>();
    ZT_CUDA_CHECK(cudaEventCreateWithFlags(&l->event, cudaEventDisableTiming));
    ZT_CUDA_CHECK(cudaEventRecord(l->event, stream));
    l->launched = true;
    return l;
  }

  // Queues a send or receive; it is launched with the next flush().
  std::shared_ptr<Launch> queue(const P2P& p) {
    if (!queued_launch_) queued_launch_ = std::make_shared<Launch>();
    queued_.push_back(p);
    return queued_launch_;
  }

  // Launches the queued sends and receives as one group.
  void flush() {
    if (queued_.empty()) return;
    check_usable();
    std::vector<P2P> ops;
    ops.swap(queued_);
    std::shared_ptr<Launch> l = std::move(queued_launch_);
    queued_launch_.reset();
    try {
      wait_for_caller();
      ZT_NCCL_CHECK(ncclGroupStart());
      for (const P2P& p : ops) {
        if (p.is_send)
          ZT_NCCL_CHECK(ncclSend(p.buf, p.count, nccl_type(p.dtype), p.peer, nccl, stream));
        else
          ZT_NCCL_CHECK(ncclRecv(p.buf, p.count, nccl_type(p.dtype), p.peer, nccl, stream));
      }
      ZT_NCCL_CHECK(ncclGroupEnd());
      ZT_CUDA_CHECK(cudaEventCreateWithFlags(&l->event, cudaEventDisableTiming));
      ZT_CUDA_CHECK(cudaEventRecord(l->event, stream));
    } catch (...) {
      abort_all_communicators();  // the batch's other requests then fail, never wait forever
      throw;
    }
    l->launched = true;
  }

  // Ends the communicator's operations after a failure, so no kernel waits forever.
  void abort() {
    if (aborted) return;
    aborted = true;
    const ncclResult_t rc = ncclCommAbort(nccl);
    if (rc != ncclSuccess) log::warn(strf("ncclCommAbort: %s", ncclGetErrorString(rc)));
  }

  MPI_Comm bootstrap = MPI_COMM_NULL;
  ncclComm_t nccl = nullptr;
  cudaStream_t stream = nullptr;
  cudaStream_t after = nullptr;       // order_after's stream, or null
  cudaEvent_t after_event = nullptr;  // recorded on `after` before each launch
  int32_t* barrier_word = nullptr;  // [1] device scratch for barrier()
  int rank = 0;
  int size = 1;
  bool aborted = false;

 private:
  int device_ = -1;
  uint64_t abort_id_ = 0;  // register_abort's
  std::vector<P2P> queued_;
  std::shared_ptr<Launch> queued_launch_;
};

class NcclRequest final : public Request {
 public:
  NcclRequest(std::shared_ptr<NcclContext> ctx, std::shared_ptr<Launch> launch, std::string what,
              std::chrono::milliseconds timeout)
      : ctx_(std::move(ctx)), launch_(std::move(launch)), what_(std::move(what)),
        timeout_(timeout) {
    in_flight_ = register_in_flight({[this] { return test(); },
                                     [l = launch_.get()] { return l->launched; }, "nccl", what_,
                                     ctx_->rank, ctx_->size, timeout_});
  }

  ~NcclRequest() override {
    unregister_in_flight(in_flight_);
    if (done_ || failed_ || communicators_aborted()) return;
    try {
      wait();
    } catch (const std::exception& e) {
      log::error(std::string("while destroying an unfinished request: ") + e.what());
    }
  }
  NcclRequest(const NcclRequest&) = delete;
  NcclRequest& operator=(const NcclRequest&) = delete;

  bool test() override {
    if (done_) return true;
    if (!launch_->launched) guard([&] { ctx_->flush(); });
    ctx_->check_usable();
    const cudaError_t rc = cudaEventQuery(launch_->event);
    if (rc == cudaSuccess) {
      done_ = true;
      unregister_in_flight(in_flight_);
      return true;
    }
    if (rc != cudaErrorNotReady) {
      failed_ = true;
      abort_all_communicators();
      cuda_fail("cudaEventQuery", rc, __FILE__, __LINE__);
    }
    ncclResult_t async = ncclSuccess;
    guard([&] { ZT_NCCL_CHECK(ncclCommGetAsyncError(ctx_->nccl, &async)); });
    if (async != ncclSuccess && async != ncclInProgress) {
      failed_ = true;
      abort_all_communicators();
      throw Error(strf("nccl %s failed on rank %d of %d (host %s, device %d): %s", what_.c_str(),
                       ctx_->rank, ctx_->size, process_host().c_str(), ctx_->device(),
                       ncclGetErrorString(async)),
                  kNcclHint);
    }
    return false;
  }

  // The caller's stream waits for this launch's event (launching a queued group first).
  bool order_before(void* s) override {
    if (!launch_->launched) guard([&] { ctx_->flush(); });
    ctx_->check_usable();
    ZT_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(s), launch_->event, 0));
    return true;
  }

  void wait() override {
    detail::poll_until([this] { return test(); }, timeout_, [this] {
      failed_ = true;
      // NCCL kernels cannot be cancelled one by one, and the other communicators' kernels
      // would keep the device (and every later wait on it) busy: abort them all.
      abort_all_communicators();
      detail::throw_timeout("nccl", what_, ctx_->rank, ctx_->size, timeout_,
                            strf("every NCCL communicator of this rank was aborted (device "
                                 "%d); NCCL_DEBUG=INFO shows where each rank stopped",
                                 ctx_->device()));
    });
  }

 private:
  template <class F>
  void guard(F&& f) {
    try {
      f();
    } catch (...) {
      failed_ = true;
      throw;
    }
  }

  std::shared_ptr<NcclContext> ctx_;
  std::shared_ptr<Launch> launch_;
  std::string what_;
  std::chrono::milliseconds timeout_;
  uint64_t in_flight_ = 0;  // register_in_flight's
  bool done_ = false;
  bool failed_ = false;
};

// Makes the NCCL communicator over `bootstrap` (owned from here on): its rank 0 creates
// the unique id, MPI broadcasts it.
std::shared_ptr<NcclContext> init_context(MPI_Comm bootstrap) {
  int rank = 0, size = 1;
  ZT_MPI_CHECK(MPI_Comm_set_errhandler(bootstrap, MPI_ERRORS_RETURN));
  ZT_MPI_CHECK(MPI_Comm_rank(bootstrap, &rank));
  ZT_MPI_CHECK(MPI_Comm_size(bootstrap, &size));
  ncclUniqueId id{};
  if (rank == 0) ZT_NCCL_CHECK(ncclGetUniqueId(&id));
  ZT_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, bootstrap));
  int device = -1;
  ZT_CUDA_CHECK(cudaGetDevice(&device));
  ncclComm_t comm = nullptr;
  ZT_NCCL_CHECK(ncclCommInitRank(&comm, size, id, rank));
  return std::make_shared<NcclContext>(bootstrap, comm, device);
}

class NcclComm final : public Comm {
 public:
  explicit NcclComm(std::shared_ptr<NcclContext> ctx) : ctx_(std::move(ctx)) {}

  int rank() const override { return ctx_->rank; }
  int size() const override { return ctx_->size; }
  std::string_view backend() const override { return "nccl"; }
  Memory memory() const override { return Memory::kDevice; }

  Handle iall_reduce(const void* send, void* recv, size_t n, DType dtype, ReduceOp op) override {
    before_collective();
    ZT_NCCL_CHECK(ncclAllReduce(send, recv, n, nccl_type(dtype), nccl_op(op), ctx_->nccl,
                                ctx_->stream));
    return finish(Op::kAllReduce, n, dtype, op);
  }

  Handle iall_gather(const void* send, void* recv, size_t n, DType dtype) override {
    before_collective();
    ZT_NCCL_CHECK(ncclAllGather(send, recv, n, nccl_type(dtype), ctx_->nccl, ctx_->stream));
    return finish(Op::kAllGather, n, dtype);
  }

  Handle ireduce_scatter(const void* send, void* recv, size_t n, DType dtype,
                         ReduceOp op) override {
    before_collective();
    ZT_NCCL_CHECK(ncclReduceScatter(send, recv, n, nccl_type(dtype), nccl_op(op), ctx_->nccl,
                                    ctx_->stream));
    return finish(Op::kReduceScatter, n, dtype, op);
  }

  Handle ibroadcast(void* buf, size_t n, DType dtype, int root) override {
    check_rank(root, "broadcast root");
    before_collective();
    ZT_NCCL_CHECK(ncclBroadcast(buf, buf, n, nccl_type(dtype), root, ctx_->nccl, ctx_->stream));
    return finish(Op::kBroadcast, n, dtype, ReduceOp::kSum, root);
  }

  Handle isend(const void* buf, size_t n, DType dtype, int peer) override {
    return queue_p2p(Op::kSend, const_cast<void*>(buf), n, dtype, peer);
  }

  Handle irecv(void* buf, size_t n, DType dtype, int peer) override {
    return queue_p2p(Op::kRecv, buf, n, dtype, peer);
  }

  // One NCCL group of sends and receives (this rank's own part included), launched now,
  // after the queued point-to-point messages and the caller's work (order_after).
  Handle iall_to_all(const void* send, std::span<const size_t> send_counts,
                     std::span<const size_t> send_offsets, void* recv,
                     std::span<const size_t> recv_counts, std::span<const size_t> recv_offsets,
                     DType dtype) override {
    detail::check_all_to_all(send_counts, send_offsets, recv_counts, recv_offsets, size());
    before_collective();
    const size_t elem = dtype_size(dtype);
    std::shared_ptr<Launch> l;
    for (int p = 0; p < size(); ++p) {
      const auto i = static_cast<size_t>(p);
      if (recv_counts[i] > 0)
        l = ctx_->queue({false, static_cast<std::byte*>(recv) + recv_offsets[i] * elem,
                         recv_counts[i], dtype, p});
      if (send_counts[i] > 0)
        l = ctx_->queue({true,
                         const_cast<std::byte*>(static_cast<const std::byte*>(send)) +
                             send_offsets[i] * elem,
                         send_counts[i], dtype, p});
    }
    const size_t sent = detail::all_to_all_sent(send_counts, rank());
    count(Op::kAllToAll, sent * elem);
    std::string what = detail::describe(Op::kAllToAll, sent, dtype);
    if (!l) return std::make_unique<NcclRequest>(ctx_, ctx_->record(), std::move(what), timeout());
    ctx_->flush();
    return std::make_unique<NcclRequest>(ctx_, std::move(l), std::move(what), timeout());
  }

  // NCCL has no barrier: an all-reduce of one word, waited on with the timeout.
  void barrier() override {
    before_collective();
    ZT_NCCL_CHECK(ncclAllReduce(ctx_->barrier_word, ctx_->barrier_word, 1, ncclInt32, ncclSum,
                                ctx_->nccl, ctx_->stream));
    count(Op::kBarrier, 0);
    NcclRequest(ctx_, ctx_->record(), detail::describe(Op::kBarrier, 0, DType::kI32), timeout())
        .wait();
  }

  std::unique_ptr<Comm> split(int color, int key) override {
    ctx_->check_usable();
    ctx_->flush();
    // The MPI side first: the child keeps a bootstrap communicator of its own.
    MPI_Comm sub_mpi = MPI_COMM_NULL;
    ZT_MPI_CHECK(MPI_Comm_split(ctx_->bootstrap, color < 0 ? MPI_UNDEFINED : color, key, &sub_mpi));
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
    ncclComm_t sub = nullptr;
    ZT_NCCL_CHECK(ncclCommSplit(ctx_->nccl, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &sub,
                                nullptr));
    if (sub_mpi == MPI_COMM_NULL) return nullptr;
    auto comm = std::make_unique<NcclComm>(std::make_shared<NcclContext>(sub_mpi, sub,
                                                                         ctx_->device()));
#else
    if (sub_mpi == MPI_COMM_NULL) return nullptr;
    auto comm = std::make_unique<NcclComm>(init_context(sub_mpi));
#endif
    comm->set_timeout(timeout());
    return comm;
  }

  void order_after(void* s) override { ctx_->set_after(static_cast<cudaStream_t>(s)); }

  // Blocks the host until every operation enqueued on this comm finished.
  void synchronize() override {
    ctx_->flush();
    wait_stream(ctx_->stream, "synchronizing an NCCL communicator");
  }

 private:
  void check_rank(int r, const char* role) const {
    ZT_CHECK(r >= 0 && r < size(), strf("%s %d on a communicator of %d ranks", role, r, size()),
             "peers and roots are ranks of this communicator, 0 <= r < size()");
  }

  // Collectives go after any queued sends and receives, in the order they were called,
  // and after the caller's stream's work queued so far (order_after).
  void before_collective() {
    ctx_->check_usable();
    ctx_->flush();
    ctx_->wait_for_caller();
  }

  Handle finish(Op what, size_t n, DType dtype, ReduceOp op = ReduceOp::kSum, int root = 0) {
    count(what, algorithm_bytes(what, n, dtype, rank(), size(), root));
    return std::make_unique<NcclRequest>(ctx_, ctx_->record(),
                                         detail::describe(what, n, dtype, op, root), timeout());
  }

  Handle queue_p2p(Op what, void* buf, size_t n, DType dtype, int peer) {
    check_rank(peer, what == Op::kSend ? "send peer" : "recv peer");
    ctx_->check_usable();
    std::shared_ptr<Launch> l = ctx_->queue({what == Op::kSend, buf, n, dtype, peer});
    count(what, algorithm_bytes(what, n, dtype, rank(), size()));
    return std::make_unique<NcclRequest>(ctx_, std::move(l),
                                         detail::describe(what, n, dtype, ReduceOp::kSum, peer),
                                         timeout());
  }

  std::shared_ptr<NcclContext> ctx_;
};

}  // namespace

bool nccl_available() { return true; }

std::unique_ptr<Comm> make_nccl_comm(MPI_Comm bootstrap) {
  MPI_Comm dup = MPI_COMM_NULL;
  ZT_MPI_CHECK(MPI_Comm_dup(bootstrap, &dup));
  return std::make_unique<NcclComm>(init_context(dup));
}

std::string nccl_version() {
  int v = 0;
  ZT_NCCL_CHECK(ncclGetVersion(&v));
  // Since 2.9: major * 10000 + minor * 100 + patch; before: major * 1000 + minor * 100 + patch.
  const int major = v >= 20900 ? v / 10000 : v / 1000;
  const int minor = v >= 20900 ? (v / 100) % 100 : (v / 100) % 10;
  return strf("%d.%d.%d", major, minor, v % 100);
}

}  // namespace zt::comm
