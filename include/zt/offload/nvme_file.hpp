#pragma once
// One rank's NVMe file: asynchronous reads and writes through io_uring, with O_DIRECT
// (no page cache: host memory stays bounded and the drive's speed is what is measured).
// A request is cut into blocks of `block_bytes`, at most `queue_depth` of them in flight.
// Buffers, offsets and lengths must be multiples of 4096 (kAlign).
//
// Fallbacks, each announced once with a warning: a file system that refuses O_DIRECT
// (tmpfs) gets buffered I/O; a kernel without io_uring (or one that forbids it) gets
// synchronous pread/pwrite. Every failure throws zt::Error naming the file, the
// operation, the offset, the errno and a HINT (ENOSPC: the disk is full).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace zt::offload {

class NvmeFile {
 public:
  struct Settings {
    int queue_depth = 32;
    uint64_t block_bytes = 1ull << 20;
    bool direct = true;       // ask for O_DIRECT
    bool preallocate = true;  // fallocate the whole file up front
    bool remove = true;       // unlink the file when closed (it is scratch state)
  };
  // Creates (or truncates) `path` and sizes it to `bytes`. Throws zt::InputError when the
  // file cannot be created or the space cannot be reserved.
  NvmeFile(std::string path, uint64_t bytes, const Settings& settings);
  ~NvmeFile();
  NvmeFile(const NvmeFile&) = delete;
  NvmeFile& operator=(const NvmeFile&) = delete;

  using Ticket = int64_t;
  Ticket submit_read(uint64_t offset, void* buf, size_t bytes);
  Ticket submit_write(uint64_t offset, const void* buf, size_t bytes);
  void wait(Ticket t);  // throws zt::Error if any block of t failed
  void wait_all();
  void read(uint64_t offset, void* buf, size_t bytes) { wait(submit_read(offset, buf, bytes)); }
  void write(uint64_t offset, const void* buf, size_t bytes) { wait(submit_write(offset, buf, bytes)); }
  void sync();  // fdatasync

  const std::string& path() const;
  uint64_t size() const;
  bool direct() const;  // O_DIRECT in effect
  bool uring() const;   // io_uring in effect (else pread/pwrite)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zt::offload
