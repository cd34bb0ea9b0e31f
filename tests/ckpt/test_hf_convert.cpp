// export_hf / import_hf without Python: a small model written with write_weights_only,
// exported to BF16 shards, checked byte by byte against bf16 rounding written out here
// (reading the files with plain ifstream + nlohmann, not zt's reader), imported back
// (values = the bf16 values widened), and exported again: the same files, byte for byte.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "zt/ckpt/hf_convert.hpp"
#include "zt/ckpt/io.hpp"
#include "zt/ckpt/serial.hpp"
#include "zt/model/layout.hpp"
#include "zt/model/model.hpp"

namespace {

namespace fs = std::filesystem;

std::vector<char> slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Round to nearest even on the upper 16 bits (finite inputs).
uint16_t bf16_bits(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t lower = u & 0xffffu;
  uint32_t upper = u >> 16;
  if (lower > 0x8000u || (lower == 0x8000u && (upper & 1u))) ++upper;
  return static_cast<uint16_t>(upper);
}

zt::model::Config small(bool tied) {
  return {.vocab = 32, .hidden = 16, .layers = 2, .heads = 4, .kv_heads = 2, .intermediate = 32,
          .context = 16, .tied_embeddings = tied};
}

void round_trip(bool tied, uint64_t max_shard) {
  const fs::path dir = fs::path(::testing::TempDir()) / (tied ? "zt_hf_tied" : "zt_hf_untied");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const zt::model::Config cfg = small(tied);
  const zt::model::ParamLayout layout(cfg);
  zt::model::Parameters<float> P(layout);
  P.init({.seed = 7});
  const std::string ck = (dir / "a.h5").string();
  zt::ckpt::write_weights_only(ck, cfg, P);

  zt::ckpt::HfExportOptions o;
  o.dtype = "bf16";
  o.max_shard_size = max_shard;
  const zt::ckpt::HfExportResult r = zt::ckpt::export_hf(ck, (dir / "hf").string(), o);
  EXPECT_EQ(r.tensors, static_cast<int64_t>(layout.tensors().size()));
  EXPECT_EQ(r.tensor_bytes, static_cast<uint64_t>(layout.total_numel()) * 2);

  // Which file holds each tensor.
  std::map<std::string, std::string> where;
  const bool sharded = fs::exists(dir / "hf" / "model.safetensors.index.json");
  EXPECT_EQ(sharded, max_shard < r.tensor_bytes);
  EXPECT_EQ(fs::exists(dir / "hf" / "model.safetensors"), !sharded);
  EXPECT_TRUE(fs::exists(dir / "hf" / "config.json"));
  if (sharded) {
    const auto text = slurp(dir / "hf" / "model.safetensors.index.json");
    const nlohmann::json idx = nlohmann::json::parse(text.begin(), text.end());
    EXPECT_EQ(idx.at("metadata").at("total_size").get<uint64_t>(), r.tensor_bytes);
    for (const auto& [k, v] : idx.at("weight_map").items()) where[k] = v.get<std::string>();
  } else {
    for (const zt::model::TensorInfo& t : layout.tensors()) where[t.name] = "model.safetensors";
  }
  EXPECT_EQ(where.size(), layout.tensors().size());

  for (const zt::model::TensorInfo& t : layout.tensors()) {
    SCOPED_TRACE(t.name);
    const std::vector<char> f = slurp(dir / "hf" / where.at(t.name));
    ASSERT_GE(f.size(), 8u);
    uint64_t n = 0;
    std::memcpy(&n, f.data(), 8);  // little-endian host
    const nlohmann::json h = nlohmann::json::parse(f.begin() + 8, f.begin() + 8 + static_cast<long>(n));
    const nlohmann::json& e = h.at(t.name);
    EXPECT_EQ(e.at("dtype"), "BF16");
    EXPECT_EQ(e.at("shape").get<std::vector<int64_t>>(), t.shape);
    const uint64_t begin = e.at("data_offsets")[0].get<uint64_t>();
    ASSERT_EQ(e.at("data_offsets")[1].get<uint64_t>() - begin, static_cast<uint64_t>(t.numel) * 2);
    const std::span<const float> src = P.params(t.unit).subspan(static_cast<size_t>(t.offset),
                                                                static_cast<size_t>(t.numel));
    int wrong = 0;
    for (int64_t i = 0; i < t.numel; ++i) {
      uint16_t got;
      std::memcpy(&got, f.data() + 8 + n + begin + 2 * static_cast<uint64_t>(i), 2);
      wrong += got != bf16_bits(src[static_cast<size_t>(i)]);
    }
    EXPECT_EQ(wrong, 0);
  }

  // Import: the bf16 values, widened; source_dtype bf16; the model's shape.
  const std::string back = (dir / "b.h5").string();
  const zt::ckpt::HfImportResult ir = zt::ckpt::import_hf((dir / "hf").string(), back);
  EXPECT_EQ(ir.source_dtype, "bf16");
  EXPECT_EQ(ir.params, layout.total_numel());
  const zt::ckpt::FullCheckpoint b = zt::ckpt::read_full(back);
  EXPECT_EQ(b.header.source_dtype, "bf16");
  EXPECT_EQ(b.header.contents, "weights");
  EXPECT_EQ(b.header.config.tied_embeddings, tied);
  EXPECT_EQ(b.header.config.num_params(), cfg.num_params());
  for (int u = 0; u < layout.num_units(); ++u) {
    const std::span<const float> src = P.params(u);
    int wrong = 0;
    for (size_t i = 0; i < src.size(); ++i)
      wrong += std::bit_cast<uint32_t>(b.params[static_cast<size_t>(u)][i]) !=
               static_cast<uint32_t>(bf16_bits(src[i])) << 16;
    EXPECT_EQ(wrong, 0) << "unit " << u;
  }

  // Export the import with the default dtype (its source_dtype): identical files.
  zt::ckpt::HfExportOptions o2;
  o2.max_shard_size = max_shard;
  const zt::ckpt::HfExportResult r2 = zt::ckpt::export_hf(back, (dir / "hf2").string(), o2);
  EXPECT_EQ(r2.dtype, "bf16");
  ASSERT_EQ(r2.files, r.files);
  for (const std::string& file : r.files)
    EXPECT_EQ(slurp(dir / "hf" / file), slurp(dir / "hf2" / file)) << file;
}

TEST(HfConvert, UntiedShardedRoundTripIsExact) { round_trip(false, 2048); }
TEST(HfConvert, TiedSingleFileRoundTripIsExact) { round_trip(true, 5ull << 30); }

// A training checkpoint (moments + /state) exports its parameters only: F32 tensors whose
// bytes are the parameters' own.
TEST(HfConvert, TrainingFileExportsParametersOnly) {
  const fs::path dir = fs::path(::testing::TempDir()) / "zt_hf_training";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const zt::model::Config cfg = small(false);
  const zt::model::ParamLayout layout(cfg);
  zt::model::Parameters<float> P(layout);
  P.init({.seed = 11});
  std::vector<std::vector<float>> m(static_cast<size_t>(layout.num_units()));
  zt::ckpt::WriteContents c;
  c.header.config = cfg;
  c.header.contents = zt::ckpt::kContentsTraining;
  for (int u = 0; u < layout.num_units(); ++u) {
    m[static_cast<size_t>(u)].assign(static_cast<size_t>(layout.unit(u).numel), 0.5f);
    c.units.push_back({0, layout.unit(u).numel, P.params(u), m[static_cast<size_t>(u)],
                       m[static_cast<size_t>(u)]});
  }
  c.state = zt::ckpt::TrainState{};
  c.state->step = 5;
  c.state->rng = {1};
  const std::string ck = (dir / "step-5.h5").string();
  zt::ckpt::write_file(MPI_COMM_NULL, ck, c);

  const zt::ckpt::HfExportResult r = zt::ckpt::export_hf(ck, (dir / "hf").string());
  EXPECT_EQ(r.dtype, "f32");  // no source_dtype: f32
  const std::vector<char> f = slurp(dir / "hf" / "model.safetensors");
  uint64_t n = 0;
  std::memcpy(&n, f.data(), 8);
  const nlohmann::json h = nlohmann::json::parse(f.begin() + 8, f.begin() + 8 + static_cast<long>(n));
  EXPECT_EQ(h.size(), layout.tensors().size() + 1);  // + __metadata__
  for (const zt::model::TensorInfo& t : layout.tensors()) {
    const uint64_t begin = h.at(t.name).at("data_offsets")[0].get<uint64_t>();
    EXPECT_EQ(h.at(t.name).at("dtype"), "F32");
    EXPECT_EQ(std::memcmp(f.data() + 8 + n + begin, P.params(t.unit).data() + t.offset,
                          static_cast<size_t>(t.numel) * 4),
              0)
        << t.name;
  }
}

}  // namespace
