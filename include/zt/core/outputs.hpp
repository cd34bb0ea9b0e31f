#pragma once
// Where a command writes, checked before any work: the folders it writes into
// (require_output_dir) and its outputs against each other and its inputs
// (refuse_collisions). docs/reliability.md, "Careless and hostile input".
#include <string>
#include <string_view>
#include <vector>

namespace zt {

// The one check of a folder zt writes into: ckpt.dir, `zt report --out`, `zt check
// --report`, a converter's OUTDIR, the folder of an output file (log.metrics, OUT.h5).
// A symbolic link to a folder is followed, as `mkdir -p` follows it. zt::InputError
// (exit 2) "<what> = '<dir>': <why>" when `dir` is empty, a system folder
// (refuse_system_folder), a dangling symbolic link (its target named), an existing
// non-folder, below a file, on a read-only file system or not writable. kMayBeMade: a missing folder is fine (the
// nearest existing folder above it, where it would be made, is checked). kFolderOfAFile:
// the folder of one output file: it must exist; a system folder is allowed (one file
// named by the user, not a folder zt fills). Creates nothing.
enum class OutputDir { kMayBeMade, kFolderOfAFile };
void require_output_dir(const std::string& dir, std::string_view what, std::string_view hint,
                        OutputDir kind = OutputDir::kMayBeMade);

// One path a command reads or writes, for refuse_collisions.
struct PathUse {
  std::string key;   // what names it: "log.metrics", "ckpt.dir", "OUT.h5"
  std::string path;  // as given; "" (the key is not used) is skipped
  bool output = true;
  // A folder: the names directly in it that belong to this use (an ECMAScript regex over
  // the first path component below it; ".*": all of them). Empty: a file.
  std::string owns;
  // An input read whole before the run writes anything (ckpt.resume): it may be one of an
  // output folder's names; naming the same file as an output is still refused.
  bool read_first = false;
};

// Every pair of `uses` with an output among them, compared after resolving `.`, `..` and
// symbolic links (and by device and inode where both exist): zt::InputError (exit 2)
// naming both keys when they are the same file or folder, or when one lies in a folder
// the other owns at a name that folder owns (an output in an input folder, an output
// among the files an output folder writes).
void refuse_collisions(const std::vector<PathUse>& uses);

}  // namespace zt
