// Token files: HDF5 /tokens + /doc_starts + root attributes (see token_file.hpp).
#include "zt/data/token_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "zt/h5/h5.hpp"
#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/log.hpp"
#include "zt/core/memory.hpp"

namespace zt::data {
namespace {

namespace fs = std::filesystem;
using h5::Handle;
using h5::Kind;

constexpr const char* kFormat = "zt-tokens";
// 2: every dataset carries the checkpoints' `checksum` attribute (h5::write_checksum),
// verified at read; 1 (older zt): none.
constexpr uint32_t kFormatVersion = 2;
constexpr const char* kReconvertHint =
    "re-create the file with `zt convert text-to-tokens IN.txt OUT.h5`; docs/training.md "
    "describes the format";

// Checks what a token file must satisfy; `where` names the file in messages.
void validate(const TokenFile& f, const std::string& where) {
  if (f.tokens.empty())
    throw InputError("token file '" + where + "' holds no tokens",
                     "the corpus is empty; give a non-empty text file");
  if (f.vocab_size == 0)
    throw InputError("token file '" + where + "' has vocab_size 0", kReconvertHint);
  if (f.tokenizer.empty())
    throw InputError("token file '" + where + "' names no tokenizer", kReconvertHint);
  const auto bad = std::find_if(f.tokens.begin(), f.tokens.end(),
                                [&](uint32_t t) { return t >= f.vocab_size; });
  if (bad != f.tokens.end())
    throw InputError(strf("token file '%s': token id %u at position %zu is >= vocab_size %u",
                          where.c_str(), *bad, static_cast<size_t>(bad - f.tokens.begin()),
                          f.vocab_size),
                     "the ids and the vocab_size attribute disagree (a different tokenizer?); " +
                         std::string(kReconvertHint));
  if (!f.loss_mask.empty()) {
    if (f.loss_mask.size() != f.tokens.size())
      throw InputError(strf("token file '%s': /loss_mask holds %zu values for %zu tokens",
                            where.c_str(), f.loss_mask.size(), f.tokens.size()),
                       kReconvertHint);
    const auto bad_mask = std::find_if(f.loss_mask.begin(), f.loss_mask.end(), [](uint8_t m) { return m > 1; });
    if (bad_mask != f.loss_mask.end())
      throw InputError(strf("token file '%s': /loss_mask[%zu] is %u, not 0 or 1", where.c_str(),
                            static_cast<size_t>(bad_mask - f.loss_mask.begin()), *bad_mask),
                       kReconvertHint);
    if (f.row_len == 0)
      throw InputError("token file '" + where + "' has /loss_mask but no row_len attribute", kReconvertHint);
    // A mask with no target trained with loss 0 and decayed the weights (issue 36, class 7).
    if (std::none_of(f.loss_mask.begin(), f.loss_mask.end(), [](uint8_t m) { return m != 0; }))
      throw InputError("token file '" + where + "': /loss_mask is 0 on every token: no target to train on",
                       kReconvertHint);
  }
  if (f.row_len != 0 && f.tokens.size() % f.row_len != 0)
    throw InputError(strf("token file '%s': %zu tokens are not whole rows of row_len %u",
                          where.c_str(), f.tokens.size(), f.row_len),
                     kReconvertHint);
  if (f.pairs && (f.loss_mask.empty() || (f.tokens.size() / f.row_len) % 2 != 0))
    throw InputError(strf("token file '%s' says it holds preference pairs but %s", where.c_str(),
                          f.loss_mask.empty() ? "has no /loss_mask" : "holds an odd number of rows"),
                     "re-create it with `zt convert pairs-to-tokens`; docs/data.md describes the layout");
  if (!f.labels.empty() &&
      (f.pairs || f.loss_mask.empty() || f.tokens.size() / f.row_len != 2 * f.labels.size() ||
       std::any_of(f.labels.begin(), f.labels.end(), [](uint8_t l) { return l > 1; })))
    throw InputError(strf("token file '%s' says it holds KTO rows (/labels) but %s", where.c_str(),
                          f.pairs ? "also says it holds pairs"
                          : f.loss_mask.empty() ? "has no /loss_mask"
                          : f.tokens.size() / f.row_len != 2 * f.labels.size()
                              ? "its rows are not two per label"
                              : "a label is neither 0 nor 1"),
                     "re-create it with `zt convert kto-to-tokens`; docs/data.md describes the layout");
  if (!f.doc_starts.empty()) {
    if (f.doc_starts[0] != 0)
      throw InputError("token file '" + where + "': doc_starts[0] must be 0", kReconvertHint);
    for (size_t i = 1; i < f.doc_starts.size(); ++i)
      if (f.doc_starts[i] <= f.doc_starts[i - 1] || f.doc_starts[i] >= f.tokens.size())
        throw InputError(strf("token file '%s': doc_starts[%zu] = %llu is not ascending "
                              "within [0, %zu)",
                              where.c_str(), i,
                              static_cast<unsigned long long>(f.doc_starts[i]),
                              f.tokens.size()),
                         kReconvertHint);
  }
}

// ---- writing ---------------------------------------------------------------------

constexpr const char* kAttrHint = "check free disk space";

// The bytes of `values` as a dataset of `size`-byte little-endian unsigned elements holds
// them (what its checksum covers): each value's low `size` bytes.
template <class T>
std::vector<std::byte> stored_bytes(const std::vector<T>& values, size_t size) {
  std::vector<std::byte> out(values.size() * size);
  for (size_t i = 0; i < values.size(); ++i) std::memcpy(out.data() + i * size, &values[i], size);
  return out;
}

// A 1-D dataset of the values, as file_type, with its checksum.
template <class T>
void write_vector(hid_t file, const char* name, hid_t file_type, hid_t mem_type,
                  const std::vector<T>& values, const std::string& path) {
  const void* data = values.data();
  const size_t n = values.size();
  const char* hint = "check free disk space and that the directory is writable";
  const hsize_t dims[1] = {static_cast<hsize_t>(n)};
  Handle space(ZT_H5_CHECK(H5Screate_simple(1, dims, nullptr), path, hint), Kind::kDataspace);
  Handle dset(ZT_H5_CHECK(H5Dcreate2(file, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT,
                                     H5P_DEFAULT),
                          path, hint),
              Kind::kDataset);
  ZT_H5_CHECK(H5Dwrite(dset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), path, hint);
  const std::vector<std::byte> bytes = stored_bytes(values, H5Tget_size(file_type));
  h5::write_checksum(dset.get(), bytes, path, hint);
  dset.close(path);
}

void write_hdf5(const std::string& tmp, const TokenFile& f) {
  h5::QuietErrors quiet;
  Handle file(ZT_H5_CHECK(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), tmp,
                          "check that the output directory exists and is writable"),
              Kind::kFile);
  // [num_tokens] ids, stored as uint16 when they fit.
  const hid_t token_type = f.vocab_size <= 65536 ? H5T_STD_U16LE : H5T_STD_U32LE;
  write_vector(file.get(), "tokens", token_type, H5T_NATIVE_UINT32, f.tokens, tmp);
  const uint64_t num_docs = f.doc_starts.empty() ? 1 : f.doc_starts.size();
  if (num_docs > 1)  // [num_docs] first token of each document
    write_vector(file.get(), "doc_starts", H5T_STD_U64LE, H5T_NATIVE_UINT64, f.doc_starts, tmp);
  const uint64_t num_tokens = f.tokens.size();
  h5::write_string_attr(file.get(), "format", kFormat, h5::StringLayout::kVariable, tmp, kAttrHint);
  h5::write_u32_attr(file.get(), "format_version", kFormatVersion, tmp, kAttrHint);
  h5::write_u32_attr(file.get(), "vocab_size", f.vocab_size, tmp, kAttrHint);
  h5::write_string_attr(file.get(), "tokenizer", f.tokenizer, h5::StringLayout::kVariable, tmp, kAttrHint);
  if (!f.loss_mask.empty())
    write_vector(file.get(), "loss_mask", H5T_STD_U8LE, H5T_NATIVE_UINT8, f.loss_mask, tmp);
  if (f.row_len != 0) h5::write_u32_attr(file.get(), "row_len", f.row_len, tmp, kAttrHint);
  if (f.pairs) h5::write_u32_attr(file.get(), "pairs", 1, tmp, kAttrHint);
  if (!f.labels.empty()) write_vector(file.get(), "labels", H5T_STD_U8LE, H5T_NATIVE_UINT8, f.labels, tmp);
  if (!f.tokenizer_hash.empty())
    h5::write_string_attr(file.get(), "tokenizer_hash", f.tokenizer_hash,
                          h5::StringLayout::kVariable, tmp, kAttrHint);
  if (!f.tokenizer_path.empty())
    h5::write_string_attr(file.get(), "tokenizer_path", f.tokenizer_path,
                          h5::StringLayout::kVariable, tmp, kAttrHint);
  h5::write_u64_attr(file.get(), "num_tokens", num_tokens, tmp, kAttrHint);
  h5::write_u64_attr(file.get(), "num_docs", num_docs, tmp, kAttrHint);
  ZT_H5_CHECK(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), tmp, "check free disk space");
  file.close(tmp);
}

// ---- reading ---------------------------------------------------------------------

// Reads the 1-D dataset `name` into `out` (converted by HDF5 to mem_type).
// checked: the file's format_version has checksums (2): verified.
template <class T>
void read_vector(hid_t file, const char* name, hid_t mem_type, std::vector<T>& out,
                 const std::string& path, bool checked) {
  {  // A group or a named type where the dataset belongs: say so, not H5Dopen2's text.
    const hid_t obj = ZT_H5_CHECK(H5Oopen(file, name, H5P_DEFAULT), path, kReconvertHint);
    const H5I_type_t type = H5Iget_type(obj);
    ZT_H5_CHECK(H5Oclose(obj), path, kReconvertHint);
    if (type != H5I_DATASET)
      throw InputError(strf("token file '%s': /%s is %s, not a dataset", path.c_str(), name,
                            type == H5I_GROUP ? "a group" : "a named datatype"),
                       kReconvertHint);
  }
  Handle dset(ZT_H5_CHECK(H5Dopen2(file, name, H5P_DEFAULT), path, kReconvertHint), Kind::kDataset);
  Handle type(ZT_H5_CHECK(H5Dget_type(dset.get()), path, kReconvertHint), Kind::kDatatype);
  if (H5Tget_class(type.get()) != H5T_INTEGER || H5Tget_sign(type.get()) != H5T_SGN_NONE ||
      H5Tget_size(type.get()) > sizeof(T))
    throw InputError(strf("token file '%s': /%s must hold unsigned integers of at most %zu "
                          "bytes (uint16 or uint32 for /tokens)",
                          path.c_str(), name, sizeof(T)),
                     kReconvertHint);
  Handle space(ZT_H5_CHECK(H5Dget_space(dset.get()), path, kReconvertHint), Kind::kDataspace);
  if (H5Sget_simple_extent_ndims(space.get()) != 1)
    throw InputError(strf("token file '%s': /%s must be 1-D", path.c_str(), name), kReconvertHint);
  hsize_t n = 0;
  ZT_H5_CHECK(H5Sget_simple_extent_dims(space.get(), &n, nullptr), path, kReconvertHint);
  h5::require_stored_here(dset.get(), path, std::string("/") + name, kReconvertHint);
  out.resize(static_cast<size_t>(n));
  if (n > 0)
    ZT_H5_CHECK(H5Dread(dset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), path,
                kReconvertHint);
  if (checked)
    h5::verify_checksum(dset.get(), stored_bytes(out, H5Tget_size(type.get())), path, std::string("/") + name,
                        kReconvertHint);
}

}  // namespace

void write_token_file(const std::string& path, const TokenFile& file, const WriteOptions& options) {
  validate(file, path);
  require_output_folder(path, "token file");
  // HDF5 writes the temporary SafeFile created (O_EXCL|O_NOFOLLOW), by name.
  SafeFile out(path, "token file", options.tmp_suffix);
  write_hdf5(out.temp_path(), file);
  out.commit();
}

TokenFile read_token_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw InputError("token file '" + path + "' not found",
                     "make one with `zt convert text-to-tokens IN.txt " + path +
                         "`, or check data.path");
  require_regular_file(path, "token file", "data.path names one .h5 file made by `zt convert "
                                           "text-to-tokens`");
  h5::QuietErrors quiet;
  if (H5Fis_hdf5(path.c_str()) <= 0)
    throw InputError("'" + path + "' is not an HDF5 file",
                     "data.path must be a token file made by `zt convert text-to-tokens`, "
                     "not the text itself");
  Handle file(ZT_H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), path,
                          "check the file's permissions"),
              Kind::kFile);
  if (ZT_H5_CHECK(H5Lexists(file.get(), "tokens", H5P_DEFAULT), path, kReconvertHint) <= 0)
    throw InputError("token file '" + path + "' has no /tokens dataset", kReconvertHint);

  const std::string where = "token file '" + path + "'";
  // Files of format_version 2 (and any later) carry checksums; 1 (older zt, or no
  // attribute) none.
  const bool checked = h5::has_attr(file.get(), "format_version", path, kReconvertHint) &&
                       h5::read_u32_attr(file.get(), "format_version", path, where, kReconvertHint) >= 2;
  TokenFile f;
  read_vector(file.get(), "tokens", H5T_NATIVE_UINT32, f.tokens, path, checked);
  if (ZT_H5_CHECK(H5Lexists(file.get(), "doc_starts", H5P_DEFAULT), path, kReconvertHint) > 0)
    read_vector(file.get(), "doc_starts", H5T_NATIVE_UINT64, f.doc_starts, path, checked);
  if (ZT_H5_CHECK(H5Lexists(file.get(), "loss_mask", H5P_DEFAULT), path, kReconvertHint) > 0)
    read_vector(file.get(), "loss_mask", H5T_NATIVE_UINT8, f.loss_mask, path, checked);
  if (ZT_H5_CHECK(H5Lexists(file.get(), "labels", H5P_DEFAULT), path, kReconvertHint) > 0)
    read_vector(file.get(), "labels", H5T_NATIVE_UINT8, f.labels, path, checked);
  f.vocab_size = h5::read_u32_attr(file.get(), "vocab_size", path, where, kReconvertHint);
  f.tokenizer = h5::read_string_attr(file.get(), "tokenizer", path, where, kReconvertHint);
  if (h5::has_attr(file.get(), "row_len", path, kReconvertHint))
    f.row_len = h5::read_u32_attr(file.get(), "row_len", path, where, kReconvertHint);
  if (h5::has_attr(file.get(), "pairs", path, kReconvertHint)) {
    const uint32_t pairs = h5::read_u32_attr(file.get(), "pairs", path, where, kReconvertHint);
    if (pairs != 1)
      throw InputError(strf("%s: attribute pairs is %u, not 1", where.c_str(), pairs), kReconvertHint);
    f.pairs = true;
  }
  if (h5::has_attr(file.get(), "tokenizer_hash", path, kReconvertHint))
    f.tokenizer_hash = h5::read_string_attr(file.get(), "tokenizer_hash", path, where, kReconvertHint);
  if (h5::has_attr(file.get(), "tokenizer_path", path, kReconvertHint))
    f.tokenizer_path = h5::read_string_attr(file.get(), "tokenizer_path", path, where, kReconvertHint);
  file.close(path);
  validate(f, path);
  return f;
}

void require_convert_memory(const std::string& command, const std::vector<std::string>& inputs,
                            double per_byte, const std::function<double(double total, double largest)>& extra,
                            const std::string& detail) {
  uint64_t total = 0, largest = 0;
  std::string name;
  for (const std::string& path : inputs) {
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(path, ec);
    if (ec) continue;  // reported by the reader, which names it
    total += size;
    if (name.empty() || size > largest) largest = size, name = path;
  }
  if (name.empty()) return;
  const double need =
      per_byte * static_cast<double>(total) + extra(static_cast<double>(total), static_cast<double>(largest));
  require_memory(need,
                 strf("%s of '%s' (%llu bytes%s)", command.c_str(), name.c_str(),
                      static_cast<unsigned long long>(largest),
                      inputs.size() > 1 ? strf("; %zu files, %llu bytes in all", inputs.size(),
                                               static_cast<unsigned long long>(total)).c_str()
                                        : ""),
                 detail,
                 "convert the input in smaller files (split it at line ends; each converted file is a "
                 "token file of its own), or run where more memory is free");
}

}  // namespace zt::data
