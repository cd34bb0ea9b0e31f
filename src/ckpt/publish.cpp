// Atomic publication of checkpoint files and `latest` (see publish.hpp).
#include "zt/ckpt/publish.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <regex>
#include <vector>

#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/log.hpp"
#include "zt/core/outputs.hpp"
#include "zt/runtime/mpi_check.hpp"

namespace zt::ckpt {
namespace {

namespace fs = std::filesystem;
constexpr const char* kDirHint = "check that ckpt.dir exists or can be created, is writable and "
                                 "has free space";

[[noreturn]] void fail_errno(const std::string& what, const std::string& path, int err) {
  throw Error(strf("%s '%s' failed: %s (errno %d)", what.c_str(), path.c_str(), std::strerror(err), err),
              kDirHint);
}

constexpr const char* kCkpt = "checkpoint";

// Runs f on rank 0 (or the only process); every rank then throws rank 0's error, if any.
template <class F>
void on_rank0(MPI_Comm comm, F f) {
  int rank = 0;
  if (comm != MPI_COMM_NULL) ZT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  int code = 0;
  std::string message, hint;
  if (rank == 0) {
    try {
      f();
    } catch (const Error& e) {
      code = static_cast<int>(e.exit_code());
      message = e.message();
      hint = e.hint();
    } catch (const std::exception& e) {
      code = static_cast<int>(ExitCode::kFailed);
      message = e.what();
      hint = kDirHint;
    }
  }
  // An InputError stays one (exit 2, and callers may catch it as such).
  const auto rethrow = [&] {
    if (code == static_cast<int>(ExitCode::kBadInput)) throw InputError(message, hint);
    throw Error(message, hint, static_cast<ExitCode>(code));
  };
  if (comm == MPI_COMM_NULL) {
    if (code != 0) rethrow();
    return;
  }
  ZT_MPI_CHECK(MPI_Bcast(&code, 1, MPI_INT, 0, comm));
  if (code == 0) return;
  for (std::string* s : {&message, &hint}) {
    int len = static_cast<int>(s->size());
    ZT_MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT, 0, comm));
    s->resize(static_cast<size_t>(len));
    ZT_MPI_CHECK(MPI_Bcast(s->data(), len, MPI_CHAR, 0, comm));
  }
  if (rank != 0) message = "(rank 0) " + message;
  rethrow();
}

// Every rank gets rank 0's s.
void bcast_string(MPI_Comm comm, std::string& s) {
  if (comm == MPI_COMM_NULL) return;
  int len = static_cast<int>(s.size());
  ZT_MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT, 0, comm));
  s.resize(static_cast<size_t>(len));
  ZT_MPI_CHECK(MPI_Bcast(s.data(), len, MPI_CHAR, 0, comm));
}

// Step numbers of the step-N.h5 files in dir.
std::vector<int64_t> steps_in(const std::string& dir) {
  static const std::regex complete(R"(step-(\d+)\.h5)");
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, m, complete) && m[1].length() < 18)
      steps.push_back(std::stoll(m[1].str()));
  }
  if (ec) fail_errno("list", dir, ec.value());
  std::sort(steps.begin(), steps.end());
  return steps;
}

}  // namespace

void preflight_dir(MPI_Comm comm, const std::string& dir) {
  on_rank0(comm, [&] {
    require_output_dir(dir, "ckpt.dir",
                       "ckpt.dir names the folder of the checkpoints (created when missing): point "
                       "it at a writable folder, e.g. --set ckpt.dir=checkpoints");
  });
}

void refuse_fresh_run_over(MPI_Comm comm, const std::string& dir, const std::string& resume,
                           bool overwrite) {
  if (overwrite) return;
  on_rank0(comm, [&] {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return;  // nothing there yet
    const std::vector<int64_t> steps = steps_in(dir);
    const bool latest = fs::exists(fs::symlink_status(fs::path(dir) / "latest", ec));
    if (steps.empty() && !latest) return;
    std::string found;
    if (!steps.empty())
      found = strf("%zu checkpoint%s (step-%lld.h5%s)", steps.size(), steps.size() == 1 ? "" : "s",
                   static_cast<long long>(steps.back()), steps.size() == 1 ? "" : " the newest");
    if (latest) found += std::string(found.empty() ? "" : " and ") + "a 'latest' file";
    throw InputError(
        strf("ckpt.dir = '%s' holds %s of another run, and this run starts fresh (ckpt.resume = "
             "%s%s): its saves would overwrite them and move 'latest'",
             dir.c_str(), found.c_str(), resume.c_str(),
             resume == "auto" ? ", and there is no 'latest' to resume from" : ""),
        "continue that run with --set ckpt.resume=auto (or ckpt.resume=PATH), point ckpt.dir at "
        "another folder, or set ckpt.overwrite = true to replace them");
  });
}

std::string step_file_name(int64_t step) { return "step-" + std::to_string(step) + ".h5"; }

std::unique_ptr<FolderLock> lock_dir(MPI_Comm comm, const std::string& dir) {
  std::unique_ptr<FolderLock> lock;
  on_rank0(comm, [&] {
    lock = std::make_unique<FolderLock>(
        dir, "ckpt.dir",
        "two runs must not share a ckpt.dir (their saves, `latest` and ckpt.keep would mix): "
        "wait for that run, or point this one elsewhere (--set ckpt.dir=...)");
    if (!lock->taken_over().empty())
      log::warn("ckpt.dir '" + dir + "': took over the lock of a run that ended without "
                "releasing it (" + lock->taken_over() + ")");
  });
  return lock;
}

Staging begin_publish(MPI_Comm comm, const std::string& dir, int64_t step, uint64_t bytes_needed) {
  Staging s;
  // Unique to this run's rank 0 (every rank writes the name rank 0 chose).
  s.path = (fs::path(dir) / (step_file_name(step) + staging_suffix())).string();
  bcast_string(comm, s.path);
  on_rank0(comm, [&] {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) fail_errno("create folder", dir, ec.value());
    s.fd = create_exclusive(s.path, kCkpt);
    struct statvfs fs_info;
    if (bytes_needed > 0 && ::statvfs(dir.c_str(), &fs_info) == 0) {
      const uint64_t free_bytes = static_cast<uint64_t>(fs_info.f_bavail) * fs_info.f_frsize;
      if (free_bytes < bytes_needed) {
        ::close(s.fd);
        s.fd = -1;
        ::unlink(s.path.c_str());
        throw Error(strf("cannot write '%s': the checkpoint needs at least %.2f MB and the file "
                         "system of '%s' has %.2f MB free: %s (errno %d)",
                         s.path.c_str(), static_cast<double>(bytes_needed) / 1e6, dir.c_str(),
                         static_cast<double>(free_bytes) / 1e6, std::strerror(ENOSPC), ENOSPC),
                    "free space there, lower ckpt.keep, or point ckpt.dir elsewhere; `latest` "
                    "still names the previous checkpoint");
      }
    }
  });
  return s;
}

std::string finish_publish(MPI_Comm comm, const std::string& dir, int64_t step, int keep,
                           Staging& staging) {
  const std::string name = step_file_name(step);
  const std::string final_path = (fs::path(dir) / name).string();
  on_rank0(comm, [&] {
    // fsync through the descriptor rank 0 created the file with: the file the ranks wrote,
    // whatever its name points to by now.
    publish_file(staging.path, final_path, staging.fd);
    ::close(staging.fd);
    staging.fd = -1;
    // latest -> name, the same way.
    const std::string latest = (fs::path(dir) / "latest").string();
    write_file_safely(latest, name + "\n", kCkpt);
    // Prune: the newest `keep` complete checkpoints stay, and always this one.
    if (keep > 0) {
      const std::vector<int64_t> steps = steps_in(dir);
      const size_t drop = steps.size() > static_cast<size_t>(keep) ? steps.size() - static_cast<size_t>(keep) : 0;
      for (size_t i = 0; i < drop; ++i)
        if (steps[i] != step) unlink_if_there((fs::path(dir) / step_file_name(steps[i])).string(), kCkpt);
    }
    // Leftovers of crashed saves (this run holds ckpt.dir's lock: no other writer is
    // there): every other staging file goes, and is named.
    static const std::regex partial(R"(step-\d+\.h5\.tmp(\..+)?)");
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
      const std::string n = e.path().filename().string();
      if (!std::regex_match(n, partial) || e.path().string() == staging.path) continue;
      unlink_if_there(e.path().string(), kCkpt);
      log::warn("ckpt.dir: removed '" + e.path().string() + "', the staging file of a save that did not finish");
    }
  });
  return final_path;
}

void abandon_publish(MPI_Comm comm, Staging& staging) {
  int rank = 0;
  if (comm != MPI_COMM_NULL) ZT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  if (rank != 0) return;
  if (staging.fd >= 0) ::close(staging.fd);
  staging.fd = -1;
  ::unlink(staging.path.c_str());  // best effort: the error that led here matters
}

std::string read_latest(const std::string& dir) {
  const std::string latest = (fs::path(dir) / "latest").string();
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(latest, ec))) return "";
  // Never a blocking open: a FIFO or device named `latest` is refused, not waited on.
  const std::string text = read_regular_file(
      latest, "'latest' of the checkpoint folder",
      "`latest` is a small text file naming the newest checkpoint (e.g. step-40.h5): remove "
      "what is there, or give ckpt.resume=PATH");
  std::string name = text.substr(0, text.find('\n'));
  static const std::regex valid(R"(step-\d+\.h5)");
  if (!std::regex_match(name, valid))
    throw InputError("'" + latest + "' does not name a checkpoint (it reads \"" + name + "\")",
                     "write the file name of a complete checkpoint into it (e.g. step-40.h5), "
                     "or give ckpt.resume=PATH");
  const std::string path = (fs::path(dir) / name).string();
  if (!fs::is_regular_file(fs::symlink_status(path, ec)))
    throw InputError("'" + latest + "' names '" + name + "', which is not in " + dir,
                     "give ckpt.resume=PATH of a checkpoint that exists, or ckpt.resume=none");
  return path;
}

std::string resolve_checkpoint(const std::string& arg, std::string_view what, bool hf_folder) {
  const std::string name = std::string(what) + " = '" + arg + "'";
  const std::string accepted =
      std::string("name a checkpoint file (step-N.h5, or a zt convert hf-to-h5 output), a ckpt.dir "
                  "that holds `latest`") +
      (hf_folder ? ", or a Hugging Face folder with config.json" : "");
  if (arg.empty()) throw InputError(std::string(what) + " is an empty path", accepted);
  std::error_code ec;
  const fs::file_status st = fs::status(arg, ec);
  if (!fs::exists(st))
    throw InputError(name + ": not found" + (fs::is_symlink(fs::symlink_status(arg, ec)) ? " (a dangling symbolic link)" : ""),
                     accepted);
  if (!fs::is_directory(st)) return arg;  // a file: read_header says what it holds
  const std::string latest = read_latest(arg);
  if (!latest.empty()) return latest;
  if (fs::exists(fs::path(arg) / "config.json", ec)) {
    if (hf_folder) return arg;
    throw InputError(name + " is a Hugging Face folder; " + std::string(what) + " takes a zt checkpoint",
                     "convert it first: zt convert hf-to-h5 " + arg + " OUT.h5, then name OUT.h5");
  }
  throw InputError(name + " is a folder with no `latest` (not a ckpt.dir with a checkpoint)" +
                       (hf_folder ? " and no config.json (not a Hugging Face folder)" : ""),
                   accepted);
}

}  // namespace zt::ckpt
