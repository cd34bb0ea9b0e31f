// zt-xxh3's 256 KiB chunks across ranks (format_version 2): a model whose tensors span
// several chunks, written at np 1-4 by uneven shards whose ends fall inside chunks (a rank
// that holds only the start of a chunk hashes it read back from the file; one that holds
// only its end leaves it to that rank), and read back by other shards.
//
// - every stored checksum equals zt-xxh3 from its definition (XXH3-64 of each chunk
//   straight from libxxhash) over the dataset read whole with plain HDF5 (rank 0), and the
//   values equal what was written;
// - the file read by the reversed split gives the same values (and its checksums pass);
// - a flipped byte inside a chunk that straddles two ranks is refused on every rank,
//   naming the dataset.
// The np 3 run keeps its file for tests/ckpt/check_file.py (Python's xxhash).
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <fstream>
#include <numeric>

#include "h5_peek.hpp"
#include "support/expect_error.hpp"
#include "support/mpi_fixtures.hpp"
#include "zt/ckpt/io.hpp"
#include "zt/model/layout.hpp"

namespace {

using namespace zt::ckpt::testing;
using zt::testing::world_rank;
using zt::testing::world_size;

// Tensors of 1-5 chunks (65,536 fp32 each): embed 1100 x 256 = 4.3 chunks (over 1 MiB: a
// page-aligned dataset, so the writer DMAs straight from the aligned shards), MLP 688 x 256
// = 2.7, q_proj exactly 1, k/v half of one, norms a small part of one.
zt::model::Config chunky() {
  return {.name = "custom", .vocab = 1100, .hidden = 256, .layers = 1, .heads = 4, .kv_heads = 2,
          .intermediate = 688, .context = 16};
}

// Element i of unit u, kind k (params 0, exp_avg 1, exp_avg_sq 2): distinct everywhere.
float value(int k, int u, int64_t i) {
  return static_cast<float>(k * 7 + u) + 1e-6f * static_cast<float>(i % 1000003);
}

// Rank r's range of a unit of n elements when the ranks hold shares in proportion to
// `weights` (uneven, so the ends fall at odd offsets inside chunks).
std::pair<int64_t, int64_t> share(int64_t n, const std::vector<int>& weights, int r) {
  const int total = std::accumulate(weights.begin(), weights.end(), 0);
  int before = 0;
  for (int i = 0; i < r; ++i) before += weights[static_cast<size_t>(i)];
  const int64_t b = n * before / total;
  const int64_t e = n * (before + weights[static_cast<size_t>(r)]) / total;
  return {b, e - b};
}

std::vector<int> weights(bool reversed) {
  std::vector<int> w;
  for (int r = 0; r < world_size(); ++r) w.push_back(3 + 2 * r);
  if (reversed) std::reverse(w.begin(), w.end());
  return w;
}

const char* kGroups[3] = {"/params/", "/optim/exp_avg/", "/optim/exp_avg_sq/"};

TEST(CkptChunks, ChecksumsMatchTheDefinitionAtAnySplit) {
  const zt::model::Config cfg = chunky();
  const zt::model::ParamLayout layout(cfg);
  const int n = world_size(), rank = world_rank();
  const std::string dir = (std::filesystem::current_path() / "chunks").string();
  const std::string path = dir + "/np" + std::to_string(n) + ".h5";
  if (rank == 0) std::filesystem::create_directories(dir);
  MPI_Barrier(MPI_COMM_WORLD);

  // This rank's shards: [units][kinds][count], in page-aligned memory (the writer's
  // O_DIRECT pieces go straight from it where the file offset agrees; the reads below land
  // in malloc'ed vectors, through the bounce buffers: both paths).
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::vector<std::array<std::unique_ptr<float[], Free>, 3>> owners(static_cast<size_t>(layout.num_units()));
  std::vector<std::array<std::span<float>, 3>> mine(owners.size());
  zt::ckpt::WriteContents c;
  c.header.config = cfg;
  c.header.contents = zt::ckpt::kContentsTraining;
  c.state = zt::ckpt::TrainState{};
  c.state->step = 5;
  c.rng_seed = 100 + static_cast<uint64_t>(rank);
  for (int u = 0; u < layout.num_units(); ++u) {
    const auto [begin, count] = share(layout.unit(u).numel, weights(false), rank);
    auto& m = mine[static_cast<size_t>(u)];
    for (size_t k = 0; k < 3; ++k) {
      const size_t bytes = (static_cast<size_t>(count) * sizeof(float) + 4095) / 4096 * 4096 + 4096;
      owners[static_cast<size_t>(u)][k].reset(static_cast<float*>(std::aligned_alloc(4096, bytes)));
      m[k] = {owners[static_cast<size_t>(u)][k].get(), static_cast<size_t>(count)};
      for (int64_t i = 0; i < count; ++i) m[k][static_cast<size_t>(i)] = value(static_cast<int>(k), u, begin + i);
    }
    c.units.push_back({begin, count, m[0], m[1], m[2]});
  }
  zt::ckpt::write_file(MPI_COMM_WORLD, path, c);
  MPI_Barrier(MPI_COMM_WORLD);

  if (rank == 0) {
    int multi_chunk = 0;
    for (int k = 0; k < 3; ++k)
      for (const auto& t : layout.tensors()) {
        uint64_t stored = 0;
        const std::vector<float> x = h5_read<float>(path, kGroups[k] + t.name, H5T_NATIVE_FLOAT, &stored);
        ASSERT_EQ(x.size(), static_cast<size_t>(t.numel));
        bool same = true;
        for (int64_t i = 0; i < t.numel; ++i) same = same && x[static_cast<size_t>(i)] == value(k, t.unit, t.offset + i);
        EXPECT_TRUE(same) << kGroups[k] << t.name;
        EXPECT_EQ(stored, xxh3_definition(std::as_bytes(std::span<const float>(x)))) << kGroups[k] << t.name;
        multi_chunk += t.numel > (int64_t{1} << 16) ? 1 : 0;
      }
    EXPECT_GE(multi_chunk, 3 * 4);  // embed, head, 3 MLP matrices (+ q_proj is exactly one)
    uint64_t stored = 0;
    const std::vector<uint64_t> rng = h5_read<uint64_t>(path, "/state/rng", H5T_NATIVE_UINT64, &stored);
    std::vector<uint64_t> expect(static_cast<size_t>(n));
    std::iota(expect.begin(), expect.end(), uint64_t{100});
    EXPECT_EQ(rng, expect);
    EXPECT_EQ(stored, xxh3_definition(std::as_bytes(std::span<const uint64_t>(rng))));
  }

  // Read by the reversed split: the same values.
  std::vector<std::array<std::vector<float>, 3>> back(mine.size());
  std::vector<zt::ckpt::UnitTarget> targets;
  std::vector<int64_t> begins;
  for (int u = 0; u < layout.num_units(); ++u) {
    const auto [begin, count] = share(layout.unit(u).numel, weights(true), rank);
    auto& b = back[static_cast<size_t>(u)];
    for (auto& v : b) v.assign(static_cast<size_t>(count), -1.0f);
    targets.push_back({begin, count, b[0], b[1], b[2]});
    begins.push_back(begin);
  }
  const std::optional<zt::ckpt::TrainState> st =
      zt::ckpt::read_file(MPI_COMM_WORLD, path, cfg, targets, zt::ckpt::ReadWhat::kTraining);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->step, 5);
  for (size_t u = 0; u < back.size(); ++u)
    for (int k = 0; k < 3; ++k) {
      bool same = true;
      const auto& v = back[u][static_cast<size_t>(k)];
      for (size_t i = 0; i < v.size(); ++i)
        same = same && v[i] == value(k, static_cast<int>(u), begins[u] + static_cast<int64_t>(i));
      EXPECT_TRUE(same) << "unit " << u << " kind " << k;
    }

  // A flipped byte in the embedding's exp_avg_sq, in the chunk holding the first rank
  // boundary of unit 0 (at np 1: chunk 1): every rank refuses the file, naming it.
  const zt::model::TensorInfo& embed = layout.tensors().front();
  const int64_t boundary = n > 1 ? share(layout.unit(0).numel, weights(false), 1).first : (int64_t{1} << 16) + 5;
  const std::string victim = std::string(kGroups[2]) + embed.name;
  const std::string bad = dir + "/flipped-np" + std::to_string(n) + ".h5";
  if (rank == 0) {
    std::filesystem::copy_file(path, bad, std::filesystem::copy_options::overwrite_existing);
    const haddr_t off = h5_offset(bad, victim);
    ASSERT_NE(off, HADDR_UNDEF);
    // One element before the boundary: in the straddling chunk, held by rank 0 (np > 1).
    flip_byte(bad, off + static_cast<uint64_t>(boundary - embed.offset - 1) * 4 + 1, 0x20);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  zt::testing::expect_input_error(
      [&] { zt::ckpt::read_file(MPI_COMM_WORLD, bad, cfg, targets, zt::ckpt::ReadWhat::kTraining); },
      {bad, victim, "fails its checksum"});
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) std::filesystem::remove(bad);
}

}  // namespace
