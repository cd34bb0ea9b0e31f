#pragma once
// The shipped corpus (data/tinyshakespeare.txt) and the cache of its converted form,
// used by the embedded default (`zt train` with no data.path).
#include <mpi.h>

#include <string>
#include <vector>

namespace zt::data {

inline constexpr const char* kShippedCorpus = "data/tinyshakespeare.txt";

// Where the shipped corpus is looked for, in order:
//   1. $ZT_DATA_DIR/tinyshakespeare.txt (when ZT_DATA_DIR is set)
//   2. <source dir at compile time>/data/tinyshakespeare.txt
//   3. relative to the executable: <exe>/../../../data, <exe>/../../data, <exe>/../data,
//      <exe>/../share/zt/data (build trees and installs)
std::vector<std::string> shipped_corpus_candidates();

// The first candidate that exists. Throws zt::InputError listing the paths tried, with
// a hint (set data.path, or ZT_DATA_DIR).
std::string find_shipped_corpus();

// $XDG_CACHE_HOME/zt, else $HOME/.cache/zt (not created here). Throws zt::InputError
// when neither variable is set.
std::string cache_dir();

// The cache file for a text corpus: cache_dir()/<stem>-bytes-<16 hex digits of the
// FNV-1a hash of its contents>.h5, so an edited corpus gets a new file.
std::string cached_tokens_path(const std::string& text_path);

// The embedded default's token file, for every rank of `world`: rank 0 converts the
// shipped corpus into the cache on first use (once, atomically: a unique .tmp, then
// rename) while the others wait, then all learn the path from rank 0. A failure on rank 0
// ends every rank with an error (runtime::collectively).
std::string prepare_shipped_tokens(MPI_Comm world);

}  // namespace zt::data
