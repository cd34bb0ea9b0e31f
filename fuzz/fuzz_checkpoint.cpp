// libFuzzer target: the HDF5 checkpoint loader (zt::ckpt::read_header, then read_file of
// everything a resume reads) on arbitrary bytes, serially (comm = MPI_COMM_NULL). The
// bytes are a memfd opened through /proc/self/fd, like a ckpt.resume path. The run's
// model config is the user's (trusted): a 1-layer model of 856 parameters; the file is not.
// Anything the loader rejects must be a zt::Error (no crash, no leak, no sanitizer report).
//
// Seeds: ZT_FUZZ_WRITE_SEEDS=DIR fuzz_checkpoint writes a training checkpoint and a
// weights-only one of that model into DIR with zt's own writer, and exits.
#include <mpi.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "zt/ckpt/format.hpp"
#include "zt/ckpt/io.hpp"
#include "zt/core/error.hpp"
#include "zt/model/layout.hpp"

namespace {

// RoPE base and norm epsilon: Config's defaults, which are tiny's.
zt::model::Config run_config() {
  return {.name = "fuzz", .vocab = 16, .hidden = 8, .layers = 1, .heads = 2, .kv_heads = 1,
          .intermediate = 16, .context = 8};
}

// Per unit: [numel] buffers for params and the two moments.
struct Buffers {
  std::vector<std::vector<float>> p, m, v;
  explicit Buffers(const zt::model::ParamLayout& layout) {
    for (const auto& u : layout.units()) {
      p.emplace_back(static_cast<size_t>(u.numel), 0.5f);
      m.emplace_back(static_cast<size_t>(u.numel), 0.25f);
      v.emplace_back(static_cast<size_t>(u.numel), 0.125f);
    }
  }
};

void write_seeds(const std::string& dir) {
  const zt::model::Config cfg = run_config();
  const zt::model::ParamLayout layout(cfg);
  Buffers b(layout);
  for (const char* contents : {zt::ckpt::kContentsTraining, zt::ckpt::kContentsWeights}) {
    zt::ckpt::WriteContents w;
    w.header.contents = contents;
    w.header.config = cfg;
    const bool training = std::string(contents) == zt::ckpt::kContentsTraining;
    for (size_t u = 0; u < b.p.size(); ++u) {
      zt::ckpt::UnitShard s;
      s.count = static_cast<int64_t>(b.p[u].size());
      s.params = b.p[u];
      if (training) {
        s.exp_avg = b.m[u];
        s.exp_avg_sq = b.v[u];
      }
      w.units.push_back(s);
    }
    if (training) {
      zt::ckpt::TrainState st;
      st.step = 3;
      st.rng = {42};
      w.state = st;
    }
    w.rng_seed = 42;
    zt::ckpt::write_file(MPI_COMM_NULL, dir + "/" + contents + ".h5", w);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);  // memfds do not need HDF5's flock
  if (const char* dir = std::getenv("ZT_FUZZ_WRITE_SEEDS")) {
    write_seeds(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const zt::model::Config cfg = run_config();
  static const zt::model::ParamLayout layout(cfg);
  const int fd = memfd_create("zt-fuzz-ckpt", 0);
  if (fd < 0) std::abort();
  for (size_t off = 0; off < size;) {
    const ssize_t n = write(fd, data + off, size - off);
    if (n <= 0) std::abort();
    off += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    const zt::ckpt::Header h = zt::ckpt::read_header(MPI_COMM_NULL, path);
    Buffers b(layout);
    std::vector<zt::ckpt::UnitTarget> targets;
    const bool training = h.contents == zt::ckpt::kContentsTraining;
    for (size_t u = 0; u < b.p.size(); ++u) {
      zt::ckpt::UnitTarget t;
      t.count = static_cast<int64_t>(b.p[u].size());
      t.params = b.p[u];
      if (training) {
        t.exp_avg = b.m[u];
        t.exp_avg_sq = b.v[u];
      }
      targets.push_back(t);
    }
    std::vector<std::string> warnings;
    (void)zt::ckpt::read_file(MPI_COMM_NULL, path, cfg, targets,
                              training ? zt::ckpt::ReadWhat::kTraining : zt::ckpt::ReadWhat::kParams,
                              &warnings);
  } catch (const zt::Error&) {
  }
  close(fd);
  return 0;
}
