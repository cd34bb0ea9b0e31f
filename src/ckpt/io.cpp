// Writing and reading one checkpoint file, collectively (parallel HDF5) or serially. See
// io.hpp and docs/checkpoint-format.md.
#include "zt/ckpt/io.hpp"

#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <type_traits>
#include <variant>

#include "h5.hpp"
#include "io_detail.hpp"
#include "zt/core/checksum.hpp"
#include "zt/core/error.hpp"
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
  if (name.ends_with(".tmp")) name.resize(name.size() - 4);  // the file being published
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

// zt-sum64 of x (first element at index `first`), over the rank's OpenMP threads: the
// sum is slice-additive, so chunks are summed apart and added (mod 2^64).
// With `non_finite`, also counts the NaN/Inf elements into it (the chunk is in cache).
uint64_t checksum(std::span<const float> x, uint64_t first, uint64_t* non_finite = nullptr) {
  constexpr size_t kChunk = size_t{1} << 20;
  const int64_t chunks = static_cast<int64_t>((x.size() + kChunk - 1) / kChunk);
  uint64_t total = 0, bad = 0;
#pragma omp parallel for reduction(+ : total, bad) schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const size_t at = static_cast<size_t>(c) * kChunk;
    const std::span<const float> chunk = x.subspan(at, std::min(kChunk, x.size() - at));
    total += sum64_fast(chunk, first + at);
    if (non_finite)
      for (const float v : chunk) bad += std::isfinite(v) ? 0u : 1u;
  }
  if (non_finite) *non_finite = bad;
  return total;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Checksums computed by one worker thread beside the main thread's transfers, so they
// cost no pass of their own on the I/O's critical path: a write queues every slice before
// its first transfer (the worker runs ahead of the writes), a read queues each slice after
// its transfer (the worker follows the reads). Jobs run in queue order, each over the
// caller's OpenMP thread count. drain() waits for all of them.
class ChecksumWorker {
 public:
  struct Job {
    std::span<const float> x;
    uint64_t first = 0;
    uint64_t* sum = nullptr;         // written
    uint64_t* non_finite = nullptr;  // written when not null
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
      *job.sum = checksum(job.x, job.first, job.non_finite);
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
class RawFile {
 public:
  // The page-aligned middle of each range goes through a second descriptor opened
  // O_DIRECT (DMA to / from an aligned bounce buffer: no page-cache copy, as fio
  // --direct=1), the unaligned head and tail (< 4 KiB each) through the buffered one. A
  // file system without O_DIRECT (tmpfs) does everything buffered.
  RawFile(const std::string& path, bool write) {
    const int mode = (write ? O_WRONLY : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW;
    fd_ = ::open(path.c_str(), mode);
    if (fd_ < 0) open_errno_ = errno;
    if (fd_ >= 0) {
      direct_fd_ = ::open(path.c_str(), mode | O_DIRECT);
      void* b = nullptr;
      if (direct_fd_ >= 0 && ::posix_memalign(&b, kAlign, kBounce) == 0) {
        bounce_.reset(static_cast<char*>(b));
      } else if (direct_fd_ >= 0) {
        ::close(direct_fd_);
        direct_fd_ = -1;
      }
    }
  }
  ~RawFile() {
    if (direct_fd_ >= 0) ::close(direct_fd_);
    if (fd_ >= 0) ::close(fd_);
  }
  RawFile(const RawFile&) = delete;
  RawFile& operator=(const RawFile&) = delete;

  // errno of the open (0: open).
  int open_error() const { return open_errno_; }
  // Writes n bytes at `at`; returns 0 or the errno.
  int write_at(const void* data, size_t n, uint64_t at) const {
    return transfer(/*write=*/true, const_cast<char*>(static_cast<const char*>(data)), n, at);
  }
  // Reads n bytes at `at`; returns 0, the errno, or -1 when the file ends first.
  int read_at(void* data, size_t n, uint64_t at) const {
    return transfer(/*write=*/false, static_cast<char*>(data), n, at);
  }
  // Closes, returning 0 or the errno (a write's error can first show here).
  int close() {
    int err = 0;
    if (direct_fd_ >= 0 && ::close(direct_fd_) != 0) err = errno;
    direct_fd_ = -1;
    if (fd_ >= 0 && ::close(fd_) != 0 && err == 0) err = errno;
    fd_ = -1;
    return err;
  }

 private:
  static constexpr size_t kAlign = 4096;              // O_DIRECT offsets, lengths, addresses
  static constexpr size_t kBounce = size_t{8} << 20;  // bytes per direct transfer

  // p [n] to or from the file at `at`: head and tail buffered, the aligned middle direct
  // through the bounce buffer (everything buffered without O_DIRECT). p is only read
  // when writing.
  int transfer(bool write, char* p, uint64_t n, uint64_t at) const {
    if (direct_fd_ < 0) return all(fd_, write, p, n, at);
    const uint64_t a0 = (at + kAlign - 1) / kAlign * kAlign, a1 = (at + n) / kAlign * kAlign;
    if (a1 <= a0) return all(fd_, write, p, n, at);  // no whole aligned block inside
    if (const int err = all(fd_, write, p, a0 - at, at)) return err;                    // head
    if (const int err = all(fd_, write, p + (a1 - at), at + n - a1, a1)) return err;    // tail
    for (uint64_t off = a0; off < a1; off += kBounce) {  // the aligned middle, direct
      const size_t len = static_cast<size_t>(std::min<uint64_t>(kBounce, a1 - off));
      if (write) std::memcpy(bounce_.get(), p + (off - at), len);
      if (const int err = all(direct_fd_, write, bounce_.get(), len, off)) return err;
      if (!write) std::memcpy(p + (off - at), bounce_.get(), len);
    }
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

  int fd_ = -1;
  int direct_fd_ = -1;
  int open_errno_ = 0;
  std::unique_ptr<char, Free> bounce_;  // [kBounce], kAlign-aligned
};

// The file offset of dataset `dset`'s first element when its bytes can be accessed raw
// (contiguous, allocated, fp32 little-endian, no filters, not external), else nullopt.
std::optional<uint64_t> raw_offset(hid_t dset, const std::string& path) {
  Handle dcpl(ZT_H5_CHECK(H5Dget_create_plist(dset), path, kReadHint), Kind::kPlist);
  if (H5Pget_layout(dcpl.get()) != H5D_CONTIGUOUS) return std::nullopt;
  if (ZT_H5_CHECK(H5Pget_nfilters(dcpl.get()), path, kReadHint) > 0) return std::nullopt;
  if (ZT_H5_CHECK(H5Pget_external_count(dcpl.get()), path, kReadHint) > 0) return std::nullopt;
  Handle type(ZT_H5_CHECK(H5Dget_type(dset), path, kReadHint), Kind::kDatatype);
  if (ZT_H5_CHECK(H5Tequal(type.get(), H5T_IEEE_F32LE), path, kReadHint) <= 0) return std::nullopt;
  const haddr_t at = H5Dget_offset(dset);
  if (at == HADDR_UNDEF) return std::nullopt;
  return static_cast<uint64_t>(at);
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

void check_shards(const model::ParamLayout& layout, size_t given, const char* what) {
  ZT_CHECK(given == static_cast<size_t>(layout.num_units()),
           strf("%s: %zu unit shards for a model of %d units", what, given, layout.num_units()),
           "pass one shard per unit of the layout");
}

}  // namespace

// open_file, header_of and open_tensor are shared with the adapter reader (io_detail.hpp).
Handle open_file(MPI_Comm comm, const std::string& path) {
  std::error_code ec;
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".tmp") == 0)
    throw InputError("'" + path + "' is a checkpoint still being written (or abandoned): .tmp "
                     "files are never loaded",
                     "load the complete file it would have become, or the one `latest` names");
  if (!fs::exists(path, ec))
    throw InputError("checkpoint file '" + path + "' does not exist",
                     "check the path (ckpt.resume / ckpt.init_from), or list ckpt.dir");
  if (!fs::is_regular_file(path, ec))
    throw InputError("checkpoint '" + path + "' is not a regular file", "give a step-N.h5 file");
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

// Queues the checksum of every slice this rank writes on the worker (in write order).
FileSums queue_checksums(MPI_Comm comm, ChecksumWorker& worker, const WriteContents& c,
                         const FileParts& f, bool training) {
  const std::vector<model::TensorInfo>& tensors = f.layout.tensors();
  const size_t n = static_cast<size_t>(f.kinds) * f.nt();
  FileSums s{std::vector<uint64_t>(n + (training ? 1 : 0), 0), std::vector<uint64_t>(n, 0)};
  for (int k = 0; k < f.kinds; ++k)
    for (size_t i = 0; i < f.nt(); ++i) {
      Part p;
      const std::span<const float> x = slice_of(c, k, tensors[i], &p);
      const size_t d = f.index(k, i);
      worker.push({x, static_cast<uint64_t>(p.first), &s.sums[d], &s.non_finite[d]});
    }
  if (training) {
    const uint64_t seed = c.rng_seed;
    s.sums[n] = sum64_u64(std::span<const uint64_t>(&seed, 1), static_cast<uint64_t>(comm_rank(comm)));
  }
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

// Per dataset, this rank's part: raw (one pwrite of its byte range) where the dataset's
// storage allows (always, for the datasets create_tensors made), else one H5Dwrite of its
// hyperslabs. After a failed write the rank writes nothing more; all agree at the end.
void write_tensors(MPI_Comm comm, const WriteContents& c, const FileParts& f, Datasets& ds,
                   hid_t dxpl, const std::string& path, Progress& progress) {
  const std::vector<model::TensorInfo>& tensors = f.layout.tensors();
  RawFile raw(path, /*write=*/true);
  int err = raw.open_error();
  std::string failed = err != 0 ? "opening the data" : "";
  const float dummy = 0.0f;  // a valid buffer for ranks that write nothing
  for (int k = 0; k < f.kinds; ++k)
    for (size_t i = 0; i < f.nt(); ++i) {
      const size_t d = f.index(k, i);
      Part p;
      const std::span<const float> data = slice_of(c, k, tensors[i], &p);
      if (const std::optional<uint64_t> at = raw_offset(ds.dsets[d].get(), path)) {
        if (err == 0 && p.n > 0) {
          err = raw.write_at(data.data(), data.size_bytes(),
                             *at + static_cast<uint64_t>(p.first) * sizeof(float));
          if (err != 0) failed = "writing " + dataset_path(k, tensors[i].name);
        }
      } else {
        h5::select_range(ds.spaces[d].get(), tensors[i].shape, p.first, p.n, path);
        Handle mem = memory_space(p.n, path);
        const herr_t rc = H5Dwrite(ds.dsets[d].get(), H5T_NATIVE_FLOAT, mem.get(),
                                   ds.spaces[d].get(), dxpl, p.n > 0 ? data.data() : &dummy);
        agree(comm, rc, "H5Dwrite of " + dataset_path(k, tensors[i].name), path);
      }
      progress.advance(static_cast<uint64_t>(tensors[i].numel) * sizeof(float), 1);
    }
  const int close_err = raw.close();
  if (err == 0 && close_err != 0) {
    err = close_err;
    failed = "closing the data";
  }
  agree_errno(comm, err, failed, path);
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

// Reads this rank's part of every tensor of each kind into `units`; the worker sums
// what was read into sums[d] (a tensor's checksum overlaps the next one's read), the
// stored sums go into stored[d].
void read_tensors(hid_t file, const model::ParamLayout& layout, int kinds,
                  std::span<const UnitTarget> units, hid_t dxpl, const std::string& path,
                  ChecksumWorker& worker, std::vector<uint64_t>& sums,
                  std::vector<uint64_t>& stored, std::vector<std::string>& names,
                  Progress& progress, IoTimes& times) {
  const std::vector<model::TensorInfo>& tensors = layout.tensors();
  const size_t nt = tensors.size();
  float dummy = 0.0f;
  const RawFile raw(path, /*write=*/false);  // unusable: every dataset through H5Dread
  for (int k = 0; k < kinds; ++k)
    for (size_t i = 0; i < nt; ++i) {
      const model::TensorInfo& t = tensors[i];
      const size_t d = static_cast<size_t>(k) * nt + i;
      names[d] = dataset_path(k, t.name);
      auto t0 = std::chrono::steady_clock::now();
      Handle space;
      Handle dset = open_tensor(file, names[d], t.shape, path, &space, &stored[d]);
      times.metadata += seconds_since(t0);
      const UnitTarget& u = units[static_cast<size_t>(t.unit)];
      const std::span<float> all = k == kParams ? u.params : k == kExpAvg ? u.exp_avg : u.exp_avg_sq;
      ZT_CHECK(all.size() == static_cast<size_t>(u.count), "target span size differs from its count",
               "every span of a UnitTarget holds `count` elements");
      const Part p = part_of(t, u.begin, u.count);
      const std::span<float> out = all.subspan(static_cast<size_t>(p.at), static_cast<size_t>(p.n));
      t0 = std::chrono::steady_clock::now();
      const std::optional<uint64_t> at = raw.open_error() == 0 ? raw_offset(dset.get(), path)
                                                                : std::nullopt;
      if (at && p.n > 0) {
        const int err = raw.read_at(out.data(), out.size_bytes(),
                                    *at + static_cast<uint64_t>(p.first) * sizeof(float));
        if (err != 0)
          throw InputError(strf("checkpoint '%s': reading dataset '%s' failed: %s", path.c_str(),
                                names[d].c_str(),
                                err < 0 ? "the file ends before its data (truncated)"
                                        : std::strerror(err)),
                           kReadHint);
      } else if (!at) {
        h5::select_range(space.get(), t.shape, p.first, p.n, path);
        Handle mem = memory_space(p.n, path);
        ZT_H5_CHECK(H5Dread(dset.get(), H5T_NATIVE_FLOAT, mem.get(), space.get(), dxpl,
                            p.n > 0 ? out.data() : &dummy),
                    path, kReadHint);
      }
      times.data += seconds_since(t0);
      worker.push({out, static_cast<uint64_t>(p.first), &sums[d], nullptr});
      progress.advance(static_cast<uint64_t>(t.numel) * sizeof(float), 1);
    }
}

// /state of a training file: the TrainState fields (kStateFields) and /state/rng, whose
// stored checksum goes to *stored and the sum of what was read (rank 0's) to *sum.
TrainState read_state(MPI_Comm comm, hid_t file, hid_t dxpl, const std::string& path,
                      uint64_t* sum, uint64_t* stored) {
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
  *sum = comm_rank(comm) == 0 ? sum64_u64(st.rng) : 0;
  return st;
}

}  // namespace

void write_file(MPI_Comm comm, const std::string& path, const WriteContents& c, IoTimes* times) {
  const auto t_start = std::chrono::steady_clock::now();
  const model::ParamLayout layout(c.header.config);
  check_shards(layout, c.units.size(), "ckpt::write_file");
  const bool training = c.header.contents == kContentsTraining;
  ZT_CHECK(!training || c.state.has_value(), "a training checkpoint without /state",
           "fill WriteContents::state");
  const FileParts parts{layout, training ? 3 : 1};
  IoTimes t;
  ChecksumWorker worker;  // runs ahead of the writes below
  FileSums sums = queue_checksums(comm, worker, c, parts, training);

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
  write_tensors(comm, c, parts, ds, dxpl.get(), path, *progress);
  t.data = seconds_since(t0);

  t.checksum_wait = worker.drain();
  t.checksum = worker.busy_seconds();
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
                                    std::vector<std::string>* warnings, IoTimes* times) {
  const auto t_start = std::chrono::steady_clock::now();
  IoTimes t;
  const model::ParamLayout layout(run_config);
  check_shards(layout, units.size(), "ckpt::read_file");
  Handle file = open_file(comm, path);
  h5::QuietErrors quiet;
  const Header header = header_of(file.get(), path);
  std::vector<std::string> w = check_same_shape(header.config, run_config, path);
  if (warnings) warnings->insert(warnings->end(), w.begin(), w.end());
  const bool training = what == ReadWhat::kTraining;
  if (training && header.contents != kContentsTraining)
    throw InputError("checkpoint '" + path + "' holds weights only (contents \"" + header.contents +
                         "\", no /optim): it cannot be resumed",
                     "start from these weights with a fresh optimizer at step 0: "
                     "--set ckpt.init_from=" + path);
  const int kinds = training ? 3 : 1;
  check_no_extra_tensors(file.get(), layout, kinds, path);

  Handle dxpl = h5::transfer(comm, path);
  const size_t n = static_cast<size_t>(kinds) * layout.tensors().size() + (training ? 1 : 0);
  std::vector<uint64_t> sums(n, 0), stored(n, 0);
  std::vector<std::string> names(n);
  const std::unique_ptr<Progress> progress = file_progress("load", path, layout, kinds);
  ChecksumWorker worker;  // follows the reads
  read_tensors(file.get(), layout, kinds, units, dxpl.get(), path, worker, sums, stored, names,
               *progress, t);
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<TrainState> state;
  if (training) {
    names.back() = "/state/rng";
    state = read_state(comm, file.get(), dxpl.get(), path, &sums.back(), &stored.back());
  }
  file.close(path);
  t.metadata += seconds_since(t0);
  t.checksum_wait = worker.drain();
  t.checksum = worker.busy_seconds();
  progress->finish();

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
