// MpiComm: the Comm interface over MPI nonblocking (optionally blocking) collectives and
// host memory.
// Blocking operations are the async ones followed by wait() (comm.hpp). Operations on
// more elements than one MPI call takes (`int` counts) are split into several calls:
// all_reduce and broadcast chunk the buffer; all_gather becomes one broadcast per rank
// and reduce_scatter one reduce per rank, each chunked.
#include "zt/comm/mpi_comm.hpp"

#include <algorithm>
#include <cstring>

#include "describe.hpp"
#include "mpi_request.hpp"
#include "mpi_types.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/runtime/mpi_check.hpp"
#include "zt/runtime/watchdog.hpp"

namespace zt::comm {
namespace {

using detail::MpiContext;
using detail::MpiRequest;

constexpr int kP2PTag = 17;       // point-to-point messages on zt's own (duplicated) communicator
constexpr int kAllToAllTag = 18;  // the messages of an all_to_all

std::byte* at(void* p, size_t elements, DType t) {
  return static_cast<std::byte*>(p) + elements * dtype_size(t);
}
const std::byte* at(const void* p, size_t elements, DType t) {
  return static_cast<const std::byte*>(p) + elements * dtype_size(t);
}

// True when [a, a+na) and [b, b+nb) share a byte.
bool overlaps(const void* a, size_t na, const void* b, size_t nb) {
  const auto* pa = static_cast<const std::byte*>(a);
  const auto* pb = static_cast<const std::byte*>(b);
  return na > 0 && nb > 0 && pa < pb + nb && pb < pa + na;
}

class MpiComm final : public Comm {
 public:
  MpiComm(std::shared_ptr<const MpiContext> ctx, const MpiCommOptions& options)
      : ctx_(std::move(ctx)), options_(options) {
    ZT_CHECK(options_.max_elements_per_call >= 1 &&
                 options_.max_elements_per_call <= static_cast<size_t>(INT_MAX),
             strf("max_elements_per_call = %zu", options_.max_elements_per_call),
             "MpiCommOptions::max_elements_per_call must be in [1, INT_MAX]");
  }

  int rank() const override { return ctx_->rank; }
  int size() const override { return ctx_->size; }
  std::string_view backend() const override { return "mpi"; }
  Memory memory() const override { return Memory::kHost; }

  Handle iall_reduce(const void* send, void* recv, size_t count, DType dtype,
                     ReduceOp op) override {
    const size_t bytes = count * dtype_size(dtype);
    const bool in_place = send == recv;
    ZT_CHECK(in_place || !overlaps(send, bytes, recv, bytes), "send and recv overlap",
             "all_reduce is either in place (send == recv) or on disjoint buffers");
    auto req = start(Op::kAllReduce, count, dtype, op);
    const MPI_Datatype type = ctx_->types->datatype(dtype);
    const MPI_Op mpi_op = ctx_->types->op(dtype, op);
    for (size_t off = 0; off < count || off == 0; off += chunk_limit()) {
      const int n = chunk(count, off);
      post_allreduce(in_place ? MPI_IN_PLACE : at(send, off, dtype), at(recv, off, dtype), n,
                     type, mpi_op, *req);
      if (count == 0) break;
    }
    finish_avg(*req, recv, count, dtype, op);
    return req;
  }

  Handle iall_gather(const void* send, void* recv, size_t count, DType dtype) override {
    const size_t part = count * dtype_size(dtype);
    void* mine = at(recv, count * static_cast<size_t>(rank()), dtype);
    const bool in_place = send == mine;
    ZT_CHECK(in_place || !overlaps(send, part, recv, part * static_cast<size_t>(size())),
             "send and recv overlap",
             "all_gather is in place when send == recv + rank*count, else the buffers are "
             "disjoint");
    auto req = start(Op::kAllGather, count, dtype);
    const MPI_Datatype type = ctx_->types->datatype(dtype);
    if (count <= chunk_limit()) {
      const int n = static_cast<int>(count);
      post_allgather(in_place ? MPI_IN_PLACE : send, recv, n, type, *req);
      return req;
    }
    // Too large for one call: every rank broadcasts its part, in chunks.
    if (!in_place) std::memcpy(mine, send, part);
    for (int root = 0; root < size(); ++root) {
      void* base = at(recv, count * static_cast<size_t>(root), dtype);
      for (size_t off = 0; off < count; off += chunk_limit())
        post_bcast(at(base, off, dtype), chunk(count, off), type, root, *req);
    }
    return req;
  }

  Handle ireduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                         ReduceOp op) override {
    const size_t part = count * dtype_size(dtype);
    const bool in_place = recv == at(send, count * static_cast<size_t>(rank()), dtype);
    ZT_CHECK(in_place || !overlaps(send, part * static_cast<size_t>(size()), recv, part),
             "send and recv overlap",
             "reduce_scatter is in place when recv == send + rank*count, else the buffers "
             "are disjoint");
    auto req = start(Op::kReduceScatter, count, dtype, op);
    const MPI_Datatype type = ctx_->types->datatype(dtype);
    const MPI_Op mpi_op = ctx_->types->op(dtype, op);
    if (count <= chunk_limit()) {
      const int n = static_cast<int>(count);
      if (in_place) {
        // MPI_IN_PLACE would put the result at the start of the buffer, not at part
        // `rank`: reduce into scratch, copy into place when done.
        void* tmp = req->scratch(part);
        post_reduce_scatter_block(send, tmp, n, type, mpi_op, *req);
        req->then([tmp, recv, part] { std::memcpy(recv, tmp, part); });
      } else {
        post_reduce_scatter_block(send, recv, n, type, mpi_op, *req);
      }
    } else {
      // Too large for one call: one reduce per rank (root r gets part r), in chunks.
      for (int root = 0; root < size(); ++root) {
        const std::byte* base = at(send, count * static_cast<size_t>(root), dtype);
        for (size_t off = 0; off < count; off += chunk_limit()) {
          const bool mine = root == rank();
          const void* s = (mine && in_place) ? MPI_IN_PLACE : at(base, off, dtype);
          post_reduce(s, mine ? at(recv, off, dtype) : nullptr, chunk(count, off), type, mpi_op,
                      root, *req);
        }
      }
    }
    finish_avg(*req, recv, count, dtype, op);
    return req;
  }

  Handle ibroadcast(void* buf, size_t count, DType dtype, int root) override {
    check_rank(root, "broadcast root");
    auto req = start(Op::kBroadcast, count, dtype, ReduceOp::kSum, root);
    const MPI_Datatype type = ctx_->types->datatype(dtype);
    for (size_t off = 0; off < count || off == 0; off += chunk_limit()) {
      post_bcast(at(buf, off, dtype), chunk(count, off), type, root, *req);
      if (count == 0) break;
    }
    return req;
  }

  Handle isend(const void* buf, size_t count, DType dtype, int peer) override {
    check_rank(peer, "send peer");
    auto req = start(Op::kSend, count, dtype, ReduceOp::kSum, peer);
    const MPI_Datatype type = ctx_->types->datatype(dtype);
    for (size_t off = 0; off < count || off == 0; off += chunk_limit()) {
      ZT_MPI_CHECK(MPI_Isend(at(buf, off, dtype), chunk(count, off), type, peer, kP2PTag,
                             ctx_->comm, req->add()));
      if (count == 0) break;
    }
    return req;
  }

  Handle irecv(void* buf, size_t count, DType dtype, int peer) override {
    check_rank(peer, "recv peer");
    auto req = start(Op::kRecv, count, dtype, ReduceOp::kSum, peer);
    const MPI_Datatype type = ctx_->types->datatype(dtype);
    for (size_t off = 0; off < count || off == 0; off += chunk_limit()) {
      ZT_MPI_CHECK(MPI_Irecv(at(buf, off, dtype), chunk(count, off), type, peer, kP2PTag,
                             ctx_->comm, req->add()));
      if (count == 0) break;
    }
    return req;
  }

  // The same count to and from every rank, in rank order, within one MPI call's count:
  // MPI_Ialltoall (MPI_Alltoall with blocking_collectives), MPI's own algorithms. Else
  // pairwise messages (receives posted first), each split at the count limit; this rank's
  // own part is copied. One request for the whole exchange.
  Handle iall_to_all(const void* send, std::span<const size_t> send_counts,
                     std::span<const size_t> send_offsets, void* recv,
                     std::span<const size_t> recv_counts, std::span<const size_t> recv_offsets,
                     DType dtype) override {
    detail::check_all_to_all(send_counts, send_offsets, recv_counts, recv_offsets, size());
    const auto me = static_cast<size_t>(rank());
    ZT_CHECK(send_counts[me] == recv_counts[me],
             strf("all_to_all: rank %d sends itself %zu elements but expects %zu", rank(),
                  send_counts[me], recv_counts[me]),
             "send_counts[rank] and recv_counts[rank] describe the same part");
    auto req = start(Op::kAllToAll, detail::all_to_all_sent(send_counts, rank()), dtype);
    const MPI_Datatype type = ctx_->types->datatype(dtype);
    const size_t each = send_counts[0];
    if (each <= chunk_limit() && uniform_blocks(send_counts, send_offsets, each) &&
        uniform_blocks(recv_counts, recv_offsets, each)) {
      post_alltoall(send, recv, static_cast<int>(each), type, *req);
      return req;
    }
    for (int pass = 0; pass < 2; ++pass) {  // 0: receives, 1: sends
      for (int p = 0; p < size(); ++p) {
        const auto i = static_cast<size_t>(p);
        if (i == me) continue;
        const size_t count = pass == 0 ? recv_counts[i] : send_counts[i];
        for (size_t off = 0; off < count; off += chunk_limit()) {
          if (pass == 0)
            ZT_MPI_CHECK(MPI_Irecv(at(recv, recv_offsets[i] + off, dtype), chunk(count, off), type,
                                   p, kAllToAllTag, ctx_->comm, req->add()));
          else
            ZT_MPI_CHECK(MPI_Isend(at(send, send_offsets[i] + off, dtype), chunk(count, off), type,
                                   p, kAllToAllTag, ctx_->comm, req->add()));
        }
      }
    }
    if (send_counts[me] > 0)
      std::memcpy(at(recv, recv_offsets[me], dtype), at(send, send_offsets[me], dtype),
                  send_counts[me] * dtype_size(dtype));
    return req;
  }

  void barrier() override {
    count(Op::kBarrier, 0);
    MpiRequest req(ctx_, detail::describe(Op::kBarrier, 0, DType::kU8), timeout());
    ZT_MPI_CHECK(MPI_Ibarrier(ctx_->comm, req.add()));
    req.wait();
  }

  std::unique_ptr<Comm> split(int color, int key) override {
    MPI_Comm sub = MPI_COMM_NULL;
    ZT_MPI_CHECK(MPI_Comm_split(ctx_->comm, color < 0 ? MPI_UNDEFINED : color, key, &sub));
    if (sub == MPI_COMM_NULL) return nullptr;
    auto comm = std::make_unique<MpiComm>(std::make_shared<MpiContext>(sub, ctx_->types),
                                          options_);
    comm->set_timeout(timeout());
    return comm;
  }

 private:
  size_t chunk_limit() const { return options_.max_elements_per_call; }
  // Elements in the MPI call that starts at element `off` of `count`.
  int chunk(size_t count, size_t off) const {
    return static_cast<int>(std::min(chunk_limit(), count - off));
  }

  void check_rank(int r, const char* role) const {
    ZT_CHECK(r >= 0 && r < size(), strf("%s %d on a communicator of %d ranks", role, r, size()),
             "peers and roots are ranks of this communicator, 0 <= r < size()");
  }

  // Each posts one MPI collective into `req`: the nonblocking call, or with
  // blocking_collectives the blocking one, under the comm's timeout (complete on
  // return; nothing is added to `req`, whose completion steps still run at wait()).
  void post_allreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op,
                      MpiRequest& req) {
    if (!options_.blocking_collectives) {
      ZT_MPI_CHECK(MPI_Iallreduce(s, r, n, t, op, ctx_->comm, req.add()));
      return;
    }
    const auto guard = arm(req);
    ZT_MPI_CHECK(MPI_Allreduce(s, r, n, t, op, ctx_->comm));
  }
  void post_allgather(const void* s, void* r, int n, MPI_Datatype t, MpiRequest& req) {
    if (!options_.blocking_collectives) {
      ZT_MPI_CHECK(MPI_Iallgather(s, n, t, r, n, t, ctx_->comm, req.add()));
      return;
    }
    const auto guard = arm(req);
    ZT_MPI_CHECK(MPI_Allgather(s, n, t, r, n, t, ctx_->comm));
  }
  void post_reduce_scatter_block(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op,
                                 MpiRequest& req) {
    if (!options_.blocking_collectives) {
      ZT_MPI_CHECK(MPI_Ireduce_scatter_block(s, r, n, t, op, ctx_->comm, req.add()));
      return;
    }
    const auto guard = arm(req);
    ZT_MPI_CHECK(MPI_Reduce_scatter_block(s, r, n, t, op, ctx_->comm));
  }
  void post_reduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, int root,
                   MpiRequest& req) {
    if (!options_.blocking_collectives) {
      ZT_MPI_CHECK(MPI_Ireduce(s, r, n, t, op, root, ctx_->comm, req.add()));
      return;
    }
    const auto guard = arm(req);
    ZT_MPI_CHECK(MPI_Reduce(s, r, n, t, op, root, ctx_->comm));
  }
  void post_bcast(void* buf, int n, MPI_Datatype t, int root, MpiRequest& req) {
    if (!options_.blocking_collectives) {
      ZT_MPI_CHECK(MPI_Ibcast(buf, n, t, root, ctx_->comm, req.add()));
      return;
    }
    const auto guard = arm(req);
    ZT_MPI_CHECK(MPI_Bcast(buf, n, t, root, ctx_->comm));
  }
  void post_alltoall(const void* s, void* r, int n, MPI_Datatype t, MpiRequest& req) {
    if (!options_.blocking_collectives) {
      ZT_MPI_CHECK(MPI_Ialltoall(s, n, t, r, n, t, ctx_->comm, req.add()));
      return;
    }
    const auto guard = arm(req);
    ZT_MPI_CHECK(MPI_Alltoall(s, n, t, r, n, t, ctx_->comm));
  }
  // True when part p is `each` elements at offset p * each, for every p.
  static bool uniform_blocks(std::span<const size_t> counts, std::span<const size_t> offsets,
                             size_t each) {
    for (size_t p = 0; p < counts.size(); ++p)
      if (counts[p] != each || offsets[p] != p * each) return false;
    return true;
  }
  // The watchdog of blocking calls, started with the first one.
  runtime::CallWatchdog::Guard arm(const MpiRequest& req) {
    if (!watchdog_) watchdog_ = std::make_unique<runtime::CallWatchdog>();
    return watchdog_->arm(req.what(), timeout());
  }

  // Counts the operation and makes its request.
  std::unique_ptr<MpiRequest> start(Op what, size_t elems, DType dtype,
                                    ReduceOp op = ReduceOp::kSum, int peer = 0) {
    count(what, algorithm_bytes(what, elems, dtype, rank(), size(),
                                what == Op::kBroadcast ? peer : 0));
    return std::make_unique<MpiRequest>(ctx_, detail::describe(what, elems, dtype, op, peer),
                                        timeout());
  }

  // kAvg: MPI computed the sum; divide by the rank count once it is there (after the
  // in-place reduce_scatter's copy, when there is one).
  void finish_avg(MpiRequest& req, void* recv, size_t elems, DType dtype, ReduceOp op) const {
    if (op != ReduceOp::kAvg) return;
    const int n = size();
    req.then([recv, elems, dtype, n] { detail::divide_in_place(recv, elems, dtype, n); });
  }

  std::shared_ptr<const MpiContext> ctx_;
  MpiCommOptions options_;
  std::unique_ptr<runtime::CallWatchdog> watchdog_;  // blocking_collectives only
};

}  // namespace

std::unique_ptr<Comm> make_mpi_comm(MPI_Comm comm, const MpiCommOptions& options) {
  MPI_Comm dup = MPI_COMM_NULL;
  ZT_MPI_CHECK(MPI_Comm_dup(comm, &dup));
  auto ctx = std::make_shared<MpiContext>(dup, std::make_shared<detail::MpiHalfTypes>());
  return std::make_unique<MpiComm>(std::move(ctx), options);
}

std::unique_ptr<Comm> make_mpi_comm(MPI_Comm comm) { return make_mpi_comm(comm, {}); }

}  // namespace zt::comm
