// The DPO reference log-probs beside the checkpoints (see preference_reference.hpp).
#include "preference_reference.hpp"

#include <filesystem>
#include <span>

#include "zt/core/checksum.hpp"
#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/hash.hpp"
#include "zt/core/log.hpp"
#include "zt/h5/h5.hpp"

namespace zt::train {
namespace {

using h5::Handle;
using h5::Kind;

constexpr const char* kFormat = "zt-dpo-reference";
constexpr const char* kWriteHint = "check free disk space and that ckpt.dir is writable";

std::string resume_hint(const std::string& path) {
  return "the reference of a full-weights DPO run is the weights before its first step, stored in " +
         path + " at that step; resume with the same data.path and train.seq_len, or start the "
         "run again (ckpt.resume = none, ckpt.overwrite = true)";
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

}  // namespace zt::train
