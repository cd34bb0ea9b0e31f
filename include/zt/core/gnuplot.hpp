#pragma once
// The one gnuplot runner (zt check's plots, the training report). The inputs (data files
// and the script plots.gp) are written into a staging folder made inside the output
// directory (StagingFolder: mkdtemp, mode 0700), gnuplot runs there, and only what is
// complete is published into the directory the one safe way (core/files.hpp).
// - The program: $ZT_GNUPLOT (a path, or a name looked up in PATH) or gnuplot, resolved
//   to an absolute path before gnuplot's working folder is set; not found: a note.
// - gnuplot dies with zt: PR_SET_PDEATHSIG in the child, and the handler of
//   remove_staging_on_signals() kills it and empties the staging folder.
// - A PNG counts only when complete (signature, chunks through IEND); others are dropped.
// A missing or failing gnuplot is a note, never an error.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace zt {

struct GnuplotResult {
  std::vector<std::string> drawn;  // the `outputs` gnuplot made complete, in their order
  std::string note;                // why some or all are missing ("" when all were drawn)
};

// A private folder DIR/.zt-stage.<host>.<pid>.XXXXXX, removed with what is left in it at
// scope exit (and emptied by the signal handler). Staging folders of zt processes of this
// host that no longer run are removed when a new one is made.
class StagingFolder {
 public:
  explicit StagingFolder(const std::filesystem::path& dir);
  ~StagingFolder();
  StagingFolder(const StagingFolder&) = delete;
  StagingFolder& operator=(const StagingFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }
  // Moves every regular file of the staging folder into the directory (publish_file:
  // fsync, rename); returns their names.
  std::vector<std::string> publish_all() const;

 private:
  std::filesystem::path dir_, path_;
};

// True when `path` is a whole PNG: the signature, then chunks through IEND at its end.
bool png_complete(const std::string& path);

// Writes `inputs` (file name, contents; one of them "plots.gp") into `work` and runs
// gnuplot there; outputs: the PNG names the script writes. Incomplete PNGs are removed.
GnuplotResult draw_in(const std::filesystem::path& work,
                      const std::vector<std::pair<std::string, std::string>>& inputs,
                      const std::vector<std::string>& outputs);

// draw_in a StagingFolder of `dir`, then everything published into `dir`. Throws
// zt::Error only when the staging folder or an input cannot be written.
GnuplotResult run_gnuplot(const std::filesystem::path& dir,
                          const std::vector<std::pair<std::string, std::string>>& inputs,
                          const std::vector<std::string>& outputs);

}  // namespace zt
