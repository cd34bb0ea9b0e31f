// The class "narrowing cast on output": every float -> bf16/f16 that zt writes goes through
// zt::narrow_floats, which counts what does not survive (finite in, inf out; NaN in), and
// the writers refuse such values unless asked to saturate. The reference: IEEE limits
// written out here (f16's largest finite 65504 = 0x7bff, its rounding edge 65520; bf16's
// largest 0x7f7f, its edge 0x7f7f8000), not zt's converter.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "zt/ckpt/hf_convert.hpp"
#include "zt/ckpt/io.hpp"
#include "zt/ckpt/serial.hpp"
#include "zt/ckpt/safetensors.hpp"
#include "zt/core/dtype.hpp"
#include "zt/core/error.hpp"
#include "zt/model/layout.hpp"
#include "zt/model/model.hpp"

namespace {

namespace fs = std::filesystem;
using zt::DType;

struct Target {
  DType to;
  zt::ckpt::StDType st;
  const char* name;      // h5-to-hf --dtype
  uint16_t max_bits;     // largest finite value
  uint16_t inf_bits;
  float max;             // its value
  float edge;            // the smallest float that rounds to inf
};
const Target kTargets[] = {
    {DType::kF16, zt::ckpt::StDType::kF16, "f16", 0x7bff, 0x7c00, 65504.0f, 65520.0f},
    {DType::kBF16, zt::ckpt::StDType::kBF16, "bf16", 0x7f7f, 0x7f80,
     std::bit_cast<float>(0x7f7f0000u), std::bit_cast<float>(0x7f7f8000u)}};

TEST(Narrowing, EveryTargetCountsOverflowAndNaNAndSaturates) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const Target& t : kTargets) {
    SCOPED_TRACE(t.name);
    const float below = std::nextafter(t.edge, 0.0f);  // rounds to max
    const std::vector<float> in = {1.0f, t.max, below, -below, t.edge, -t.edge,
                                   std::numeric_limits<float>::max(), inf, -inf, nan};
    for (bool saturate : {false, true}) {
      std::vector<uint16_t> out(in.size());
      zt::NarrowCount c;
      zt::narrow_floats(in, t.to, out, saturate, c);
      EXPECT_EQ(c.overflow, 3u);  // edge, -edge, FLT_MAX; inf in is not an overflow
      EXPECT_EQ(c.nan, 1u);
      EXPECT_EQ(c.largest, std::numeric_limits<float>::max());
      EXPECT_FALSE(c.clean());
      EXPECT_EQ(out[1], t.max_bits);
      EXPECT_EQ(out[2], t.max_bits);
      EXPECT_EQ(out[3], 0x8000 | t.max_bits);
      const uint16_t big = saturate ? t.max_bits : t.inf_bits;
      EXPECT_EQ(out[4], big);
      EXPECT_EQ(out[5], 0x8000 | big);
      EXPECT_EQ(out[6], big);
      EXPECT_EQ(out[7], t.inf_bits);
      EXPECT_EQ(out[8], 0x8000 | t.inf_bits);
      EXPECT_EQ(out[9] & t.inf_bits, t.inf_bits);
      EXPECT_NE(out[9] & ~t.inf_bits & 0x7fff, 0) << "NaN stays NaN";
    }
    const std::string text = zt::narrow_count_text({3, 1, 7e4f}, t.to);
    EXPECT_NE(text.find("3 values beyond"), std::string::npos) << text;
    EXPECT_NE(text.find("1 NaN"), std::string::npos) << text;
    zt::NarrowCount clean;
    std::vector<uint16_t> out(3);
    zt::narrow_floats(std::vector<float>{0.0f, -1.0f, below}, t.to, out, false, clean);
    EXPECT_TRUE(clean.clean());
  }
}

TEST(Narrowing, SafetensorsWriterRefusesUnlessSaturating) {
  const fs::path dir = fs::path(::testing::TempDir()) / "zt_narrow_writer";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const Target& t : kTargets) {
    SCOPED_TRACE(t.name);
    const std::string path = (dir / (std::string(t.name) + ".safetensors")).string();
    for (bool saturate : {false, true}) {
      zt::ckpt::SafetensorsWriter w(path, {{"w.weight", t.st, {2}}}, {}, saturate);
      const std::vector<float> v = {1.0f, t.edge};
      if (!saturate) {
        try {
          w.write(v);
          ADD_FAILURE() << "no refusal";
        } catch (const zt::InputError& e) {
          EXPECT_NE(e.message().find("'w.weight'"), std::string::npos) << e.message();
          EXPECT_NE(e.message().find("1 value beyond"), std::string::npos) << e.message();
          EXPECT_NE(e.hint().find("--saturate"), std::string::npos) << e.hint();
        }
        continue;
      }
      w.write(v);
      w.finish();
      const zt::ckpt::StHeader h = zt::ckpt::read_safetensors_header(path);
      std::vector<float> back;
      zt::ckpt::read_safetensors_tensor(path, h, *h.find("w.weight"), back);
      EXPECT_EQ(back, (std::vector<float>{1.0f, t.max}));
    }
  }
}

TEST(Narrowing, ExportRefusesBeforeWritingAndSaturatesOnRequest) {
  const fs::path dir = fs::path(::testing::TempDir()) / "zt_narrow_export";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const zt::model::Config cfg = {.vocab = 32, .hidden = 16, .layers = 1, .heads = 4,
                                 .kv_heads = 2, .intermediate = 32, .context = 16};
  const zt::model::ParamLayout layout(cfg);
  zt::model::Parameters<float> P(layout);
  P.init({.seed = 3});
  // Two tensors overflow (a checkpoint holds no NaN: the writer and the function above
  // cover it).
  const zt::model::TensorInfo& big = layout.tensors().back();
  const zt::model::TensorInfo& odd = layout.tensors().front();
  for (const Target& t : kTargets) {
    SCOPED_TRACE(t.name);
    P.params(big.unit)[static_cast<size_t>(big.offset)] = -t.edge;
    P.params(big.unit)[static_cast<size_t>(big.offset + 1)] = std::numeric_limits<float>::max();
    P.params(odd.unit)[static_cast<size_t>(odd.offset)] = t.edge;
    const std::string ck = (dir / (std::string(t.name) + ".h5")).string();
    zt::ckpt::write_weights_only(ck, cfg, P);
    const fs::path out = dir / (std::string("hf-") + t.name);
    zt::ckpt::HfExportOptions o;
    o.dtype = t.name;
    try {
      zt::ckpt::export_hf(ck, out.string(), o);
      ADD_FAILURE() << "no refusal";
    } catch (const zt::InputError& e) {
      const std::string m = e.message();
      EXPECT_NE(m.find("2 tensors"), std::string::npos) << m;
      EXPECT_NE(m.find("'" + big.name + "' 2 values beyond"), std::string::npos) << m;
      EXPECT_NE(m.find("'" + odd.name + "' 1 value beyond"), std::string::npos) << m;
    }
    EXPECT_FALSE(fs::exists(out / "config.json")) << "refused before writing";
    o.saturate = true;
    zt::ckpt::export_hf(ck, out.string(), o);
    const zt::ckpt::StHeader h = zt::ckpt::read_safetensors_header((out / "model.safetensors").string());
    std::vector<float> back;
    zt::ckpt::read_safetensors_tensor((out / "model.safetensors").string(), h, *h.find(big.name), back);
    EXPECT_EQ(back[0], -t.max);
    EXPECT_EQ(back[1], t.max);
  }
}

}  // namespace
