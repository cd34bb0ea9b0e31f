// Writing and reading one checkpoint file, collectively (parallel HDF5) or serially. See
// io.hpp and docs/checkpoint-format.md.
#include "zt/ckpt/io.hpp"

#include <filesystem>
#include <set>

#include "h5.hpp"
#include "zt/core/checksum.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/model/layout.hpp"
#include "zt/runtime/agree.hpp"
#include "zt/runtime/mpi_check.hpp"
#include "zt/version.hpp"

namespace zt::ckpt {
namespace {

namespace fs = std::filesystem;
using h5::Handle;
using h5::Kind;

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
uint64_t checksum(std::span<const float> x, uint64_t first) {
  constexpr size_t kChunk = size_t{1} << 20;
  const int64_t chunks = static_cast<int64_t>((x.size() + kChunk - 1) / kChunk);
  uint64_t total = 0;
#pragma omp parallel for reduction(+ : total) schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const size_t at = static_cast<size_t>(c) * kChunk;
    total += sum64(x.subspan(at, std::min(kChunk, x.size() - at)), first + at);
  }
  return total;
}

// After a data transfer that may fail on some ranks only (a full disk, an I/O error): all
// ranks agree (one all_reduce) and all throw, so none is left in the next collective.
void agree(MPI_Comm comm, herr_t rc, const std::string& what, const std::string& path) {
  runtime::agree(comm, [&] {
    if (rc < 0) data::h5::fail(what.c_str(), path, kWriteHint, false, __FILE__, __LINE__);
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
  if (id < 0) data::h5::fail("H5Fopen", path, kReadHint, /*bad_input=*/true, __FILE__, __LINE__);
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
  if (h.contents != kContentsTraining && h.contents != kContentsWeights)
    throw InputError("checkpoint '" + path + "': attribute contents = \"" + h.contents +
                         "\", expected \"training\" or \"weights\"",
                     kReadHint);
  h.zt_version = h5::read_string_attr(file, "zt_version", path, root);
  h.zt_commit = h5::read_string_attr(file, "zt_commit", path, root);
  h.config = config_from_json(h5::read_string_attr(file, "model_config", path, root), path);
  if (h5::has_attr(file, "source_dtype", path))
    h.source_dtype = h5::read_string_attr(file, "source_dtype", path, root);
  return h;
}

}  // namespace

// ---- writing -----------------------------------------------------------------------

void write_file(MPI_Comm comm, const std::string& path, const WriteContents& c) {
  const model::ParamLayout layout(c.header.config);
  check_shards(layout, c.units.size(), "ckpt::write_file");
  const bool training = c.header.contents == kContentsTraining;
  ZT_CHECK(!training || c.state.has_value(), "a training checkpoint without /state",
           "fill WriteContents::state");
  const std::vector<model::TensorInfo>& tensors = layout.tensors();
  const size_t nt = tensors.size();
  const int kinds = training ? 3 : 1;
  const int rank = comm_rank(comm);
  const int world = comm_size(comm);

  // This rank's slice of each tensor of each kind, and the partial checksums.
  const auto slice_of = [&](int kind, const model::TensorInfo& t, const Part& p) {
    const UnitShard& s = c.units[static_cast<size_t>(t.unit)];
    const std::span<const float> all = kind == kParams ? s.params : kind == kExpAvg ? s.exp_avg : s.exp_avg_sq;
    ZT_CHECK(all.size() == static_cast<size_t>(s.count), "shard span size differs from its count",
             "every span of a UnitShard holds `count` elements");
    return all.subspan(static_cast<size_t>(p.at), static_cast<size_t>(p.n));
  };
  std::vector<uint64_t> sums(static_cast<size_t>(kinds) * nt + (training ? 1 : 0), 0);
  for (int k = 0; k < kinds; ++k)
    for (size_t i = 0; i < nt; ++i) {
      const UnitShard& s = c.units[static_cast<size_t>(tensors[i].unit)];
      const Part p = part_of(tensors[i], s.begin, s.count);
      sums[static_cast<size_t>(k) * nt + i] = checksum(slice_of(k, tensors[i], p), static_cast<uint64_t>(p.first));
    }
  if (training) {
    const uint64_t seed = c.rng_seed;
    sums.back() = sum64_u64(std::span<const uint64_t>(&seed, 1), static_cast<uint64_t>(rank));
  }
  sum_over_ranks(comm, sums);

  h5::QuietErrors quiet;
  Handle fapl = h5::file_access(comm, path);
  Handle file(ZT_H5_CHECK(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), path,
                          kWriteHint),
              Kind::kFile);

  // Root attributes.
  h5::write_string_attr(file.get(), "format", kFormat, path);
  h5::write_u32_attr(file.get(), "format_version", kFormatVersion, path);
  h5::write_string_attr(file.get(), "contents", c.header.contents, path);
  h5::write_string_attr(file.get(), "zt_version", kVersion, path);
  h5::write_string_attr(file.get(), "zt_commit", kGitCommit, path);
  h5::write_string_attr(file.get(), "model_config", config_to_json(c.header.config), path);
  if (!c.header.source_dtype.empty())
    h5::write_string_attr(file.get(), "source_dtype", c.header.source_dtype, path);

  // Every dataset first (collective metadata, the same on every rank), each with its
  // checksum; contiguous, allocated at once, never filled.
  Handle dcpl(ZT_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE), path, kWriteHint), Kind::kPlist);
  ZT_H5_CHECK(H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS), path, kWriteHint);
  ZT_H5_CHECK(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY), path, kWriteHint);
  ZT_H5_CHECK(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), path, kWriteHint);
  {
    Handle g = h5::create_group(file.get(), "params", path);
  }
  if (training) {
    Handle g = h5::create_group(file.get(), "optim", path);
    Handle a = h5::create_group(g.get(), "exp_avg", path);
    Handle b = h5::create_group(g.get(), "exp_avg_sq", path);
  }
  std::vector<Handle> dsets;
  std::vector<Handle> spaces;
  for (int k = 0; k < kinds; ++k)
    for (size_t i = 0; i < nt; ++i) {
      const std::vector<hsize_t> dims = dims_of(tensors[i].shape);
      Handle space(ZT_H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                               path, kWriteHint),
                   Kind::kDataspace);
      const std::string name = dataset_path(k, tensors[i].name);
      Handle d(ZT_H5_CHECK(H5Dcreate2(file.get(), name.c_str(), H5T_IEEE_F32LE, space.get(),
                                      H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                           path, kWriteHint),
               Kind::kDataset);
      h5::write_u64_attr(d.get(), "checksum", sums[static_cast<size_t>(k) * nt + i], path);
      dsets.push_back(std::move(d));
      spaces.push_back(std::move(space));
    }

  // The data: per dataset, one collective write of this rank's hyperslabs.
  Handle dxpl = h5::transfer(comm, path);
  const float dummy = 0.0f;  // a valid buffer for ranks that write nothing
  for (int k = 0; k < kinds; ++k)
    for (size_t i = 0; i < nt; ++i) {
      const size_t d = static_cast<size_t>(k) * nt + i;
      const UnitShard& s = c.units[static_cast<size_t>(tensors[i].unit)];
      const Part p = part_of(tensors[i], s.begin, s.count);
      const std::span<const float> data = slice_of(k, tensors[i], p);
      h5::select_range(spaces[d].get(), tensors[i].shape, p.first, p.n, path);
      Handle mem = memory_space(p.n, path);
      const herr_t rc = H5Dwrite(dsets[d].get(), H5T_NATIVE_FLOAT, mem.get(), spaces[d].get(),
                                 dxpl.get(), p.n > 0 ? data.data() : &dummy);
      agree(comm, rc, "H5Dwrite of " + dataset_path(k, tensors[i].name), path);
    }
  for (Handle& d : dsets) d.close(path);

  // /state.
  Handle state = h5::create_group(file.get(), "state", path);
  const TrainState st = training ? *c.state : TrainState{};
  h5::write_i64_attr(state.get(), "step", st.step, path);
  h5::write_i64_attr(state.get(), "tokens_seen", st.tokens_seen, path);
  if (training) {
    h5::write_u64_attr(state.get(), "sampler_seed", st.sampler_seed, path);
    h5::write_i64_attr(state.get(), "sampler_next_step", st.sampler_next_step, path);
    h5::write_f64_attr(state.get(), "lr", st.lr, path);
    h5::write_f64_attr(state.get(), "min_lr", st.min_lr, path);
    h5::write_i64_attr(state.get(), "warmup", st.warmup, path);
    h5::write_i64_attr(state.get(), "steps", st.steps, path);
    h5::write_f64_attr(state.get(), "beta1", st.beta1, path);
    h5::write_f64_attr(state.get(), "beta2", st.beta2, path);
    h5::write_f64_attr(state.get(), "eps", st.eps, path);
    h5::write_f64_attr(state.get(), "weight_decay", st.weight_decay, path);
    h5::write_f64_attr(state.get(), "grad_clip", st.grad_clip, path);
    h5::write_i64_attr(state.get(), "global_batch", st.global_batch, path);
    h5::write_i64_attr(state.get(), "seq_len", st.seq_len, path);
    h5::write_i64_attr(state.get(), "world_size", world, path);
    h5::write_i64_attr(state.get(), "zero_stage", st.zero_stage, path);
    h5::write_i64_attr(state.get(), "hpz", st.hpz, path);
    // /state/rng [world]: each rank writes its own element.
    const hsize_t dims[1] = {static_cast<hsize_t>(world)};
    Handle space(ZT_H5_CHECK(H5Screate_simple(1, dims, nullptr), path, kWriteHint), Kind::kDataspace);
    Handle d(ZT_H5_CHECK(H5Dcreate2(state.get(), "rng", H5T_STD_U64LE, space.get(), H5P_DEFAULT,
                                    dcpl.get(), H5P_DEFAULT),
                         path, kWriteHint),
             Kind::kDataset);
    h5::write_u64_attr(d.get(), "checksum", sums.back(), path);
    const hsize_t start[1] = {static_cast<hsize_t>(rank)}, one[1] = {1};
    ZT_H5_CHECK(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, one, nullptr), path,
                kWriteHint);
    Handle mem = memory_space(1, path);
    ZT_H5_CHECK(H5Dwrite(d.get(), H5T_NATIVE_UINT64, mem.get(), space.get(), dxpl.get(), &c.rng_seed),
                path, kWriteHint);
    d.close(path);
  }
  state.close(path);
  file.close(path);
}

// ---- reading -----------------------------------------------------------------------

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
                                    std::vector<std::string>* warnings) {
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

  const std::vector<model::TensorInfo>& tensors = layout.tensors();
  const size_t nt = tensors.size();
  const int kinds = training ? 3 : 1;

  // Exactly the run model's tensors in each group.
  for (int k = 0; k < kinds; ++k) {
    const std::string group = k == kParams ? "/params" : k == kExpAvg ? "/optim/exp_avg" : "/optim/exp_avg_sq";
    Handle g = h5::open_group(file.get(), group.c_str(), path);
    std::set<std::string> expected;
    for (const model::TensorInfo& t : tensors) expected.insert(t.name);
    for (const std::string& name : h5::group_members(g.get(), path))
      if (!expected.count(name))
        throw InputError("checkpoint '" + path + "' holds dataset '" + group + "/" + name +
                             "', which this run's model (" + run_config.name + ") does not have",
                         "load it with the model.* settings it was saved with");
  }

  Handle dxpl = h5::transfer(comm, path);
  std::vector<uint64_t> sums(static_cast<size_t>(kinds) * nt + (training ? 1 : 0), 0);
  std::vector<uint64_t> stored(sums.size(), 0);
  std::vector<std::string> names(sums.size());
  float dummy = 0.0f;
  for (int k = 0; k < kinds; ++k)
    for (size_t i = 0; i < nt; ++i) {
      const model::TensorInfo& t = tensors[i];
      const size_t d = static_cast<size_t>(k) * nt + i;
      names[d] = dataset_path(k, t.name);
      if (!h5::link_exists(file.get(), names[d], path))
        throw InputError("checkpoint '" + path + "' has no dataset '" + names[d] + "'",
                         "the file is incomplete or of another model; load another checkpoint");
      Handle dset(ZT_H5_CHECK(H5Dopen2(file.get(), names[d].c_str(), H5P_DEFAULT), path, kReadHint),
                  Kind::kDataset);
      Handle type(ZT_H5_CHECK(H5Dget_type(dset.get()), path, kReadHint), Kind::kDatatype);
      if (H5Tget_class(type.get()) != H5T_FLOAT || H5Tget_size(type.get()) != 4)
        throw InputError("checkpoint '" + path + "': dataset '" + names[d] + "' is not fp32",
                         "zt checkpoints hold fp32 tensors; convert the file again");
      Handle space(ZT_H5_CHECK(H5Dget_space(dset.get()), path, kReadHint), Kind::kDataspace);
      const int nd = ZT_H5_CHECK(H5Sget_simple_extent_ndims(space.get()), path, kReadHint);
      std::vector<hsize_t> dims(static_cast<size_t>(std::max(nd, 0)));
      ZT_H5_CHECK(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), path, kReadHint);
      if (dims != dims_of(t.shape)) {
        std::string got, want;
        for (const hsize_t x : dims) got += (got.empty() ? "" : ", ") + std::to_string(x);
        for (const int64_t x : t.shape) want += (want.empty() ? "" : ", ") + std::to_string(x);
        throw InputError("checkpoint '" + path + "': dataset '" + names[d] + "' has shape [" + got +
                             "], this run's model needs [" + want + "]",
                         "load it with the model.* settings it was saved with");
      }
      data::h5::require_stored_here(dset.get(), path, names[d], kReadHint);
      stored[d] = h5::read_u64_attr(dset.get(), "checksum", path, "dataset '" + names[d] + "'");
      const UnitTarget& u = units[static_cast<size_t>(t.unit)];
      const std::span<float> all = k == kParams ? u.params : k == kExpAvg ? u.exp_avg : u.exp_avg_sq;
      ZT_CHECK(all.size() == static_cast<size_t>(u.count), "target span size differs from its count",
               "every span of a UnitTarget holds `count` elements");
      const Part p = part_of(t, u.begin, u.count);
      const std::span<float> out = all.subspan(static_cast<size_t>(p.at), static_cast<size_t>(p.n));
      h5::select_range(space.get(), t.shape, p.first, p.n, path);
      Handle mem = memory_space(p.n, path);
      ZT_H5_CHECK(H5Dread(dset.get(), H5T_NATIVE_FLOAT, mem.get(), space.get(), dxpl.get(),
                          p.n > 0 ? out.data() : &dummy),
                  path, kReadHint);
      sums[d] = checksum(out, static_cast<uint64_t>(p.first));
    }

  std::optional<TrainState> state;
  if (training) {
    Handle g = h5::open_group(file.get(), "state", path);
    const std::string what_state = "group /state";
    TrainState st;
    st.step = h5::read_i64_attr(g.get(), "step", path, what_state);
    st.tokens_seen = h5::read_i64_attr(g.get(), "tokens_seen", path, what_state);
    st.sampler_seed = h5::read_u64_attr(g.get(), "sampler_seed", path, what_state);
    st.sampler_next_step = h5::read_i64_attr(g.get(), "sampler_next_step", path, what_state);
    st.lr = h5::read_f64_attr(g.get(), "lr", path, what_state);
    st.min_lr = h5::read_f64_attr(g.get(), "min_lr", path, what_state);
    st.warmup = h5::read_i64_attr(g.get(), "warmup", path, what_state);
    st.steps = h5::read_i64_attr(g.get(), "steps", path, what_state);
    st.beta1 = h5::read_f64_attr(g.get(), "beta1", path, what_state);
    st.beta2 = h5::read_f64_attr(g.get(), "beta2", path, what_state);
    st.eps = h5::read_f64_attr(g.get(), "eps", path, what_state);
    st.weight_decay = h5::read_f64_attr(g.get(), "weight_decay", path, what_state);
    st.grad_clip = h5::read_f64_attr(g.get(), "grad_clip", path, what_state);
    st.global_batch = h5::read_i64_attr(g.get(), "global_batch", path, what_state);
    st.seq_len = h5::read_i64_attr(g.get(), "seq_len", path, what_state);
    st.world_size = h5::read_i64_attr(g.get(), "world_size", path, what_state);
    st.zero_stage = h5::read_i64_attr(g.get(), "zero_stage", path, what_state);
    st.hpz = h5::read_i64_attr(g.get(), "hpz", path, what_state);
    if (st.step < 0 || st.world_size < 1)
      throw InputError(strf("checkpoint '%s': /state has step %lld, world_size %lld", path.c_str(),
                            static_cast<long long>(st.step), static_cast<long long>(st.world_size)),
                       kReadHint);
    // /state/rng: every rank reads it whole (world_size elements); rank 0's sum counts.
    names.back() = "/state/rng";
    if (!h5::link_exists(g.get(), "rng", path))
      throw InputError("checkpoint '" + path + "' has no dataset '/state/rng'", kReadHint);
    Handle d(ZT_H5_CHECK(H5Dopen2(g.get(), "rng", H5P_DEFAULT), path, kReadHint), Kind::kDataset);
    Handle space(ZT_H5_CHECK(H5Dget_space(d.get()), path, kReadHint), Kind::kDataspace);
    if (H5Sget_simple_extent_npoints(space.get()) != st.world_size)
      throw InputError("checkpoint '" + path + "': dataset '/state/rng' does not hold world_size "
                       "elements", kReadHint);
    data::h5::require_stored_here(d.get(), path, "/state/rng", kReadHint);
    stored.back() = h5::read_u64_attr(d.get(), "checksum", path, "dataset '/state/rng'");
    st.rng.resize(static_cast<size_t>(st.world_size));
    ZT_H5_CHECK(H5Dread(d.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, dxpl.get(), st.rng.data()),
                path, kReadHint);
    sums.back() = comm_rank(comm) == 0 ? sum64_u64(st.rng) : 0;
    state = std::move(st);
  }
  file.close(path);

  sum_over_ranks(comm, sums);
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
