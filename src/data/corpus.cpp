// Locating the shipped corpus and its cache file (see corpus.hpp).
#include "zt/data/corpus.hpp"


#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/shipped.hpp"
#include "zt/data/text.hpp"
#include "zt/runtime/agree.hpp"
#include "zt/runtime/mpi_check.hpp"

namespace zt::data {
namespace fs = std::filesystem;

std::vector<std::string> shipped_corpus_candidates() {
  return shipped_file_candidates(fs::path(kShippedCorpus).filename().string());
}

std::string find_shipped_corpus() {
  std::string tried;
  const std::string found = find_shipped_file(fs::path(kShippedCorpus).filename().string(), &tried);
  if (!found.empty()) return found;
  throw InputError("the shipped corpus " + std::string(kShippedCorpus) +
                       " was not found; looked in:" + tried,
                   "run from a zt source checkout, set ZT_DATA_DIR to the folder holding "
                   "tinyshakespeare.txt, or give a token file: `zt convert text-to-tokens "
                   "IN.txt OUT.h5` then `zt train --set data.path=OUT.h5`");
}

std::string cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return (fs::path(xdg) / "zt").string();
  if (const char* home = std::getenv("HOME"); home && *home)
    return (fs::path(home) / ".cache" / "zt").string();
  throw InputError("no cache folder: neither XDG_CACHE_HOME nor HOME is set",
                   "set XDG_CACHE_HOME, or convert the corpus yourself and set data.path");
}

std::string cached_tokens_path(const std::string& text_path) {
  std::ifstream in(text_path, std::ios::binary);
  if (!in) throw InputError("cannot read '" + text_path + "'", "check its permissions");
  // FNV-1a 64 over the bytes: a different corpus gets a different cache file.
  uint64_t h = 14695981039346656037ull;
  std::array<char, 65536> buf{};
  while (in) {
    in.read(buf.data(), buf.size());
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      h ^= static_cast<unsigned char>(buf[static_cast<size_t>(i)]);
      h *= 1099511628211ull;
    }
  }
  const std::string stem = fs::path(text_path).stem().string();
  return (fs::path(cache_dir()) /
          strf("%s-bytes-%016llx.h5", stem.c_str(), static_cast<unsigned long long>(h)))
      .string();
}

std::string prepare_shipped_tokens(MPI_Comm world) {
  std::string path;
  runtime::collectively(world, [&] {
    const std::string corpus = find_shipped_corpus();
    path = cached_tokens_path(corpus);
    std::error_code ec;
    if (fs::exists(path, ec)) return;
    const fs::path dir = fs::path(path).parent_path();
    fs::create_directories(dir, ec);
    if (ec)
      throw InputError("cannot create the cache folder '" + dir.string() + "': " + ec.message(),
                       "set XDG_CACHE_HOME to a writable folder, or convert the corpus "
                       "yourself and set data.path");
    log::info("zt train: converting " + corpus + " -> " + path + " (first use)");
    convert_text_to_tokens({corpus}, path, WriteOptions{});
  }, /*rank0_only=*/true);
  int len = static_cast<int>(path.size());
  ZT_MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT, 0, world));
  path.resize(static_cast<size_t>(len));
  ZT_MPI_CHECK(MPI_Bcast(path.data(), len, MPI_CHAR, 0, world));
  return path;
}

}  // namespace zt::data
