#pragma once
// Private to the checkpoint writer (io_write.cpp) and reader (io_read.cpp): the I/O engine
// they share (io_engine.cpp): byte ranges of the file moved by I/O threads in file order
// (RawFile), the checksums and the worker that computes them beside the transfers, and the
// small MPI and HDF5 helpers of both halves.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "h5.hpp"
#include "zt/ckpt/io.hpp"
#include "zt/core/checksum.hpp"
#include "zt/core/progress.hpp"
#include "zt/model/layout.hpp"

namespace zt::ckpt::detail {

// Progress over the whole file's tensor bytes (every rank writes or reads its part of
// each dataset together), printed by rank 0 when the file is big enough.
std::unique_ptr<Progress> file_progress(const char* what, const std::string& path,
                                        const model::ParamLayout& layout, int kinds);

inline constexpr const char* kWriteHint = "check free disk space and that ckpt.dir is writable";
inline constexpr const char* kReadHint = "the file may be damaged, truncated or not a zt checkpoint; "
                                         "load an older one (ckpt.resume=PATH) or write it again";

// The three tensor kinds of a checkpoint, in file order.
enum TensorKind { kParams = 0, kExpAvg = 1, kExpAvgSq = 2 };
std::string dataset_path(int kind, const std::string& name);

// The part of tensor t inside a rank's slice [begin, begin + count) of t's unit:
// tensor-local elements [first, first + n), at `at` within the slice.
struct Part {
  int64_t first = 0;
  int64_t n = 0;
  int64_t at = 0;
};
Part part_of(const model::TensorInfo& t, int64_t begin, int64_t count);
// The same for tensor i of a file's layout when the shard is of `slices`' units (expert
// parallelism, WriteContents::slices; null: part_of(tensors[i], ...)): an expert slice's
// part moved to its place in the whole tensor; a replicated tensor's part empty unless
// this rank is its expert group's first.
Part part_in_file(const std::vector<model::TensorInfo>& tensors, size_t i,
                  const model::ParamLayout* slices, int64_t begin, int64_t count);

// Which checksum a file's datasets carry (docs/checkpoint-format.md, "Checksums"):
// zt-sum64 in format_version 1 files, zt-xxh3 in the version-2 files zt writes now.
enum class SumKind { kSum64, kXxh3 };
SumKind sum_kind_of(uint32_t format_version);

// zt-xxh3's chunk in fp32 elements.
inline constexpr int64_t kChunkElems = static_cast<int64_t>(kXxh3ChunkBytes / sizeof(float));

// zt-xxh3's chunks of a rank's elements [lo, hi) of a tensor of `numel` elements: it hashes
// the whole chunks [c0, c1) from its memory (the tensor's short last chunk counts as
// whole); the chunk starting inside its range but ending past it, [tail, tail_end) (empty:
// none), it hashes from the file once every rank's bytes are there; a chunk starting
// before lo is the previous owner's.
struct ChunkPlan {
  int64_t c0 = 0, c1 = 0;
  int64_t tail = 0, tail_end = 0;
};
ChunkPlan plan_chunks(int64_t lo, int64_t hi, int64_t numel);

// This rank's checksum of x, its elements [first, first + x.size()) of a tensor of `numel`
// elements, over the rank's OpenMP threads (chunks of the data summed apart and added mod
// 2^64): zt-sum64 of every element, or zt-xxh3 of the whole chunks plan_chunks gives it.
// With `non_finite`, also counts x's NaN/Inf elements into it, chunk by chunk while the
// chunk is in cache.
uint64_t checksum(SumKind kind, std::span<const float> x, uint64_t first, uint64_t numel,
                  uint64_t* non_finite = nullptr);

double seconds_since(std::chrono::steady_clock::time_point t0);
// The process's minor page faults so far (getrusage; 0 where it fails).
uint64_t minor_page_faults();

// One read of a unit's bytes through WriteContents::source (begin_read .. end_read);
// without a source (or nothing to read), the bytes where they are.
class SourcedRead {
 public:
  SourcedRead(UnitSource* source, size_t unit, const void* p, size_t n)
      : source_(n > 0 ? source : nullptr), unit_(unit), read_(static_cast<const char*>(p)) {
    if (source_) read_ = source_->begin_read(unit_, read_);
  }
  SourcedRead(UnitSource* source, size_t unit, std::span<const float> x)
      : SourcedRead(source, unit, x.data(), x.size()) {}
  ~SourcedRead() {
    if (source_) source_->end_read(unit_, read_);
  }
  SourcedRead(const SourcedRead&) = delete;
  SourcedRead& operator=(const SourcedRead&) = delete;
  const char* bytes() const { return read_; }
  std::span<const float> floats(size_t n) const { return {reinterpret_cast<const float*>(read_), n}; }

 private:
  UnitSource* source_;
  size_t unit_;
  const char* read_;
};

// Checksums computed by one worker thread beside the main thread's transfers, so they
// cost no pass of their own on the I/O's critical path: a write queues every slice before
// its first transfer (the worker runs ahead of the writes), a read queues each slice after
// its transfer (the worker follows the reads). Jobs run in queue order, each over the
// caller's OpenMP thread count. drain() waits for all of them.
class ChecksumWorker {
 public:
  struct Job {
    SumKind kind = SumKind::kXxh3;
    std::span<const float> x;  // the rank's elements [first, first + x.size()) of a tensor
    uint64_t first = 0;
    uint64_t numel = 0;              // the tensor's
    uint64_t* sum = nullptr;         // written
    uint64_t* non_finite = nullptr;  // written when not null
    std::function<void()> done;      // runs on the worker after the sum (may be empty)
    UnitSource* source = nullptr;    // not null: x is read where source says (unit's copy)
    size_t unit = 0;                 // x's unit, for source
  };

  ChecksumWorker();
  ~ChecksumWorker();
  ChecksumWorker(const ChecksumWorker&) = delete;
  ChecksumWorker& operator=(const ChecksumWorker&) = delete;

  void push(const Job& job);
  // Waits until every queued job is done; returns the seconds this thread waited.
  double drain();
  double busy_seconds();

 private:
  void run();

  const int threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<Job> jobs_;
  size_t pending_ = 0;
  bool stop_ = false;
  double busy_ = 0;
  std::thread thread_;  // last: starts once the members above exist
};

// Raw access to a dataset's bytes. zt's datasets are contiguous, allocated when created,
// never filled, fp32 little-endian: a rank's part of a tensor is one byte range of the
// file, written or read with pwrite / pread on a descriptor of its own, as fio does (no
// MPI-IO layer between, no two-phase aggregation). Another writer's layout (chunked,
// filtered, big-endian: h5py can write those) goes through H5Dread, which converts.
//
// Ranges are queued and moved by kThreads I/O threads in queue (file) order, a piece of
// at most kBounce bytes at a time: while one thread waits for the device, another copies
// its piece between the caller's memory and its bounce buffer (when that memory is not
// aligned for DMA), so the device never waits for a copy (and sees up to kThreads
// requests, as fio --iodepth) and there is no bubble between one tensor's range and the
// next. wait() returns once everything queued moved.
class RawFile {
 public:
  // The page-aligned middle of each range goes through a second descriptor opened
  // O_DIRECT (DMA straight from / into the caller's memory where it is aligned as the
  // device needs, else through an aligned bounce buffer: no page-cache copy, as fio
  // --direct=1), the unaligned head and tail (< 4 KiB each) through the buffered one. A
  // file system without O_DIRECT (tmpfs) does everything buffered.
  RawFile(const std::string& path, bool write);
  ~RawFile();
  RawFile(const RawFile&) = delete;
  RawFile& operator=(const RawFile&) = delete;

  // errno of the open (0: open).
  int open_error() const { return open_errno_; }

  // Queues moving p [n] to (write) or from (read) the file at `at`, named `what` in an
  // error; `done` runs on an I/O thread once all n bytes moved (not after an error).
  // Returns the range's index for wait_range().
  // A write's `source` (may be null) is asked where each piece's bytes are (unit's copy).
  size_t queue(char* p, uint64_t n, uint64_t at, std::string what, std::function<void()> done = {},
               UnitSource* source = nullptr, size_t unit = 0);
  // Waits until range `range` moved or anything failed (then returns the errno as wait()).
  int wait_range(size_t range, std::string* what = nullptr);
  // Waits until everything queued moved or failed. Returns 0, or the first failure's
  // errno (-1: a read past the end of the file) with the name of its range in *what.
  int wait(std::string* what = nullptr);
  // One range, moved before returning: 0 or the errno (-1: the file ends first).
  int write_at(const void* data, size_t n, uint64_t at);
  int read_at(void* data, size_t n, uint64_t at);
  // Closes after wait(), returning 0 or the errno (a write's error can first show here).
  int close();
  // Seconds the I/O threads spent copying through their bounce buffers, summed.
  double copy_seconds();

 private:
  static constexpr size_t kAlign = 4096;              // O_DIRECT offsets, lengths, addresses
  static constexpr size_t kBounce = size_t{8} << 20;  // bytes per direct request
  static constexpr int kThreads = 3;                  // I/O threads: requests in flight

  struct Piece {
    char* p = nullptr;  // the caller's bytes
    uint64_t n = 0;
    uint64_t at = 0;     // file offset
    bool direct = false;  // on the O_DIRECT descriptor (page-aligned offset and length)
    size_t range = 0;
  };
  struct Range {
    std::string what;
    std::function<void()> done;
    size_t left = 0;  // pieces not yet moved
    UnitSource* source = nullptr;  // writes: where the pieces' bytes are read (may be null)
    size_t unit = 0;
  };

  void run(char* bounce);
  // Moves the piece; the seconds spent copying through the bounce buffer into *copy_s.
  int move(const Piece& piece, char* bounce, double* copy_s) const;
  // pwrite / pread of all n bytes (EINTR retried): 0, the errno, or (a read) -1 when the
  // file ends first.
  static int all(int fd, bool write, char* p, uint64_t n, uint64_t at);
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  // The memory alignment O_DIRECT transfers on fd need (statx STATX_DIOALIGN, Linux 6.1;
  // 512 on the development VM's virtio disk), else a page.
  static size_t direct_memory_alignment(int fd);

  const bool write_;
  int fd_ = -1;
  int direct_fd_ = -1;
  int open_errno_ = 0;
  size_t mem_align_ = kAlign;  // of the caller's memory for a transfer without the bounce buffer
  std::vector<std::unique_ptr<char, Free>> bounces_;  // [kThreads][kBounce], kAlign-aligned
  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<Piece> queue_;
  std::deque<Range> ranges_;  // every range queued (a deque: references stay valid)
  int busy_ = 0;              // pieces being moved
  int err_ = 0;
  double copy_s_ = 0;  // copy_seconds()
  std::string failed_;
  bool stop_ = false;
  std::vector<std::thread> threads_;  // last: start once the members above exist
};

// A read's target memory faulted in ahead of the reads, on a thread of its own, in the
// order given (madvise MADV_POPULATE_WRITE, Linux 5.14; elsewhere nothing). A resume reads
// into the engine's freshly mapped moments: every 4 KiB page's first touch is a fault in
// which the kernel zeroes it, and inside an O_DIRECT pread that fault time holds the I/O
// thread off the device (the 1.1B state: 1.08M faults per rank, a load at 0.65 of fio,
// issue 43); here the faults overlap the transfers. Transparent huge pages for the same
// memory made the load 5x slower on the development VM (bench/results/ckpt-io.md).
class Prefault {
 public:
  explicit Prefault(std::vector<std::span<char>> ranges);
  ~Prefault();  // stops early and joins
  Prefault(const Prefault&) = delete;
  Prefault& operator=(const Prefault&) = delete;
  // Seconds the thread spent faulting, once it ended (joins).
  double seconds();

 private:
  std::vector<std::span<char>> ranges_;
  std::atomic<bool> stop_{false};
  double seconds_ = 0;
  std::thread thread_;  // last
};

// Whether dataset `dset`'s bytes can be accessed raw (contiguous, allocated, fp32
// little-endian, no filters, not external); then its first element's file offset in *at.
bool raw_offset(hid_t dset, const std::string& path, uint64_t* at);

// After a data transfer that may fail on some ranks only (a full disk, an I/O error): all
// ranks agree (one all_reduce) and all throw, so none is left in the next collective.
void agree(MPI_Comm comm, herr_t rc, const std::string& what, const std::string& path);

int comm_rank(MPI_Comm comm);
int comm_size(MPI_Comm comm);
// Sums the ranks' partial checksums (uint64, wrapping).
void sum_over_ranks(MPI_Comm comm, std::vector<uint64_t>& sums);

std::vector<hsize_t> dims_of(const std::vector<int64_t>& shape);

// A 1-D memory space of n elements (none selected when n == 0).
h5::Handle memory_space(int64_t n, const std::string& path);

// Reads tensor t's elements [first, first + out.size()) of dataset `dset` (file dataspace
// `space`) into out through H5Dread of the selection (which converts another writer's
// layout): the datasets raw_offset refuses.
void read_range_h5(hid_t dset, hid_t space, const model::TensorInfo& t, int64_t first,
                   std::span<float> out, hid_t dxpl, const std::string& path);

// The zt-xxh3 chunks [plan.tail, plan.tail_end) of tensors read back from the file (the
// chunk a rank holds only the start of): queued on a RawFile, hashed on its I/O thread
// once read; the buffers live until the RawFile's wait().
class TailChunks {
 public:
  // Queues the chunk of a raw dataset whose first element is at file offset `at`; its
  // hash goes to *sum.
  void queue(RawFile& raw, const ChunkPlan& plan, uint64_t at, const std::string& name, uint64_t* sum);
  // The same for a dataset read through H5Dread, at once.
  static uint64_t read_h5(const ChunkPlan& plan, hid_t dset, hid_t space, const model::TensorInfo& t,
                          hid_t dxpl, const std::string& path);
  size_t count() const { return bufs_.size(); }

 private:
  std::deque<std::vector<float>> bufs_;  // a deque: elements stay where they are
};

// A failed raw read named: the dataset and the reason (-1: the file ends first).
[[noreturn]] void throw_read_error(int err, const std::string& path, const std::string& name);

void check_shards(const model::ParamLayout& layout, size_t given, const char* what);

}  // namespace zt::ckpt::detail
