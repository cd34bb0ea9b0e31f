// Token files: round trips checked with the raw HDF5 C API (independent of our reader
// and writer), bad files, text conversion, the byte tokenizer, the corpus cache name.
#include <gtest/gtest.h>

#include "support/expect_error.hpp"
#include "support/temp_dir.hpp"
#include <hdf5.h>
#include <xxhash.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "zt/core/error.hpp"
#include "zt/data/corpus.hpp"
#include "zt/data/text.hpp"
#include "zt/data/token_file.hpp"
#include "zt/data/tokenizer.hpp"

namespace fs = std::filesystem;
using zt::data::TokenFile;

namespace {

using zt::testing::temp_dir;

std::string write_text(const std::string& name, const std::string& text) {
  const fs::path p = temp_dir() / name;
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

using zt::testing::expect_input_error;

// Raw HDF5: the root attributes of a token file, each optional: vocab_size (uint32) and
// tokenizer "bytes" (a fixed-length string, as other tools may write it).
void raw_write_attrs(hid_t f, bool with_vocab, uint32_t vocab, bool with_tokenizer) {
  hid_t scalar = H5Screate(H5S_SCALAR);
  if (with_vocab) {
    hid_t a = H5Acreate2(f, "vocab_size", H5T_STD_U32LE, scalar, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_UINT32, &vocab);
    H5Aclose(a);
  }
  if (with_tokenizer) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, 5);
    hid_t a = H5Acreate2(f, "tokenizer", t, scalar, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, t, "bytes");
    H5Aclose(a);
    H5Tclose(t);
  }
  H5Sclose(scalar);
}

// Raw HDF5: a file with /tokens of the given file type, written from uint32 values, and
// optional vocab_size/tokenizer attributes. The reference writer for reader tests.
void raw_write(const std::string& path, const std::vector<uint32_t>& tokens, hid_t file_type,
               bool with_vocab, uint32_t vocab, bool with_tokenizer, hid_t mem_type = H5T_NATIVE_UINT32) {
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  const hsize_t n = tokens.size();
  hid_t s = H5Screate_simple(1, &n, nullptr);
  hid_t d = H5Dcreate2(f, "tokens", file_type, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(d, 0);
  if (n > 0) {
    ASSERT_GE(H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, tokens.data()), 0);
  }
  H5Dclose(d);
  H5Sclose(s);
  raw_write_attrs(f, with_vocab, vocab, with_tokenizer);
  H5Fclose(f);
}

// Raw HDF5: /tokens declaring `declared` uint16 elements with creation list `dcpl`;
// the first written.size() elements are written, the rest never are.
void raw_write_declared(const std::string& path, hsize_t declared, hid_t dcpl,
                        const std::vector<uint32_t>& written) {
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t s = H5Screate_simple(1, &declared, nullptr);
  hid_t d = H5Dcreate2(f, "tokens", H5T_STD_U16LE, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  ASSERT_GE(d, 0);
  if (!written.empty()) {
    const hsize_t start = 0, count = written.size();
    hid_t mem = H5Screate_simple(1, &count, nullptr);
    ASSERT_GE(H5Sselect_hyperslab(s, H5S_SELECT_SET, &start, nullptr, &count, nullptr), 0);
    ASSERT_GE(H5Dwrite(d, H5T_NATIVE_UINT32, mem, s, H5P_DEFAULT, written.data()), 0);
    H5Sclose(mem);
  }
  raw_write_attrs(f, true, 256, true);
  H5Dclose(d);
  H5Sclose(s);
  H5Fclose(f);
}

hid_t chunked(hsize_t chunk) {
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 1, &chunk);
  return dcpl;
}

}  // namespace

TEST(ByteTokenizer, RoundTripsEveryByte) {
  std::string all(256, '\0');
  for (int i = 0; i < 256; ++i) all[static_cast<size_t>(i)] = static_cast<char>(i);
  const std::vector<uint32_t> ids = zt::data::ByteTokenizer::encode(all);
  ASSERT_EQ(ids.size(), 256u);
  for (uint32_t i = 0; i < 256; ++i) EXPECT_EQ(ids[i], i);
  EXPECT_EQ(zt::data::ByteTokenizer::decode(std::span<const uint32_t>(ids)), all);
  EXPECT_EQ(zt::data::ByteTokenizer::encode("Hé")[1], 0xC3u);  // UTF-8 bytes
  const std::vector<int32_t> bad = {65, 256};
  expect_input_error([&] { zt::data::ByteTokenizer::decode(std::span<const int32_t>(bad)); },
                     {"256", "position 1"});
}

TEST(TokenFile, WrittenFileReadsBackWithRawHdf5) {
  TokenFile f;
  f.vocab_size = 300;
  f.tokenizer = "test";
  f.tokens.resize(1000);
  for (size_t i = 0; i < f.tokens.size(); ++i) f.tokens[i] = static_cast<uint32_t>((i * 7) % 300);
  f.doc_starts = {0, 10, 500};
  const std::string path = (temp_dir() / "rt.h5").string();
  zt::data::write_token_file(path, f);
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  // The reference: HDF5's own API, not our reader.
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  hid_t d = H5Dopen2(file, "tokens", H5P_DEFAULT);
  hid_t t = H5Dget_type(d);
  EXPECT_TRUE(H5Tequal(t, H5T_STD_U16LE) > 0) << "vocab <= 65536 must be stored as uint16";
  std::vector<uint16_t> raw(1000);
  ASSERT_GE(H5Dread(d, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.data()), 0);
  for (size_t i = 0; i < raw.size(); ++i) ASSERT_EQ(raw[i], (i * 7) % 300) << i;
  H5Tclose(t);
  H5Dclose(d);
  uint32_t vocab = 0;
  hid_t a = H5Aopen(file, "vocab_size", H5P_DEFAULT);
  H5Aread(a, H5T_NATIVE_UINT32, &vocab);
  H5Aclose(a);
  EXPECT_EQ(vocab, 300u);
  uint64_t num_docs = 0;
  a = H5Aopen(file, "num_docs", H5P_DEFAULT);
  H5Aread(a, H5T_NATIVE_UINT64, &num_docs);
  H5Aclose(a);
  EXPECT_EQ(num_docs, 3u);
  std::vector<uint64_t> starts(3);
  d = H5Dopen2(file, "doc_starts", H5P_DEFAULT);
  H5Dread(d, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, starts.data());
  H5Dclose(d);
  EXPECT_EQ(starts, (std::vector<uint64_t>{0, 10, 500}));
  H5Fclose(file);

  // And our reader gives back what was written.
  const TokenFile back = zt::data::read_token_file(path);
  EXPECT_EQ(back.tokens, f.tokens);
  EXPECT_EQ(back.vocab_size, 300u);
  EXPECT_EQ(back.tokenizer, "test");
  EXPECT_EQ(back.doc_starts, f.doc_starts);
}

TEST(TokenFile, LargeVocabIsUint32) {
  TokenFile f;
  f.vocab_size = 100000;
  f.tokenizer = "big";
  f.tokens = {0, 99999, 70000};
  const std::string path = (temp_dir() / "big.h5").string();
  zt::data::write_token_file(path, f);
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(file, "tokens", H5P_DEFAULT);
  hid_t t = H5Dget_type(d);
  EXPECT_TRUE(H5Tequal(t, H5T_STD_U32LE) > 0);
  H5Tclose(t);
  H5Dclose(d);
  H5Fclose(file);
  EXPECT_EQ(zt::data::read_token_file(path).tokens, f.tokens);
}

TEST(TokenFile, ReadsFileWrittenByRawHdf5) {
  const std::string path = (temp_dir() / "raw.h5").string();
  raw_write(path, {1, 2, 3, 255}, H5T_STD_U16LE, true, 256, true);
  const TokenFile f = zt::data::read_token_file(path);
  EXPECT_EQ(f.tokens, (std::vector<uint32_t>{1, 2, 3, 255}));
  EXPECT_EQ(f.tokenizer, "bytes");  // fixed-length string attribute
  EXPECT_TRUE(f.doc_starts.empty());
}

TEST(TokenFile, BadFilesAreInputErrorsNamingTheFile) {
  const fs::path dir = temp_dir();
  const std::string over = (dir / "over.h5").string();
  raw_write(over, {1, 2, 256, 3}, H5T_STD_U16LE, true, 256, true);
  expect_input_error([&] { zt::data::read_token_file(over); },
                     {over, "token id 256 at position 2", ">= vocab_size 256"});

  expect_input_error([&] { zt::data::read_token_file((dir / "missing.h5").string()); },
                     {"missing.h5", "not found"});

  const std::string text = write_text("not.h5", "hello");
  expect_input_error([&] { zt::data::read_token_file(text); }, {"not.h5", "not an HDF5 file"});

  const std::string empty = (dir / "empty.h5").string();
  raw_write(empty, {}, H5T_STD_U16LE, true, 256, true);
  expect_input_error([&] { zt::data::read_token_file(empty); }, {"empty.h5", "no tokens"});

  // /tokens a group, not a dataset: said so, not H5Dopen2's text (issue 20).
  const std::string group = (dir / "group.h5").string();
  {
    const hid_t f = H5Fcreate(group.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    const hid_t g = H5Gcreate2(f, "tokens", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(g, 0);
    ASSERT_GE(H5Gclose(g), 0);
    ASSERT_GE(H5Fclose(f), 0);
  }
  expect_input_error([&] { zt::data::read_token_file(group); },
                     {"group.h5", "/tokens is a group, not a dataset"});
  // Not a regular file: a directory, a character device (read until memory runs out).
  expect_input_error([&] { zt::data::read_token_file(dir.string()); }, {"is a directory"});
  expect_input_error([&] { zt::data::read_token_file("/dev/zero"); },
                     {"'/dev/zero' is a character device"});

  const std::string novocab = (dir / "novocab.h5").string();
  raw_write(novocab, {1}, H5T_STD_U16LE, false, 0, true);
  expect_input_error([&] { zt::data::read_token_file(novocab); }, {"novocab.h5", "vocab_size"});

  const std::string floats = (dir / "float.h5").string();
  raw_write(floats, {1, 2}, H5T_IEEE_F32LE, true, 256, true);
  expect_input_error([&] { zt::data::read_token_file(floats); }, {"float.h5", "unsigned"});

  hid_t f = H5Fcreate((dir / "notokens.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  H5Fclose(f);
  expect_input_error([&] { zt::data::read_token_file((dir / "notokens.h5").string()); },
                     {"notokens.h5", "no /tokens"});
}

TEST(TokenFile, WriterRefusesBadContentsAndReplacesAtomically) {
  const std::string path = (temp_dir() / "w.h5").string();
  TokenFile f;
  f.vocab_size = 256;
  f.tokenizer = "bytes";
  expect_input_error([&] { zt::data::write_token_file(path, f); }, {"no tokens"});
  f.tokens = {1, 300};
  expect_input_error([&] { zt::data::write_token_file(path, f); }, {"token id 300"});
  EXPECT_FALSE(fs::exists(path));
  f.tokens = {1, 2};
  zt::data::write_token_file(path, f);
  f.tokens = {3, 4, 5};
  zt::data::write_token_file(path, f);  // replaces the old file
  EXPECT_EQ(zt::data::read_token_file(path).tokens, (std::vector<uint32_t>{3, 4, 5}));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  // A destination in a missing folder: exit 2 naming the file and its folder, before
  // HDF5 is asked (issue 20: no H5Fcreate text).
  expect_input_error([&] { zt::data::write_token_file("/nonexistent-dir/x.h5", f); },
                     {"'/nonexistent-dir/x.h5' = '/nonexistent-dir'", "it does not exist"});
  // An unwritable destination is an error naming the intermediate file.
  try {
    zt::data::write_token_file("/proc/x.h5", f);
    FAIL();
  } catch (const zt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/proc/x.h5.tmp"), std::string::npos) << e.what();
  }
}

TEST(TextToTokens, FilesBecomeDocuments) {
  const std::string a = write_text("a.txt", "ROMEO:\n");
  const std::string b = write_text("b.txt", "JULIET");
  const std::string out = (temp_dir() / "ab.h5").string();
  const TokenFile f = zt::data::convert_text_to_tokens({a, b}, out);
  const TokenFile back = zt::data::read_token_file(out);
  EXPECT_EQ(back.tokens.size(), 13u);
  EXPECT_EQ(back.tokens[0], static_cast<uint32_t>('R'));
  EXPECT_EQ(back.tokens[7], static_cast<uint32_t>('J'));
  EXPECT_EQ(back.doc_starts, (std::vector<uint64_t>{0, 7}));
  EXPECT_EQ(back.vocab_size, 256u);
  EXPECT_EQ(back.tokenizer, "bytes");

  const std::string empty = write_text("empty.txt", "");
  expect_input_error([&] { zt::data::convert_text_to_tokens({empty}, out); },
                     {"empty.txt", "empty"});
  expect_input_error([&] { zt::data::convert_text_to_tokens({"/nonexistent/in.txt"}, out); },
                     {"/nonexistent/in.txt", "not found"});
}

TEST(Corpus, ShippedCorpusFoundAndCacheNameFollowsContent) {
  const std::string corpus = zt::data::find_shipped_corpus();
  EXPECT_TRUE(fs::is_regular_file(corpus)) << corpus;
  ::setenv("XDG_CACHE_HOME", temp_dir().c_str(), 1);
  EXPECT_EQ(zt::data::cache_dir(), (temp_dir() / "zt").string());
  const std::string a = write_text("c1.txt", "abc");
  const std::string p1 = zt::data::cached_tokens_path(a);
  write_text("c1.txt", "abd");
  const std::string p2 = zt::data::cached_tokens_path(a);
  EXPECT_NE(p1, p2);
  EXPECT_EQ(fs::path(p1).parent_path(), temp_dir() / "zt");
  // FNV-1a 64 of "abc", computed independently: e71fa2190541574b.
  EXPECT_EQ(fs::path(p1).filename().string(), "c1-bytes-e71fa2190541574b.h5");
}

// A file of a few kilobytes that declares gigabytes of never-written tokens (HDF5 would
// read them back as fill value) is refused before anything is allocated for them: the
// fuzzer's out-of-memory finding. So are tokens kept in another file.
TEST(TokenFile, DeclaredButUnstoredTokensAreRefused) {
  const fs::path dir = temp_dir();
  const std::string none = (dir / "declared.h5").string();
  hid_t dcpl = chunked(1 << 20);
  raw_write_declared(none, 1000000000ULL, dcpl, {});
  EXPECT_LT(fs::file_size(none), 64u * 1024);
  expect_input_error([&] { zt::data::read_token_file(none); },
                     {"declared.h5", "/tokens", "declares 2000000000 bytes", "holds none"});

  const std::string part = (dir / "part.h5").string();
  raw_write_declared(part, 1000000000ULL, dcpl, std::vector<uint32_t>(100, 7));
  expect_input_error([&] { zt::data::read_token_file(part); },
                     {"part.h5", "/tokens", "holds only 2097152"});
  H5Pclose(dcpl);

  // Contiguous, allocated late and never written.
  dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_LATE);
  const std::string late = (dir / "late.h5").string();
  raw_write_declared(late, 500000000ULL, dcpl, {});
  expect_input_error([&] { zt::data::read_token_file(late); }, {"late.h5", "holds none"});
  H5Pclose(dcpl);

  // Raw data in an external file, here one holding exactly the declared bytes.
  const std::string outside = write_text("outside.bin", std::string(8, '\x01'));
  dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_external(dcpl, outside.c_str(), 0, 8);
  const std::string external = (dir / "external.h5").string();
  raw_write_declared(external, 4, dcpl, {});
  expect_input_error([&] { zt::data::read_token_file(external); },
                     {"external.h5", "/tokens", "external files"});
  H5Pclose(dcpl);
}

// Compressed tokens with every chunk written are read as written: the check does not
// compare compressed bytes with declared ones.
TEST(TokenFile, CompressedTokensWithEveryChunkWrittenAreRead) {
  if (H5Zfilter_avail(H5Z_FILTER_DEFLATE) <= 0) GTEST_SKIP() << "this HDF5 has no deflate filter";
  std::vector<uint32_t> tokens(50000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint32_t>(i % 7);
  hid_t dcpl = chunked(4096);
  H5Pset_deflate(dcpl, 9);
  const std::string path = (temp_dir() / "deflate.h5").string();
  raw_write_declared(path, tokens.size(), dcpl, tokens);
  H5Pclose(dcpl);
  EXPECT_LT(fs::file_size(path), tokens.size());  // smaller than its 100,000 bytes of ids
  EXPECT_EQ(zt::data::read_token_file(path).tokens, tokens);

  // One compressed chunk written of the 244,141 that a billion tokens declare.
  dcpl = chunked(4096);
  H5Pset_deflate(dcpl, 9);
  const std::string bomb = (temp_dir() / "deflate-declared.h5").string();
  raw_write_declared(bomb, 1000000000ULL, dcpl, std::vector<uint32_t>(4096, 3));
  H5Pclose(dcpl);
  expect_input_error([&] { zt::data::read_token_file(bomb); },
                     {"deflate-declared.h5", "in 244141 chunks", "holds only 1 of them"});
}

// Attributes are read only when they hold one value of the right class: an array where
// one number is expected would otherwise be written past the number by H5Aread.
TEST(TokenFile, AttributesMustHoldOneValue) {
  const std::string path = (temp_dir() / "array-attr.h5").string();
  raw_write(path, {1, 2}, H5T_STD_U16LE, false, 0, true);
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  const hsize_t three = 3;
  hid_t space = H5Screate_simple(1, &three, nullptr);
  hid_t a = H5Acreate2(f, "vocab_size", H5T_STD_U32LE, space, H5P_DEFAULT, H5P_DEFAULT);
  const uint32_t values[3] = {256, 256, 256};
  H5Awrite(a, H5T_NATIVE_UINT32, values);
  H5Aclose(a);
  H5Sclose(space);
  H5Fclose(f);
  expect_input_error([&] { zt::data::read_token_file(path); },
                     {"array-attr.h5", "attribute 'vocab_size' must hold a single value"});

  const std::string text = (temp_dir() / "text-vocab.h5").string();
  raw_write(text, {1, 2}, H5T_STD_U16LE, false, 0, true);
  f = H5Fopen(text.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t scalar = H5Screate(H5S_SCALAR);
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, 3);
  a = H5Acreate2(f, "vocab_size", t, scalar, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, t, "256");
  H5Aclose(a);
  H5Tclose(t);
  H5Sclose(scalar);
  H5Fclose(f);
  expect_input_error([&] { zt::data::read_token_file(text); },
                     {"text-vocab.h5", "attribute 'vocab_size' must be an integer"});
}

namespace {

// Raw HDF5: dataset `name` of `path` read (or rewritten) as `type`'s little-endian bytes.
std::vector<unsigned char> raw_bytes(hid_t f, const char* name, uint64_t* checksum) {
  hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  hid_t t = H5Dget_type(d);
  hid_t s = H5Dget_space(d);
  std::vector<unsigned char> out(static_cast<size_t>(H5Sget_simple_extent_npoints(s)) * H5Tget_size(t));
  EXPECT_GE(H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), 0);
  hid_t a = H5Aopen(d, "checksum", H5P_DEFAULT);
  EXPECT_GE(a, 0);
  if (a >= 0) {
    H5Aread(a, H5T_NATIVE_UINT64, checksum);
    H5Aclose(a);
  }
  H5Sclose(s);
  H5Tclose(t);
  H5Dclose(d);
  return out;
}

}  // namespace

// Every dataset of a token file zt writes carries the checkpoints' checksum (zt-xxh3 of
// its stored bytes, recomputed here with libxxhash over 256 KiB chunks seeded by their
// index), and a read refuses any changed byte, naming the file and the dataset.
TEST(TokenFile, EveryDatasetIsChecksummedAndVerified) {
  for (const uint32_t vocab : {257u, 70000u}) {  // /tokens as uint16, then uint32
    TokenFile t;
    t.vocab_size = vocab;
    t.tokenizer = "bytes";
    t.row_len = 4;
    t.tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    t.loss_mask = {0, 1, 1, 0, 0, 1, 1, 1, 0, 0, 1, 0};
    t.doc_starts = {0, 4, 8};
    for (const char* name : {"tokens", "loss_mask", "doc_starts"}) {
      const std::string path = (temp_dir() / (std::string("sum-") + name + ".h5")).string();
      zt::data::write_token_file(path, t);
      EXPECT_EQ(zt::data::read_token_file(path).tokens, t.tokens);
      hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
      ASSERT_GE(f, 0);
      uint64_t stored = 0;
      std::vector<unsigned char> bytes = raw_bytes(f, name, &stored);
      EXPECT_EQ(stored, XXH3_64bits_withSeed(bytes.data(), bytes.size(), 0)) << name;
      bytes[bytes.size() - 1] ^= 1;  // one bit of the last element (ids stay < vocab)
      hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
      hid_t type = H5Dget_type(d);
      ASSERT_GE(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()), 0);
      H5Tclose(type);
      H5Dclose(d);
      H5Fclose(f);
      expect_input_error([&] { zt::data::read_token_file(path); },
                         {path, std::string("dataset '/") + name + "'", "fails its checksum"});
    }
  }
}
