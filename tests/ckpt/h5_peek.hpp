#pragma once
// The checkpoint tests' independent reader: plain HDF5 calls (no zt code) for a dataset's
// values, checksum attribute and file offset, a byte flipped in place, and zt-xxh3 from
// its definition straight over libxxhash (docs/checkpoint-format.md, "Checksums").
#include <gtest/gtest.h>
#include <hdf5.h>
#include <xxhash.h>

#include <algorithm>
#include <cstddef>
#include <fstream>
#include <span>
#include <string>
#include <vector>

namespace zt::ckpt::testing {

// A dataset's values as T (read as HDF5 type `type`) and its `checksum` attribute.
template <typename T>
std::vector<T> h5_read(const std::string& file, const std::string& dset, hid_t type, uint64_t* checksum) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(f, 0) << file;
  const hid_t d = H5Dopen2(f, dset.c_str(), H5P_DEFAULT);
  EXPECT_GE(d, 0) << dset;
  const hid_t s = H5Dget_space(d);
  std::vector<T> v(static_cast<size_t>(H5Sget_simple_extent_npoints(s)));
  EXPECT_GE(H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0) << dset;
  const hid_t a = H5Aopen(d, "checksum", H5P_DEFAULT);
  EXPECT_GE(H5Aread(a, H5T_NATIVE_UINT64, checksum), 0) << dset;
  H5Aclose(a);
  H5Sclose(s);
  H5Dclose(d);
  H5Fclose(f);
  return v;
}
inline std::vector<float> h5_read(const std::string& file, const std::string& dset, uint64_t* checksum) {
  return h5_read<float>(file, dset, H5T_NATIVE_FLOAT, checksum);
}

// The file offset of a dataset's first byte (HADDR_UNDEF: not contiguous).
inline haddr_t h5_offset(const std::string& file, const std::string& dset) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t d = H5Dopen2(f, dset.c_str(), H5P_DEFAULT);
  const haddr_t off = H5Dget_offset(d);
  H5Dclose(d);
  H5Fclose(f);
  return off;
}

// XORs the byte at `at` of `file` with `mask`.
inline void flip_byte(const std::string& file, uint64_t at, char mask) {
  std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(io.good()) << file;
  io.seekg(static_cast<std::streamoff>(at));
  char b = 0;
  io.read(&b, 1);
  b = static_cast<char>(b ^ mask);
  io.seekp(static_cast<std::streamoff>(at));
  io.write(&b, 1);
}

// zt-xxh3: XXH3-64 of each 256 KiB chunk of the bytes, seeded with the chunk's index,
// added mod 2^64.
inline uint64_t xxh3_definition(std::span<const std::byte> b) {
  constexpr size_t C = size_t{1} << 18;
  uint64_t s = 0;
  for (size_t j = 0; j * C < b.size(); ++j)
    s += XXH3_64bits_withSeed(b.data() + j * C, std::min(C, b.size() - j * C), j);
  return s;
}

}  // namespace zt::ckpt::testing
