#pragma once
// Checks of every Comm operation against the independent references of values.hpp,
// written once for any backend: a BufferSpace says where the comm's buffers live
// (host memory for MpiComm, device memory for NcclComm) and how to copy to and from it.
// Each check reports mismatches with GoogleTest EXPECTs and returns the wrong count.
#include <cstddef>
#include <memory>
#include <vector>

#include "zt/comm/comm.hpp"

namespace zt::comm::testing {

class BufferSpace {
 public:
  virtual ~BufferSpace() = default;
  virtual void* alloc(size_t bytes) = 0;
  virtual void release(void* p) = 0;
  virtual void upload(void* dst, const void* host, size_t bytes) = 0;
  virtual void download(void* host, const void* src, size_t bytes) = 0;
};

// Host memory (MpiComm).
class HostSpace final : public BufferSpace {
 public:
  void* alloc(size_t bytes) override;
  void release(void* p) override;
  void upload(void* dst, const void* host, size_t bytes) override;
  void download(void* host, const void* src, size_t bytes) override;
};

// A buffer of `count` elements of `dtype` in a space, freed on destruction.
class Buffer {
 public:
  Buffer(BufferSpace& space, size_t count, DType dtype);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* data() { return ptr_; }
  void* at(size_t element) { return static_cast<std::byte*>(ptr_) + element * elem_; }
  // Fills with input_value(dtype, rank, base + i, salt) for i = 0..count-1.
  void fill(int rank, size_t base, int salt);
  void fill_sentinel();  // a value no check expects (-99 / 99 for uint8)
  std::vector<unsigned char> to_host() const;

 private:
  BufferSpace& space_;
  size_t count_;
  size_t elem_;
  DType dtype_;
  void* ptr_;
};

struct Case {
  DType dtype;
  size_t count;
  bool in_place;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  // Largest accepted |result - reference| of a reduction. 0 (exact) everywhere except
  // NCCL's float average, which pre-multiplies each input by 1/n and so rounds
  // differently from sum-then-divide when n is not a power of two.
  double tolerance = 0;
};

int check_all_reduce(Comm& comm, BufferSpace& space, const Case& c);
int check_all_gather(Comm& comm, BufferSpace& space, const Case& c);
int check_reduce_scatter(Comm& comm, BufferSpace& space, const Case& c);
int check_broadcast(Comm& comm, BufferSpace& space, const Case& c);  // in_place ignored
// Every rank sends to rank+1 and receives from rank-1 (mod n), with sendrecv.
int check_ring_sendrecv(Comm& comm, BufferSpace& space, const Case& c);
// all_to_all with uneven per-rank counts (some zero, the own part included) around
// c.count, receive ranges apart with one untouched element between them; also checks the
// operation's byte counter (counted: the comm counts all_to_all itself, not a wrapper
// whose default runs it as sends and receives).
int check_all_to_all(Comm& comm, BufferSpace& space, const Case& c, bool counted = true);

// Counts not divisible by the common world sizes: 1, 7, 1000 + a prime.
inline constexpr size_t kCounts[] = {1, 7, 1009};

}  // namespace zt::comm::testing
