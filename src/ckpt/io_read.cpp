// Reading one checkpoint file, collectively (parallel HDF5) or serially: the file opened
// and its header checked (shared with the adapter reader, io_detail.hpp), each rank's part
// of every tensor read through the I/O engine (io_engine.hpp) with its checksum verified,
// the train state read. See io.hpp and docs/checkpoint-format.md.
#include "zt/ckpt/io.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>

#include "h5.hpp"
#include "io_detail.hpp"
#include "io_engine.hpp"
#include "zt/ckpt/adapters.hpp"
#include "zt/core/checksum.hpp"
#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/log.hpp"
#include "zt/core/progress.hpp"
#include "zt/model/layout.hpp"

namespace zt::ckpt {
namespace {

namespace fs = std::filesystem;
using h5::Handle;
using h5::Kind;
using namespace detail;

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
                  Progress& progress, IoTimes& times, const model::ParamLayout* slices) {
  const std::vector<model::TensorInfo>& tensors = layout.tensors();
  const size_t nt = tensors.size();
  const auto t_data = std::chrono::steady_clock::now();
  std::vector<std::span<char>> targets;  // in file order: each kind's units
  for (int k = 0; k < kinds; ++k)
    for (const UnitTarget& u : units) {
      const std::span<float> x = k == kParams ? u.params : k == kExpAvg ? u.exp_avg : u.exp_avg_sq;
      targets.push_back({reinterpret_cast<char*>(x.data()), x.size_bytes()});
    }
  Prefault prefault(std::move(targets));  // ahead of the reads
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
      const Part p = part_in_file(tensors, i, slices, u.begin, u.count);
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
  times.copies += raw.copy_seconds();
  times.prefault += prefault.seconds();
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
  if (h5::has_attr(g.get(), "objective", path))
    st.objective = h5::read_string_attr(g.get(), "objective", path, what_state);
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

// Where a read's time went, for the load's progress line (rank 0's figures).
std::string describe_read(const IoTimes& t) {
  return strf("reads %.2f s (pages faulted in beside them %.2f s, %.0fk page faults; bounce "
              "copies %.2f s on the I/O threads), "
              "HDF5 metadata %.2f s, checksums %.2f s beside the reads (waited %.2f s), "
              "waiting for the other ranks %.2f s",
              t.data, t.prefault, static_cast<double>(t.page_faults) / 1e3, t.copies, t.metadata, t.checksum,
              t.checksum_wait, t.ranks);
}

}  // namespace

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
                                    const model::ParamLayout* part,
                                    const model::ParamLayout* slices) {
  const auto t_start = std::chrono::steady_clock::now();
  const uint64_t faults0 = minor_page_faults();
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
               stored, names, *progress, t, slices);
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

  for (size_t d = 0; d < n; ++d) sums[d] += tails[d];
  const auto t_ranks = std::chrono::steady_clock::now();
  sum_over_ranks(comm, sums);
  t.ranks = seconds_since(t_ranks);
  t.page_faults = minor_page_faults() - faults0;
  t.total = seconds_since(t_start);
  progress->finish(describe_read(t));
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
