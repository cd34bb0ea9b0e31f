#pragma once
// Private HDF5 helpers of the checkpoint layer over the HDF5 layer (zt/h5/h5.hpp): file
// access and transfer lists for parallel HDF5, row-major range selections, and the
// layer's attribute and group calls bound to the checkpoint's hints and messages.
#include <hdf5.h>
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "zt/h5/h5.hpp"

namespace zt::ckpt::h5 {

using ::zt::h5::Handle;
using ::zt::h5::Kind;
using ::zt::h5::QuietErrors;
using ::zt::h5::fail;
using ::zt::h5::require_stored_here;

// File access: MPI-IO with collective metadata when comm is not MPI_COMM_NULL, else
// HDF5's default (serial) driver; datasets of 1 MiB or more aligned to 1 MiB.
Handle file_access(MPI_Comm comm, const std::string& path);
// Transfer list: independent MPI-IO transfers (or the default when serial), for datasets
// io_engine.cpp cannot access raw. A rank's part of a tensor is one contiguous range of the file
// (its shard of the unit): MPI-IO's two-phase (collective) buffering would only move the
// same bytes between ranks first (measured with bench/ckpt: reads 2-3x slower).
Handle transfer(MPI_Comm comm, const std::string& path);

// Selects elements [first, first + n) of a row-major tensor of `shape` in `space`: at
// most three hyperslabs (rest of a first row, whole rows, start of a last row) of the
// tensor seen as [rows, last dim], joined with H5S_SELECT_OR. n == 0 selects none.
void select_range(hid_t space, const std::vector<int64_t>& shape, int64_t first, int64_t n,
                  const std::string& path);

// Scalar attributes (fixed-length UTF-8 strings; little-endian numbers), with the write hint.
void write_string_attr(hid_t obj, const char* name, const std::string& value, const std::string& path);
void write_u64_attr(hid_t obj, const char* name, uint64_t value, const std::string& path);
void write_i64_attr(hid_t obj, const char* name, int64_t value, const std::string& path);
void write_u32_attr(hid_t obj, const char* name, uint32_t value, const std::string& path);
void write_f64_attr(hid_t obj, const char* name, double value, const std::string& path);

bool has_attr(hid_t obj, const char* name, const std::string& path);
// Readers throw zt::InputError naming the file, `what` (the object) and the attribute.
std::string read_string_attr(hid_t obj, const char* name, const std::string& path, const std::string& what);
uint64_t read_u64_attr(hid_t obj, const char* name, const std::string& path, const std::string& what);
int64_t read_i64_attr(hid_t obj, const char* name, const std::string& path, const std::string& what);
double read_f64_attr(hid_t obj, const char* name, const std::string& path, const std::string& what);

bool link_exists(hid_t loc, const std::string& name, const std::string& path);
Handle create_group(hid_t loc, const char* name, const std::string& path);
Handle open_group(hid_t loc, const char* name, const std::string& path);
// Names of the links in a group, in name order.
std::vector<std::string> group_members(hid_t group, const std::string& path);

}  // namespace zt::ckpt::h5
