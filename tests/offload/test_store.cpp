// The NVMe file and the offload store: io_uring round trips, the pipelined pass (each
// sub-group visited once, in order, its changes written back), the host budget, and the
// preflight and disk errors on small tmpfs mounts (missing, read-only, too small, and a
// disk that fills during training, with a stand-in checkpoint that must stay untouched).
// The mount tests need root (CAP_SYS_ADMIN) and skip themselves without it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "support/expect_error.hpp"
#include "zt/offload/host_buffer.hpp"
#include "zt/offload/nvme_file.hpp"
#include "zt/offload/preflight.hpp"
#include "zt/offload/store.hpp"

namespace zt::offload {
namespace {

std::string temp_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string t = std::string(tmp && *tmp ? tmp : "/tmp") + "/zt-store-XXXXXX";
  char* d = ::mkdtemp(t.data());
  EXPECT_NE(d, nullptr);
  return t;
}

// A tmpfs of `size` mounted on a fresh directory; unmounted at the end.
struct Tmpfs {
  std::string dir;
  bool ok = false;
  Tmpfs(const std::string& size, bool read_only) : dir(temp_dir()) {
    const std::string opts = "size=" + size;
    ok = ::mount("tmpfs", dir.c_str(), "tmpfs", read_only ? MS_RDONLY : 0, opts.c_str()) == 0;
  }
  ~Tmpfs() {
    if (ok) ::umount2(dir.c_str(), MNT_DETACH);
    ::rmdir(dir.c_str());
  }
};

Options nvme_options(const std::string& dir) {
  Options o;
  o.optimizer = Home::kNvme;
  o.nvme_path = dir;
  o.subgroup_bytes = 48 << 10;  // 4096 elements per sub-group
  o.buffers = 3;
  o.queue_depth = 4;
  o.block_bytes = 16 << 10;
  return o;
}

TEST(NvmeFile, ManyRequestsInFlightRoundTrip) {
  const std::string dir = temp_dir();
  NvmeFile::Settings s;
  s.queue_depth = 3;
  s.block_bytes = 8192;
  const size_t n = 40 * 4096;
  NvmeFile f(dir + "/f.bin", n, s);
  HostBuffer out(n, false), in(n, false);
  auto* o = static_cast<uint32_t*>(out.data());
  for (size_t i = 0; i < n / 4; ++i) o[i] = static_cast<uint32_t>(i * 2654435761u);
  std::vector<NvmeFile::Ticket> w;
  for (size_t k = 0; k < 10; ++k)  // 10 writes of 16 KiB, 2 blocks each
    w.push_back(f.submit_write(k * 16384, static_cast<char*>(out.data()) + k * 16384, 16384));
  for (auto t : w) f.wait(t);
  f.read(0, in.data(), n);
  EXPECT_EQ(std::memcmp(in.data(), out.data(), n), 0);
  ::rmdir(dir.c_str());
}

TEST(Store, PipelinedPassVisitsEverySubGroupOnceAndWritesBack) {
  const std::string dir = temp_dir();
  const std::vector<int64_t> counts = {10000, 0, 4096, 12289};
  for (int buffers : {3, 4, 7}) {
    Options o = nvme_options(dir);
    o.buffers = buffers;
    Store st(o, counts, {}, 0);
    std::vector<std::vector<float>> master(counts.size());
    for (size_t u = 0; u < counts.size(); ++u) {
      master[u].resize(static_cast<size_t>(counts[u]));
      std::iota(master[u].begin(), master[u].end(), static_cast<float>(u * 100000));
      st.init_unit(static_cast<int>(u), master[u].data());
    }
    // 3 + 0 + 1 + 4 sub-groups of at most 4096 elements
    ASSERT_EQ(st.subgroups().size(), 8u);
    for (int pass = 1; pass <= 2; ++pass) {
      size_t next = 0;
      st.update([&](const SubGroup& g, const StateView& v) {
        EXPECT_EQ(&g, &st.subgroups()[next]) << "out of order";
        ++next;
        for (int64_t i = 0; i < g.count; ++i) {
          EXPECT_EQ(v.master[i], master[static_cast<size_t>(g.unit)][static_cast<size_t>(g.first + i)] + static_cast<float>(pass - 1));
          EXPECT_EQ(v.m[i], static_cast<float>(pass - 1));
          v.master[i] += 1.0f;
          v.m[i] += 1.0f;
          v.v[i] = static_cast<float>(g.first + i);
        }
      });
      EXPECT_EQ(next, 8u);
    }
    std::vector<float> pm(12289), pmm(12289), pv(12289);
    st.read_unit(3, pm.data(), pmm.data(), pv.data());
    for (size_t i = 0; i < 12289; ++i) {
      ASSERT_EQ(pm[i], master[3][i] + 2.0f);
      ASSERT_EQ(pmm[i], 2.0f);
      ASSERT_EQ(pv[i], static_cast<float>(i));
    }
    // host memory: the buffers only
    EXPECT_EQ(st.host_bytes(), static_cast<uint64_t>(buffers) * 48u * 1024u);
  }
  ::rmdir(dir.c_str());
}

TEST(Store, HostBudgetTooSmallIsAnInputError) {
  const std::string dir = temp_dir();
  Options o = nvme_options(dir);
  o.max_host_bytes = 100 << 10;  // < 3 x 48 KiB
  zt::testing::expect_input_error([&] { Store s(o, {100000}, {}, 0); },
                                  {"offload.max_host_bytes", "HINT"});
  o.optimizer = Home::kCpu;
  o.max_host_bytes = 1 << 20;  // 1 MiB < 12 x 100000 B
  zt::testing::expect_input_error([&] { Store s(o, {100000}, {}, 0); },
                                  {"offload.max_host_bytes", "offload.optimizer = nvme"});
  ::rmdir(dir.c_str());
}

TEST(Preflight, MissingPathOrNotADirectory) {
  Options o = nvme_options("/nonexistent/zt-offload");
  zt::testing::expect_input_error([&] { Store s(o, {100000}, {}, 0); },
                                  {"/nonexistent/zt-offload", "No such file or directory", "errno 2", "HINT"});
  o.nvme_path = "/proc/self/status";
  zt::testing::expect_input_error([&] { Store s(o, {100000}, {}, 0); }, {"is not a directory"});
}

TEST(Preflight, ReadOnlyMount) {
  Tmpfs ro("4m", true);
  if (!ro.ok) GTEST_SKIP() << "mount needs root";
  zt::testing::expect_input_error([&] { Store s(nvme_options(ro.dir), {100000}, {}, 0); },
                                  {ro.dir, "not writable", "Read-only file system", "errno 30", "HINT"});
}

TEST(Preflight, TooSmall) {
  Tmpfs small("1m", false);
  if (!small.ok) GTEST_SKIP() << "mount needs root";
  // 300000 elements x 12 B = 3.4 MiB of state on a 1 MiB file system
  zt::testing::expect_input_error([&] { Store s(nvme_options(small.dir), {300000}, {}, 0); },
                                  {small.dir, "available", "needs", "ENOSPC", "HINT"});
}

TEST(Preflight, MemlockLimit) {
  EXPECT_TRUE(preflight_memlock(0));
  struct rlimit rl {};
  ::getrlimit(RLIMIT_MEMLOCK, &rl);
  if (rl.rlim_cur != RLIM_INFINITY) {
    EXPECT_FALSE(preflight_memlock(1ull << 60));
  }
}

// The store writes its whole file before step 1 and then overwrites in place, so on
// ext4/xfs/tmpfs a disk that fills later cannot take its space. Copy-on-write or thin
// provisioned storage can; this is simulated by punching holes in the store's file and
// then filling the file system. The step must fail with a clear ENOSPC error, and a file
// written before (a checkpoint stand-in) must be unchanged.
TEST(DiskFull, DuringTrainingIsAClearErrorAndTheCheckpointIsUntouched) {
  Tmpfs fs("8m", false);
  if (!fs.ok) GTEST_SKIP() << "mount needs root";
  const std::string ckpt = fs.dir + "/step-10.h5";
  std::vector<char> ckpt_bytes(1 << 20);
  for (size_t i = 0; i < ckpt_bytes.size(); ++i) ckpt_bytes[i] = static_cast<char>(i * 7);
  { std::ofstream(ckpt, std::ios::binary).write(ckpt_bytes.data(), static_cast<std::streamsize>(ckpt_bytes.size())); }

  Store st(nvme_options(fs.dir), {200000}, {}, 0);  // 2.3 MiB file
  std::vector<float> p(200000, 1.0f);
  st.init_unit(0, p.data());
  auto step = [&] {
    st.update([](const SubGroup& g, const StateView& v) {
      for (int64_t i = 0; i < g.count; ++i) v.master[i] *= 0.5f;
    });
  };
  step();  // fine
  // Storage loses the store's blocks (CoW / thin provisioning) and something else fills it.
  const int fd = ::open(nvme_file_path(fs.dir, 0).c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 64 << 20), 0);
  ::close(fd);
  {
    std::ofstream filler(fs.dir + "/filler", std::ios::binary);
    std::vector<char> mb(1 << 16, 'x');
    for (int i = 0; i < 200 && filler; ++i) filler.write(mb.data(), static_cast<std::streamsize>(mb.size()));
  }
  try {
    step();
    FAIL() << "no error on a full disk";
  } catch (const zt::Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("No space left on device"), std::string::npos) << w;
    EXPECT_NE(w.find(nvme_file_path(fs.dir, 0)), std::string::npos) << w;
    EXPECT_NE(w.find("HINT"), std::string::npos) << w;
    EXPECT_NE(w.find("NVMe offload write"), std::string::npos) << w;
  }
  std::ifstream in(ckpt, std::ios::binary);
  std::vector<char> back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(back == ckpt_bytes) << "the checkpoint changed";
}

}  // namespace
}  // namespace zt::offload
