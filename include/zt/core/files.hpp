#pragma once
// Checks on the files a user names, before zt reads them; and the one safe way zt
// writes a file (SafeFile: every report, checkpoint, token file, export and plot).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace zt {

// Throws zt::InputError (exit 2) unless `path` is a regular file (symlinks followed):
// "<what> '<path>' is a directory" (or a character device, a FIFO, a socket, not found,
// empty with `allow_empty` false). A device or FIFO would be read until memory runs out.
// `hint` says what to give instead.
void require_regular_file(const std::string& path, std::string_view what, std::string_view hint,
                          bool allow_empty = true);

// require_regular_file, then the whole file as text: "<what> '<path>'" in every error
// (cannot open, a read error). For small files a user names (configs, baselines).
std::string read_regular_file(const std::string& path, std::string_view what,
                              std::string_view hint, bool allow_empty = true);

// Throws zt::InputError (exit 2) unless the folder that will hold the new file `path`
// exists and is a folder: "<what> '<path>': its folder '<dir>' does not exist" (or is not
// a folder), with the hint to create it; `path` itself, when it exists, must be a
// regular file (not a directory, device or FIFO). Called before a library (HDF5) would report it
// in its own words.
void require_output_folder(const std::string& path, std::string_view what);

// Throws zt::InputError (exit 2) when the output `path` is one of `inputs` (the same file:
// device and inode, so another name or a hard link counts) or, unless `force`, exists at
// all: "<what> '<path>' already exists" with the hint to pass --force or name another file.
// Inputs that do not exist are skipped.
void require_new_output(const std::string& path, std::string_view what,
                        const std::vector<std::string>& inputs, bool force);

// ---- Writing ------------------------------------------------------------------------
// Every file zt writes goes through SafeFile (docs/reliability.md, class 2): a temporary
// file beside `path` (path + `tmp_suffix`) is created O_CREAT|O_EXCL|O_NOFOLLOW (mode
// 0666 & ~umask; a stale file or symlink of that name is unlinked, never followed; a
// folder there is an error), written, then commit(): fsync, rename over `path` (a
// symlink at `path` is replaced, not written through), fsync the folder. Destroyed
// without commit(), the temporary is removed. Errors are zt::Error naming `what`, the
// path and errno.
class SafeFile {
 public:
  SafeFile(std::string path, std::string_view what, std::string tmp_suffix = ".tmp");
  ~SafeFile();
  SafeFile(const SafeFile&) = delete;
  SafeFile& operator=(const SafeFile&) = delete;

  const std::string& path() const { return path_; }
  // The temporary's name: a library that opens files by name (HDF5) writes it after
  // close_fd(); the file already exists, so it never creates one through a link.
  const std::string& temp_path() const { return tmp_; }
  int fd() const { return fd_; }
  void write(const void* data, size_t n);  // all of it (EINTR retried), or throws
  void write(std::string_view text) { write(text.data(), text.size()); }
  void close_fd();  // checked close of the descriptor (commit() does it when still open)
  void commit();    // fsync, rename over path(), fsync the folder

 private:
  std::string path_, tmp_, what_;
  int fd_ = -1;
  bool committed_ = false;
};

// SafeFile in one call: `path` holds exactly `contents` afterwards.
void write_file_safely(const std::string& path, std::string_view contents, std::string_view what);

// The pieces, for writers that create and fill the temporary themselves (the checkpoint
// publisher: rank 0 creates, all ranks write through parallel HDF5):
// a new empty file at `path`, never through a link (a stale file or link is unlinked).
int create_exclusive(const std::string& path, std::string_view what);
// Removes `path` if it is a file or a symlink (never what a link points to); a folder
// there is an error.
void unlink_if_there(const std::string& path, std::string_view what);
// Writes all n bytes to fd (EINTR retried), or throws zt::Error naming `what` and `path`.
void write_all(int fd, const void* data, size_t n, const std::string& path, std::string_view what);
// fsync a file or a folder (file systems that refuse fsync on folders are let be).
void fsync_path(const std::string& path, bool directory);
// fsync `tmp`, rename it over `final_path`, fsync the folder.
void publish_file(const std::string& tmp, const std::string& final_path);

}  // namespace zt
