// Writing and reading one checkpoint file, collectively (parallel HDF5) or serially. See
// io.hpp and docs/checkpoint-format.md.
#include "zt/ckpt/io.hpp"

#include <fcntl.h>
#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <atomic>
#include <bit>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <type_traits>
#include <variant>

#include "h5.hpp"
#include "io_detail.hpp"
#include "zt/ckpt/adapters.hpp"
#include "zt/core/checksum.hpp"
#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/log.hpp"
#include "zt/core/progress.hpp"
#include "zt/model/layout.hpp"
#include "zt/runtime/agree.hpp"
#include "zt/runtime/mpi_check.hpp"
#include "zt/version.hpp"

namespace zt::ckpt {
namespace {

namespace fs = std::filesystem;
using h5::Handle;
using h5::Kind;

// A checkpoint file at least this big reports progress while it is written or read.
constexpr uint64_t kProgressBytes = uint64_t{1} << 30;

// Progress over the whole file's tensor bytes (every rank writes or reads its part of
// each dataset together), printed by rank 0 when the file is big enough.
std::unique_ptr<Progress> file_progress(const char* what, const std::string& path,
                                        const model::ParamLayout& layout, int kinds) {
  const uint64_t total = static_cast<uint64_t>(kinds) * static_cast<uint64_t>(layout.total_numel()) *
                         sizeof(float);
  ProgressOptions o;
  o.print = total >= kProgressBytes && process_rank() <= 0;
  std::string name = std::filesystem::path(path).filename().string();
  if (const size_t k = name.find(".tmp"); k != std::string::npos) name.resize(k);  // being published
  auto p = std::make_unique<Progress>(std::string(what) + " " + name, total, ProgressUnit::kBytes, o);
  p->count_items(static_cast<uint64_t>(kinds) * layout.tensors().size(), "tensors");
  return p;
}

constexpr const char* kWriteHint = "check free disk space and that ckpt.dir is writable";
constexpr const char* kReadHint = "the file may be damaged, truncated or not a zt checkpoint; "
                                  "load an older one (ckpt.resume=PATH) or write it again";

// The three tensor kinds of a checkpoint, in file order.
enum TensorKind { kParams = 0, kExpAvg = 1, kExpAvgSq = 2 };
std::string dataset_path(int kind, const std::string& name) {
  return kind == kParams ? param_path(name) : kind == kExpAvg ? exp_avg_path(name) : exp_avg_sq_path(name);
}

// The part of tensor t inside a rank's slice [begin, begin + count) of t's unit:
// tensor-local elements [first, first + n), at `at` within the slice.
struct Part {
  int64_t first = 0;
  int64_t n = 0;
  int64_t at = 0;
};
Part part_of(const model::TensorInfo& t, int64_t begin, int64_t count) {
  const int64_t lo = std::max(begin, t.offset);
  const int64_t hi = std::min(begin + count, t.offset + t.numel);
  if (hi <= lo) return {};
  return {lo - t.offset, hi - lo, lo - begin};
}

// Which checksum a file's datasets carry (docs/checkpoint-format.md, "Checksums"):
// zt-sum64 in format_version 1 files, zt-xxh3 in the version-2 files zt writes now.
enum class SumKind { kSum64, kXxh3 };
SumKind sum_kind_of(uint32_t format_version) {
  return format_version >= 2 ? SumKind::kXxh3 : SumKind::kSum64;
}

// zt-xxh3's chunk in fp32 elements.
constexpr int64_t kChunkElems = static_cast<int64_t>(kXxh3ChunkBytes / sizeof(float));

// zt-xxh3's chunks of a rank's elements [lo, hi) of a tensor of `numel` elements: it hashes
// the whole chunks [c0, c1) from its memory (the tensor's short last chunk counts as
// whole); the chunk starting inside its range but ending past it, [tail, tail_end) (empty:
// none), it hashes from the file once every rank's bytes are there; a chunk starting
// before lo is the previous owner's.
struct ChunkPlan {
  int64_t c0 = 0, c1 = 0;
  int64_t tail = 0, tail_end = 0;
};
ChunkPlan plan_chunks(int64_t lo, int64_t hi, int64_t numel) {
  ChunkPlan p;
  if (hi <= lo) return p;
  p.c0 = (lo + kChunkElems - 1) / kChunkElems * kChunkElems;
  const int64_t last = hi / kChunkElems * kChunkElems;  // the chunk holding element hi
  p.c1 = std::max(p.c0, hi == numel ? hi : last);
  if (hi != numel && last >= lo && last < hi) {
    p.tail = last;
    p.tail_end = std::min(last + kChunkElems, numel);
  }
  return p;
}

// NaN/Inf elements of x (exponent bits all ones), as a loop the compiler vectorises.
uint64_t count_non_finite(std::span<const float> x) {
  uint64_t bad = 0;
  for (const float v : x) bad += (std::bit_cast<uint32_t>(v) & 0x7f800000u) == 0x7f800000u;
  return bad;
}

// This rank's checksum of x, its elements [first, first + x.size()) of a tensor of `numel`
// elements, over the rank's OpenMP threads (chunks of the data summed apart and added mod
// 2^64): zt-sum64 of every element, or zt-xxh3 of the whole chunks plan_chunks gives it.
// With `non_finite`, also counts x's NaN/Inf elements into it, chunk by chunk while the
// chunk is in cache.
uint64_t checksum(SumKind kind, std::span<const float> x, uint64_t first, uint64_t numel,
                  uint64_t* non_finite = nullptr) {
  if (non_finite) *non_finite = 0;
  if (x.empty()) return 0;
  // Pieces of the work, one per thread iteration: the boundaries lo, base + kPiece,
  // base + 2 kPiece, ..., hi, with base on zt-xxh3's chunk grid, so every piece's hash
  // range [max(A, c0), min(B, c1)) starts on a chunk boundary.
  constexpr int64_t kPiece = 4 * kChunkElems;
  const int64_t lo = static_cast<int64_t>(first), hi = lo + static_cast<int64_t>(x.size());
  const ChunkPlan plan = plan_chunks(lo, hi, static_cast<int64_t>(numel));
  const int64_t base = kind == SumKind::kXxh3 ? plan.c0 : lo;  // c0 >= lo
  const int64_t pieces = hi > base ? (hi - base + kPiece - 1) / kPiece : 1;
  uint64_t total = 0, bad = 0;
#pragma omp parallel for reduction(+ : total, bad) schedule(static) if (pieces > 1)
  for (int64_t c = 0; c < pieces; ++c) {
    const int64_t A = c == 0 ? lo : base + c * kPiece;
    const int64_t B = c == pieces - 1 ? hi : base + (c + 1) * kPiece;
    const std::span<const float> piece = x.subspan(static_cast<size_t>(A - lo), static_cast<size_t>(B - A));
    if (kind == SumKind::kSum64) {
      total += sum64_fast(piece, static_cast<uint64_t>(A));
    } else {
      const int64_t h0 = std::max(A, plan.c0), h1 = std::min(B, plan.c1);
      if (h1 > h0)
        total += xxh3_sum(std::as_bytes(x.subspan(static_cast<size_t>(h0 - lo), static_cast<size_t>(h1 - h0))),
                          static_cast<uint64_t>(h0 / kChunkElems));
    }
    if (non_finite) bad += count_non_finite(piece);  // the piece is in cache
  }
  if (non_finite) *non_finite = bad;
  return total;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

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

  ChecksumWorker() : threads_(omp_get_max_threads()), thread_([this] { run(); }) {}
  ~ChecksumWorker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  ChecksumWorker(const ChecksumWorker&) = delete;
  ChecksumWorker& operator=(const ChecksumWorker&) = delete;

  void push(const Job& job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.push_back(job);
      ++pending_;
    }
    wake_.notify_one();
  }
  // Waits until every queued job is done; returns the seconds this thread waited.
  double drain() {
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    return seconds_since(t0);
  }
  double busy_seconds() {
    std::lock_guard<std::mutex> lock(mutex_);
    return busy_;
  }

 private:
  void run() {
    omp_set_num_threads(threads_);
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (stop_) return;  // destroyed: after drain(), or unwinding an error
      const Job job = jobs_.front();
      jobs_.pop_front();
      lock.unlock();
      const auto t0 = std::chrono::steady_clock::now();
      {
        const SourcedRead read(job.source, job.unit, job.x);  // ends before done() releases the unit
        *job.sum = checksum(job.kind, read.floats(job.x.size()), job.first, job.numel, job.non_finite);
      }
      if (job.done) job.done();
      const double t = seconds_since(t0);
      lock.lock();
      busy_ += t;
      if (--pending_ == 0) done_.notify_all();
    }
  }

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
  RawFile(const std::string& path, bool write) : write_(write) {
    const int mode = (write ? O_WRONLY : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW;
    fd_ = ::open(path.c_str(), mode);
    if (fd_ < 0) {
      open_errno_ = errno;
      return;
    }
    direct_fd_ = ::open(path.c_str(), mode | O_DIRECT);
    if (direct_fd_ >= 0) mem_align_ = direct_memory_alignment(direct_fd_);
    if (direct_fd_ >= 0)
      for (int i = 0; i < kThreads; ++i) {
        void* b = nullptr;
        if (::posix_memalign(&b, kAlign, kBounce) != 0) break;
        bounces_.emplace_back(static_cast<char*>(b));
      }
    if (direct_fd_ >= 0 && bounces_.size() < static_cast<size_t>(kThreads)) {
      ::close(direct_fd_);  // no aligned memory: everything buffered
      direct_fd_ = -1;
    }
    for (int i = 0; i < kThreads; ++i) {
      char* bounce = direct_fd_ >= 0 ? bounces_[static_cast<size_t>(i)].get() : nullptr;  // [kBounce]
      threads_.emplace_back([this, bounce] { run(bounce); });
    }
  }
  ~RawFile() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
    if (direct_fd_ >= 0) ::close(direct_fd_);
    if (fd_ >= 0) ::close(fd_);
  }
  RawFile(const RawFile&) = delete;
  RawFile& operator=(const RawFile&) = delete;

  // errno of the open (0: open).
  int open_error() const { return open_errno_; }

  // Queues moving p [n] to (write) or from (read) the file at `at`, named `what` in an
  // error; `done` runs on an I/O thread once all n bytes moved (not after an error).
  // Returns the range's index for wait_range().
  // A write's `source` (may be null) is asked where each piece's bytes are (unit's copy).
  size_t queue(char* p, uint64_t n, uint64_t at, std::string what, std::function<void()> done = {},
               UnitSource* source = nullptr, size_t unit = 0) {
    std::vector<Piece> pieces;  // head and tail buffered, the aligned middle direct
    const uint64_t a0 = (at + kAlign - 1) / kAlign * kAlign, a1 = (at + n) / kAlign * kAlign;
    if (direct_fd_ < 0 || a1 <= a0) {
      if (n > 0) pieces.push_back({p, n, at, false});
    } else {
      if (a0 > at) pieces.push_back({p, a0 - at, at, false});
      for (uint64_t off = a0; off < a1; off += kBounce)
        pieces.push_back({p + (off - at), std::min<uint64_t>(kBounce, a1 - off), off, true});
      if (at + n > a1) pieces.push_back({p + (a1 - at), at + n - a1, a1, false});
    }
    size_t range = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ranges_.push_back({std::move(what), std::move(done), pieces.size(), write_ ? source : nullptr, unit});
      range = ranges_.size() - 1;
      for (Piece& piece : pieces) {
        piece.range = range;
        queue_.push_back(piece);
      }
      if (pieces.empty() && ranges_[range].done) ranges_[range].done();
    }
    wake_.notify_all();
    return range;
  }
  // Waits until range `range` moved or anything failed (then returns the errno as wait()).
  int wait_range(size_t range, std::string* what = nullptr) {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [&] { return ranges_[range].left == 0 || err_ != 0; });
    if (err_ != 0 && what) *what = failed_;
    return err_;
  }
  // Waits until everything queued moved or failed. Returns 0, or the first failure's
  // errno (-1: a read past the end of the file) with the name of its range in *what.
  int wait(std::string* what = nullptr) {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return queue_.empty() && busy_ == 0; });
    if (err_ != 0 && what) *what = failed_;
    return err_;
  }
  // One range, moved before returning: 0 or the errno (-1: the file ends first).
  int write_at(const void* data, size_t n, uint64_t at) {
    queue(const_cast<char*>(static_cast<const char*>(data)), n, at, "");
    return wait();
  }
  int read_at(void* data, size_t n, uint64_t at) {
    queue(static_cast<char*>(data), n, at, "");
    return wait();
  }
  // Closes after wait(), returning 0 or the errno (a write's error can first show here).
  int close() {
    wait();
    int err = 0;
    if (direct_fd_ >= 0 && ::close(direct_fd_) != 0) err = errno;
    direct_fd_ = -1;
    if (fd_ >= 0 && ::close(fd_) != 0 && err == 0) err = errno;
    fd_ = -1;
    return err;
  }

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

  void run(char* bounce) {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_
      const Piece piece = queue_.front();
      queue_.pop_front();
      ++busy_;
      // After a failure nothing more moves; nor once destroyed early (the caller threw).
      const bool skip = err_ != 0 || stop_;
      UnitSource* source = skip ? nullptr : ranges_[piece.range].source;
      const size_t unit = ranges_[piece.range].unit;
      lock.unlock();
      int err = 0;
      if (!skip) {
        const SourcedRead read(source, unit, piece.p, piece.n);
        Piece moved = piece;
        moved.p = const_cast<char*>(read.bytes());  // a write only reads it
        err = move(moved, bounce);
      }
      lock.lock();
      if (err != 0 && err_ == 0) {
        err_ = err;
        failed_ = ranges_[piece.range].what;
      }
      if (--ranges_[piece.range].left == 0 && err_ == 0 && !stop_) {
        std::function<void()> done = std::move(ranges_[piece.range].done);
        lock.unlock();
        if (done) done();  // e.g. queues the range's checksum
        lock.lock();
      }
      --busy_;
      idle_.notify_all();  // wait() and wait_range() check their condition
    }
  }
  int move(const Piece& piece, char* bounce) const {
    if (!piece.direct) return all(fd_, write_, piece.p, piece.n, piece.at);
    // Memory aligned as the device's DMA wants it: straight from / into the caller's
    // bytes (no copy at all, as fio), else through the bounce buffer.
    if (reinterpret_cast<uintptr_t>(piece.p) % mem_align_ == 0)
      return all(direct_fd_, write_, piece.p, piece.n, piece.at);
    const size_t len = static_cast<size_t>(piece.n);
    if (write_) std::memcpy(bounce, piece.p, len);
    if (const int err = all(direct_fd_, write_, bounce, len, piece.at)) return err;
    if (!write_) std::memcpy(piece.p, bounce, len);
    return 0;
  }
  // pwrite / pread of all n bytes (EINTR retried): 0, the errno, or (a read) -1 when the
  // file ends first.
  static int all(int fd, bool write, char* p, uint64_t n, uint64_t at) {
    while (n > 0) {
      const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, uint64_t{1} << 30));
      const ssize_t r = write ? ::pwrite(fd, p, chunk, static_cast<off_t>(at))
                              : ::pread(fd, p, chunk, static_cast<off_t>(at));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return errno;
      if (r == 0) return write ? EIO : -1;
      p += r;
      at += static_cast<uint64_t>(r);
      n -= static_cast<uint64_t>(r);
    }
    return 0;
  }
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  // The memory alignment O_DIRECT transfers on fd need (statx STATX_DIOALIGN, Linux 6.1;
  // 512 on the development VM's virtio disk), else a page.
  static size_t direct_memory_alignment(int fd) {
#ifdef STATX_DIOALIGN
    struct statx st {};
    if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &st) == 0 && (st.stx_mask & STATX_DIOALIGN) &&
        st.stx_dio_mem_align > 0 && kAlign % st.stx_dio_mem_align == 0)
      return st.stx_dio_mem_align;
#endif
    return kAlign;
  }

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
  std::string failed_;
  bool stop_ = false;
  std::vector<std::thread> threads_;  // last: start once the members above exist
};

// Whether dataset `dset`'s bytes can be accessed raw (contiguous, allocated, fp32
// little-endian, no filters, not external); then its first element's file offset in *at.
bool raw_offset(hid_t dset, const std::string& path, uint64_t* at) {
  Handle dcpl(ZT_H5_CHECK(H5Dget_create_plist(dset), path, kReadHint), Kind::kPlist);
  if (H5Pget_layout(dcpl.get()) != H5D_CONTIGUOUS) return false;
  if (ZT_H5_CHECK(H5Pget_nfilters(dcpl.get()), path, kReadHint) > 0) return false;
  if (ZT_H5_CHECK(H5Pget_external_count(dcpl.get()), path, kReadHint) > 0) return false;
  Handle type(ZT_H5_CHECK(H5Dget_type(dset), path, kReadHint), Kind::kDatatype);
  if (ZT_H5_CHECK(H5Tequal(type.get(), H5T_IEEE_F32LE), path, kReadHint) <= 0) return false;
  const haddr_t offset = H5Dget_offset(dset);
  if (offset == HADDR_UNDEF) return false;
  *at = static_cast<uint64_t>(offset);
  return true;
}

// After a data transfer that may fail on some ranks only (a full disk, an I/O error): all
// ranks agree (one all_reduce) and all throw, so none is left in the next collective.
void agree(MPI_Comm comm, herr_t rc, const std::string& what, const std::string& path) {
  runtime::agree(comm, [&] {
    if (rc < 0) h5::fail(what.c_str(), path, kWriteHint, false, __FILE__, __LINE__);
  }).rethrow(what + " failed on another rank writing '" + path + "' (its message says why)", kWriteHint);
}

int comm_rank(MPI_Comm comm) {
  int r = 0;
  if (comm != MPI_COMM_NULL) ZT_MPI_CHECK(MPI_Comm_rank(comm, &r));
  return r;
}
int comm_size(MPI_Comm comm) {
  int n = 1;
  if (comm != MPI_COMM_NULL) ZT_MPI_CHECK(MPI_Comm_size(comm, &n));
  return n;
}
// Sums the ranks' partial checksums (uint64, wrapping).
void sum_over_ranks(MPI_Comm comm, std::vector<uint64_t>& sums) {
  if (comm == MPI_COMM_NULL || sums.empty()) return;
  ZT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sums.data(), static_cast<int>(sums.size()),
                             MPI_UINT64_T, MPI_SUM, comm));
}

std::vector<hsize_t> dims_of(const std::vector<int64_t>& shape) {
  std::vector<hsize_t> d;
  for (const int64_t x : shape) d.push_back(static_cast<hsize_t>(x));
  return d;
}

// A 1-D memory space of n elements (none selected when n == 0).
Handle memory_space(int64_t n, const std::string& path) {
  const hsize_t dims[1] = {static_cast<hsize_t>(std::max<int64_t>(n, 1))};
  Handle m(ZT_H5_CHECK(H5Screate_simple(1, dims, nullptr), path, kWriteHint), Kind::kDataspace);
  if (n == 0) ZT_H5_CHECK(H5Sselect_none(m.get()), path, kWriteHint);
  return m;
}

// Reads tensor t's elements [first, first + out.size()) of dataset `dset` (file dataspace
// `space`) into out through H5Dread of the selection (which converts another writer's
// layout): the datasets raw_offset refuses.
void read_range_h5(hid_t dset, hid_t space, const model::TensorInfo& t, int64_t first,
                   std::span<float> out, hid_t dxpl, const std::string& path) {
  float dummy = 0.0f;  // a valid buffer for a rank that reads nothing
  const int64_t n = static_cast<int64_t>(out.size());
  h5::select_range(space, t.shape, first, n, path);
  Handle mem = memory_space(n, path);
  ZT_H5_CHECK(H5Dread(dset, H5T_NATIVE_FLOAT, mem.get(), space, dxpl, n > 0 ? out.data() : &dummy),
              path, kReadHint);
}

// The zt-xxh3 chunks [plan.tail, plan.tail_end) of tensors read back from the file (the
// chunk a rank holds only the start of): queued on a RawFile, hashed on its I/O thread
// once read; the buffers live until the RawFile's wait().
class TailChunks {
 public:
  // Queues the chunk of a raw dataset whose first element is at file offset `at`; its
  // hash goes to *sum.
  void queue(RawFile& raw, const ChunkPlan& plan, uint64_t at, const std::string& name, uint64_t* sum) {
    if (plan.tail_end <= plan.tail) return;
    std::vector<float>& chunk = bufs_.emplace_back(static_cast<size_t>(plan.tail_end - plan.tail));  // [<= kChunkElems]
    const uint64_t first_chunk = static_cast<uint64_t>(plan.tail / kChunkElems);
    raw.queue(reinterpret_cast<char*>(chunk.data()), chunk.size() * sizeof(float),
              at + static_cast<uint64_t>(plan.tail) * sizeof(float), name,
              [&chunk, first_chunk, sum] { *sum = xxh3_sum(std::as_bytes(std::span<const float>(chunk)), first_chunk); });
  }
  // The same for a dataset read through H5Dread, at once.
  static uint64_t read_h5(const ChunkPlan& plan, hid_t dset, hid_t space, const model::TensorInfo& t,
                          hid_t dxpl, const std::string& path) {
    if (plan.tail_end <= plan.tail) return 0;
    std::vector<float> chunk(static_cast<size_t>(plan.tail_end - plan.tail));  // [<= kChunkElems]
    read_range_h5(dset, space, t, plan.tail, chunk, dxpl, path);
    return xxh3_sum(std::as_bytes(std::span<const float>(chunk)), static_cast<uint64_t>(plan.tail / kChunkElems));
  }
  size_t count() const { return bufs_.size(); }

 private:
  std::deque<std::vector<float>> bufs_;  // a deque: elements stay where they are
};

// A failed raw read named: the dataset and the reason (-1: the file ends first).
[[noreturn]] void throw_read_error(int err, const std::string& path, const std::string& name) {
  throw InputError(strf("checkpoint '%s': reading dataset '%s' failed: %s", path.c_str(), name.c_str(),
                        err < 0 ? "the file ends before its data (truncated)" : std::strerror(err)),
                   kReadHint);
}

void check_shards(const model::ParamLayout& layout, size_t given, const char* what) {
  ZT_CHECK(given == static_cast<size_t>(layout.num_units()),
           strf("%s: %zu unit shards for a model of %d units", what, given, layout.num_units()),
           "pass one shard per unit of the layout");
}

}  // namespace

// open_file, header_of and open_tensor are shared with the adapter reader (io_detail.hpp).
Handle open_file(MPI_Comm comm, const std::string& path) {
  std::error_code ec;
  const std::string name = fs::path(path).filename().string();  // .tmp, .tmp.<host>.<pid>
  if (name.ends_with(".tmp") || name.find(".tmp.") != std::string::npos)
    throw InputError("'" + path + "' is a checkpoint still being written (or abandoned): .tmp "
                     "files are never loaded",
                     "load the complete file it would have become, or the one `latest` names");
  if (!fs::exists(path, ec))
    throw InputError("checkpoint file '" + path + "' does not exist",
                     "check the path (ckpt.resume / ckpt.init_from), or list ckpt.dir");
  require_regular_file(path, "checkpoint", "give a step-N.h5 file");  // never a blocking open
  h5::QuietErrors quiet;
  if (H5Fis_hdf5(path.c_str()) <= 0)
    throw InputError("checkpoint '" + path + "' is not an HDF5 file", kReadHint);
  Handle fapl = h5::file_access(comm, path);
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
  if (id < 0) h5::fail("H5Fopen", path, kReadHint, /*bad_input=*/true, __FILE__, __LINE__);
  return Handle(id, Kind::kFile);
}

Header header_of(hid_t file, const std::string& path) {
  const std::string root = "the root group";
  const std::string format = h5::read_string_attr(file, "format", path, root);
  if (format != kFormat)
    throw InputError("'" + path + "' is not a zt checkpoint (attribute format = \"" + format + "\")",
                     "give a file written by zt train or zt convert hf-to-h5");
  Header h;
  h.format_version = static_cast<uint32_t>(h5::read_u64_attr(file, "format_version", path, root));
  if (h.format_version > kFormatVersion || h.format_version == 0)
    throw InputError(strf("checkpoint '%s' has format_version %u; this zt reads version %u",
                          path.c_str(), h.format_version, kFormatVersion),
                     "load it with the zt version that wrote it (attribute zt_version)");
  h.contents = h5::read_string_attr(file, "contents", path, root);
  if (h.contents != kContentsTraining && h.contents != kContentsWeights &&
      h.contents != kContentsAdapters)
    throw InputError("checkpoint '" + path + "': attribute contents = \"" + h.contents +
                         "\", expected \"training\", \"weights\" or \"adapters\"",
                     kReadHint);
  h.zt_version = h5::read_string_attr(file, "zt_version", path, root);
  h.zt_commit = h5::read_string_attr(file, "zt_commit", path, root);
  h.config = config_from_json(h5::read_string_attr(file, "model_config", path, root), path);
  if (h5::has_attr(file, "source_dtype", path))
    h.source_dtype = h5::read_string_attr(file, "source_dtype", path, root);
  if (h5::has_attr(file, "tokenizer", path)) {
    h.tokenizer.name = h5::read_string_attr(file, "tokenizer", path, root);
    h.tokenizer.path = h5::read_string_attr(file, "tokenizer_path", path, root);
    h.tokenizer.hash = h5::read_string_attr(file, "tokenizer_hash", path, root);
  }
  if (h.contents == kContentsAdapters) {  // adapters.hpp
    h.adapters.finetune = h5::read_string_attr(file, "finetune", path, root);
    h.adapters.base_path = h5::read_string_attr(file, "base_path", path, root);
    h.adapters.base_hash = h5::read_string_attr(file, "base_hash", path, root);
  }
  return h;
}

namespace {

// ---- writing -----------------------------------------------------------------------

// This rank's part of one checkpoint file: the tensors of each kind (params, then the two
// moments of a training file) and the dataset of each.
struct FileParts {
  const model::ParamLayout& layout;
  int kinds = 1;  // 1: params only; 3: params and both moments
  size_t nt() const { return layout.tensors().size(); }
  size_t index(int kind, size_t i) const { return static_cast<size_t>(kind) * nt() + i; }
};

// The order in which a write visits (kind, tensor index) pairs: file order (every tensor
// of each kind in turn), or unit by unit (each unit's params, then exp_avg, exp_avg_sq)
// for WriteContents::unit_done, whose first units the optimizer updates first.
using Slot = std::pair<int, size_t>;
std::vector<Slot> write_order(const FileParts& f, bool by_unit) {
  std::vector<Slot> order;  // [kinds * tensors]
  for (int k = 0; k < f.kinds; ++k)
    for (size_t i = 0; i < f.nt(); ++i) order.emplace_back(k, i);
  if (by_unit)
    std::stable_sort(order.begin(), order.end(), [&](const Slot& a, const Slot& b) {
      return f.layout.tensors()[a.second].unit < f.layout.tensors()[b.second].unit;
    });
  return order;
}

// Calls WriteContents::unit_done once a unit's slices left its memory: each (kind,
// tensor) of the unit arrives twice (its range written, its checksum job done); the last
// arrival releases the unit. Destroyed (write_file returning or throwing, after the I/O
// and checksum threads stopped), it releases every unit not yet released, so a failed
// save never leaves the optimizer waiting.
class UnitRelease {
 public:
  UnitRelease(const std::function<void(size_t)>& done, const FileParts& f)
      : done_(done), left_(done ? static_cast<size_t>(f.layout.num_units()) : 0) {
    for (size_t i = 0; i < f.nt() && done_; ++i)
      left_[static_cast<size_t>(f.layout.tensors()[i].unit)] += 2 * f.kinds;
  }
  ~UnitRelease() {
    for (size_t u = 0; u < left_.size(); ++u)
      if (left_[u].exchange(0) > 0) done_(u);
  }
  UnitRelease(const UnitRelease&) = delete;
  UnitRelease& operator=(const UnitRelease&) = delete;
  // The callback one arrival of tensor i's unit runs (empty without unit_done).
  std::function<void()> arrival(const FileParts& f, size_t i) {
    if (!done_) return {};
    const size_t u = static_cast<size_t>(f.layout.tensors()[i].unit);
    return [this, u] {
      if (left_[u].fetch_sub(1) == 1) done_(u);
    };
  }

 private:
  const std::function<void(size_t)>& done_;
  std::vector<std::atomic<int>> left_;  // [units] arrivals still to come
};

// This rank's slice of tensor i of `kind`, and where it lies in the tensor.
std::span<const float> slice_of(const WriteContents& c, int kind, const model::TensorInfo& t, Part* part) {
  const UnitShard& s = c.units[static_cast<size_t>(t.unit)];
  const std::span<const float> all = kind == kParams ? s.params : kind == kExpAvg ? s.exp_avg : s.exp_avg_sq;
  ZT_CHECK(all.size() == static_cast<size_t>(s.count), "shard span size differs from its count",
           "every span of a UnitShard holds `count` elements");
  *part = part_of(t, s.begin, s.count);
  return all.subspan(static_cast<size_t>(part->at), static_cast<size_t>(part->n));
}

// The checksums of a file being written: every dataset's (and /state/rng's last, for a
// training file) and every dataset's count of NaN/Inf elements, this rank's slices first,
// then summed over the ranks.
struct FileSums {
  std::vector<uint64_t> sums;        // [datasets (+ 1: /state/rng)]
  std::vector<uint64_t> non_finite;  // [datasets]
};

// Rank 0's zt-xxh3 of /state/rng [world] (every rank's seed, gathered), 0 on the others:
// the dataset is one chunk, which one rank hashes.
uint64_t rng_sum(MPI_Comm comm, uint64_t seed) {
  std::vector<uint64_t> seeds(static_cast<size_t>(comm_size(comm)), seed);  // [world]
  if (comm != MPI_COMM_NULL)
    ZT_MPI_CHECK(MPI_Allgather(&seed, 1, MPI_UINT64_T, seeds.data(), 1, MPI_UINT64_T, comm));
  return comm_rank(comm) == 0 ? xxh3_sum(std::as_bytes(std::span<const uint64_t>(seeds))) : 0;
}


// Queues the checksum of every slice this rank writes on the worker (in write order): its
// whole zt-xxh3 chunks; the chunks it holds only part of come later (add_tail_sums).
FileSums queue_checksums(MPI_Comm comm, ChecksumWorker& worker, const WriteContents& c,
                         const FileParts& f, const std::vector<Slot>& order, UnitRelease& release,
                         bool training) {
  const std::vector<model::TensorInfo>& tensors = f.layout.tensors();
  const size_t n = static_cast<size_t>(f.kinds) * f.nt();
  FileSums s{std::vector<uint64_t>(n + (training ? 1 : 0), 0), std::vector<uint64_t>(n, 0)};
  for (const auto& [k, i] : order) {
    Part p;
    const std::span<const float> x = slice_of(c, k, tensors[i], &p);
    const size_t d = f.index(k, i);
    worker.push({SumKind::kXxh3, x, static_cast<uint64_t>(p.first), static_cast<uint64_t>(tensors[i].numel),
                 &s.sums[d], &s.non_finite[d], release.arrival(f, i), c.source,
                 static_cast<size_t>(tensors[i].unit)});
  }
  if (training) s.sums[n] = rng_sum(comm, c.rng_seed);
  return s;
}

// After the worker drained: sums over the ranks (one all_reduce, the same on every rank),
// and a file with a NaN/Inf element is refused on every rank alike, before its checksums
// are written and long before it could be published (a NaN weight would be resumed from
// forever; issue 20).
void finish_checksums(MPI_Comm comm, const FileParts& f, FileSums& s, const std::string& path) {
  const std::vector<model::TensorInfo>& tensors = f.layout.tensors();
  std::vector<uint64_t> all = s.sums;
  all.insert(all.end(), s.non_finite.begin(), s.non_finite.end());
  sum_over_ranks(comm, all);
  std::copy(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(s.sums.size()), s.sums.begin());
  std::copy(all.begin() + static_cast<std::ptrdiff_t>(s.sums.size()), all.end(), s.non_finite.begin());
  std::string bad;
  size_t bad_count = 0;
  for (int k = 0; k < f.kinds; ++k)
    for (size_t i = 0; i < f.nt(); ++i) {
      const uint64_t b = s.non_finite[f.index(k, i)];
      if (b == 0) continue;
      if (bad_count++ < 4)
        bad += strf("%s'%s' (%llu of %lld elements)", bad.empty() ? "" : ", ",
                    dataset_path(k, tensors[i].name).c_str(), static_cast<unsigned long long>(b),
                    static_cast<long long>(tensors[i].numel));
    }
  if (bad_count > 0)
    throw Error(strf("refusing to write checkpoint '%s': %zu tensor%s NaN or Inf: %s%s",
                     path.c_str(), bad_count, bad_count == 1 ? " holds" : "s hold", bad.c_str(),
                     bad_count > 4 ? ", ..." : ""),
                "the model diverged (check train.lr, train.eps, train.grad_clip) or the state "
                "was corrupted; `latest` still names the last good checkpoint: resume from it "
                "with different settings");
}

void write_root_attributes(hid_t file, const Header& h, const std::string& path) {
  h5::write_string_attr(file, "format", kFormat, path);
  h5::write_u32_attr(file, "format_version", kFormatVersion, path);
  h5::write_string_attr(file, "contents", h.contents, path);
  h5::write_string_attr(file, "zt_version", kVersion, path);
  h5::write_string_attr(file, "zt_commit", kGitCommit, path);
  h5::write_string_attr(file, "model_config", config_to_json(h.config), path);
  if (!h.source_dtype.empty()) h5::write_string_attr(file, "source_dtype", h.source_dtype, path);
  if (!h.tokenizer.name.empty()) {
    h5::write_string_attr(file, "tokenizer", h.tokenizer.name, path);
    h5::write_string_attr(file, "tokenizer_path", h.tokenizer.path, path);
    h5::write_string_attr(file, "tokenizer_hash", h.tokenizer.hash, path);
  }
  if (h.contents == kContentsAdapters) {  // adapters.hpp
    h5::write_string_attr(file, "finetune", h.adapters.finetune, path);
    h5::write_string_attr(file, "base_path", h.adapters.base_path, path);
    h5::write_string_attr(file, "base_hash", h.adapters.base_hash, path);
  }
}

// Contiguous datasets, allocated at once, never filled.
Handle dataset_creation(const std::string& path) {
  Handle dcpl(ZT_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE), path, kWriteHint), Kind::kPlist);
  ZT_H5_CHECK(H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS), path, kWriteHint);
  ZT_H5_CHECK(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY), path, kWriteHint);
  ZT_H5_CHECK(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), path, kWriteHint);
  return dcpl;
}

// The open datasets of a file being written, with their file dataspaces.
struct Datasets {
  std::vector<Handle> dsets;
  std::vector<Handle> spaces;
};

// Every tensor dataset (collective metadata: the same calls on every rank).
Datasets create_tensors(hid_t file, const FileParts& f, hid_t dcpl, const std::string& path) {
  const std::vector<model::TensorInfo>& tensors = f.layout.tensors();
  { Handle g = h5::create_group(file, "params", path); }
  if (f.kinds == 3) {
    Handle g = h5::create_group(file, "optim", path);
    Handle a = h5::create_group(g.get(), "exp_avg", path);
    Handle b = h5::create_group(g.get(), "exp_avg_sq", path);
  }
  Datasets ds;
  for (int k = 0; k < f.kinds; ++k)
    for (size_t i = 0; i < f.nt(); ++i) {
      const std::vector<hsize_t> dims = dims_of(tensors[i].shape);
      Handle space(ZT_H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                               path, kWriteHint),
                   Kind::kDataspace);
      const std::string name = dataset_path(k, tensors[i].name);
      Handle d(ZT_H5_CHECK(H5Dcreate2(file, name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT,
                                      dcpl, H5P_DEFAULT),
                           path, kWriteHint),
               Kind::kDataset);
      ds.dsets.push_back(std::move(d));
      ds.spaces.push_back(std::move(space));
    }
  return ds;
}

// The ranks agree once on the raw writes' outcome (errno 0, or the first error and the
// write it ended), so a full disk on one rank ends every rank with its message; no rank
// waits for another between datasets.
void agree_errno(MPI_Comm comm, int err, const std::string& what, const std::string& path) {
  runtime::agree(comm, [&] {
    if (err != 0)
      throw Error(strf("%s of checkpoint '%s' failed: %s", what.c_str(), path.c_str(),
                       std::strerror(err)),
                  kWriteHint);
  }).rethrow(what + " failed on another rank writing '" + path + "' (its message says why)", kWriteHint);
}

// Per dataset, this rank's part: raw (its byte range queued on the I/O threads, which
// write in file order while the next ranges are queued) where the dataset's storage
// allows (always, for the datasets create_tensors made), else one H5Dwrite of its
// hyperslabs. After a failed write the rank writes nothing more; all agree at the end.
void write_tensors(MPI_Comm comm, const WriteContents& c, const FileParts& f,
                   const std::vector<Slot>& order, UnitRelease& release, Datasets& ds, hid_t dxpl,
                   const std::string& path, Progress& progress) {
  const std::vector<model::TensorInfo>& tensors = f.layout.tensors();
  RawFile raw(path, /*write=*/true);
  int err = raw.open_error();
  std::string failed = err != 0 ? "opening the data" : "";
  const float dummy = 0.0f;  // a valid buffer for ranks that write nothing
  std::vector<std::pair<size_t, size_t>> queued;  // [raw datasets]: (range, tensor index)
  for (const auto& [k, i] : order) {
    const size_t d = f.index(k, i);
    Part p;
    const std::span<const float> data = slice_of(c, k, tensors[i], &p);
    if (uint64_t at = 0; raw_offset(ds.dsets[d].get(), path, &at)) {
      if (err == 0)
        queued.emplace_back(raw.queue(const_cast<char*>(reinterpret_cast<const char*>(data.data())),
                                      data.size_bytes(), at + static_cast<uint64_t>(p.first) * sizeof(float),
                                      "writing " + dataset_path(k, tensors[i].name), release.arrival(f, i),
                                      c.source, static_cast<size_t>(tensors[i].unit)),
                            i);
    } else {
      h5::select_range(ds.spaces[d].get(), tensors[i].shape, p.first, p.n, path);
      Handle mem = memory_space(p.n, path);
      herr_t rc = 0;
      {
        const SourcedRead read(c.source, static_cast<size_t>(tensors[i].unit), data);  // ends before arrival
        rc = H5Dwrite(ds.dsets[d].get(), H5T_NATIVE_FLOAT, mem.get(), ds.spaces[d].get(), dxpl,
                      p.n > 0 ? static_cast<const void*>(read.bytes()) : &dummy);
      }
      agree(comm, rc, "H5Dwrite of " + dataset_path(k, tensors[i].name), path);
      if (const std::function<void()> arrived = release.arrival(f, i)) arrived();
      progress.advance(static_cast<uint64_t>(tensors[i].numel) * sizeof(float), 1);
    }
  }
  for (const auto& [range, i] : queued) {  // progress as the ranges reach the file
    if (err == 0) err = raw.wait_range(range, &failed);
    progress.advance(static_cast<uint64_t>(tensors[i].numel) * sizeof(float), 1);
  }
  if (err == 0) err = raw.wait(&failed);
  const int close_err = raw.close();
  if (err == 0 && close_err != 0) {
    err = close_err;
    failed = "closing the data";
  }
  agree_errno(comm, err, failed, path);
}

// Once every rank's bytes are in the file (write_tensors agreed): adds to sums the zt-xxh3
// chunks this rank holds only the start of, read back from the file (at most one per
// tensor this rank's range ends inside: <= 256 KiB each). The ranks agree on the outcome.
// Returns how many chunks it read.
size_t add_tail_sums(MPI_Comm comm, const WriteContents& c, const FileParts& f, Datasets& ds,
                     const std::string& path, FileSums& s) {
  size_t count = 0;
  runtime::agree(comm, [&] {
    std::vector<uint64_t> tails(s.sums.size(), 0);  // [datasets (+ 1)]
    TailChunks chunks;  // outlives back's I/O threads
    RawFile back(path, /*write=*/false);
    if (back.open_error() != 0)
      throw Error(strf("reading back checkpoint '%s': %s", path.c_str(), std::strerror(back.open_error())),
                  kWriteHint);
    const std::vector<model::TensorInfo>& tensors = f.layout.tensors();
    for (int k = 0; k < f.kinds; ++k)
      for (size_t i = 0; i < f.nt(); ++i) {
        Part p;
        slice_of(c, k, tensors[i], &p);
        const size_t d = f.index(k, i);
        uint64_t at = 0;
        ZT_CHECK(raw_offset(ds.dsets[d].get(), path, &at), "a dataset zt created is not contiguous",
                 "create_tensors makes them so");
        chunks.queue(back, plan_chunks(p.first, p.first + p.n, tensors[i].numel), at,
                     dataset_path(k, tensors[i].name), &tails[d]);
      }
    std::string failed;
    if (const int err = back.wait(&failed))
      throw Error(strf("reading back '%s' of checkpoint '%s': %s", failed.c_str(), path.c_str(),
                       err < 0 ? "the file ends first" : std::strerror(err)),
                  kWriteHint);
    for (size_t d = 0; d < tails.size(); ++d) s.sums[d] += tails[d];
    count = chunks.count();
  }).rethrow("reading back checksum chunks failed on another rank writing '" + path + "' (its message says why)",
             kWriteHint);
  return count;
}

// Each dataset's checksum attribute (collective metadata), then the datasets closed.
void write_checksums(const FileParts& f, Datasets& ds, const std::vector<uint64_t>& sums,
                     const std::string& path) {
  for (int k = 0; k < f.kinds; ++k)
    for (size_t i = 0; i < f.nt(); ++i)
      h5::write_u64_attr(ds.dsets[f.index(k, i)].get(), "checksum", sums[f.index(k, i)], path);
  for (Handle& d : ds.dsets) d.close(path);
}

// /state: the TrainState fields (kStateFields) and, for a training file, /state/rng
// [world], each rank writing its own element.
// `state` null: a weights-only file (step and tokens_seen 0, no /state/rng).
void write_state(MPI_Comm comm, hid_t file, const TrainState* state, uint64_t rng_seed,
                 uint64_t rng_sum, hid_t dcpl, hid_t dxpl, const std::string& path) {
  const bool training = state != nullptr;
  TrainState st = training ? *state : TrainState{};
  st.world_size = comm_size(comm);
  Handle group = h5::create_group(file, "state", path);
  for (const StateField& f : kStateFields) {
    if (f.training_only && !training) continue;
    std::visit(
        [&](auto member) {
          using T = std::remove_cvref_t<decltype(st.*member)>;
          if constexpr (std::is_same_v<T, double>) h5::write_f64_attr(group.get(), f.name, st.*member, path);
          else if constexpr (std::is_same_v<T, uint64_t>) h5::write_u64_attr(group.get(), f.name, st.*member, path);
          else h5::write_i64_attr(group.get(), f.name, st.*member, path);
        },
        f.member);
  }
  if (training) {
    const hsize_t dims[1] = {static_cast<hsize_t>(st.world_size)};
    Handle space(ZT_H5_CHECK(H5Screate_simple(1, dims, nullptr), path, kWriteHint), Kind::kDataspace);
    Handle d(ZT_H5_CHECK(H5Dcreate2(group.get(), "rng", H5T_STD_U64LE, space.get(), H5P_DEFAULT, dcpl,
                                    H5P_DEFAULT),
                         path, kWriteHint),
             Kind::kDataset);
    h5::write_u64_attr(d.get(), "checksum", rng_sum, path);
    const hsize_t start[1] = {static_cast<hsize_t>(comm_rank(comm))}, one[1] = {1};
    ZT_H5_CHECK(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, one, nullptr), path,
                kWriteHint);
    Handle mem = memory_space(1, path);
    ZT_H5_CHECK(H5Dwrite(d.get(), H5T_NATIVE_UINT64, mem.get(), space.get(), dxpl, &rng_seed), path,
                kWriteHint);
    d.close(path);
  }
  group.close(path);
}

// ---- reading -----------------------------------------------------------------------

// Refuses a file whose groups hold a tensor this run's model does not have.
void check_no_extra_tensors(hid_t file, const model::ParamLayout& layout, int kinds,
                            const std::string& path) {
  std::set<std::string> expected;
  for (const model::TensorInfo& t : layout.tensors()) expected.insert(t.name);
  for (int k = 0; k < kinds; ++k) {
    const std::string group = k == kParams ? "/params" : k == kExpAvg ? "/optim/exp_avg" : "/optim/exp_avg_sq";
    Handle g = h5::open_group(file, group.c_str(), path);
    for (const std::string& name : h5::group_members(g.get(), path))
      if (!expected.count(name))
        throw InputError("checkpoint '" + path + "' holds dataset '" + group + "/" + name +
                             "', which this run's model (" + layout.config().name + ") does not have",
                         "load it with the model.* settings it was saved with");
  }
}

}  // namespace

// Opens dataset `name` and checks it is an fp32 tensor of `shape` whose bytes this file
// holds; its stored checksum into *stored.
Handle open_tensor(hid_t file, const std::string& name, const std::vector<int64_t>& shape,
                   const std::string& path, Handle* space, uint64_t* stored) {
  if (!h5::link_exists(file, name, path))
    throw InputError("checkpoint '" + path + "' has no dataset '" + name + "'",
                     "the file is incomplete or of another model; load another checkpoint");
  Handle dset(ZT_H5_CHECK(H5Dopen2(file, name.c_str(), H5P_DEFAULT), path, kReadHint), Kind::kDataset);
  Handle type(ZT_H5_CHECK(H5Dget_type(dset.get()), path, kReadHint), Kind::kDatatype);
  if (H5Tget_class(type.get()) != H5T_FLOAT || H5Tget_size(type.get()) != 4)
    throw InputError("checkpoint '" + path + "': dataset '" + name + "' is not fp32",
                     "zt checkpoints hold fp32 tensors; convert the file again");
  *space = Handle(ZT_H5_CHECK(H5Dget_space(dset.get()), path, kReadHint), Kind::kDataspace);
  const int nd = ZT_H5_CHECK(H5Sget_simple_extent_ndims(space->get()), path, kReadHint);
  std::vector<hsize_t> dims(static_cast<size_t>(std::max(nd, 0)));
  ZT_H5_CHECK(H5Sget_simple_extent_dims(space->get(), dims.data(), nullptr), path, kReadHint);
  if (dims != dims_of(shape)) {
    std::string got, want;
    for (const hsize_t x : dims) got += (got.empty() ? "" : ", ") + std::to_string(x);
    for (const int64_t x : shape) want += (want.empty() ? "" : ", ") + std::to_string(x);
    throw InputError("checkpoint '" + path + "': dataset '" + name + "' has shape [" + got +
                         "], this run's model needs [" + want + "]",
                     "load it with the model.* settings it was saved with");
  }
  h5::require_stored_here(dset.get(), path, name, kReadHint);
  *stored = h5::read_u64_attr(dset.get(), "checksum", path, "dataset '" + name + "'");
  return dset;
}

namespace {

// Reads this rank's part of every tensor of each kind into `units`: the raw datasets'
// ranges queued on the I/O threads in file order (the main thread opens the next dataset
// meanwhile), others through H5Dread at once. The worker sums each range once it arrived
// into sums[d]; the zt-xxh3 chunk this rank holds only the start of is read whole and
// hashed into tails[d]; the stored sums go into stored[d].
void read_tensors(hid_t file, const model::ParamLayout& layout, int kinds, SumKind kind,
                  std::span<const UnitTarget> units, hid_t dxpl, const std::string& path,
                  ChecksumWorker& worker, std::vector<uint64_t>& sums, std::vector<uint64_t>& tails,
                  std::vector<uint64_t>& stored, std::vector<std::string>& names,
                  Progress& progress, IoTimes& times) {
  const std::vector<model::TensorInfo>& tensors = layout.tensors();
  const size_t nt = tensors.size();
  const auto t_data = std::chrono::steady_clock::now();
  double metadata = 0;
  TailChunks tail_chunks;  // outlives raw's I/O threads
  RawFile raw(path, /*write=*/false);  // unusable: every dataset through H5Dread
  std::vector<std::pair<size_t, size_t>> queued;  // [raw datasets]: (range, tensor index)
  for (int k = 0; k < kinds; ++k)
    for (size_t i = 0; i < nt; ++i) {
      const model::TensorInfo& t = tensors[i];
      const size_t d = static_cast<size_t>(k) * nt + i;
      names[d] = dataset_path(k, t.name);
      const auto t0 = std::chrono::steady_clock::now();
      Handle space;
      Handle dset = open_tensor(file, names[d], t.shape, path, &space, &stored[d]);
      uint64_t at = 0;
      const bool is_raw = raw.open_error() == 0 && raw_offset(dset.get(), path, &at);
      metadata += seconds_since(t0);
      const UnitTarget& u = units[static_cast<size_t>(t.unit)];
      const std::span<float> all = k == kParams ? u.params : k == kExpAvg ? u.exp_avg : u.exp_avg_sq;
      ZT_CHECK(all.size() == static_cast<size_t>(u.count), "target span size differs from its count",
               "every span of a UnitTarget holds `count` elements");
      const Part p = part_of(t, u.begin, u.count);
      const std::span<float> out = all.subspan(static_cast<size_t>(p.at), static_cast<size_t>(p.n));
      const ChecksumWorker::Job job{kind, out, static_cast<uint64_t>(p.first), static_cast<uint64_t>(t.numel),
                                    &sums[d], nullptr};
      const ChunkPlan plan = kind == SumKind::kXxh3 ? plan_chunks(p.first, p.first + p.n, t.numel) : ChunkPlan{};
      if (is_raw) {
        const size_t range = raw.queue(reinterpret_cast<char*>(out.data()), out.size_bytes(),
                                       at + static_cast<uint64_t>(p.first) * sizeof(float), names[d],
                                       [&worker, job] { worker.push(job); });
        tail_chunks.queue(raw, plan, at, names[d], &tails[d]);
        queued.emplace_back(range, i);
      } else {
        read_range_h5(dset.get(), space.get(), t, p.first, out, dxpl, path);
        worker.push(job);
        tails[d] = TailChunks::read_h5(plan, dset.get(), space.get(), t, dxpl, path);
        progress.advance(static_cast<uint64_t>(t.numel) * sizeof(float), 1);
      }
    }
  // Progress as the ranges arrive (in queue order), then every read's outcome.
  std::string failed;
  for (const auto& [range, i] : queued) {
    if (const int err = raw.wait_range(range, &failed)) throw_read_error(err, path, failed);
    progress.advance(static_cast<uint64_t>(tensors[i].numel) * sizeof(float), 1);
  }
  if (const int err = raw.wait(&failed)) throw_read_error(err, path, failed);
  times.metadata += metadata;
  times.data += seconds_since(t_data) - metadata;
  times.chunks_read_back += tail_chunks.count();
}

// /state of a training file: the TrainState fields (kStateFields) and /state/rng, whose
// stored checksum goes to *stored and the sum of what was read (rank 0's) to *sum.
TrainState read_state(MPI_Comm comm, hid_t file, hid_t dxpl, const std::string& path,
                      SumKind sum_kind, uint64_t* sum, uint64_t* stored) {
  Handle g = h5::open_group(file, "state", path);
  const std::string what_state = "group /state";
  TrainState st;
  for (const StateField& f : kStateFields)
    std::visit(
        [&](auto member) {
          using T = std::remove_cvref_t<decltype(st.*member)>;
          if constexpr (std::is_same_v<T, double>) st.*member = h5::read_f64_attr(g.get(), f.name, path, what_state);
          else if constexpr (std::is_same_v<T, uint64_t>) st.*member = h5::read_u64_attr(g.get(), f.name, path, what_state);
          else st.*member = h5::read_i64_attr(g.get(), f.name, path, what_state);
        },
        f.member);
  if (st.step < 0 || st.world_size < 1)
    throw InputError(strf("checkpoint '%s': /state has step %lld, world_size %lld", path.c_str(),
                          static_cast<long long>(st.step), static_cast<long long>(st.world_size)),
                     kReadHint);
  // /state/rng: every rank reads it whole (world_size elements); rank 0's sum counts.
  if (!h5::link_exists(g.get(), "rng", path))
    throw InputError("checkpoint '" + path + "' has no dataset '/state/rng'", kReadHint);
  Handle d(ZT_H5_CHECK(H5Dopen2(g.get(), "rng", H5P_DEFAULT), path, kReadHint), Kind::kDataset);
  Handle space(ZT_H5_CHECK(H5Dget_space(d.get()), path, kReadHint), Kind::kDataspace);
  if (H5Sget_simple_extent_npoints(space.get()) != st.world_size)
    throw InputError("checkpoint '" + path + "': dataset '/state/rng' does not hold world_size "
                     "elements", kReadHint);
  h5::require_stored_here(d.get(), path, "/state/rng", kReadHint);
  *stored = h5::read_u64_attr(d.get(), "checksum", path, "dataset '/state/rng'");
  st.rng.resize(static_cast<size_t>(st.world_size));
  ZT_H5_CHECK(H5Dread(d.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, dxpl, st.rng.data()), path,
              kReadHint);
  const bool xxh3 = sum_kind == SumKind::kXxh3;
  *sum = comm_rank(comm) != 0 ? 0
         : xxh3             ? xxh3_sum(std::as_bytes(std::span<const uint64_t>(st.rng)))
                            : sum64_u64(st.rng);
  return st;
}

}  // namespace

void write_file(MPI_Comm comm, const std::string& path, const WriteContents& c, IoTimes* times) {
  const auto t_start = std::chrono::steady_clock::now();
  const model::ParamLayout layout = file_layout(c.header);  // (adapters.hpp)
  check_shards(layout, c.units.size(), "ckpt::write_file");
  const bool training = c.header.contents != kContentsWeights;
  ZT_CHECK(!training || c.state.has_value(), "a training checkpoint without /state",
           "fill WriteContents::state");
  const FileParts parts{layout, training ? 3 : 1};
  IoTimes t;
  const std::vector<Slot> order = write_order(parts, static_cast<bool>(c.unit_done));
  UnitRelease release(c.unit_done, parts);  // outlives the worker's and the writes' threads
  ChecksumWorker worker;  // runs ahead of the writes below
  FileSums sums = queue_checksums(comm, worker, c, parts, order, release, training);

  auto t0 = std::chrono::steady_clock::now();
  h5::QuietErrors quiet;
  Handle fapl = h5::file_access(comm, path);
  Handle file(ZT_H5_CHECK(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), path,
                          kWriteHint),
              Kind::kFile);
  write_root_attributes(file.get(), c.header, path);
  Handle dcpl = dataset_creation(path);
  Handle dxpl = h5::transfer(comm, path);
  Datasets ds = create_tensors(file.get(), parts, dcpl.get(), path);
  t.metadata += seconds_since(t0);

  t0 = std::chrono::steady_clock::now();
  const std::unique_ptr<Progress> progress = file_progress("save", path, layout, parts.kinds);
  write_tensors(comm, c, parts, order, release, ds, dxpl.get(), path, *progress);
  t.data = seconds_since(t0);

  t.checksum_wait = worker.drain();
  t.checksum = worker.busy_seconds();
  t0 = std::chrono::steady_clock::now();
  t.chunks_read_back = add_tail_sums(comm, c, parts, ds, path, sums);
  t.checksum_tails = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  finish_checksums(comm, parts, sums, path);
  write_checksums(parts, ds, sums.sums, path);
  write_state(comm, file.get(), training ? &*c.state : nullptr, c.rng_seed,
              training ? sums.sums.back() : 0, dcpl.get(), dxpl.get(), path);
  file.close(path);
  t.metadata += seconds_since(t0);
  progress->finish();
  t.total = seconds_since(t_start);
  if (times) *times = t;
}

Header read_header(MPI_Comm comm, const std::string& path) {
  Handle file = open_file(comm, path);
  h5::QuietErrors quiet;
  Header h = header_of(file.get(), path);
  file.close(path);
  return h;
}

std::optional<TrainState> read_file(MPI_Comm comm, const std::string& path,
                                    const model::Config& run_config,
                                    std::span<const UnitTarget> units, ReadWhat what,
                                    std::vector<std::string>* warnings, IoTimes* times,
                                    const model::ParamLayout* part) {
  const auto t_start = std::chrono::steady_clock::now();
  IoTimes t;
  Handle file = open_file(comm, path);
  h5::QuietErrors quiet;
  const Header header = header_of(file.get(), path);
  // The run's model with the file's adapters, if any (the caller checked they are the
  // run's: checkpoint.cpp).
  Header run_header = header;
  run_header.config = run_config;
  const model::ParamLayout whole = file_layout(run_header);
  const model::ParamLayout& layout = part ? *part : whole;  // what is read, and where
  if (header.contents == kContentsAdapters && units.size() != static_cast<size_t>(whole.num_units()))
    throw InputError("checkpoint '" + path + "' holds LoRA adapters only (finetune " +
                         header.adapters.finetune + ", base '" + header.adapters.base_path +
                         "'), not a whole model",
                     "resume it in a LoRA run (ckpt.resume, with ckpt.init_from = its base), or "
                     "use a whole-model checkpoint here");
  check_shards(layout, units.size(), "ckpt::read_file");
  std::vector<std::string> w = check_same_shape(header.config, run_config, path);
  if (warnings) warnings->insert(warnings->end(), w.begin(), w.end());
  const bool training = what == ReadWhat::kTraining;
  if (training && header.contents == kContentsWeights)
    throw InputError("checkpoint '" + path + "' holds weights only (contents \"" + header.contents +
                         "\", no /optim): it cannot be resumed",
                     "start from these weights with a fresh optimizer at step 0: "
                     "--set ckpt.init_from=" + path);
  const int kinds = training ? 3 : 1;
  check_no_extra_tensors(file.get(), whole, kinds, path);

  Handle dxpl = h5::transfer(comm, path);
  const size_t n = static_cast<size_t>(kinds) * layout.tensors().size() + (training ? 1 : 0);
  std::vector<uint64_t> sums(n, 0), tails(n, 0), stored(n, 0);
  std::vector<std::string> names(n);
  const std::unique_ptr<Progress> progress = file_progress("load", path, layout, kinds);
  const SumKind sum_kind = sum_kind_of(header.format_version);
  ChecksumWorker worker;  // follows the reads
  read_tensors(file.get(), layout, kinds, sum_kind, units, dxpl.get(), path, worker, sums, tails,
               stored, names, *progress, t);
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<TrainState> state;
  if (training) {
    names.back() = "/state/rng";
    state = read_state(comm, file.get(), dxpl.get(), path, sum_kind, &sums.back(), &stored.back());
  }
  file.close(path);
  t.metadata += seconds_since(t0);
  t.checksum_wait = worker.drain();
  t.checksum = worker.busy_seconds();
  progress->finish();

  for (size_t d = 0; d < n; ++d) sums[d] += tails[d];
  sum_over_ranks(comm, sums);
  t.total = seconds_since(t_start);
  if (times) *times = t;
  for (size_t d = 0; d < sums.size(); ++d)
    if (sums[d] != stored[d])
      throw InputError(strf("checkpoint '%s': dataset '%s' fails its checksum (stored %016llx, "
                            "contents give %016llx): the file is damaged",
                            path.c_str(), names[d].c_str(), static_cast<unsigned long long>(stored[d]),
                            static_cast<unsigned long long>(sums[d])),
                       "load an older checkpoint (ckpt.resume=PATH) or write this one again");
  return state;
}

}  // namespace zt::ckpt
