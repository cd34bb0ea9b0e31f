// Safetensors header parser, reader and writer; the shard index parser. References are
// written by hand here: header bytes typed as JSON text, expected element bit patterns
// worked out from IEEE-754 (bf16 1.0 = 0x3F80, f16 -2.0 = 0xC000, ...).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "support/expect_error.hpp"
#include "zt/ckpt/hf_convert.hpp"
#include "zt/ckpt/safetensors.hpp"

namespace {

using zt::ckpt::StDType;
using zt::testing::expect_input_error;

// 8-byte little-endian length + header text + `data_bytes` zero bytes.
std::vector<std::byte> file_bytes(const std::string& header, size_t data_bytes,
                                  uint64_t len_override = UINT64_MAX) {
  const uint64_t n = len_override == UINT64_MAX ? header.size() : len_override;
  std::vector<std::byte> out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>((n >> (8 * i)) & 0xff));
  for (char ch : header) out.push_back(static_cast<std::byte>(ch));
  out.resize(out.size() + data_bytes);
  return out;
}

zt::ckpt::StHeader parse(const std::string& header, size_t data_bytes) {
  const std::vector<std::byte> b = file_bytes(header, data_bytes);
  return zt::ckpt::parse_safetensors_header(b, b.size(), "t.safetensors");
}

void expect_refused(const std::string& header, size_t data_bytes,
                    std::initializer_list<std::string> needles) {
  expect_input_error([&] { parse(header, data_bytes); }, needles);
}

TEST(Safetensors, ParsesAValidHeader) {
  // b: BF16 [4] at [0, 8); a: F32 [2, 3] at [8, 32); metadata; padding spaces.
  const std::string h =
      R"({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [8, 32]},)"
      R"( "b": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]},)"
      R"( "__metadata__": {"format": "pt"}}   )";
  const zt::ckpt::StHeader p = parse(h, 32);
  EXPECT_EQ(p.header_len, h.size());
  EXPECT_EQ(p.data_start, 8 + h.size());
  EXPECT_EQ(p.data_size, 32u);
  ASSERT_EQ(p.tensors.size(), 2u);
  EXPECT_EQ(p.tensors[0].name, "b");  // sorted by offset
  EXPECT_EQ(p.tensors[0].dtype, StDType::kBF16);
  EXPECT_EQ(p.tensors[1].name, "a");
  EXPECT_EQ(p.tensors[1].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(p.tensors[1].numel(), 6);
  EXPECT_EQ(p.tensors[1].begin, 8u);
  EXPECT_EQ(p.tensors[1].end, 32u);
  EXPECT_EQ(p.metadata.at("format"), "pt");
  ASSERT_NE(p.find("a"), nullptr);
  EXPECT_EQ(p.find("c"), nullptr);
}

TEST(Safetensors, AcceptsScalarsEmptyTensorsAndAnEmptyFile) {
  const zt::ckpt::StHeader p = parse(
      R"({"s": {"dtype": "F64", "shape": [], "data_offsets": [0, 8]},)"
      R"( "e": {"dtype": "F32", "shape": [0, 5], "data_offsets": [8, 8]}})",
      8);
  EXPECT_EQ(p.tensors.size(), 2u);
  EXPECT_EQ(parse("{}", 0).tensors.size(), 0u);
}

TEST(Safetensors, RefusesBadLengths) {
  const std::string h = R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})";
  std::vector<std::byte> b = file_bytes(h, 4, /*len_override=*/1u << 30);
  expect_input_error([&] { zt::ckpt::parse_safetensors_header(b, b.size(), "t.safetensors"); },
                     {"t.safetensors", "header length", "past the end"});
  b = file_bytes(h, 4, UINT64_MAX - 3);
  expect_input_error([&] { zt::ckpt::parse_safetensors_header(b, b.size(), "t.safetensors"); },
                     {"header length"});
  b.resize(5);
  expect_input_error([&] { zt::ckpt::parse_safetensors_header(b, b.size(), "t.safetensors"); },
                     {"t.safetensors", "8-byte"});
  b = file_bytes(h, 4);
  // The caller gave fewer bytes than the header needs.
  expect_input_error(
      [&] {
        zt::ckpt::parse_safetensors_header(std::span<const std::byte>(b.data(), 20), b.size(),
                                           "t.safetensors");
      },
      {"header bytes"});
}

TEST(Safetensors, RefusesHostileJson) {
  expect_refused(R"({"a": [1, 2)", 0, {"t.safetensors", "not valid JSON"});
  expect_refused(R"([1, 2, 3])", 0, {"not a JSON object"});
  expect_refused("{\"a\xff\": 1}", 0, {"not valid JSON"});  // invalid UTF-8
  const std::string e = R"({"dtype": "F32", "shape": [1], "data_offsets": [0, 4]})";
  expect_refused(R"({"x": )" + e + R"(, "x": )" + e + "}", 4, {"'x'", "twice"});
  expect_refused(R"({"x": {"dtype": "F32", "dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 4,
                 {"'dtype'", "twice"});
  expect_refused(R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "y": 0}})", 4,
                 {"tensor 'x'", "unknown field 'y'"});
  expect_refused(R"({"x": {"shape": [1], "data_offsets": [0, 4]}})", 4, {"tensor 'x'", "'dtype'"});
  expect_refused(R"({"x": 5})", 0, {"tensor 'x'", "not a JSON object"});
  expect_refused(R"({"": )" + e + "}", 4, {"empty name"});
  expect_refused(R"({"__metadata__": {"k": 1}})", 0, {"__metadata__.k"});
  expect_refused(R"({"__metadata__": [1]})", 0, {"__metadata__"});
  std::string deep = R"({"x": {"dtype": "F32", "shape": [)" + std::string(200000, '[') +
                     std::string(200000, ']') + R"(], "data_offsets": [0, 4]}})";
  expect_refused(deep, 4, {"tensor 'x'", "shape"});
}

TEST(Safetensors, RefusesBadDtypesShapesAndOffsets) {
  expect_refused(R"({"x": {"dtype": "F99", "shape": [1], "data_offsets": [0, 4]}})", 4,
                 {"tensor 'x'", "dtype", "F99"});
  expect_refused(R"({"x": {"dtype": 4, "shape": [1], "data_offsets": [0, 4]}})", 4, {"'dtype'"});
  expect_refused(R"({"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4,
                 {"'shape'", "-1"});
  expect_refused(R"({"x": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4, {"'shape'"});
  expect_refused(R"({"x": {"dtype": "F32", "shape": 4, "data_offsets": [0, 4]}})", 4, {"'shape'"});
  // 2^62 * 4 elements overflow; 2^61 F32 elements overflow the byte count.
  expect_refused(R"({"x": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 4]}})",
                 4, {"'shape'", "63 bits"});
  expect_refused(R"({"x": {"dtype": "F32", "shape": [2305843009213693952, 2], "data_offsets": [0, 4]}})",
                 4, {"'shape'"});
  expect_refused(R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4, {"'data_offsets'"});
  expect_refused(R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", 4,
                 {"'data_offsets'", "ends before"});
  expect_refused(R"({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", 4,
                 {"'data_offsets'", "need 8"});
  expect_refused(R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 4,
                 {"tensor 'x'", "past the data buffer"});
  expect_refused(R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                 R"( "y": {"dtype": "F32", "shape": [1], "data_offsets": [2, 6]}})",
                 8, {"tensor 'y'", "overlap"});
  expect_refused(R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                 R"( "y": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                 12, {"tensor 'y'", "gap"});
  expect_refused(R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 9, {"left over"});
}

TEST(Safetensors, WriterBytesMatchHandComputedValues) {
  const std::string dir = ::testing::TempDir() + "/zt_st_writer";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/m.safetensors";
  {
    zt::ckpt::SafetensorsWriter w(path,
                                  {{"w", StDType::kBF16, {2, 2}},
                                   {"h", StDType::kF16, {3}},
                                   {"f", StDType::kF32, {1}}},
                                  {{"format", "pt"}});
    w.write(std::vector<float>{1.0f, -2.5f, 0.0f, 1.00390625f});  // last: halfway -> even (1.0)
    w.write(std::vector<float>{1.0f, -2.0f, 0.5f});
    w.write(std::vector<float>{3.0f});
    w.finish();
  }
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GE(raw.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(raw[static_cast<size_t>(i)]);
  EXPECT_EQ(n % 8, 0u) << "header padded to 8 bytes";
  ASSERT_EQ(raw.size(), 8 + n + 8 + 6 + 4);
  const uint8_t* d = reinterpret_cast<const uint8_t*>(raw.data()) + 8 + n;
  // bf16: 1.0 = 0x3F80, -2.5 = 0xC020, 0 = 0x0000, 1.00390625 ties to even -> 0x3F80.
  // f16: 1.0 = 0x3C00, -2.0 = 0xC000, 0.5 = 0x3800. f32: 3.0 = 0x40400000. Little-endian.
  const uint8_t expect[] = {0x80, 0x3F, 0x20, 0xC0, 0x00, 0x00, 0x80, 0x3F, 0x00, 0x3C,
                            0x00, 0xC0, 0x00, 0x38, 0x00, 0x00, 0x40, 0x40};
  EXPECT_EQ(std::memcmp(d, expect, sizeof expect), 0);
  const std::string header(raw.data() + 8, n);
  EXPECT_NE(header.find(R"("w":{"data_offsets":[0,8],"dtype":"BF16","shape":[2,2]})"), std::string::npos) << header;
  EXPECT_NE(header.find(R"("h":{"data_offsets":[8,14],"dtype":"F16","shape":[3]})"), std::string::npos);
  EXPECT_NE(header.find(R"("f":{"data_offsets":[14,18],"dtype":"F32","shape":[1]})"), std::string::npos);
  EXPECT_NE(header.find(R"("__metadata__":{"format":"pt"})"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(zt::ckpt::SafetensorsWriter::file_size({{"w", StDType::kBF16, {2, 2}},
                                                    {"h", StDType::kF16, {3}},
                                                    {"f", StDType::kF32, {1}}},
                                                   {{"format", "pt"}}),
            raw.size());

  // And the reader gives the values back (bf16/f16 widen exactly).
  const zt::ckpt::StHeader h = zt::ckpt::read_safetensors_header(path);
  std::vector<float> v;
  zt::ckpt::read_safetensors_tensor(path, h, *h.find("w"), v);
  EXPECT_EQ(v, (std::vector<float>{1.0f, -2.5f, 0.0f, 1.0f}));
  zt::ckpt::read_safetensors_tensor(path, h, *h.find("h"), v);
  EXPECT_EQ(v, (std::vector<float>{1.0f, -2.0f, 0.5f}));
  zt::ckpt::read_safetensors_tensor(path, h, *h.find("f"), v);
  EXPECT_EQ(v, (std::vector<float>{3.0f}));
}

TEST(Safetensors, UnfinishedWriterLeavesNoFile) {
  const std::string dir = ::testing::TempDir() + "/zt_st_unfinished";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/m.safetensors";
  {
    zt::ckpt::SafetensorsWriter w(path, {{"w", StDType::kF32, {2}}}, {});
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(Safetensors, ReadingAMissingFileNamesIt) {
  expect_input_error([] { zt::ckpt::read_safetensors_header("/nonexistent/zt/x.safetensors"); },
                     {"/nonexistent/zt/x.safetensors"});
}

TEST(HfIndex, ParsesAndRefusesEscapingShardNames) {
  const zt::ckpt::HfIndex idx = zt::ckpt::parse_hf_index(
      R"({"metadata": {"total_size": 100}, "weight_map": {"a": "model-00001-of-00002.safetensors",)"
      R"( "b": "model-00002-of-00002.safetensors"}})",
      "i.json");
  EXPECT_EQ(idx.total_size, 100u);
  EXPECT_EQ(idx.weight_map.at("b"), "model-00002-of-00002.safetensors");
  for (const char* shard : {"../../x", "/etc/passwd", "a/b", "a\\\\b", "..", ".", "", "x..y"}) {
    const std::string text = std::string(R"({"weight_map": {"t": ")") + shard + R"("}})";
    expect_input_error([&] { zt::ckpt::parse_hf_index(text, "i.json"); },
                       {"i.json", "weight_map.t"});
  }
  expect_input_error([] { zt::ckpt::parse_hf_index(R"({"weight_map": {"t": "a\u0000b"}})", "i.json"); },
                     {"weight_map.t"});
  expect_input_error([] { zt::ckpt::parse_hf_index(R"({"weight_map": {"t": 3}})", "i.json"); },
                     {"weight_map.t"});
  expect_input_error([] { zt::ckpt::parse_hf_index(R"({"metadata": {}})", "i.json"); },
                     {"i.json", "weight_map"});
  expect_input_error([] { zt::ckpt::parse_hf_index(R"({"weight_map": {"t": "a", "t": "b"}})", "i.json"); },
                     {"'t'", "twice"});
  expect_input_error(
      [] { zt::ckpt::parse_hf_index(R"({"metadata": {"total_size": -1}, "weight_map": {"t": "a"}})", "i.json"); },
      {"total_size"});
  EXPECT_EQ(zt::ckpt::hf_shard_name(3, 12), "model-00003-of-00012.safetensors");
}

}  // namespace
