#pragma once
// Checks on the files a user names, before zt reads them.
#include <string>
#include <string_view>

namespace zt {

// Throws zt::InputError (exit 2) unless `path` is a regular file (symlinks followed):
// "<what> '<path>' is a directory" (or a character device, a FIFO, a socket, not found,
// empty with `allow_empty` false). A device or FIFO would be read until memory runs out.
// `hint` says what to give instead.
void require_regular_file(const std::string& path, std::string_view what, std::string_view hint,
                          bool allow_empty = true);

// Throws zt::InputError (exit 2) unless the folder that will hold the new file `path`
// exists and is a folder: "<what> '<path>': its folder '<dir>' does not exist" (or is not
// a folder), with the hint to create it; `path` itself, when it exists, must be a
// regular file (not a directory, device or FIFO). Called before a library (HDF5) would report it
// in its own words.
void require_output_folder(const std::string& path, std::string_view what);

}  // namespace zt
