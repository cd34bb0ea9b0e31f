#pragma once
// The one gnuplot runner (zt check's plots, the training report): the inputs (data files
// and the script plots.gp) are written into a private folder made inside the output
// directory (mkdtemp, mode 0700), `gnuplot plots.gp` runs there (posix_spawnp, no shell;
// $ZT_GNUPLOT names another program, tests point it at a missing one), then the inputs,
// plots.log and each PNG are moved into the directory the one safe way (core/files.hpp:
// a symlink planted there is replaced, never written through). A missing or failing
// gnuplot is a note, never an error.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace zt {

struct GnuplotResult {
  std::vector<std::string> drawn;  // the `outputs` gnuplot made, in their order
  std::string note;                // why some or all are missing ("" when all were drawn)
};

// inputs: (file name, contents), one of them "plots.gp"; outputs: the PNG names the
// script writes. Throws zt::Error only when the private folder or an input cannot be
// written (the directory is not usable).
GnuplotResult run_gnuplot(const std::filesystem::path& dir,
                          const std::vector<std::pair<std::string, std::string>>& inputs,
                          const std::vector<std::string>& outputs);

}  // namespace zt
