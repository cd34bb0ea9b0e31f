#pragma once
// The offload store: where one rank's optimizer state (fp32 master weights, exp_avg,
// exp_avg_sq of the elements it updates) and, with offload.params = nvme, its stage-3
// parameter shards live. Homes (options.hpp): host memory (pinned in CUDA builds) or
// one NVMe file per rank. The engine asks the store for a unit's state; it never knows
// where the state lives. (Home kNone means the engine keeps the state itself: no store.)
//
// The optimizer state is cut into SUB-GROUPS: consecutive elements of one unit, at most
// offload.subgroup_bytes of master + m + v. update() is the pipelined pass of an
// optimizer step over every sub-group in order: on NVMe it reads sub-group k+1 (and up
// to buffers - 2 ahead) while k is updated and k-1 is written back, in `buffers`
// aligned host buffers. Each element is read, updated once and written, as a
// synchronous loop would do: the results are the same bit for bit.
//
// NVMe file layout (every piece 4 KiB aligned):
//   per sub-group k: [master (count) | m (count) | v (count)] fp32, rounded up to 4 KiB
//   then, per unit u (offload.params = nvme): the parameter shard, rounded up to 4 KiB
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zt/offload/options.hpp"

namespace zt::offload {

struct SubGroup {
  int unit = 0;
  int64_t first = 0;  // first element within the unit's state (0 .. count)
  int64_t count = 0;
  uint64_t offset = 0;  // NVMe: byte offset of its record
};

struct StateView {
  float* master = nullptr;  // [count]
  float* m = nullptr;       // [count]
  float* v = nullptr;       // [count]
};

class Store {
 public:
  // state_counts[u]: elements of unit u whose optimizer state this rank keeps (used when
  // options.optimizer != none); param_counts[u]: elements of its parameter shard (used
  // when options.params != none; params = cpu keeps them in host memory, for an engine
  // on a device). Runs the preflight (preflight.hpp) and creates the
  // NVMe file before returning. Throws zt::InputError for a bad setup (path, space,
  // a host budget too small for the buffers).
  Store(const Options& options, std::vector<int64_t> state_counts,
        std::vector<int64_t> param_counts, int rank);
  ~Store();
  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;

  const Options& options() const;
  Home optimizer_home() const;
  const std::vector<SubGroup>& subgroups() const;

  // Optimizer state, whole units (start-up and checkpoints): blocking.
  // init_unit: master := master, m := 0, v := 0.
  void init_unit(int u, const float* master);
  void read_unit(int u, float* master, float* m, float* v);
  void write_unit(int u, const float* master, const float* m, const float* v);
  // The pipelined pass (see above): fn(sub-group, its state) for every sub-group in
  // order; whatever fn leaves in the view is written back.
  void update(const std::function<void(const SubGroup&, const StateView&)>& fn);

  // Parameter shards (offload.params = nvme: blocking, through an aligned bounce buffer;
  // cpu: copies of the resident shard).
  void read_params(int u, float* dst);
  void write_params(int u, const float* src);

  uint64_t host_bytes() const;  // host memory the store holds (buffers or resident state)
  uint64_t nvme_bytes() const;  // size of this rank's file (0 without NVMe)
  std::string describe() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Bytes of this rank's NVMe file for these counts and options (0 when nothing is on
// NVMe): what the preflight asks the file system for, and what `zt estimate` shows.
uint64_t nvme_file_bytes(const Options& options, const std::vector<int64_t>& state_counts,
                         const std::vector<int64_t>& param_counts);
// Elements per sub-group: subgroup_bytes / 12, a multiple of 1024 (4 KiB of fp32).
int64_t subgroup_elements(const Options& options);
// Host bytes of the NVMe pipeline: buffers x the record of the largest sub-group (a full
// one, or the largest unit's state when smaller), plus the parameter bounce buffer
// (largest shard) with offload.params = nvme.
uint64_t nvme_host_bytes(const Options& options, int64_t largest_state_count,
                         int64_t largest_param_shard);
// Host bytes a Store of these counts holds: the resident state (optimizer = cpu), the
// resident parameter shards (params = cpu), the NVMe pipeline's buffers. What the
// store's constructor allocates, and what the host-memory preflight counts.
uint64_t store_host_bytes(const Options& options, const std::vector<int64_t>& state_counts,
                          const std::vector<int64_t>& param_counts);

}  // namespace zt::offload
