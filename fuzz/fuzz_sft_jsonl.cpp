// libFuzzer target: the instruction-data readers (zt::data::read_sft_examples, Alpaca JSON
// array / JSONL and prompt-response JSONL) on arbitrary bytes. The first byte picks the
// format; the rest is written to an anonymous in-memory file (memfd) and read through its
// /proc/self/fd path, the way a user's file would be. Anything rejected must be a
// zt::Error (InputError naming FILE:LINE and the field); an accepted file must give at
// least one example.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "zt/core/error.hpp"
#include "zt/data/sft.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto format = data[0] % 2 ? zt::data::SftFormat::kPromptResponse : zt::data::SftFormat::kAlpaca;
  const int fd = memfd_create("zt-fuzz-sft", 0);
  if (fd < 0) std::abort();
  for (size_t off = 1; off < size;) {
    const ssize_t n = write(fd, data + off, size - off);
    if (n <= 0) std::abort();
    off += static_cast<size_t>(n);
  }
  try {
    if (zt::data::read_sft_examples("/proc/self/fd/" + std::to_string(fd), format).empty()) std::abort();
  } catch (const zt::Error&) {
    // rejected with a message: fine
  }
  close(fd);
  return 0;
}
