// Checkpoint write and read bandwidth: the training state of a model preset (fp32
// parameters + AdamW exp_avg + exp_avg_sq: 12 bytes per parameter) written and read by
// every rank's ZeRO-style shard through zt's collective writer and reader (parallel HDF5,
// hyperslabs, checksums, fsync, rename, `latest`), the way `zt train` saves.
//
//   mpiexec -n 2 bench_ckpt_io --preset tinyllama-1.1b --dir DIR [--repeats N]
//
// Each rank owns [r*S, (r+1)*S) of every unit (S = ceil(numel / n)), as the engine's
// partition does. To fit in memory the three tensors of a shard share one buffer (the
// bytes on disk and the work are the same). Before each read the file's pages are
// dropped from the page cache (fsync'ed, then POSIX_FADV_DONTNEED), so reads come from the
// device. Prints, per repeat, where the time went (rank 0's; the slowest rank's total):
// HDF5 metadata, data transfers (O_DIRECT ranges on the I/O threads), checksums (zt-xxh3,
// on a worker thread beside the transfers: its busy time and what the transfers did not
// hide), the checksum chunks read back, fsync of the file, publish (rename + `latest`),
// and medians: MB = 1e6 bytes of tensor data.
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <span>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "zt/ckpt/io.hpp"
#include "zt/ckpt/publish.hpp"
#include "zt/core/checksum.hpp"
#include "zt/model/config.hpp"
#include "zt/model/layout.hpp"

namespace {

double now() { return MPI_Wtime(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void drop_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

void fsync_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("checkpoint write/read bandwidth through zt's collective HDF5 path");
  std::string preset = "tinyllama-1.1b", dir = "/work/peers/ckpt-bench";
  int repeats = 2;
  int layers = 0;
  app.add_option("--preset", preset, "model preset");
  app.add_option("--layers", layers, "override the preset's layers (0: keep)");
  app.add_option("--dir", dir, "folder for the checkpoint files");
  app.add_option("--repeats", repeats, "write + read rounds");
  bool serial = false;
  app.add_flag("--serial", serial, "1 rank: HDF5's default (sec2) driver instead of MPI-IO");
  bool unaligned = false;
  app.add_flag("--malloc", unaligned,
               "shards malloc'ed (O_DIRECT through the I/O threads' bounce buffers, as the "
               "engine's before its host shards were page-aligned); default: page-aligned, as "
               "the engine's mmap'ed shards (O_DIRECT straight from / into them)");
  CLI11_PARSE(app, argc, argv);
  const bool aligned = !unaligned;

  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  int rc = 0;
  try {
    zt::model::Config cfg = zt::model::Config::preset(preset);
    if (layers > 0) cfg.layers = layers;
    const zt::model::ParamLayout layout(cfg);
    // This rank's shard of each unit; params, exp_avg and exp_avg_sq share its buffer
    // (page-aligned, or malloc'ed with --malloc).
    std::vector<std::unique_ptr<float[], decltype(&std::free)>> owners;
    std::vector<std::span<float>> bufs;
    zt::ckpt::WriteContents c;
    c.header.config = cfg;
    c.header.contents = zt::ckpt::kContentsTraining;
    c.state = zt::ckpt::TrainState{};
    c.state->step = 1;
    std::vector<zt::ckpt::UnitTarget> targets;
    for (int u = 0; u < layout.num_units(); ++u) {
      const int64_t numel = layout.unit(u).numel;
      const int64_t S = (numel + n - 1) / n;
      const int64_t begin = std::min<int64_t>(numel, rank * S);
      const int64_t count = std::min<int64_t>(numel, begin + S) - begin;
      const size_t bytes_u = static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(float);
      void* mem = aligned ? std::aligned_alloc(4096, (bytes_u + 4095) / 4096 * 4096) : std::malloc(bytes_u);
      if (!mem) throw std::bad_alloc();
      owners.emplace_back(static_cast<float*>(mem), &std::free);
      bufs.emplace_back(owners.back().get(), static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i)
        bufs.back()[static_cast<size_t>(i)] = static_cast<float>((begin + i) % 1000) * 1e-3f;
      const std::span<float> b = bufs.back();
      c.units.push_back({begin, count, b, b, b});
      targets.push_back({begin, count, b, b, b});
    }
    const double bytes = 12.0 * static_cast<double>(layout.total_numel());
    if (rank == 0)
      std::printf("# %s: %lld parameters, %.3f GB of training state (fp32 params + 2 moments), "
                  "%d ranks, dir %s, shards %s\n",
                  cfg.name.c_str(), static_cast<long long>(layout.total_numel()), bytes / 1e9, n,
                  dir.c_str(), aligned ? "page-aligned" : "malloc'ed");
    // The checksum's share: zt-xxh3 over this rank's three tensors per shard, alone, one
    // thread (and format 1's zt-sum64 beside it, for the record).
    if (repeats > 0) {
      const auto alone = [&](const char* what, auto sum) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = now();
        uint64_t sink = 0;
        for (const auto& b : bufs)
          for (int k = 0; k < 3; ++k) sink += sum(std::span<const float>(b));
        double dt = now() - t0;
        MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (rank == 0)
          std::printf("checksums alone (%s of every rank's shards, one thread, slowest rank): "
                      "%.2f s = %.0f MB/s per rank (%llx)\n",
                      what, dt, bytes / n / dt / 1e6, static_cast<unsigned long long>(sink));
      };
      alone("zt-xxh3, format 2", [](std::span<const float> b) { return zt::xxh3_sum(std::as_bytes(b)); });
      alone(zt::sum64_isa()[0] == 'a' ? "zt-sum64, format 1, SIMD" : "zt-sum64, format 1, scalar",
            [](std::span<const float> b) { return zt::sum64_fast(b); });
    }
    if (serial && n != 1) throw std::runtime_error("--serial runs at 1 rank");
    const MPI_Comm io = serial ? MPI_COMM_NULL : MPI_COMM_WORLD;
    std::vector<double> w, r;
    for (int k = 0; k < repeats; ++k) {
      const int64_t step = k + 1;
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = now();
      zt::ckpt::Staging staging = zt::ckpt::begin_publish(io, dir, step);
      const std::string tmp = staging.path;
      zt::ckpt::IoTimes wt, rt;
      zt::ckpt::write_file(io, tmp, c, &wt);
      const double t1 = now();
      // The file's fsync, timed on its own (finish_publish's own fsync then finds nothing
      // left to flush): what publishing costs beyond it is the rename and `latest`.
      if (rank == 0) fsync_file(tmp);
      MPI_Barrier(MPI_COMM_WORLD);
      const double t_sync = now();
      const std::string path = zt::ckpt::finish_publish(io, dir, step, 1, staging);
      MPI_Barrier(MPI_COMM_WORLD);
      const double t2 = now();
      w.push_back(bytes / (t2 - t0) / 1e6);
      // Where the time went (rank 0's; the checksums run beside the transfers).
      if (rank == 0) {
        std::printf("round %d: write %.2f s = %.0f MB/s [metadata %.2f, data %.2f, checksum %.2f "
                    "(beside the data; waited %.2f), %zu chunks read back %.3f, fsync %.2f, "
                    "publish %.2f]\n",
                    k + 1, t2 - t0, w.back(), wt.metadata, wt.data, wt.checksum, wt.checksum_wait,
                    wt.chunks_read_back, wt.checksum_tails, t_sync - t1, t2 - t_sync);
        std::fflush(stdout);
        drop_cache(path);
      }
      MPI_Barrier(MPI_COMM_WORLD);
      const double t3 = now();
      zt::ckpt::read_file(io, path, cfg, targets, zt::ckpt::ReadWhat::kTraining, nullptr, &rt);
      MPI_Barrier(MPI_COMM_WORLD);
      const double t4 = now();
      r.push_back(bytes / (t4 - t3) / 1e6);
      if (rank == 0)
        std::printf("round %d: read %.2f s = %.0f MB/s [metadata %.2f, data %.2f (%zu checksum chunks "
                    "read beside), checksum %.2f (beside the data; waited %.2f)]\n",
                    k + 1, t4 - t3, r.back(), rt.metadata, rt.data, rt.chunks_read_back, rt.checksum,
                    rt.checksum_wait);
      std::fflush(stdout);
    }
    if (rank == 0) {
      std::printf("median: write %.0f MB/s, read %.0f MB/s (%d rounds)\n", median(w), median(r), repeats);
      std::filesystem::remove_all(dir);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    rc = 1;
  }
  MPI_Finalize();
  return rc;
}
