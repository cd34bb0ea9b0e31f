#pragma once
// The one way node health reads what the kernel and Slurm show it (sysfs attributes,
// /proc, environment variables), and the one rule for the numbers in them. Nothing here
// throws: what cannot be read comes back as a reason naming the file or the variable, and
// the check that needed it says UNKNOWN with that reason, never PASS.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zt::check {

// Sysfs attributes are one short line; more than this is not one.
constexpr size_t kMaxKernelFileBytes = 4096;

// The first line of the kernel file `path`, trailing blanks cut; nullopt with *why_not
// ("'<path>' is a FIFO, not a regular file", "... not found", "... is empty", "... holds
// more than 4096 bytes") otherwise. Opened O_NONBLOCK and fstat'ed before any read (only a
// regular file is read: a FIFO, a device such as /dev/zero or a folder is refused, so the
// read can neither block nor grow), and at most kMaxKernelFileBytes + 1 bytes are read.
std::optional<std::string> read_kernel_line(const std::string& path, std::string* why_not);

// A whole decimal number: digits only (no sign, blank, point or exponent), at most 2^64-1.
std::optional<uint64_t> parse_whole_number(std::string_view text);

// read_kernel_line, then parse_whole_number: "'<path>' holds '-5', not a whole number".
std::optional<uint64_t> read_kernel_counter(const std::string& path, std::string* why_not);

// The environment variable `name` as a whole number in [0, max]: nullopt when it is unset
// or empty (*why_not untouched), or when it holds anything else (*why_not: "NAME='8 GPUs'
// is not a whole number in [0, 1023]").
std::optional<uint64_t> env_whole_number(const char* name, uint64_t max, std::string* why_not);

}  // namespace zt::check
