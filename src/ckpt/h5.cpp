// Private HDF5 helpers of the checkpoint layer (see h5.hpp).
#include "h5.hpp"

#include <algorithm>
#include <cstring>

#include "zt/core/error.hpp"

namespace zt::ckpt::h5 {
namespace {

constexpr const char* kWriteHint = "check free disk space and that ckpt.dir is writable";
constexpr const char* kReadHint = "the file may be damaged or not a zt checkpoint";

std::string where_of(const std::string& path, const std::string& what) {
  return "checkpoint '" + path + "': " + what;
}

}  // namespace

Handle file_access(MPI_Comm comm, const std::string& path) {
  Handle fapl(ZT_H5_CHECK(H5Pcreate(H5P_FILE_ACCESS), path, kWriteHint), Kind::kPlist);
  if (comm != MPI_COMM_NULL) {
    ZT_H5_CHECK(H5Pset_fapl_mpio(fapl.get(), comm, MPI_INFO_NULL), path, kWriteHint);
    ZT_H5_CHECK(H5Pset_coll_metadata_write(fapl.get(), true), path, kWriteHint);
    ZT_H5_CHECK(H5Pset_all_coll_metadata_ops(fapl.get(), true), path, kWriteHint);
  }
  // Large tensors start on 1 MiB boundaries (file-system stripes, O_DIRECT-friendly);
  // small ones (norms, the tiny model's tensors) pack tightly.
  ZT_H5_CHECK(H5Pset_alignment(fapl.get(), 1 << 20, 1 << 20), path, kWriteHint);
  return fapl;
}

Handle transfer(MPI_Comm comm, const std::string& path) {
  Handle dxpl(ZT_H5_CHECK(H5Pcreate(H5P_DATASET_XFER), path, kWriteHint), Kind::kPlist);
  if (comm != MPI_COMM_NULL)
    ZT_H5_CHECK(H5Pset_dxpl_mpio(dxpl.get(), H5FD_MPIO_INDEPENDENT), path, kWriteHint);
  return dxpl;
}

void select_range(hid_t space, const std::vector<int64_t>& shape, int64_t first, int64_t n,
                  const std::string& path) {
  ZT_H5_CHECK(H5Sselect_none(space), path, kWriteHint);
  if (n <= 0) return;
  const int rank = static_cast<int>(shape.size());
  // The tensor seen as [rows, C] with C its last dim. add() selects the rectangle
  // [row0, row0 + rows) x [col0, col0 + cols) of that view (for tensors above 2-D, one
  // row at a time: zt has none today).
  const int64_t C = rank == 0 ? 1 : shape.back();
  // The first rectangle replaces the empty selection (a regular hyperslab, which HDF5
  // turns into one contiguous MPI type); the others are OR-ed onto it.
  bool first_rect = true;
  const auto add = [&](int64_t row0, int64_t col0, int64_t rows, int64_t cols) {
    if (rows <= 0 || cols <= 0) return;
    const H5S_seloper_t op = first_rect ? H5S_SELECT_SET : H5S_SELECT_OR;
    first_rect = false;
    std::vector<hsize_t> start(static_cast<size_t>(std::max(rank, 1)), 0);
    std::vector<hsize_t> count(start.size(), 1);
    if (rank <= 1) {
      start[0] = static_cast<hsize_t>(row0 * C + col0);
      count[0] = static_cast<hsize_t>(cols);
      ZT_CHECK(rows == 1 || rank == 0, "1-D range of more than one row", "internal");
    } else {
      // Row index over the leading dims -> their coordinates; whole rows must not wrap a
      // leading dim, so multi-dim tensors above 2-D go row by row (zt has none today).
      if (rank == 2) {
        start[0] = static_cast<hsize_t>(row0);
        count[0] = static_cast<hsize_t>(rows);
      } else {
        ZT_CHECK(rows == 1, "ranges of tensors above 2-D span one row at a time", "internal");
        int64_t r = row0;
        for (int d = rank - 2; d >= 0; --d) {
          start[static_cast<size_t>(d)] = static_cast<hsize_t>(r % shape[static_cast<size_t>(d)]);
          r /= shape[static_cast<size_t>(d)];
        }
      }
      start.back() = static_cast<hsize_t>(col0);
      count.back() = static_cast<hsize_t>(cols);
    }
    ZT_H5_CHECK(H5Sselect_hyperslab(space, op, start.data(), nullptr, count.data(),
                                    nullptr),
                path, kWriteHint);
  };
  if (rank <= 1) {
    add(0, first, 1, n);
    return;
  }
  const int64_t last = first + n;  // exclusive
  const int64_t row_a = first / C, col_a = first % C;
  const int64_t row_b = last / C, col_b = last % C;  // last element is (row_b, col_b - 1)
  if (row_a == row_b) {  // inside one row
    add(row_a, col_a, 1, col_b - col_a);
    return;
  }
  int64_t full_from = row_a;
  if (col_a != 0) {  // rest of the first row
    add(row_a, col_a, 1, C - col_a);
    full_from = row_a + 1;
  }
  if (rank == 2) {
    add(full_from, 0, row_b - full_from, C);  // whole rows
  } else {
    for (int64_t r = full_from; r < row_b; ++r) add(r, 0, 1, C);
  }
  add(row_b, 0, 1, col_b);  // start of the last row
}

void write_string_attr(hid_t obj, const char* name, const std::string& value, const std::string& path) {
  ::zt::h5::write_string_attr(obj, name, value, ::zt::h5::StringLayout::kFixed, path, kWriteHint);
}
void write_u64_attr(hid_t obj, const char* name, uint64_t v, const std::string& path) {
  ::zt::h5::write_u64_attr(obj, name, v, path, kWriteHint);
}
void write_i64_attr(hid_t obj, const char* name, int64_t v, const std::string& path) {
  ::zt::h5::write_i64_attr(obj, name, v, path, kWriteHint);
}
void write_u32_attr(hid_t obj, const char* name, uint32_t v, const std::string& path) {
  ::zt::h5::write_u32_attr(obj, name, v, path, kWriteHint);
}
void write_f64_attr(hid_t obj, const char* name, double v, const std::string& path) {
  ::zt::h5::write_f64_attr(obj, name, v, path, kWriteHint);
}

bool has_attr(hid_t obj, const char* name, const std::string& path) {
  return ::zt::h5::has_attr(obj, name, path, kReadHint);
}

std::string read_string_attr(hid_t obj, const char* name, const std::string& path,
                             const std::string& what) {
  return ::zt::h5::read_string_attr(obj, name, path, where_of(path, what), kReadHint);
}
uint64_t read_u64_attr(hid_t obj, const char* name, const std::string& path, const std::string& what) {
  return ::zt::h5::read_u64_attr(obj, name, path, where_of(path, what), kReadHint);
}
int64_t read_i64_attr(hid_t obj, const char* name, const std::string& path, const std::string& what) {
  return ::zt::h5::read_i64_attr(obj, name, path, where_of(path, what), kReadHint);
}
double read_f64_attr(hid_t obj, const char* name, const std::string& path, const std::string& what) {
  return ::zt::h5::read_f64_attr(obj, name, path, where_of(path, what), kReadHint);
}

bool link_exists(hid_t loc, const std::string& name, const std::string& path) {
  return ::zt::h5::link_exists(loc, name, path, kReadHint);
}

Handle create_group(hid_t loc, const char* name, const std::string& path) {
  return ::zt::h5::create_group(loc, name, path, kWriteHint);
}

Handle open_group(hid_t loc, const char* name, const std::string& path) {
  if (!link_exists(loc, name, path))
    throw InputError("checkpoint '" + path + "' has no group '" + name + "'", kReadHint);
  return ::zt::h5::open_group(loc, name, path, kReadHint);
}

std::vector<std::string> group_members(hid_t group, const std::string& path) {
  return ::zt::h5::group_members(group, path, kReadHint);
}

}  // namespace zt::ckpt::h5
