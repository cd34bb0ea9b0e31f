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

}  // namespace zt
