// The one safe writer (core/files.hpp), against the file system itself: a symlink planted
// where zt writes is replaced and never written through; a failed write leaves nothing;
// an output that is an input (same inode, another name) is refused even with --force.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/expect_error.hpp"
#include "zt/core/error.hpp"
#include "zt/core/files.hpp"

namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "zt-files-XXXXXX").string();
    EXPECT_NE(::mkdtemp(t.data()), nullptr);
    path = t;
  }
  ~TempDir() { fs::remove_all(path); }
};

}  // namespace

TEST(SafeFile, ReplacesPlantedSymlinksAndNeverWritesThroughThem) {
  TempDir d;
  spit(d.path / "victim", "victim bytes");
  fs::create_symlink(d.path / "victim", d.path / "out");          // the output itself
  const std::string tmp_name = "other" + zt::staging_suffix();
  fs::create_symlink(d.path / "victim", d.path / tmp_name);       // the temporary's name
  zt::write_file_safely((d.path / "out").string(), "new", "test file");
  zt::SafeFile f((d.path / "other").string(), "test file");
  f.write("x", 1);
  f.commit();
  EXPECT_EQ(slurp(d.path / "victim"), "victim bytes");
  EXPECT_FALSE(fs::is_symlink(d.path / "out"));
  EXPECT_EQ(slurp(d.path / "out"), "new");
  EXPECT_EQ(slurp(d.path / "other"), "x");
  EXPECT_FALSE(fs::exists(fs::symlink_status(d.path / tmp_name)));
}

TEST(SafeFile, AnUncommittedFileLeavesTheOldOneAndNoTemporary) {
  TempDir d;
  spit(d.path / "out", "old");
  {
    zt::SafeFile f((d.path / "out").string(), "test file");
    f.write("half", 4);
  }  // destroyed without commit(): an error on the way
  EXPECT_EQ(slurp(d.path / "out"), "old");
  EXPECT_FALSE(fs::exists(d.path / ("out" + zt::staging_suffix())));
  EXPECT_THROW(zt::write_file_safely((d.path / "missing" / "out").string(), "x", "test file"), zt::Error);
  fs::create_directory(d.path / ("blocked" + zt::staging_suffix()));  // a folder where the temporary goes
  EXPECT_THROW(zt::write_file_safely((d.path / "blocked").string(), "x", "test file"), zt::Error);
}

TEST(RequireNewOutput, AnInputIsRefusedByInodeAnExistingFileWithoutForce) {
  TempDir d;
  spit(d.path / "in.txt", "text");
  fs::create_hard_link(d.path / "in.txt", d.path / "alias.txt");
  const std::string in = (d.path / "in.txt").string(), alias = (d.path / "alias.txt").string();
  zt::testing::expect_input_error([&] { zt::require_new_output(alias, "output", {in}, true); },
                                  {"is the input", "in.txt"});
  zt::testing::expect_input_error([&] { zt::require_new_output(alias, "output", {}, false); },
                                  {"already exists", "--force"});
  zt::require_new_output(alias, "output", {}, true);                                  // forced
  zt::require_new_output((d.path / "new.h5").string(), "output", {in}, false);        // new
  zt::testing::expect_input_error([&] { zt::require_output_folder("", "output"); }, {"empty path"});
  EXPECT_EQ(slurp(d.path / "in.txt"), "text");
}

TEST(ReadRegularFile, DevicesAndFifosAreRefusedBeforeReading) {
  TempDir d;
  const std::string fifo = (d.path / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  zt::testing::expect_input_error([&] { zt::read_regular_file(fifo, "some file", "hint"); },
                                  {"FIFO"});
  zt::testing::expect_input_error([] { zt::read_regular_file("/dev/zero", "some file", "hint"); },
                                  {"character device"});
  spit(d.path / "f", "abc");
  EXPECT_EQ(zt::read_regular_file((d.path / "f").string(), "some file", "hint"), "abc");
}

// Issue 36, class 8: a FIFO (no writer) or a device is refused at once, never opened
// blocking; a regular file is read through the same descriptor.
TEST(ReadFile, AFifoOrDeviceIsRefusedWithoutBlocking) {
  TempDir d;
  const std::string fifo = (d.path / "latest").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  zt::testing::expect_input_error([&] { zt::read_regular_file(fifo, "'latest'", "hint"); },
                     {"'latest' '" + fifo + "' is a FIFO (named pipe), not a regular file"});
  zt::testing::expect_input_error([&] { zt::require_regular_file("/dev/zero", "input", "hint"); },
                     {"'/dev/zero' is a character device"});
  spit(d.path / "f", "step-4.h5\n");
  EXPECT_EQ(zt::read_regular_file((d.path / "f").string(), "f", "hint"), "step-4.h5\n");
}

// Issue 36, class 1: one holder per folder (open-file-description locks conflict inside
// one process too); the refusal names the holder; the lock file goes at the end, and the
// folder the lock made; a lock file a killed holder left is taken over and named.
TEST(FolderLock, ASecondHolderIsRefusedAndAKilledHoldersFileTakenOver) {
  TempDir d;
  const std::string dir = (d.path / "ck").string();
  {
    const zt::FolderLock a(dir, "ckpt.dir", "use another folder");
    EXPECT_EQ(slurp(dir + "/zt.lock"), zt::lock_holder_text() + "\n");
    EXPECT_TRUE(a.taken_over().empty());
    zt::testing::expect_input_error([&] { zt::FolderLock b(dir, "ckpt.dir", "use another folder"); },
                       {"ckpt.dir '" + dir + "' is in use by another zt process: " +
                            zt::lock_holder_text() + " (lock file '" + dir + "/zt.lock')",
                        "use another folder"});
  }
  EXPECT_FALSE(fs::exists(dir));  // made by the lock and left empty: removed
  fs::create_directories(dir);
  spit(dir + "/zt.lock", "zt on host elsewhere, pid 1, started 2026-01-01 00:00:00 UTC\n");
  {
    const zt::FolderLock c(dir, "ckpt.dir", "hint");
    EXPECT_EQ(c.taken_over(), "zt on host elsewhere, pid 1, started 2026-01-01 00:00:00 UTC");
  }
  EXPECT_FALSE(fs::exists(dir + "/zt.lock"));
  EXPECT_TRUE(fs::exists(dir));  // not made by the lock: kept
}

// FolderLock::beside: the lock of one output file, on OUT.lock in OUT's folder; the refusal
// names OUT and the holder; the folder is kept, the lock file removed at the end.
TEST(FolderLock, BesideLocksOneOutputFile) {
  TempDir d;
  const std::string out = (d.path / "out.h5").string();
  {
    const zt::FolderLock a = zt::FolderLock::beside(out, "output token file", "wait");
    EXPECT_EQ(slurp(out + ".lock"), zt::lock_holder_text() + "\n");
    zt::testing::expect_input_error(
        [&] { const zt::FolderLock b = zt::FolderLock::beside(out, "output token file", "wait"); },
        {"output token file '" + out + "' is in use by another zt process: " +
             zt::lock_holder_text() + " (lock file '" + out + ".lock')",
         "wait"});
    // Another output in the same folder is not held by it.
    const zt::FolderLock c = zt::FolderLock::beside((d.path / "other.h5").string(), "output", "wait");
  }
  EXPECT_FALSE(fs::exists(out + ".lock"));
  EXPECT_FALSE(fs::exists(d.path / "other.h5.lock"));
  EXPECT_TRUE(fs::exists(d.path));
}

// Issue 36, classes 1 and 4: staging names are unique to the process; a dead process's
// staging file of this host is removed, another host's kept.
TEST(SafeFile, StagingIsPerProcessAndStaleStagingOfTheDeadIsRemoved) {
  TempDir d;
  const std::string out = (d.path / "out.h5").string();
  EXPECT_EQ(zt::staging_suffix(), ".tmp." + zt::process_host() + "." + std::to_string(::getpid()));
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);  // now a pid of no process
  const std::string dead = out + ".tmp." + zt::process_host() + "." + std::to_string(child);
  const std::string other = out + ".tmp.otherhost." + std::to_string(child);
  spit(dead, "partial");
  spit(other, "partial");
  zt::write_file_safely(out, "new", "test file");
  EXPECT_EQ(slurp(out), "new");
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(other));
}
