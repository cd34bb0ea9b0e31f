#pragma once
// The comm layer: one interface, two backends (MpiComm over host memory, NcclComm over
// device memory). Everything above this layer (the checklist, the training loop, the
// ZeRO engine) talks to a Comm and never to MPI or NCCL directly.
//
// Conventions, the same as NCCL's and nccl-tests':
//  - counts are in elements of `dtype`, never bytes;
//  - all_gather: `count` elements from each rank, recv holds size()*count, rank r's part
//    at offset r*count;
//  - reduce_scatter: send holds size()*count, rank r receives the reduction of part r;
//  - in place when send == recv (all_gather in place: send == recv + rank()*count;
//    reduce_scatter in place: recv == send + rank()*count).
//  - kAvg is the sum divided by size() (integer types: truncating division).
//
// Every operation has an async form returning a Handle; the blocking form is the async
// form followed by wait(). A Handle must be waited on before its buffers are touched.
// wait() honours the communicator's timeout: past it the job is ended with a message
// naming the operation, the rank and the host, instead of hanging.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "zt/core/dtype.hpp"

namespace zt::comm {

enum class ReduceOp : uint8_t { kSum, kAvg, kMax, kMin };
std::string_view reduce_op_name(ReduceOp op);  // nccl-tests' names: sum, avg, max, min

enum class Op : uint8_t {
  kAllReduce, kAllGather, kReduceScatter, kBroadcast, kSend, kRecv, kBarrier, kAllToAll
};
inline constexpr int kOpCount = 8;
std::string_view op_name(Op op);  // all_reduce, all_gather, ...

// Bytes this rank sends and calls it made, per operation. The byte counts are the
// bytes the bandwidth-optimal (ring) algorithm must send from this rank, the volume
// that nccl-tests' bus bandwidth is defined against (see docs/comm.md). They are
// modelled from the calls (algorithm_bytes on each call's arguments), not measured on
// a link: whatever algorithm the library really runs, the count is the same. Per op:
//   all_reduce     2 (n-1)/n * S   (S = count * dtype size; exact chunked integer form)
//   all_gather     (n-1) * count * size     (count per rank)
//   reduce_scatter (n-1) * count * size     (count per rank)
//   broadcast      S on every rank but the last in the chain from root
//   send           S;  recv, barrier: 0 bytes
//   all_to_all     the bytes sent to the other ranks (count = those elements)
struct Counters {
  uint64_t bytes[kOpCount] = {};
  uint64_t calls[kOpCount] = {};
  uint64_t total_bytes() const;
  uint64_t total_calls() const;
};

// Where buffers live. MpiComm takes host memory; NcclComm device memory.
enum class Memory : uint8_t { kHost, kDevice };

class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;  // blocks until done (or the comm's timeout ends the job)
  virtual bool test() = 0;  // true when done; never blocks
  // Device ordering without blocking the host: makes `stream` (a cudaStream_t) wait on
  // the device for this operation and returns true; the request must still be waited
  // on later (wait() or test()), which is where errors and timeouts surface. Host
  // backends return false: call wait().
  virtual bool order_before(void* stream) {
    (void)stream;
    return false;
  }
};
using Handle = std::unique_ptr<Request>;

class Comm {
 public:
  virtual ~Comm() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string_view backend() const = 0;  // "mpi" or "nccl"
  virtual Memory memory() const = 0;

  // --- async ------------------------------------------------------------------
  virtual Handle iall_reduce(const void* send, void* recv, size_t count, DType dtype,
                             ReduceOp op) = 0;
  virtual Handle iall_gather(const void* send, void* recv, size_t count, DType dtype) = 0;
  virtual Handle ireduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                                 ReduceOp op) = 0;
  virtual Handle ibroadcast(void* buf, size_t count, DType dtype, int root) = 0;
  virtual Handle isend(const void* buf, size_t count, DType dtype, int peer) = 0;
  virtual Handle irecv(void* buf, size_t count, DType dtype, int peer) = 0;
  // All-to-all with per-rank counts (MPI_Alltoallv's semantics; counts and offsets in
  // elements, each span of size() entries): sends send_counts[p] elements from
  // send + send_offsets[p] to rank p and receives recv_counts[p] elements from rank p into
  // recv + recv_offsets[p] (recv_counts[p] must equal rank p's send_counts[this rank]).
  // The receive ranges must not overlap each other or the send buffer. MpiComm and
  // NcclComm run it as one operation (pairwise messages, NCCL: one group); the default,
  // for communicators that wrap another, is the same messages through isend and irecv
  // (counted as sends). Do not have point-to-point messages of your own in flight on the
  // communicator at the same time.
  virtual Handle iall_to_all(const void* send, std::span<const size_t> send_counts,
                             std::span<const size_t> send_offsets, void* recv,
                             std::span<const size_t> recv_counts,
                             std::span<const size_t> recv_offsets, DType dtype);

  // --- blocking -----------------------------------------------------------------
  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) {
    iall_reduce(send, recv, count, dtype, op)->wait();
  }
  void all_gather(const void* send, void* recv, size_t count, DType dtype) {
    iall_gather(send, recv, count, dtype)->wait();
  }
  void reduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) {
    ireduce_scatter(send, recv, count, dtype, op)->wait();
  }
  void broadcast(void* buf, size_t count, DType dtype, int root) {
    ibroadcast(buf, count, dtype, root)->wait();
  }
  void send(const void* buf, size_t count, DType dtype, int peer) {
    isend(buf, count, dtype, peer)->wait();
  }
  void recv(void* buf, size_t count, DType dtype, int peer) {
    irecv(buf, count, dtype, peer)->wait();
  }
  void all_to_all(const void* send, std::span<const size_t> send_counts,
                  std::span<const size_t> send_offsets, void* recv,
                  std::span<const size_t> recv_counts, std::span<const size_t> recv_offsets,
                  DType dtype) {
    iall_to_all(send, send_counts, send_offsets, recv, recv_counts, recv_offsets, dtype)->wait();
  }
  // Send to one peer and receive from another at once (a ring step); no deadlock.
  void sendrecv(const void* sendbuf, int dst, void* recvbuf, int src, size_t count,
                DType dtype) {
    Handle r = irecv(recvbuf, count, dtype, src);
    Handle s = isend(sendbuf, count, dtype, dst);
    s->wait();
    r->wait();
  }
  virtual void barrier() = 0;

  // Ranks with the same color form a new communicator, ordered by key then old rank.
  virtual std::unique_ptr<Comm> split(int color, int key) = 0;

  // Ordering fence for the caller's device stream; a no-op for host backends.
  virtual void synchronize() {}
  // Device ordering for a caller computing on its own stream: every operation launched
  // from now on first waits, on the device, for the work queued on `stream` (a
  // cudaStream_t) before its launch; null turns it off. A no-op for host backends.
  virtual void order_after(void* stream) { (void)stream; }

  const Counters& counters() const { return counters_; }
  void reset_counters() { counters_ = {}; }

  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }

 protected:
  void count(Op op, uint64_t bytes) {
    counters_.bytes[static_cast<int>(op)] += bytes;
    counters_.calls[static_cast<int>(op)] += 1;
  }
  Counters counters_;
  std::chrono::milliseconds timeout_{std::chrono::minutes(5)};
};

// Bytes the ring algorithm sends from `rank` of `n` for each operation (the Counters
// definition above). Shared by the backends and by the tests' expectations.
uint64_t algorithm_bytes(Op op, size_t count, DType dtype, int rank, int n, int root = 0);

}  // namespace zt::comm
