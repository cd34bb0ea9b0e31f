// The reference log-probs (DPO, KTO) beside the checkpoints (see preference_reference.hpp).
#include "preference_reference.hpp"

#include <cctype>
#include <filesystem>
#include <span>

#include "zt/core/checksum.hpp"
#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/hash.hpp"
#include "zt/core/log.hpp"
#include "zt/h5/h5.hpp"
#include "objective_pairs.hpp"

namespace zt::train {
namespace {

using h5::Handle;
using h5::Kind;

constexpr const char* kFormat = "zt-dpo-reference";
constexpr const char* kWriteHint = "check free disk space and that ckpt.dir is writable";

std::string resume_hint(const std::string& path) {
  return "the reference of a full-weights DPO or KTO run is the weights before its first step, stored in " +
         path + " at that step; resume with the same data.path and train.seq_len, or start the "
         "run again (ckpt.resume = none, ckpt.overwrite = true)";
}

// "DPO" for "dpo": the objective's name in the log lines.
std::string upper_name(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

uint64_t pair_data_hash(const data::TokenFile& data) {
  const uint64_t t = xxh3_sum(std::as_bytes(std::span(data.tokens)));
  const uint64_t m = xxh3_sum(std::as_bytes(std::span(data.loss_mask)));
  return mix64(t ^ mix64(m ^ data.row_len));
}

uint64_t weights_hash(zero::Engine& engine, comm::Comm& comm) {
  const int units = engine.partition().num_units();
  // Each unit's partial sum as two 32-bit halves in int64: their sums over the ranks never
  // overflow, and (hi << 32) + lo is the wrapping uint64 sum.
  std::vector<int64_t> halves(2 * static_cast<size_t>(units), 0);
  for (int u = 0; u < units; ++u) {
    const zero::OwnedSlice s = engine.owned(u);
    const uint64_t v = sum64_fast(s.params, static_cast<uint64_t>(s.begin));
    halves[2 * static_cast<size_t>(u)] = static_cast<int64_t>(v >> 32);
    halves[2 * static_cast<size_t>(u) + 1] = static_cast<int64_t>(v & 0xffffffffULL);
  }
  comm.all_reduce(halves.data(), halves.data(), halves.size(), DType::kI64, comm::ReduceOp::kSum);
  uint64_t h = 0;
  for (size_t u = 0; u < static_cast<size_t>(units); ++u)
    h = mix64(h ^ ((static_cast<uint64_t>(halves[2 * u]) << 32) + static_cast<uint64_t>(halves[2 * u + 1])));
  return h;
}

void write_reference(const std::string& path, const std::vector<double>& logp, const ReferenceIdentity& id) {
  SafeFile out(path, "DPO reference log-probs");
  {
    const std::string& tmp = out.temp_path();
    h5::QuietErrors quiet;
    Handle file(ZT_H5_CHECK(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), tmp, kWriteHint),
                Kind::kFile);
    const hsize_t dims[1] = {static_cast<hsize_t>(logp.size())};
    Handle space(ZT_H5_CHECK(H5Screate_simple(1, dims, nullptr), tmp, kWriteHint), Kind::kDataspace);
    Handle dset(ZT_H5_CHECK(H5Dcreate2(file.get(), "logp", H5T_IEEE_F64LE, space.get(), H5P_DEFAULT,
                                       H5P_DEFAULT, H5P_DEFAULT),
                            tmp, kWriteHint),
                Kind::kDataset);
    ZT_H5_CHECK(H5Dwrite(dset.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, logp.data()), tmp,
                kWriteHint);
    h5::write_checksum(dset.get(), std::as_bytes(std::span(logp)), tmp, kWriteHint);
    dset.close(tmp);
    h5::write_string_attr(file.get(), "format", kFormat, h5::StringLayout::kVariable, tmp, kWriteHint);
    h5::write_u64_attr(file.get(), "rows", logp.size(), tmp, kWriteHint);
    h5::write_u32_attr(file.get(), "row_len", id.row_len, tmp, kWriteHint);
    h5::write_u64_attr(file.get(), "data_hash", id.data_hash, tmp, kWriteHint);
    h5::write_u64_attr(file.get(), "weights_hash", id.weights_hash, tmp, kWriteHint);
    h5::write_string_attr(file.get(), "data_path", id.data_path, h5::StringLayout::kVariable, tmp, kWriteHint);
    file.close(tmp);
  }
  out.commit();
}

std::vector<double> read_reference(const std::string& path, const ReferenceIdentity& id) {
  const std::string hint = resume_hint(path);
  const size_t rows = id.rows;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw InputError("the DPO reference log-probs " + path + " are missing", hint);
  require_regular_file(path, "DPO reference log-probs", hint);
  h5::QuietErrors quiet;
  if (H5Fis_hdf5(path.c_str()) <= 0) throw InputError(path + " is not an HDF5 file", hint);
  Handle file(ZT_H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), path, hint), Kind::kFile);
  const std::string where = "DPO reference '" + path + "'";
  if (h5::read_string_attr(file.get(), "format", path, where, hint) != kFormat)
    throw InputError(where + ": format is not " + kFormat, hint);
  const uint64_t n = h5::read_u64_attr(file.get(), "rows", path, where, hint);
  const uint32_t len = h5::read_u32_attr(file.get(), "row_len", path, where, hint);
  const uint64_t hash = h5::read_u64_attr(file.get(), "data_hash", path, where, hint);
  if (n != rows || len != id.row_len || hash != id.data_hash)
    throw InputError(strf("%s holds the log-probs of %llu rows of %u tokens of other data (%s) than "
                          "data.path = %s (%zu rows of %u)",
                          where.c_str(), static_cast<unsigned long long>(n), len,
                          h5::read_string_attr(file.get(), "data_path", path, where, hint).c_str(),
                          id.data_path.c_str(), rows, id.row_len),
                     hint);
  const uint64_t weights = h5::read_u64_attr(file.get(), "weights_hash", path, where, hint);
  if (id.weights_hash != 0 && weights != id.weights_hash)
    throw InputError(strf("%s holds the log-probs of other weights (weights_hash %016llx) than this "
                          "run's before its first step (%016llx)",
                          where.c_str(), static_cast<unsigned long long>(weights),
                          static_cast<unsigned long long>(id.weights_hash)),
                     hint);
  Handle dset(ZT_H5_CHECK(H5Dopen2(file.get(), "logp", H5P_DEFAULT), path, hint), Kind::kDataset);
  Handle space(ZT_H5_CHECK(H5Dget_space(dset.get()), path, hint), Kind::kDataspace);
  hsize_t dims[1] = {0};
  if (H5Sget_simple_extent_ndims(space.get()) != 1 ||
      ZT_H5_CHECK(H5Sget_simple_extent_dims(space.get(), dims, nullptr), path, hint) != 1 || dims[0] != rows)
    throw InputError(where + ": /logp is not a vector of " + std::to_string(rows) + " values", hint);
  h5::require_stored_here(dset.get(), path, "logp", hint);
  std::vector<double> logp(rows);
  ZT_H5_CHECK(H5Dread(dset.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, logp.data()), path, hint);
  h5::verify_checksum(dset.get(), std::as_bytes(std::span(logp)), path, "/logp", hint);
  return logp;
}

// ReferencePairObjective (objective_pairs.hpp). The reference log-probs of every row (the base with the adapters off, or the weights
// before the first step of a full fine-tune), one forward pass over the file, rows split
// over the ranks. A full fine-tune stores them in ckpt_dir/dpo-reference.h5 and, resumed
// past step 0, reads them from beside the checkpoint it resumed from. At step 0 a stored
// file of the same identity (weights, data, seq_len) and checksum is reused; any other is
// recomputed with a warning.
bool ReferencePairObjective::reference(const ReferenceContext& rc) {
  namespace fs = std::filesystem;
  const std::string upper = upper_name(name());
  const char* tag = upper.c_str();
  const std::string& resumed_from = rc.resumed_from;
  const std::string& ckpt_dir = rc.ckpt_dir;
  const bool full = !cfg_.lora.enabled();
  const size_t rows = data_.tokens.size() / row_;
  ReferenceIdentity id{rows, static_cast<uint32_t>(row_), full ? pair_data_hash(data_) : 0, 0, cfg_.data_path};
  const std::string stored = ckpt_dir.empty() ? "" : (fs::path(ckpt_dir) / kReferenceFile).string();
  // Where a stored reference lies: beside the checkpoint resumed from, else in ckpt.dir.
  const fs::path dir = resumed_from.empty() ? fs::path(ckpt_dir) : fs::absolute(resumed_from).parent_path();
  const std::string from = (dir / kReferenceFile).string();
  if (full && rc.first_step > 0) {  // the weights of step 0 are gone: the stored log-probs
    ZT_CHECK(!resumed_from.empty(), "a full-weights run against a reference resumed without a checkpoint path",
             "LoopCheckpoints::last_path() names the checkpoint resumed from");
    ref_ = read_reference(from, id);
    if (comm_.rank() == 0)
      log::info(strf("%s reference: log-probs of %zu rows read from %s (stored at step 0)", tag, rows, from.c_str()));
    std::error_code ec;
    if (!stored.empty() && !fs::equivalent(dir, ckpt_dir, ec))
      store_reference(stored, id);  // this run's checkpoints go to another ckpt.dir
    return true;
  }
  if (full) {  // step 0: a stored reference of these very weights is reused, else recomputed
    id.weights_hash = weights_hash(engine_, comm_);
    std::error_code ec;
    if (!ckpt_dir.empty() && fs::exists(from, ec)) {
      try {
        ref_ = read_reference(from, id);
        if (comm_.rank() == 0)
          log::info(strf("%s reference: log-probs of %zu rows reused from %s (same weights, data and "
                         "seq_len; checksum verified)", tag, rows, from.c_str()));
        if (!fs::equivalent(dir, ckpt_dir, ec)) store_reference(stored, id);
        return true;
      } catch (const InputError& e) {
        if (comm_.rank() == 0) log::warn(std::string(tag) + " reference: recomputing it: " + e.message());
      }
    }
  }
  const size_t chunks = (rows + B_ - 1) / B_;
  const int world = comm_.size(), rank = comm_.rank();
  const size_t rounds = (chunks + static_cast<size_t>(world) - 1) / static_cast<size_t>(world);
  ref_.assign(rows, 0.0);
  std::vector<double> logp(B_);
  std::vector<int64_t> count(B_);
  if (rank == 0) log::info(strf("%s reference: computing the log-probs of %zu rows", tag, rows));
  engine_.set_adapters_enabled(false);  // LoRA: the frozen base (no-op without adapters)
  for (size_t r = 0; r < rounds; ++r) {
    if (rc.stop && rc.stop()) {  // agreed by every rank (collective): the pass ends between batches
      engine_.set_adapters_enabled(true);
      ref_.clear();
      if (rank == 0)
        log::info(strf("%s reference: stop requested after %zu of %zu rows: not stored", tag, r * B_ * world, rows));
      return false;
    }
    const size_t chunk = r * static_cast<size_t>(world) + static_cast<size_t>(rank);
    const bool mine = chunk < chunks;  // else a repeat of chunk 0, discarded (collective)
    for (size_t i = 0; i < B_; ++i) fill(i, std::min((mine ? chunk * B_ : 0) + i, rows - 1) * row_);
    engine_.row_logps(batch_.tokens, batch_.targets, cfg_.micro_batch, cfg_.seq_len, {}, logp, count);
    if (mine)
      for (size_t i = 0; i < B_ && chunk * B_ + i < rows; ++i) ref_[chunk * B_ + i] = logp[i];
  }
  engine_.set_adapters_enabled(true);
  // Each row comes from one rank, zeros elsewhere: the sum is exact.
  comm_.all_reduce(ref_.data(), ref_.data(), ref_.size(), DType::kF64, comm::ReduceOp::kSum);
  if (comm_.rank() == 0)
    log::info(strf("%s reference: log-probs of %zu rows (%s)", tag, rows,
                   cfg_.lora.enabled() ? "the base, adapters off" : "the weights before the first step"));
  if (full && !stored.empty()) store_reference(stored, id);
  return true;
}

// Rank 0 writes; every rank learns whether it could (no rank left in a collective).
void ReferencePairObjective::store_reference(const std::string& path, const ReferenceIdentity& id) {
  int32_t failed = 0;
  std::string why;
  if (comm_.rank() == 0) {
    try {
      write_reference(path, ref_, id);
      log::info(strf("%s reference: stored in %s (%zu rows, %zu bytes; a resume reads it)",
                     upper_name(name()).c_str(), path.c_str(),
                     ref_.size(), ref_.size() * sizeof(double)));
    } catch (const Error& e) {
      failed = 1;
      why = e.what();
    }
  }
  comm_.all_reduce(&failed, &failed, 1, DType::kI32, comm::ReduceOp::kMax);
  if (failed)
    throw Error("rank 0 could not store the reference log-probs in " + path +
                    (why.empty() ? std::string() : ": " + why),
                "check free disk space and that ckpt.dir is writable");
}

std::span<const double> ReferencePairObjective::batch_reference() {
  batch_ref_.clear();
  for (const size_t r : rows_) batch_ref_.push_back(ref_[r]);
  return batch_ref_;
}

}  // namespace zt::train
