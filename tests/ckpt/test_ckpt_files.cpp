// Checkpoint files without MPI: the serial writer and reader round trip; the stored
// checksums against zt-xxh3's definition (XXH3 of each 256 KiB chunk, straight from
// libxxhash) over the tensors read with plain HDF5 calls (an independent reader); a
// format_version 1 file (zt-sum64) still loads and is still checked; refusals (a flipped byte in a tensor, a truncated file, another model shape, a
// missing file, a .tmp file, a weights-only file to resume) each naming the file or the
// dataset; publishing: `latest`, ckpt.keep, stale .tmp files, symlinks never followed.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "h5_peek.hpp"
#include "support/expect_error.hpp"
#include "zt/ckpt/io.hpp"
#include "zt/ckpt/publish.hpp"
#include "zt/ckpt/serial.hpp"
#include "zt/core/checksum.hpp"
#include "zt/model/layout.hpp"

namespace {

namespace fs = std::filesystem;
using zt::testing::expect_input_error;
using namespace zt::ckpt::testing;

// tiny cut down (unnamed fields: Config's defaults, which are tiny's).
zt::model::Config small() {
  return {.name = "tiny", .hidden = 32, .layers = 2, .heads = 4, .kv_heads = 2,
          .intermediate = 48, .context = 16};
}

std::vector<std::vector<float>> random_units(const zt::model::Config& cfg, uint32_t seed) {
  const zt::model::ParamLayout layout(cfg);
  std::mt19937 gen(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<std::vector<float>> units;
  for (int u = 0; u < layout.num_units(); ++u) {
    units.emplace_back(static_cast<size_t>(layout.unit(u).numel));
    for (float& x : units.back()) x = n(gen);
  }
  return units;
}

std::string dir_for(const std::string& name) {
  const fs::path d = fs::current_path() / ("files_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

TEST(CkptFiles, WeightsOnlyRoundTripAndChecksums) {
  const zt::model::Config cfg = small();
  const auto units = random_units(cfg, 7);
  const std::string path = dir_for("roundtrip") + "/w.h5";
  zt::ckpt::write_weights_only(path, cfg, units, {"bf16"});
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  const zt::ckpt::FullCheckpoint f = zt::ckpt::read_full(path);
  EXPECT_EQ(f.header.contents, "weights");
  EXPECT_EQ(f.header.source_dtype, "bf16");
  EXPECT_EQ(f.header.config.hidden, 32);
  EXPECT_EQ(f.header.format_version, 2u);
  EXPECT_FALSE(f.state.has_value());
  EXPECT_TRUE(f.exp_avg.empty());
  ASSERT_EQ(f.params.size(), units.size());
  for (size_t u = 0; u < units.size(); ++u) EXPECT_EQ(f.params[u], units[u]) << "unit " << u;
  // Every tensor through plain HDF5: global shape's values at the layout's offsets, and
  // the checksum attribute equals zt-xxh3 of them.
  const zt::model::ParamLayout layout(cfg);
  for (const auto& t : layout.tensors()) {
    uint64_t stored = 0;
    const std::vector<float> v = h5_read(path, "/params/" + t.name, &stored);
    const std::vector<float> expect(units[static_cast<size_t>(t.unit)].begin() + t.offset,
                                    units[static_cast<size_t>(t.unit)].begin() + t.offset + t.numel);
    EXPECT_EQ(v, expect) << t.name;
    EXPECT_EQ(stored, xxh3_definition(std::as_bytes(std::span<const float>(expect)))) << t.name;
  }
}

// Plain HDF5: sets the root attribute format_version to 1 and every tensor's checksum to
// zt-sum64 of its contents, /state/rng's to zt-sum64 of its uint64s: a file as zt wrote
// format version 1.
void rewrite_as_version_1(const std::string& path, const zt::model::ParamLayout& layout, bool training) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  const uint32_t one = 1;
  const hid_t v = H5Aopen(f, "format_version", H5P_DEFAULT);
  ASSERT_GE(H5Awrite(v, H5T_NATIVE_UINT32, &one), 0);
  H5Aclose(v);
  // Dataset `name`'s contents as T (H5 type `type`), and its checksum set to sum(them).
  const auto resum = [&]<typename T>(const std::string& name, hid_t type, auto sum) {
    const hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
    ASSERT_GE(d, 0) << name;
    const hid_t space = H5Dget_space(d);
    std::vector<T> x(static_cast<size_t>(H5Sget_simple_extent_npoints(space)));
    H5Sclose(space);
    ASSERT_GE(H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, x.data()), 0) << name;
    const uint64_t value = sum(std::span<const T>(x));
    const hid_t a = H5Aopen(d, "checksum", H5P_DEFAULT);
    ASSERT_GE(H5Awrite(a, H5T_NATIVE_UINT64, &value), 0) << name;
    H5Aclose(a);
    H5Dclose(d);
  };
  std::vector<std::string> groups = {"/params/"};
  if (training) groups.insert(groups.end(), {"/optim/exp_avg/", "/optim/exp_avg_sq/"});
  for (const std::string& g : groups)
    for (const auto& t : layout.tensors())
      resum.template operator()<float>(g + t.name, H5T_NATIVE_FLOAT,
                                       [](std::span<const float> x) { return zt::sum64(x); });
  if (training)
    resum.template operator()<uint64_t>("/state/rng", H5T_NATIVE_UINT64,
                                        [](std::span<const uint64_t> x) { return zt::ckpt::sum64_u64(x); });
  H5Fclose(f);
}

// Files of format_version 1 (zt-sum64 checksums) still load, training state included, and
// their checksums are still checked: a flipped byte is refused by name.
TEST(CkptFiles, Version1FilesStillLoadAndAreChecked) {
  const zt::model::Config cfg = small();
  const zt::model::ParamLayout layout(cfg);
  const auto params = random_units(cfg, 31), m = random_units(cfg, 32), v = random_units(cfg, 33);
  zt::ckpt::WriteContents c;
  c.header.config = cfg;
  c.header.contents = zt::ckpt::kContentsTraining;
  c.state = zt::ckpt::TrainState{};
  c.state->step = 9;
  c.rng_seed = 1234;
  for (int u = 0; u < layout.num_units(); ++u) {
    const size_t i = static_cast<size_t>(u);
    c.units.push_back({0, layout.unit(u).numel, params[i], m[i], v[i]});
  }
  const std::string dir = dir_for("version1");
  const std::string path = dir + "/v1.h5";
  zt::ckpt::write_file(MPI_COMM_NULL, path, c);
  rewrite_as_version_1(path, layout, /*training=*/true);
  const zt::ckpt::FullCheckpoint f = zt::ckpt::read_full(path);
  EXPECT_EQ(f.header.format_version, 1u);
  ASSERT_TRUE(f.state.has_value());
  EXPECT_EQ(f.state->step, 9);
  EXPECT_EQ(f.state->rng, std::vector<uint64_t>{1234});
  EXPECT_EQ(f.params, params);
  EXPECT_EQ(f.exp_avg, m);
  EXPECT_EQ(f.exp_avg_sq, v);

  // The same file with one byte of a moment flipped: zt-sum64 catches it.
  const std::string victim = "/optim/exp_avg_sq/" + layout.tensors()[2].name;
  const haddr_t off = h5_offset(path, victim);
  ASSERT_NE(off, HADDR_UNDEF);
  flip_byte(path, off + 13, 0x01);
  expect_input_error([&] { zt::ckpt::read_full(path); }, {path, victim, "fails its checksum"});
}

TEST(CkptFiles, RefusesDamagedOrForeignFiles) {
  const zt::model::Config cfg = small();
  const std::string dir = dir_for("refuse");
  const std::string good = dir + "/good.h5";
  zt::ckpt::write_weights_only(good, cfg, random_units(cfg, 1));

  // A flipped byte inside one tensor: the checksum names the dataset.
  const std::string flipped = dir + "/flipped.h5";
  fs::copy_file(good, flipped);
  const std::string victim = "/params/model.layers.1.mlp.up_proj.weight";
  const haddr_t off = h5_offset(flipped, victim);
  ASSERT_NE(off, HADDR_UNDEF);
  flip_byte(flipped, off + 101, 0x10);
  expect_input_error([&] { zt::ckpt::read_full(flipped); },
                     {flipped, victim, "fails its checksum", "damaged"});

  // A truncated file (half of it).
  const std::string truncated = dir + "/truncated.h5";
  fs::copy_file(good, truncated);
  fs::resize_file(truncated, fs::file_size(good) / 2);
  expect_input_error([&] { zt::ckpt::read_full(truncated); }, {truncated});

  // Another model shape.
  zt::model::Config other = cfg;
  other.hidden = 64;
  const zt::model::ParamLayout layout(other);
  std::vector<std::vector<float>> bufs;
  std::vector<zt::ckpt::UnitTarget> targets;
  for (int u = 0; u < layout.num_units(); ++u) bufs.emplace_back(static_cast<size_t>(layout.unit(u).numel));
  for (int u = 0; u < layout.num_units(); ++u)
    targets.push_back({0, layout.unit(u).numel, bufs[static_cast<size_t>(u)], {}, {}});
  expect_input_error([&] {
    zt::ckpt::read_file(MPI_COMM_NULL, good, other, targets, zt::ckpt::ReadWhat::kParams);
  }, {good, "another shape", "model.hidden is 32 in the checkpoint and 64 in this run"});

  // A missing file, a .tmp, a text file, a weights-only file to resume.
  expect_input_error([&] { zt::ckpt::read_full(dir + "/nope.h5"); }, {dir + "/nope.h5", "does not exist"});
  fs::copy_file(good, good + ".tmp");
  expect_input_error([&] { zt::ckpt::read_full(good + ".tmp"); }, {good + ".tmp", "never loaded"});
  std::ofstream(dir + "/text.h5") << "not hdf5\n";
  expect_input_error([&] { zt::ckpt::read_full(dir + "/text.h5"); }, {dir + "/text.h5", "not an HDF5 file"});
  const zt::model::ParamLayout same(cfg);
  std::vector<std::vector<float>> p, m, v;
  std::vector<zt::ckpt::UnitTarget> full;
  for (int u = 0; u < same.num_units(); ++u) {
    const size_t n = static_cast<size_t>(same.unit(u).numel);
    p.emplace_back(n);
    m.emplace_back(n);
    v.emplace_back(n);
  }
  for (size_t u = 0; u < p.size(); ++u) full.push_back({0, static_cast<int64_t>(p[u].size()), p[u], m[u], v[u]});
  expect_input_error([&] {
    zt::ckpt::read_file(MPI_COMM_NULL, good, cfg, full, zt::ckpt::ReadWhat::kTraining);
  }, {good, "weights only", "ckpt.init_from"});
}

TEST(CkptFiles, PublishLatestKeepAndSymlinks) {
  const zt::model::Config cfg = small();
  const std::string dir = dir_for("publish");
  const auto units = random_units(cfg, 3);
  zt::ckpt::WriteContents c;
  c.header.config = cfg;
  c.header.contents = "weights";
  for (const auto& u : units) c.units.push_back({0, static_cast<int64_t>(u.size()), u, {}, {}});

  EXPECT_EQ(zt::ckpt::read_latest(dir), "");  // none yet
  // A stale .tmp of an older step (a crashed save) and a symlink where step 30's .tmp goes.
  std::ofstream(dir + "/step-5.h5.tmp") << "partial";
  const std::string target = dir + "/../publish_target.txt";
  std::ofstream(target) << "must survive";
  fs::create_symlink(target, dir + "/step-30.h5" + zt::staging_suffix());
  for (const int64_t step : {10, 20, 30}) {
    zt::ckpt::Staging tmp = zt::ckpt::begin_publish(MPI_COMM_NULL, dir, step);
    EXPECT_EQ(tmp.path, dir + "/step-" + std::to_string(step) + ".h5" + zt::staging_suffix());
    EXPECT_FALSE(fs::is_symlink(tmp.path));
    zt::ckpt::write_file(MPI_COMM_NULL, tmp.path, c);
    const std::string final_path = zt::ckpt::finish_publish(MPI_COMM_NULL, dir, step, 2, tmp);
    EXPECT_EQ(zt::ckpt::read_latest(dir), final_path);
  }
  EXPECT_FALSE(fs::exists(dir + "/step-10.h5"));  // keep = 2
  EXPECT_TRUE(fs::exists(dir + "/step-20.h5"));
  EXPECT_TRUE(fs::exists(dir + "/step-30.h5"));
  EXPECT_FALSE(fs::exists(dir + "/step-5.h5.tmp"));
  for (const auto& e : fs::directory_iterator(dir))  // no staging file of any name is left
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  std::string line;
  std::getline(std::ifstream(dir + "/latest") >> std::ws, line);
  EXPECT_EQ(line, "step-30.h5");
  std::string survived;
  std::getline(std::ifstream(target), survived);
  EXPECT_EQ(survived, "must survive");
  EXPECT_EQ(zt::ckpt::read_full(dir + "/step-30.h5").params, units);

  // `latest` naming something else is refused, naming it.
  std::ofstream(dir + "/latest") << "../../etc/passwd\n";
  expect_input_error([&] { zt::ckpt::read_latest(dir); }, {dir + "/latest", "does not name a checkpoint"});
  // ckpt.dir that is a file: a zt::Error naming it.
  std::ofstream(dir + "/afile") << "x";
  try {
    zt::ckpt::begin_publish(MPI_COMM_NULL, dir + "/afile", 40);
    FAIL() << "no error";
  } catch (const zt::Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/afile"), std::string::npos) << e.what();
  }
}

}  // namespace

namespace {

// A checkpoint holding a NaN or Inf parameter is never written (issue 20): the writer
// refuses before creating the file, naming the tensors and how many elements.
TEST(CkptFiles, NonFiniteTensorsAreNeverWritten) {
  const zt::model::Config cfg = small();
  auto units = random_units(cfg, 11);
  const zt::model::ParamLayout layout(cfg);
  const zt::model::TensorInfo& t = layout.tensors()[1];  // in unit 1
  units[static_cast<size_t>(t.unit)][static_cast<size_t>(t.offset)] = std::nanf("");
  units[static_cast<size_t>(t.unit)][static_cast<size_t>(t.offset + 1)] = INFINITY;
  const std::string path = dir_for("nonfinite") + "/w.h5";
  try {
    zt::ckpt::write_weights_only(path, cfg, units, {"bf16"});
    FAIL() << "no error";
  } catch (const zt::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("NaN or Inf"), std::string::npos) << what;
    EXPECT_NE(what.find("/params/" + t.name + "' (2 of"), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

// ckpt.dir is checked before training: a file, a folder under a file are exit 2 naming
// ckpt.dir and the path; a missing folder under a writable one passes (nothing made).
TEST(CkptFiles, PreflightDirRefusesUnusableFolders) {
  const std::string dir = dir_for("preflight");
  std::ofstream(dir + "/afile") << "x";
  expect_input_error([&] { zt::ckpt::preflight_dir(MPI_COMM_NULL, dir + "/afile"); },
                     {"ckpt.dir = '" + dir + "/afile'", "is not a folder"});
  expect_input_error([&] { zt::ckpt::preflight_dir(MPI_COMM_NULL, dir + "/afile/sub/x"); },
                     {"'" + dir + "/afile' above it is a file"});
  zt::ckpt::preflight_dir(MPI_COMM_NULL, dir + "/new/a/b");
  EXPECT_FALSE(fs::exists(dir + "/new"));
  zt::ckpt::preflight_dir(MPI_COMM_NULL, dir);
}

}  // namespace

// zt reads its own datasets' bytes raw (contiguous fp32 little-endian: one pread per
// rank's part); a dataset another writer stored otherwise (chunked and big-endian, as
// h5py can) goes through H5Dread, which converts: the same values and checksums either way.
TEST(CkptFiles, DatasetsOfAnotherLayoutAreReadThroughHdf5) {
  const zt::model::Config cfg = small();
  const auto units = random_units(cfg, 23);
  const std::string path = dir_for("otherlayout") + "/w.h5";
  zt::ckpt::write_weights_only(path, cfg, units, {});
  const zt::model::ParamLayout layout(cfg);
  const zt::model::TensorInfo& t = layout.tensors()[2];  // a 2-D tensor of block 0
  ASSERT_EQ(t.shape.size(), 2u);
  const std::string name = "/params/" + t.name;
  uint64_t sum = 0;
  const std::vector<float> values = h5_read(path, name, &sum);
  ASSERT_NE(h5_offset(path, name), HADDR_UNDEF);  // zt's own: contiguous, allocated
  {  // Replace it by a chunked, big-endian copy with the same checksum attribute.
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    ASSERT_GE(H5Ldelete(f, name.c_str(), H5P_DEFAULT), 0);
    const hsize_t dims[2] = {static_cast<hsize_t>(t.shape[0]), static_cast<hsize_t>(t.shape[1])};
    const hsize_t chunk[2] = {std::max<hsize_t>(1, dims[0] / 3), std::max<hsize_t>(1, dims[1] / 2)};
    const hid_t space = H5Screate_simple(2, dims, nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    ASSERT_GE(H5Pset_chunk(dcpl, 2, chunk), 0);
    const hid_t d = H5Dcreate2(f, name.c_str(), H5T_IEEE_F32BE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(d, 0);
    ASSERT_GE(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
    const hid_t as = H5Screate(H5S_SCALAR);
    const hid_t a = H5Acreate2(d, "checksum", H5T_STD_U64LE, as, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(H5Awrite(a, H5T_NATIVE_UINT64, &sum), 0);
    H5Aclose(a);
    H5Sclose(as);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(f);
  }
  ASSERT_EQ(h5_offset(path, name), HADDR_UNDEF);  // chunked: no single offset
  const zt::ckpt::FullCheckpoint back = zt::ckpt::read_full(path);
  for (size_t u = 0; u < units.size(); ++u) EXPECT_EQ(back.params[u], units[u]) << "unit " << u;
}

// A file cut short inside a dataset's bytes is refused by name, not read as zeros.
TEST(CkptFiles, TruncatedDataIsRefusedByName) {
  const zt::model::Config cfg = small();
  const std::string path = dir_for("truncated") + "/w.h5";
  zt::ckpt::write_weights_only(path, cfg, random_units(cfg, 5), {});
  const zt::model::ParamLayout layout(cfg);
  const std::string last = "/params/" + layout.tensors().back().name;
  const haddr_t off = h5_offset(path, last);
  ASSERT_NE(off, HADDR_UNDEF);
  fs::resize_file(path, off + 8);  // 2 of its elements remain
  try {
    (void)zt::ckpt::read_full(path);
    FAIL() << "a truncated file was read";
  } catch (const zt::InputError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find("truncated") != std::string::npos ||
                what.find("never written") != std::string::npos ||
                what.find("HDF5") != std::string::npos)
        << what;
    EXPECT_NE(what.find(path), std::string::npos) << what;
  }
}
