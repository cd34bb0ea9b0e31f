#pragma once
// Checks on the files a user names, before zt reads them; and the one safe way zt
// writes a file (SafeFile: every report, checkpoint, token file, export and plot).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zt {

// ---- Reading ------------------------------------------------------------------------
// The one way zt opens a file it reads (issue 36, class 8): open(O_RDONLY | O_NONBLOCK)
// (a FIFO or a device never blocks the open), fstat() of that descriptor, and unless it is
// a regular file (symlinks followed) zt::InputError (exit 2): "<what> '<path>' is a
// directory" (or a character device, a FIFO, a socket, not found, empty with
// `allow_empty` false). A device or FIFO would hang the read or be read until memory runs
// out. `hint` says what to give instead. The descriptor (blocking again) is owned.
class ReadFile {
 public:
  ReadFile(const std::string& path, std::string_view what, std::string_view hint,
           bool allow_empty = true);
  ~ReadFile();
  ReadFile(const ReadFile&) = delete;
  ReadFile& operator=(const ReadFile&) = delete;
  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  std::string read_all();  // the whole file (its errors name what and path)

 private:
  std::string path_, what_, hint_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// ReadFile, opened and closed: for a path a library (HDF5, a tokenizer) opens by name next.
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

// Throws zt::InputError (exit 2) when the folder `dir` zt would write into is a system
// folder: /, /bin, /boot, /dev, /etc, /home, /lib*, /opt, /proc, /root, /run, /sbin, /srv,
// /sys, /usr, /usr/*, /var, /var/lib, ... (after resolving `.`, `..` and symlinks):
// "<what> = '<dir>' is the system folder '<resolved>'", hint: name a folder of your own.
void refuse_system_folder(const std::string& dir, std::string_view what);

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
  // tmp_suffix "" (the default): staging_suffix(), and stale staging of dead writers of
  // `path` is removed first (remove_stale_staging).
  SafeFile(std::string path, std::string_view what, std::string tmp_suffix = "");
  ~SafeFile();
  SafeFile(const SafeFile&) = delete;
  SafeFile& operator=(const SafeFile&) = delete;

  const std::string& path() const { return path_; }
  // The temporary's name: a library that opens files by name (HDF5) writes it while the
  // descriptor stays open (commit() fsyncs through it: the file this object created, not
  // whatever the name points to by then); it never creates one through a link.
  const std::string& temp_path() const { return tmp_; }
  int fd() const { return fd_; }
  void write(const void* data, size_t n);  // all of it (EINTR retried), or throws
  void write(std::string_view text) { write(text.data(), text.size()); }
  void commit();  // fsync through the descriptor, checked close, rename over path(), fsync the folder

 private:
  std::string path_, tmp_, what_;
  int fd_ = -1;
  bool committed_ = false;
};

// Staging files (issue 36, classes 1 and 4): the temporary of `path` is named
// path + ".tmp.<host>.<pid>", unique to the writing process, so two writers of one output
// never write into each other's file. staging_suffix() is ".tmp.<host>.<pid>".
std::string staging_suffix();
// Staging files of `path` (path.tmp.<host>.<pid>) whose process is gone: those of this
// host whose pid no longer runs are removed (a warning names each); those of other hosts
// are reported (a warning), never removed (their process may run there). Returns how
// many were removed.
int remove_stale_staging(const std::string& path);
// SIGTERM / SIGINT / SIGHUP of a zt process that writes outputs (zt convert): the live
// SafeFile temporaries are removed, then the signal's default action ends the process (exit
// 128 + signal, as before, and no .tmp left behind).
void remove_staging_on_signals();
// What that handler also cleans up: a child process of the live work (killed; 0: none)
// and a staging folder (its files removed, then the folder; nullptr: none). The string
// stays owned by the caller, who clears it before freeing it (core/gnuplot.hpp).
void set_signal_child(int pid);
void set_signal_staging_folder(const char* path);

// An exclusive lock on a folder for as long as the object lives (issue 36, class 1): two
// zt runs writing one ckpt.dir (or one export folder) are refused, not interleaved.
// The folder is created when missing (and removed again at the end if this lock made it
// and it is empty). The lock is an fcntl (open file description) write lock on
// DIR/zt.lock, whose text names the holder: host, pid, start time and command. fcntl
// locks, not O_EXCL files or flock(): the kernel (the NFS/Lustre/GPFS lock manager across
// nodes) drops the lock when its process dies, so a stale lock is never guessed from a
// pid that may run on another host or have been reused; flock() is node-local on some
// shared file systems. Taken while the file still names a holder: that run died without
// releasing it; taken_over() says who. A file system without locks (ENOLCK, ENOSYS,
// EOPNOTSUPP) is warned about, and the run goes on unlocked.
// Refusal: zt::InputError (exit 2) "<what> '<dir>' is in use by another zt process: <holder
// text> (lock file '<dir>/zt.lock')" with `hint`.
//
// FolderLock::beside(OUT, what, hint): the same lock for one output file (zt convert's
// token files and hf-to-h5's OUT.h5), on OUT.lock in OUT's folder (which must exist), held
// for the whole conversion, so two conversions into one OUT are refused, not raced
// (issue 36, class 1): "<what> '<OUT>' is in use by another zt process: ... (lock file
// 'OUT.lock')".
class FolderLock {
 public:
  FolderLock(const std::string& dir, std::string_view what, std::string_view hint);
  static FolderLock beside(const std::string& file, std::string_view what, std::string_view hint);
  ~FolderLock();  // removes zt.lock while still holding it, then releases
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  const std::string& taken_over() const { return taken_over_; }  // "" or the dead holder's text

 private:
  // `subject`: what the messages name ("<what> '<dir or file>'"); `lock_path`: the file locked.
  FolderLock(const std::string& dir, std::string lock_path, const std::string& subject,
             std::string_view what, std::string_view hint);
  std::string dir_, path_, taken_over_;
  int fd_ = -1;
  bool made_dir_ = false;
};
// The text of the lock file: "zt <command> on host H, pid P, started YYYY-MM-DD HH:MM:SS UTC".
std::string lock_holder_text();

// SafeFile in one call: `path` holds exactly `contents` afterwards.
void write_file_safely(const std::string& path, std::string_view contents, std::string_view what);

// The pieces, for writers that create and fill the temporary themselves (the checkpoint
// publisher: rank 0 creates, all ranks write through parallel HDF5):
// a new empty file at `path`, never through a link (a stale file or link is unlinked).
// Returns its descriptor (the caller closes it).
int create_exclusive(const std::string& path, std::string_view what);
// Removes `path` if it is a file or a symlink (never what a link points to); a folder
// there is an error.
void unlink_if_there(const std::string& path, std::string_view what);
// Writes all n bytes to fd (EINTR retried), or throws zt::Error naming `what` and `path`.
void write_all(int fd, const void* data, size_t n, const std::string& path, std::string_view what);
// fsync a file or a folder (file systems that refuse fsync on folders are let be).
void fsync_path(const std::string& path, bool directory);
// fsync `tmp` through `tmp_fd` (the descriptor it was written or created through; -1:
// reopened by path), rename it over `final_path`, fsync the folder. Does not close tmp_fd.
void publish_file(const std::string& tmp, const std::string& final_path, int tmp_fd = -1);

}  // namespace zt
