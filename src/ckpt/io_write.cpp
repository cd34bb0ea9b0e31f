// Writing one checkpoint file, collectively (parallel HDF5) or serially: the datasets
// created, each rank's part of every tensor queued on the I/O engine (io_engine.hpp) in file
// order with its checksum computed beside it, the checksums and the train state written.
// See io.hpp and docs/checkpoint-format.md.
#include "zt/ckpt/io.hpp"

#include <chrono>
#include <cstring>

#include "h5.hpp"
#include "io_engine.hpp"
#include "zt/ckpt/adapters.hpp"
#include "zt/core/checksum.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/runtime/agree.hpp"
#include "zt/runtime/mpi_check.hpp"
#include "zt/version.hpp"

namespace zt::ckpt {
namespace {

using h5::Handle;
using h5::Kind;
using namespace detail;

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
std::span<const float> slice_of(const WriteContents& c, int kind,
                                const std::vector<model::TensorInfo>& tensors, size_t i, Part* part) {
  const model::TensorInfo& t = tensors[i];
  const UnitShard& s = c.units[static_cast<size_t>(t.unit)];
  const std::span<const float> all = kind == kParams ? s.params : kind == kExpAvg ? s.exp_avg : s.exp_avg_sq;
  ZT_CHECK(all.size() == static_cast<size_t>(s.count), "shard span size differs from its count",
           "every span of a UnitShard holds `count` elements");
  *part = part_in_file(tensors, i, c.slices, s.begin, s.count);
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
    const std::span<const float> x = slice_of(c, k, tensors, i, &p);
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
    const std::span<const float> data = slice_of(c, k, tensors, i, &p);
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
        slice_of(c, k, tensors, i, &p);
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
  if (training && !st.objective.empty())
    h5::write_string_attr(group.get(), "objective", st.objective, path);
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

}  // namespace zt::ckpt
