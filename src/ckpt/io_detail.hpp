#pragma once
// Pieces of the checkpoint reader (io_read.cpp) shared with the adapter reader
// (adapter_export.cpp), so both open files, read headers and check tensors the one way.
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "h5.hpp"
#include "zt/ckpt/format.hpp"

namespace zt::ckpt {

// Opens a checkpoint for reading: refuses (zt::InputError naming the file) a .tmp, a
// missing or non-regular file, a file that is not HDF5.
h5::Handle open_file(MPI_Comm comm, const std::string& path);
// The root attributes, checked (format, version, contents, model_config).
Header header_of(hid_t file, const std::string& path);
// Opens dataset `name` and checks it is an fp32 tensor of `shape` whose bytes this file
// holds; its stored checksum into *stored.
h5::Handle open_tensor(hid_t file, const std::string& name, const std::vector<int64_t>& shape,
                       const std::string& path, h5::Handle* space, uint64_t* stored);

}  // namespace zt::ckpt
