#pragma once
// Size strings, as users type them on the command line and in TOML files:
// "8", "8B", "64K", "64KB", "64KiB", "256M", "1G", "2T" (case-insensitive suffix).
// Multiples are binary (K = 1024), as in nccl-tests' -b/-e flags.
#include <cstdint>
#include <string>
#include <string_view>

namespace zt {

// Bytes named by `text`. Throws zt::InputError naming `text` when it is empty, negative,
// fractional, has an unknown suffix, or does not fit in 64 bits.
uint64_t parse_size(std::string_view text);

// The shortest exact spelling: 8 -> "8", 1024 -> "1K", 268435456 -> "256M", 1536 -> "1536".
std::string format_size(uint64_t bytes);

// For people, not for parsing back: 25276063744 -> "23.5G", 8388608 -> "8M", 100 -> "100".
std::string format_size_approx(uint64_t bytes);

// Figures in one binary unit, for log lines and tables where columns share a unit.
enum class BinaryUnit : int { kKiB = 1, kMiB = 2, kGiB = 3 };
double in_unit(uint64_t bytes, BinaryUnit unit);  // 3221225472, kGiB -> 3.0
const char* unit_name(BinaryUnit unit);           // "KiB", "MiB", "GiB"
// 13107200, kMiB, 1 -> "12.5 MiB"
std::string format_binary(uint64_t bytes, BinaryUnit unit, int decimals);

// Decimal (SI) bytes, as bandwidth is reported: "0 B", "812 kB", "8.39 MB", "1.20 GB".
std::string format_si(uint64_t bytes);

}  // namespace zt
