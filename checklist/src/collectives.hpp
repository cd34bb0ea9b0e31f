#pragma once
// The collectives `zt check` benchmarks: one table entry each (collectives.cpp), the way
// nccl-tests has one test file per collective. An entry says everything the sweep, the
// bandwidth arithmetic and the report need: the name, the shape of a call (count and S),
// the bus-bandwidth factor, the buffers it writes, the data it starts from and how every
// received element is checked, and the Comm call itself. Adding a collective is one
// CheckOp enumerator (ops.hpp) and one entry here, plus its test.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "buffer.hpp"
#include "zt/check/ops.hpp"
#include "zt/check/pattern.hpp"
#include "zt/comm/comm.hpp"

namespace zt::check {

enum class Place { kOut, kIn };

// One call. `count` is the count of the Comm call (per rank where the entry says so).
struct Call {
  CheckOp op;
  Place place;
  size_t count;
  DType dtype;
  comm::ReduceOp redop;
  int root;
  int rank, n;
  Buffer* send;
  Buffer* recv;

  size_t elem() const { return dtype_size(dtype); }
  bool out() const { return place == Place::kOut; }
  // Byte offset of block b (b * count elements).
  size_t block(int b) const { return static_cast<size_t>(b) * count * elem(); }
};

struct Collective {
  CheckOp op;
  std::string_view name;
  bool reduces;                // takes a reduction (--op)
  bool out_of_place, in_place;  // the placements the Comm interface has
  bool per_rank;               // count is per rank: S = count * n * size, else count * size
  double (*bus_factor)(double n);  // busbw = algbw * bus_factor(n)
  size_t (*send_elems)(const Call&);  // elements of send the call reads
  size_t (*recv_elems)(const Call&);  // elements of recv it reads or writes
  // Writes the pattern into the host views (poison where the call must write).
  void (*prepare)(const Call&, const Pattern&);
  void (*run)(comm::Comm&, const Call&);
  // This rank's wrong elements in recv's host view (downloaded).
  int64_t (*count_wrong)(const Call&, const Pattern&);
};

// The entry of `op`; every CheckOp has one.
const Collective& collective(CheckOp op);

}  // namespace zt::check
