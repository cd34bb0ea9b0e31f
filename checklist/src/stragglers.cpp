// The straggler loop: per-rank times of a fixed all_reduce loop, and the ranks above
// factor * median (include/zt/check/stages.hpp).
#include <algorithm>
#include <chrono>

#include "buffer.hpp"
#include "zt/check/stages.hpp"

namespace zt::check {

void find_stragglers(Stragglers& s) {
  s.ranks.clear();
  if (s.rank_us.empty()) return;
  std::vector<double> sorted = s.rank_us;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  s.median_us = n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  for (size_t r = 0; r < n; ++r)
    if (s.rank_us[r] > s.factor * s.median_us) s.ranks.push_back(static_cast<int>(r));
}

Stragglers run_stragglers(comm::Comm& bench, comm::Comm& control, uint64_t bytes, int iters,
                          double factor) {
  using Clock = std::chrono::steady_clock;
  Stragglers s;
  s.bytes = bytes;
  s.iters = iters;
  s.factor = factor;
  const size_t count = std::max<size_t>(bytes / sizeof(float), 1);
  std::unique_ptr<Buffer> send = make_buffer(bench.memory(), count * sizeof(float));  // [count] f32
  std::unique_ptr<Buffer> recv = make_buffer(bench.memory(), count * sizeof(float));  // [count] f32
  send->zero(count * sizeof(float));
  bench.all_reduce(send->data(), recv->data(), count, DType::kF32, comm::ReduceOp::kSum);  // warm-up
  bench.synchronize();
  double total = 0.0;
  for (int i = 0; i < iters; ++i) {
    control.barrier();  // every round starts together: a rank's time is its own
    const Clock::time_point t0 = Clock::now();
    bench.all_reduce(send->data(), recv->data(), count, DType::kF32, comm::ReduceOp::kSum);
    bench.synchronize();
    total += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  const double my_us = total / iters * 1e6;
  s.rank_us.resize(static_cast<size_t>(control.size()));
  control.all_gather(&my_us, s.rank_us.data(), 1, DType::kF64);
  s.ran = true;
  find_stragglers(s);
  return s;
}

}  // namespace zt::check
