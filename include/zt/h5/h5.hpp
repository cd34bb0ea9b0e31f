#pragma once
// The one HDF5 helper layer, below data and ckpt: owned handles, checked calls, scalar
// attributes and groups. Every HDF5 call goes through ZT_H5_CHECK, which turns a failure
// into a zt::Error naming the call, the file, HDF5's own description (from its error
// stack) and a hint.
#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zt::h5 {

// Throws zt::Error (or zt::InputError when `bad_input`) for a failed HDF5 call.
[[noreturn]] void fail(const char* call, const std::string& path, std::string_view hint,
                       bool bad_input, const char* file, int line);

// While alive, HDF5 does not print its error stack to stderr (our errors carry it).
class QuietErrors {
 public:
  QuietErrors();
  ~QuietErrors();
  QuietErrors(const QuietErrors&) = delete;
  QuietErrors& operator=(const QuietErrors&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

// An owned hid_t, closed with the right H5?close on destruction.
enum class Kind { kFile, kDataset, kDataspace, kDatatype, kAttribute, kPlist, kGroup };
class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, Kind kind) : id_(id), kind_(kind) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : id_(o.id_), kind_(o.kind_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  // Closes now; a failing close (e.g. the final flush of a file) throws.
  void close(const std::string& path);
  void reset() noexcept;

 private:
  hid_t id_ = H5I_INVALID_HID;
  Kind kind_ = Kind::kFile;
};

// Writers of scalar attributes (little-endian numbers; UTF-8 strings, fixed-length and
// null-padded or variable-length). `hint` goes into the error of a failed call.
void write_scalar_attr(hid_t obj, const char* name, hid_t file_type, hid_t mem_type,
                       const void* value, const std::string& path, std::string_view hint);
enum class StringLayout { kFixed, kVariable };
void write_string_attr(hid_t obj, const char* name, const std::string& value, StringLayout layout,
                       const std::string& path, std::string_view hint);
void write_u32_attr(hid_t obj, const char* name, uint32_t value, const std::string& path, std::string_view hint);
void write_u64_attr(hid_t obj, const char* name, uint64_t value, const std::string& path, std::string_view hint);
void write_i64_attr(hid_t obj, const char* name, int64_t value, const std::string& path, std::string_view hint);
void write_f64_attr(hid_t obj, const char* name, double value, const std::string& path, std::string_view hint);

// Groups and links. open_group throws zt::InputError naming `path` and the group when it
// is missing.
bool link_exists(hid_t loc, const std::string& name, const std::string& path, std::string_view hint);
Handle create_group(hid_t loc, const char* name, const std::string& path, std::string_view hint);
Handle open_group(hid_t loc, const char* name, const std::string& path, std::string_view hint);
// Names of the links in a group, in name order.
std::vector<std::string> group_members(hid_t group, const std::string& path, std::string_view hint);

// Readers of single-valued attributes of files zt reads (token files, checkpoints).
// `where` names the object in messages ("token file 'x.h5'", "checkpoint 'c.h5': group
// /state"). A missing attribute, one of another type class, one holding more than one
// value, or a string longer than kMaxStringAttrBytes is a zt::InputError with `hint`;
// nothing is allocated from what the file declares before those checks.
inline constexpr size_t kMaxStringAttrBytes = size_t{1} << 20;
bool has_attr(hid_t obj, const char* name, const std::string& path, std::string_view hint);
std::string read_string_attr(hid_t obj, const char* name, const std::string& path,
                             const std::string& where, std::string_view hint);
uint32_t read_u32_attr(hid_t obj, const char* name, const std::string& path,
                       const std::string& where, std::string_view hint);
uint64_t read_u64_attr(hid_t obj, const char* name, const std::string& path,
                       const std::string& where, std::string_view hint);
int64_t read_i64_attr(hid_t obj, const char* name, const std::string& path,
                      const std::string& where, std::string_view hint);
double read_f64_attr(hid_t obj, const char* name, const std::string& path,
                     const std::string& where, std::string_view hint);

// Refuses a dataset whose contents this file does not hold, before anything is allocated
// for it: raw data in other files (external storage, virtual layout), and storage that
// was never written (read back as fill value, so a few hundred bytes of header can
// declare gigabytes). Unfiltered data must store at least its declared bytes; filtered
// (compressed) data must have every chunk written. Throws zt::InputError naming `path`
// and the dataset `name`, with `hint`.
void require_stored_here(hid_t dset, const std::string& path, const std::string& name,
                         std::string_view hint);

// Checksums of datasets zt writes and later trusts (checkpoints, the DPO reference, token
// files): attribute `checksum` (uint64) = zt-xxh3 of the dataset's bytes as stored
// (row-major, little-endian elements; zt/core/checksum.hpp). verify_checksum recomputes it
// over `bytes` (the values read, in the file's element type) and throws zt::InputError
// naming `path` and the dataset `name` when it is missing or differs, with `hint`.
void write_checksum(hid_t dset, std::span<const std::byte> bytes, const std::string& path,
                    std::string_view hint);
void verify_checksum(hid_t dset, std::span<const std::byte> bytes, const std::string& path,
                     const std::string& name, std::string_view hint);

}  // namespace zt::h5

// ZT_H5_CHECK(expr, path, hint): expr returns hid_t or herr_t; negative is failure.
#define ZT_H5_CHECK(expr, path, hint)                                                   \
  [&]() {                                                                               \
    const auto zt_h5_rc_ = (expr);                                                      \
    if (zt_h5_rc_ < 0) ::zt::h5::fail(#expr, (path), (hint), false, __FILE__, __LINE__); \
    return zt_h5_rc_;                                                                   \
  }()
