// Every entry of the table of collectives against a reference written from the ops'
// definitions (MPI semantics), on MpiComm at np 1, 2, 4, each placement the entry has:
// the inputs its prepare() writes on every rank are gathered, the result each rank must
// hold is computed here element by element, the entry's run() must produce exactly it,
// its count_wrong() must find 0 wrong, and must find exactly 1 when any single result
// element is changed (every received element is checked).
#include <gtest/gtest.h>
#include <mpi.h>

#include <map>
#include <vector>

#include "collectives.hpp"
#include "zt/comm/mpi_comm.hpp"
#include "zt/runtime/runtime.hpp"

namespace zc = zt::check;
using zc::CheckOp;

namespace {

constexpr size_t kCount = 5;  // elements per call (per rank for the per-rank ops)
constexpr int kRoot = 1;      // broadcast root (mod n)

// Every rank's n*kCount floats of one buffer.
std::vector<std::vector<float>> gather_all(const float* mine, int n) {
  const size_t len = kCount * static_cast<size_t>(n);
  std::vector<float> flat(len * static_cast<size_t>(n));
  MPI_Allgather(mine, static_cast<int>(len), MPI_FLOAT, flat.data(), static_cast<int>(len),
                MPI_FLOAT, MPI_COMM_WORLD);
  std::vector<std::vector<float>> out;
  for (int r = 0; r < n; ++r) out.emplace_back(flat.begin() + r * len, flat.begin() + (r + 1) * len);
  return out;
}

// recv index -> the value rank `me` must hold there, from the inputs (sum for reductions).
std::map<size_t, double> reference(CheckOp op, bool out, int me, int n,
                                   const std::vector<std::vector<float>>& s,
                                   const std::vector<std::vector<float>>& r) {
  const size_t c = kCount;
  const auto& in = out ? s : r;  // where each rank's input lies
  std::map<size_t, double> want;
  for (size_t k = 0; k < c; ++k) {
    for (int q = 0; q < n; ++q) {
      const auto uq = static_cast<size_t>(q), um = static_cast<size_t>(me);
      switch (op) {
        case CheckOp::kAllReduce: want[k] += in[uq][k]; break;
        case CheckOp::kAllGather: want[uq * c + k] = in[uq][(out ? 0 : uq * c) + k]; break;
        case CheckOp::kReduceScatter: want[(out ? 0 : um * c) + k] += in[uq][um * c + k]; break;
        case CheckOp::kBroadcast: want[k] = r[static_cast<size_t>(kRoot % n)][k]; break;
        case CheckOp::kSendRecv: want[k] = s[static_cast<size_t>((me - 1 + n) % n)][k]; break;
        case CheckOp::kAllToAll: want[uq * c + k] = s[uq][um * c + k]; break;
        case CheckOp::kEnd: ADD_FAILURE() << "no reference for this op"; break;
      }
    }
  }
  return want;
}

}  // namespace

TEST(CollectivesMpi, EveryTableEntryMatchesItsReference) {
  zt::runtime::Runtime rt;
  auto comm = zt::comm::make_mpi_comm(rt.world());
  const int n = comm->size(), me = comm->rank();
  const size_t bytes = kCount * static_cast<size_t>(n) * sizeof(float);
  auto send = zc::make_host_buffer(bytes), recv = zc::make_host_buffer(bytes);
  uint32_t seed = 3;
  for (CheckOp op : zc::kAllCheckOps) {
    const zc::Collective& entry = zc::collective(op);
    EXPECT_EQ(zc::check_op_name(op), entry.name);
    EXPECT_EQ(zc::parse_check_op(entry.name), op);
    for (zc::Place place : {zc::Place::kOut, zc::Place::kIn}) {
      if (!(place == zc::Place::kOut ? entry.out_of_place : entry.in_place)) continue;
      SCOPED_TRACE(std::string(entry.name) + (place == zc::Place::kOut ? " out" : " in"));
      const zc::Call call{op, place, kCount, zt::DType::kF32, zt::comm::ReduceOp::kSum,
                          kRoot % n, me, n, send.get(), recv.get()};
      const zc::Pattern pattern(zt::DType::kF32, n, seed++);
      std::fill_n(reinterpret_cast<float*>(send->host()), kCount * n, -7.0f);
      std::fill_n(reinterpret_cast<float*>(recv->host()), kCount * n, -7.0f);
      entry.prepare(call, pattern);
      const auto s = gather_all(reinterpret_cast<const float*>(send->host()), n);
      const auto r = gather_all(reinterpret_cast<const float*>(recv->host()), n);
      entry.run(*comm, call);
      const auto want = reference(op, place == zc::Place::kOut, me, n, s, r);
      float* got = reinterpret_cast<float*>(recv->host());
      ASSERT_FALSE(want.empty());
      for (const auto& [i, v] : want) EXPECT_EQ(got[i], v) << "element " << i;
      EXPECT_LE(want.rbegin()->first, entry.recv_elems(call) - 1);
      EXPECT_EQ(entry.count_wrong(call, pattern), 0);
      for (const auto& [i, v] : want) {  // one changed element, anywhere in the result
        got[i] += 1.0f;
        EXPECT_EQ(entry.count_wrong(call, pattern), 1) << "element " << i << " not checked";
        got[i] -= 1.0f;
      }
    }
  }
}

TEST(CollectivesMpi, AllToAllValuesDistinctPerSenderReceiverElement) {
  zt::runtime::Runtime rt;
  auto comm = zt::comm::make_mpi_comm(rt.world());
  const int n = comm->size(), me = comm->rank();
  auto send = zc::make_host_buffer(kCount * n * sizeof(float));
  auto recv = zc::make_host_buffer(kCount * n * sizeof(float));
  const zc::Call call{CheckOp::kAllToAll, zc::Place::kOut, kCount, zt::DType::kF32,
                      zt::comm::ReduceOp::kSum, 0, me, n, send.get(), recv.get()};
  zc::collective(CheckOp::kAllToAll).prepare(call, zc::Pattern(zt::DType::kF32, n, 9));
  const auto s = gather_all(reinterpret_cast<const float*>(send->host()), n);
  std::map<float, int> seen;
  for (const auto& rank_send : s)
    for (float v : rank_send) ++seen[v];
  EXPECT_EQ(seen.size(), kCount * n * n);  // n senders x n receivers x kCount elements
}
