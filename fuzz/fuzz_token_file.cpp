// libFuzzer target: the token dataset loader (zt::data::read_token_file) on arbitrary
// bytes. The input is written to an anonymous in-memory file (memfd) and opened through
// its /proc/self/fd path, the way a user's data.path would be. Anything the loader
// rejects must be a zt::Error (InputError for a bad file); what it accepts must satisfy
// the documented invariants (ids < vocab_size, doc_starts ascending from 0).
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "zt/core/error.hpp"
#include "zt/data/token_file.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);  // memfds do not need HDF5's flock
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("zt-fuzz-tokens", 0);
  if (fd < 0) std::abort();
  size_t off = 0;
  while (off < size) {
    const ssize_t n = write(fd, data + off, size - off);
    if (n <= 0) std::abort();
    off += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    const zt::data::TokenFile f = zt::data::read_token_file(path);
    if (f.tokens.empty() || f.vocab_size == 0) std::abort();
    for (const uint32_t t : f.tokens)
      if (t >= f.vocab_size) std::abort();
    for (size_t i = 0; i < f.doc_starts.size(); ++i)
      if ((i == 0 && f.doc_starts[0] != 0) || (i > 0 && f.doc_starts[i] <= f.doc_starts[i - 1]))
        std::abort();
  } catch (const zt::Error&) {
    // rejected with a message: fine
  }
  close(fd);
  return 0;
}
