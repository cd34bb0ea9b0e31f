// The HDF5 helper layer (see include/zt/h5/h5.hpp).
#include "zt/h5/h5.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <vector>

#include "zt/core/checksum.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::h5 {
namespace {

// Collects "function: description" of each entry of HDF5's error stack, innermost last.
herr_t collect(unsigned /*n*/, const H5E_error2_t* err, void* out) {
  auto* text = static_cast<std::string*>(out);
  if (!text->empty()) *text += "; ";
  *text += std::string(err->func_name ? err->func_name : "?") + ": " +
           (err->desc ? err->desc : "?");
  return 0;
}

}  // namespace

void fail(const char* call, const std::string& path, std::string_view hint, bool bad_input,
          const char* file, int line) {
  std::string stack;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect, &stack);
  H5Eclear2(H5E_DEFAULT);
  std::string msg = std::string(call) + " failed on '" + path + "'";
  if (!stack.empty()) msg += " (HDF5: " + stack + ")";
  msg += " (" + std::filesystem::path(file).filename().string() + ":" + std::to_string(line) + ")";
  if (bad_input) throw InputError(std::move(msg), std::string(hint));
  throw Error(std::move(msg), std::string(hint));
}

QuietErrors::QuietErrors() {
  H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

QuietErrors::~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    kind_ = o.kind_;
    o.id_ = H5I_INVALID_HID;
  }
  return *this;
}

namespace {
herr_t close_id(hid_t id, Kind kind) {
  switch (kind) {
    case Kind::kFile: return H5Fclose(id);
    case Kind::kDataset: return H5Dclose(id);
    case Kind::kDataspace: return H5Sclose(id);
    case Kind::kDatatype: return H5Tclose(id);
    case Kind::kAttribute: return H5Aclose(id);
    case Kind::kPlist: return H5Pclose(id);
    case Kind::kGroup: return H5Gclose(id);
  }
  return -1;
}
}  // namespace

void Handle::close(const std::string& path) {
  if (id_ < 0) return;
  const hid_t id = id_;
  id_ = H5I_INVALID_HID;
  ZT_H5_CHECK(close_id(id, kind_), path, "check free disk space and that the file system is writable");
}

void Handle::reset() noexcept {
  if (id_ >= 0) close_id(id_, kind_);
  id_ = H5I_INVALID_HID;
}

namespace {

// The attribute `name` of `obj`, open, after checking it exists and holds one value.
Handle open_single_attr(hid_t obj, const char* name, const std::string& path,
                        const std::string& where, std::string_view hint) {
  if (!has_attr(obj, name, path, hint))
    throw InputError(where + " has no attribute '" + name + "'", std::string(hint));
  Handle attr(ZT_H5_CHECK(H5Aopen(obj, name, H5P_DEFAULT), path, hint), Kind::kAttribute);
  Handle space(ZT_H5_CHECK(H5Aget_space(attr.get()), path, hint), Kind::kDataspace);
  if (H5Sget_simple_extent_npoints(space.get()) != 1)
    throw InputError(where + ": attribute '" + name + "' must hold a single value",
                     std::string(hint));
  return attr;
}

template <class T>
T read_number_attr(hid_t obj, const char* name, hid_t mem_type, H5T_class_t cls,
                   const std::string& path, const std::string& where, std::string_view hint) {
  Handle attr = open_single_attr(obj, name, path, where, hint);
  Handle type(ZT_H5_CHECK(H5Aget_type(attr.get()), path, hint), Kind::kDatatype);
  if (H5Tget_class(type.get()) != cls)
    throw InputError(where + ": attribute '" + name + "' must be " +
                         (cls == H5T_INTEGER ? "an integer" : "a floating-point number"),
                     std::string(hint));
  T value{};
  if (H5Aread(attr.get(), mem_type, &value) < 0)
    fail("H5Aread", path, std::string("attribute '") + name + "' does not fit; " + std::string(hint),
         true, __FILE__, __LINE__);
  return value;
}

}  // namespace

bool has_attr(hid_t obj, const char* name, const std::string& path, std::string_view hint) {
  return ZT_H5_CHECK(H5Aexists(obj, name), path, hint) > 0;
}

std::string read_string_attr(hid_t obj, const char* name, const std::string& path,
                             const std::string& where, std::string_view hint) {
  Handle attr = open_single_attr(obj, name, path, where, hint);
  Handle ftype(ZT_H5_CHECK(H5Aget_type(attr.get()), path, hint), Kind::kDatatype);
  if (H5Tget_class(ftype.get()) != H5T_STRING)
    throw InputError(where + ": attribute '" + name + "' is not a string", std::string(hint));
  Handle mtype(ZT_H5_CHECK(H5Tcopy(H5T_C_S1), path, hint), Kind::kDatatype);
  ZT_H5_CHECK(H5Tset_cset(mtype.get(), H5Tget_cset(ftype.get())), path, hint);
  if (ZT_H5_CHECK(H5Tis_variable_str(ftype.get()), path, hint) > 0) {
    // HDF5 allocates what the file stores (bounded by the file); copied out and freed.
    ZT_H5_CHECK(H5Tset_size(mtype.get(), H5T_VARIABLE), path, hint);
    char* text = nullptr;
    ZT_H5_CHECK(H5Aread(attr.get(), mtype.get(), &text), path, hint);
    std::string out = text ? text : "";
    H5free_memory(text);
    return out;
  }
  const size_t size = H5Tget_size(ftype.get());
  if (size > kMaxStringAttrBytes)
    throw InputError(strf("%s: attribute '%s' is a string of %zu bytes; zt's are under %zu",
                          where.c_str(), name, size, kMaxStringAttrBytes),
                     std::string(hint));
  std::string out(size + 1, '\0');
  ZT_H5_CHECK(H5Tset_size(mtype.get(), size + 1), path, hint);
  ZT_H5_CHECK(H5Aread(attr.get(), mtype.get(), out.data()), path, hint);
  out.resize(std::strlen(out.c_str()));
  return out;
}

uint32_t read_u32_attr(hid_t obj, const char* name, const std::string& path,
                       const std::string& where, std::string_view hint) {
  return read_number_attr<uint32_t>(obj, name, H5T_NATIVE_UINT32, H5T_INTEGER, path, where, hint);
}
uint64_t read_u64_attr(hid_t obj, const char* name, const std::string& path,
                       const std::string& where, std::string_view hint) {
  return read_number_attr<uint64_t>(obj, name, H5T_NATIVE_UINT64, H5T_INTEGER, path, where, hint);
}
int64_t read_i64_attr(hid_t obj, const char* name, const std::string& path,
                      const std::string& where, std::string_view hint) {
  return read_number_attr<int64_t>(obj, name, H5T_NATIVE_INT64, H5T_INTEGER, path, where, hint);
}
double read_f64_attr(hid_t obj, const char* name, const std::string& path,
                     const std::string& where, std::string_view hint) {
  return read_number_attr<double>(obj, name, H5T_NATIVE_DOUBLE, H5T_FLOAT, path, where, hint);
}

void require_stored_here(hid_t dset, const std::string& path, const std::string& name,
                         std::string_view hint) {
  const std::string h(hint);
  const auto refuse = [&](const std::string& why) {
    throw InputError("'" + path + "': dataset '" + name + "' " + why, h);
  };
  Handle dcpl(ZT_H5_CHECK(H5Dget_create_plist(dset), path, hint), Kind::kPlist);
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  if (layout != H5D_CONTIGUOUS && layout != H5D_CHUNKED && layout != H5D_COMPACT)
    refuse("has a virtual or unknown storage layout (its data would come from other files)");
  if (ZT_H5_CHECK(H5Pget_external_count(dcpl.get()), path, hint) > 0)
    refuse("keeps its data in external files");
  Handle type(ZT_H5_CHECK(H5Dget_type(dset), path, hint), Kind::kDatatype);
  Handle space(ZT_H5_CHECK(H5Dget_space(dset), path, hint), Kind::kDataspace);
  const hssize_t points = ZT_H5_CHECK(H5Sget_simple_extent_npoints(space.get()), path, hint);
  const size_t element = H5Tget_size(type.get());
  if (points == 0) return;
  if (element == 0) refuse("has an element type of size 0");
  const auto n = static_cast<unsigned long long>(points);
  if (n > ~0ULL / element) refuse(strf("declares %llu elements of %zu bytes: more than 2^64 bytes", n, element));
  const unsigned long long declared = n * element;
  if (ZT_H5_CHECK(H5Pget_nfilters(dcpl.get()), path, hint) > 0) {
    // Compressed: every chunk must be in the file (HDF5's space status cannot tell,
    // it compares compressed bytes with declared ones).
    const int rank = ZT_H5_CHECK(H5Sget_simple_extent_ndims(space.get()), path, hint);
    std::vector<hsize_t> dims(static_cast<size_t>(rank)), chunk(static_cast<size_t>(rank));
    ZT_H5_CHECK(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), path, hint);
    if (ZT_H5_CHECK(H5Pget_chunk(dcpl.get(), rank, chunk.data()), path, hint) != rank)
      refuse("is filtered but not chunked");
    unsigned long long expected = 1;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (chunk[i] == 0) refuse("has a chunk dimension of 0");
      expected *= dims[i] / chunk[i] + (dims[i] % chunk[i] != 0);
    }
    hsize_t present = 0;
    ZT_H5_CHECK(H5Dget_num_chunks(dset, space.get(), &present), path, hint);
    if (present < expected)
      refuse(strf("declares %llu bytes in %llu chunks but the file holds %s%llu of them (never "
                  "written)",
                  declared, expected, present == 0 ? "" : "only ",
                  static_cast<unsigned long long>(present)));
    return;
  }
  const unsigned long long stored = H5Dget_storage_size(dset);
  if (stored < declared)
    refuse(stored == 0 ? strf("declares %llu bytes but the file holds none of them (never written)",
                              declared)
                       : strf("declares %llu bytes but the file holds only %llu (never written, "
                              "or a forged file)",
                              declared, stored));
}

// ---- writing attributes, groups --------------------------------------------------------

void write_scalar_attr(hid_t obj, const char* name, hid_t file_type, hid_t mem_type,
                       const void* value, const std::string& path, std::string_view hint) {
  Handle space(ZT_H5_CHECK(H5Screate(H5S_SCALAR), path, hint), Kind::kDataspace);
  Handle attr(ZT_H5_CHECK(H5Acreate2(obj, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                          path, hint),
              Kind::kAttribute);
  ZT_H5_CHECK(H5Awrite(attr.get(), mem_type, value), path, hint);
  attr.close(path);
}

void write_string_attr(hid_t obj, const char* name, const std::string& value, StringLayout layout,
                       const std::string& path, std::string_view hint) {
  Handle type(ZT_H5_CHECK(H5Tcopy(H5T_C_S1), path, hint), Kind::kDatatype);
  if (layout == StringLayout::kVariable) {
    ZT_H5_CHECK(H5Tset_size(type.get(), H5T_VARIABLE), path, hint);
    ZT_H5_CHECK(H5Tset_cset(type.get(), H5T_CSET_UTF8), path, hint);
    const char* data = value.c_str();
    write_scalar_attr(obj, name, type.get(), type.get(), &data, path, hint);
    return;
  }
  ZT_H5_CHECK(H5Tset_size(type.get(), std::max<size_t>(1, value.size())), path, hint);
  ZT_H5_CHECK(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), path, hint);
  ZT_H5_CHECK(H5Tset_cset(type.get(), H5T_CSET_UTF8), path, hint);
  std::string padded = value;
  if (padded.empty()) padded.push_back('\0');
  write_scalar_attr(obj, name, type.get(), type.get(), padded.data(), path, hint);
}

void write_u32_attr(hid_t obj, const char* name, uint32_t v, const std::string& path, std::string_view hint) {
  write_scalar_attr(obj, name, H5T_STD_U32LE, H5T_NATIVE_UINT32, &v, path, hint);
}
void write_u64_attr(hid_t obj, const char* name, uint64_t v, const std::string& path, std::string_view hint) {
  write_scalar_attr(obj, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &v, path, hint);
}
void write_i64_attr(hid_t obj, const char* name, int64_t v, const std::string& path, std::string_view hint) {
  write_scalar_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v, path, hint);
}
void write_f64_attr(hid_t obj, const char* name, double v, const std::string& path, std::string_view hint) {
  write_scalar_attr(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v, path, hint);
}

bool link_exists(hid_t loc, const std::string& name, const std::string& path, std::string_view hint) {
  return ZT_H5_CHECK(H5Lexists(loc, name.c_str(), H5P_DEFAULT), path, hint) > 0;
}

Handle create_group(hid_t loc, const char* name, const std::string& path, std::string_view hint) {
  return Handle(ZT_H5_CHECK(H5Gcreate2(loc, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), path, hint),
                Kind::kGroup);
}

Handle open_group(hid_t loc, const char* name, const std::string& path, std::string_view hint) {
  if (!link_exists(loc, name, path, hint))
    throw InputError("'" + path + "' has no group '" + name + "'", std::string(hint));
  return Handle(ZT_H5_CHECK(H5Gopen2(loc, name, H5P_DEFAULT), path, hint), Kind::kGroup);
}

std::vector<std::string> group_members(hid_t group, const std::string& path, std::string_view hint) {
  H5G_info_t info;
  ZT_H5_CHECK(H5Gget_info(group, &info), path, hint);
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t len = ZT_H5_CHECK(H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i,
                                                       nullptr, 0, H5P_DEFAULT),
                                    path, hint);
    std::string name(static_cast<size_t>(len) + 1, '\0');
    ZT_H5_CHECK(H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(),
                                   name.size(), H5P_DEFAULT),
                path, hint);
    name.resize(static_cast<size_t>(len));
    names.push_back(std::move(name));
  }
  return names;
}

void write_checksum(hid_t dset, std::span<const std::byte> bytes, const std::string& path,
                    std::string_view hint) {
  write_u64_attr(dset, "checksum", xxh3_sum(bytes), path, hint);
}

void verify_checksum(hid_t dset, std::span<const std::byte> bytes, const std::string& path,
                     const std::string& name, std::string_view hint) {
  const std::string where = "dataset '" + name + "' of '" + path + "'";
  if (!has_attr(dset, "checksum", path, hint))
    throw InputError(where + " has no checksum: it was not written by this zt, or was edited",
                     std::string(hint));
  const uint64_t stored = read_u64_attr(dset, "checksum", path, where, hint);
  const uint64_t sum = xxh3_sum(bytes);
  if (sum != stored)
    throw InputError(strf("%s fails its checksum (stored %016llx, contents %016llx): the file was "
                          "changed after zt wrote it",
                          where.c_str(), static_cast<unsigned long long>(stored),
                          static_cast<unsigned long long>(sum)),
                     std::string(hint));
}

}  // namespace zt::h5
