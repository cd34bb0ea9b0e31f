// The checkpoint I/O engine the writer (io_write.cpp) and the reader (io_read.cpp) share
// (io_engine.hpp): RawFile's queue of byte ranges moved by I/O threads with pwrite/pread
// (O_DIRECT where the file system has it), the zt-sum64/zt-xxh3 checksums over OpenMP
// threads, the checksum worker, and the MPI and HDF5 helpers of both halves.
#include "io_engine.hpp"

#include <fcntl.h>
#include <omp.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/runtime/agree.hpp"
#include "zt/runtime/mpi_check.hpp"

namespace zt::ckpt::detail {

using h5::Handle;
using h5::Kind;

namespace {

// A checkpoint file at least this big reports progress while it is written or read.
constexpr uint64_t kProgressBytes = uint64_t{1} << 30;

// NaN/Inf elements of x (exponent bits all ones), as a loop the compiler vectorises.
uint64_t count_non_finite(std::span<const float> x) {
  uint64_t bad = 0;
  for (const float v : x) bad += (std::bit_cast<uint32_t>(v) & 0x7f800000u) == 0x7f800000u;
  return bad;
}

}  // namespace

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

std::string dataset_path(int kind, const std::string& name) {
  return kind == kParams ? param_path(name) : kind == kExpAvg ? exp_avg_path(name) : exp_avg_sq_path(name);
}

Part part_of(const model::TensorInfo& t, int64_t begin, int64_t count) {
  const int64_t lo = std::max(begin, t.offset);
  const int64_t hi = std::min(begin + count, t.offset + t.numel);
  if (hi <= lo) return {};
  return {lo - t.offset, hi - lo, lo - begin};
}

Part part_in_file(const std::vector<model::TensorInfo>& tensors, size_t i,
                  const model::ParamLayout* slices, int64_t begin, int64_t count) {
  if (!slices) return part_of(tensors[i], begin, count);
  ZT_CHECK(slices->tensors().size() == tensors.size() && slices->tensors()[i].name == tensors[i].name,
           "an expert-parallel layout of another model than the file's", "a bug in the caller");
  const model::TensorInfo& mine = slices->tensors()[i];
  Part p = part_of(mine, begin, count);
  if (mine.global_rows > 0)
    p.first += mine.global_begin;
  else if (slices->first_expert() != 0)
    p = Part{};  // the group's first rank writes (reads) the replicated tensors
  return p;
}

SumKind sum_kind_of(uint32_t format_version) {
  return format_version >= 2 ? SumKind::kXxh3 : SumKind::kSum64;
}

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

uint64_t checksum(SumKind kind, std::span<const float> x, uint64_t first, uint64_t numel,
                  uint64_t* non_finite) {
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

uint64_t minor_page_faults() {
  struct rusage u {};
  return ::getrusage(RUSAGE_SELF, &u) == 0 ? static_cast<uint64_t>(u.ru_minflt) : 0;
}

ChecksumWorker::ChecksumWorker() : threads_(omp_get_max_threads()), thread_([this] { run(); }) {}

ChecksumWorker::~ChecksumWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void ChecksumWorker::push(const Job& job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(job);
    ++pending_;
  }
  wake_.notify_one();
}

double ChecksumWorker::drain() {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
  return seconds_since(t0);
}

double ChecksumWorker::busy_seconds() {
  std::lock_guard<std::mutex> lock(mutex_);
  return busy_;
}

void ChecksumWorker::run() {
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

RawFile::RawFile(const std::string& path, bool write) : write_(write) {
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

RawFile::~RawFile() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
  if (direct_fd_ >= 0) ::close(direct_fd_);
  if (fd_ >= 0) ::close(fd_);
}

size_t RawFile::queue(char* p, uint64_t n, uint64_t at, std::string what, std::function<void()> done,
                      UnitSource* source, size_t unit) {
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

int RawFile::wait_range(size_t range, std::string* what) {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return ranges_[range].left == 0 || err_ != 0; });
  if (err_ != 0 && what) *what = failed_;
  return err_;
}

int RawFile::wait(std::string* what) {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return queue_.empty() && busy_ == 0; });
  if (err_ != 0 && what) *what = failed_;
  return err_;
}

int RawFile::write_at(const void* data, size_t n, uint64_t at) {
  queue(const_cast<char*>(static_cast<const char*>(data)), n, at, "");
  return wait();
}

int RawFile::read_at(void* data, size_t n, uint64_t at) {
  queue(static_cast<char*>(data), n, at, "");
  return wait();
}

int RawFile::close() {
  wait();
  int err = 0;
  if (direct_fd_ >= 0 && ::close(direct_fd_) != 0) err = errno;
  direct_fd_ = -1;
  if (fd_ >= 0 && ::close(fd_) != 0 && err == 0) err = errno;
  fd_ = -1;
  return err;
}

void RawFile::run(char* bounce) {
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
    double copy_s = 0;
    if (!skip) {
      const SourcedRead read(source, unit, piece.p, piece.n);
      Piece moved = piece;
      moved.p = const_cast<char*>(read.bytes());  // a write only reads it
      err = move(moved, bounce, &copy_s);
    }
    lock.lock();
    copy_s_ += copy_s;
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

int RawFile::move(const Piece& piece, char* bounce, double* copy_s) const {
  if (!piece.direct) return all(fd_, write_, piece.p, piece.n, piece.at);
  // Memory aligned as the device's DMA wants it: straight from / into the caller's
  // bytes (no copy at all, as fio), else through the bounce buffer.
  if (reinterpret_cast<uintptr_t>(piece.p) % mem_align_ == 0)
    return all(direct_fd_, write_, piece.p, piece.n, piece.at);
  const size_t len = static_cast<size_t>(piece.n);
  auto t0 = std::chrono::steady_clock::now();
  if (write_) std::memcpy(bounce, piece.p, len);
  *copy_s += seconds_since(t0);
  if (const int err = all(direct_fd_, write_, bounce, len, piece.at)) return err;
  t0 = std::chrono::steady_clock::now();
  if (!write_) std::memcpy(piece.p, bounce, len);
  *copy_s += seconds_since(t0);
  return 0;
}

double RawFile::copy_seconds() {
  std::lock_guard<std::mutex> lock(mutex_);
  return copy_s_;
}

int RawFile::all(int fd, bool write, char* p, uint64_t n, uint64_t at) {
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

size_t RawFile::direct_memory_alignment(int fd) {
#ifdef STATX_DIOALIGN
  struct statx st {};
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &st) == 0 && (st.stx_mask & STATX_DIOALIGN) &&
      st.stx_dio_mem_align > 0 && kAlign % st.stx_dio_mem_align == 0)
    return st.stx_dio_mem_align;
#endif
  return kAlign;
}

Prefault::Prefault(std::vector<std::span<char>> ranges) : ranges_(std::move(ranges)) {
  thread_ = std::thread([this] {
#ifdef MADV_POPULATE_WRITE
    const auto t0 = std::chrono::steady_clock::now();
    const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    constexpr uintptr_t kStep = uintptr_t{8} << 20;  // bytes per call: stop_ is checked between
    for (const std::span<char> r : ranges_) {
      const uintptr_t lo = (reinterpret_cast<uintptr_t>(r.data()) + page - 1) / page * page;
      const uintptr_t hi = (reinterpret_cast<uintptr_t>(r.data()) + r.size()) / page * page;
      for (uintptr_t a = lo; a < hi && !stop_.load(std::memory_order_relaxed); a += kStep)
        // Advice only: a kernel without it (EINVAL) or memory it refuses (EFAULT, a file
        // mapping) leaves the faults to the reads, as before.
        if (::madvise(reinterpret_cast<void*>(a), std::min(kStep, hi - a), MADV_POPULATE_WRITE) != 0) {
          seconds_ = seconds_since(t0);
          return;
        }
    }
    seconds_ = seconds_since(t0);
#endif
  });
}

Prefault::~Prefault() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

double Prefault::seconds() {
  if (thread_.joinable()) thread_.join();
  return seconds_;
}

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

void TailChunks::queue(RawFile& raw, const ChunkPlan& plan, uint64_t at, const std::string& name, uint64_t* sum) {
  if (plan.tail_end <= plan.tail) return;
  std::vector<float>& chunk = bufs_.emplace_back(static_cast<size_t>(plan.tail_end - plan.tail));  // [<= kChunkElems]
  const uint64_t first_chunk = static_cast<uint64_t>(plan.tail / kChunkElems);
  raw.queue(reinterpret_cast<char*>(chunk.data()), chunk.size() * sizeof(float),
            at + static_cast<uint64_t>(plan.tail) * sizeof(float), name,
            [&chunk, first_chunk, sum] { *sum = xxh3_sum(std::as_bytes(std::span<const float>(chunk)), first_chunk); });
}

uint64_t TailChunks::read_h5(const ChunkPlan& plan, hid_t dset, hid_t space, const model::TensorInfo& t,
                             hid_t dxpl, const std::string& path) {
  if (plan.tail_end <= plan.tail) return 0;
  std::vector<float> chunk(static_cast<size_t>(plan.tail_end - plan.tail));  // [<= kChunkElems]
  read_range_h5(dset, space, t, plan.tail, chunk, dxpl, path);
  return xxh3_sum(std::as_bytes(std::span<const float>(chunk)), static_cast<uint64_t>(plan.tail / kChunkElems));
}

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

}  // namespace zt::ckpt::detail
