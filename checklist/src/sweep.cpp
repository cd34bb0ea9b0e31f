// The collective sweep (sweep.hpp). Per (op, size, placement):
//   1. zero the buffers, barrier, `warmup` untimed calls;
//   2. barrier, `iters` timed calls, synchronize: this rank's mean time per call;
//   3. gather every rank's mean: report the mean over ranks (nccl-tests' default) and
//      name the slowest rank;
//   4. write the verification pattern, one more call, count wrong elements against the
//      closed-form expectation (pattern.hpp), sum over ranks.
// What each op calls, writes and checks is its entry in the table (collectives.hpp).
// Bookkeeping goes over `control`, never over the Comm under test.
#include "sweep.hpp"

#include <algorithm>
#include <chrono>
#include <ostream>

#include "collectives.hpp"
#include "zt/check/bandwidth.hpp"
#include "zt/check/pattern.hpp"
#include "zt/check/report_writer.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/progress.hpp"
#include "zt/core/units.hpp"

namespace zt::check {
namespace {

Placement measure(const Call& call, comm::Comm& bench, comm::Comm& control,
                  const CheckOptions& o, uint32_t seed, uint64_t bytes) {
  using Clock = std::chrono::steady_clock;
  const Collective& op = collective(call.op);
  const size_t send_bytes = op.send_elems(call) * call.elem();
  const size_t recv_bytes = op.recv_elems(call) * call.elem();
  call.recv->zero(recv_bytes);
  if (send_bytes > 0) call.send->zero(send_bytes);

  control.barrier();
  for (int i = 0; i < o.warmup; ++i) op.run(bench, call);
  bench.synchronize();
  control.barrier();
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < o.iters; ++i) op.run(bench, call);
  bench.synchronize();
  const double my_seconds = std::chrono::duration<double>(Clock::now() - t0).count() / o.iters;

  std::vector<double> seconds(static_cast<size_t>(call.n));  // [n] each rank's mean
  control.all_gather(&my_seconds, seconds.data(), 1, DType::kF64);
  Placement p;
  p.ran = true;
  double sum = 0.0;
  for (double s : seconds) sum += s;
  const double mean = sum / call.n;
  const auto slowest = std::max_element(seconds.begin(), seconds.end());
  p.slowest_rank = static_cast<int>(slowest - seconds.begin());
  p.slowest_us = *slowest * 1e6;
  p.time_us = mean * 1e6;
  p.alg_bw = alg_bw_gbs(bytes, mean);
  p.bus_bw = bus_bw_gbs(call.op, bytes, mean, call.n);

  const Pattern pattern(call.dtype, call.n, seed);
  op.prepare(call, pattern);
  if (send_bytes > 0) call.send->upload(0, send_bytes);
  call.recv->upload(0, recv_bytes);
  control.barrier();
  op.run(bench, call);
  bench.synchronize();
  call.recv->download(0, recv_bytes);
  const int64_t my_wrong = op.count_wrong(call, pattern);
  control.all_reduce(&my_wrong, &p.nwrong, 1, DType::kI64, comm::ReduceOp::kSum);
  return p;
}

}  // namespace

std::vector<Row> run_sweep(comm::Comm& bench, comm::Comm& control, const CheckOptions& o,
                           std::ostream* out) {
  ZT_CHECK(control.memory() == comm::Memory::kHost, "control comm must use host memory",
           "pass an MpiComm as the control comm");
  ZT_CHECK(control.size() == bench.size() && control.rank() == bench.rank(),
           "control and bench comms must span the same ranks in the same order",
           "build both from the same MPI communicator");
  const int n = bench.size();
  const int rank = bench.rank();
  if (o.root >= n)
    throw InputError(strf("--root %d is not a rank of this %d-rank job", o.root, n),
                     "give a root between 0 and the number of ranks - 1");

  const std::vector<uint64_t> sizes = sweep_of(o);
  const size_t e = dtype_size(o.dtype);
  const size_t capacity = static_cast<size_t>(o.max_bytes / e) * e;  // largest buffer any call needs
  std::unique_ptr<Buffer> send = make_buffer(bench.memory(), std::max<size_t>(capacity, e));
  std::unique_ptr<Buffer> recv = make_buffer(bench.memory(), std::max<size_t>(capacity, e));

  std::vector<Row> rows;
  uint32_t seed = 1;
  // Size by size, on rank 0: the last size's time, bus bandwidth and slowest rank ride
  // in each line.
  Progress progress("check sweep", o.ops.size() * sizes.size(), ProgressUnit::kSizes);
  for (CheckOp op : o.ops) {
    if (out) *out << table_header(op) << std::flush;
    for (uint64_t nominal : sizes) {
      const RowShape shape = row_shape(op, nominal, o.dtype, n);
      if (shape.count == 0) {
        if (out)
          *out << strf("  %10llu: fewer than one %s per rank, skipped\n",
                       static_cast<unsigned long long>(nominal),
                       std::string(dtype_name(o.dtype)).c_str()) << std::flush;
        progress.advance(1);
        continue;
      }
      Row row;
      row.op = op;
      row.nominal_size = nominal;
      row.size = shape.bytes;
      row.count = shape.count;
      row.root = op == CheckOp::kBroadcast ? o.root : -1;
      Call call{op, Place::kOut, shape.count, o.dtype, o.redop, o.root, rank, n, send.get(), recv.get()};
      if (has_out_of_place(op)) row.out_of_place = measure(call, bench, control, o, seed++, shape.bytes);
      call.place = Place::kIn;
      if (has_in_place(op)) row.in_place = measure(call, bench, control, o, seed++, shape.bytes);
      if (out) *out << table_row(row, o.dtype, o.redop) << "\n" << std::flush;
      const Placement& shown = row.out_of_place.ran ? row.out_of_place : row.in_place;
      progress.note(strf("%s %s %.1f us busbw %.3g GB/s, slowest rank %d",
                         std::string(check_op_name(op)).c_str(), format_size_approx(nominal).c_str(),
                         shown.time_us, shown.bus_bw, shown.slowest_rank));
      progress.advance(1);
      rows.push_back(row);
    }
  }
  progress.finish();
  return rows;
}

}  // namespace zt::check
