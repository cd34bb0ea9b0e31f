// Offload from a device, on a CPU: the engine on the host-staged space (host memory the
// engine treats as a device's: every gradient sub-group goes down through the pinned
// pool, every updated parameter sub-group and stage-3 shard comes back up through it,
// with synchronous copies) trains bit for bit like the engine on the host space with the
// same offload, and like the host engine without offload: losses, gradient norms and
// every final parameter (==). The step's offload figures count what moved (bytes are
// exact: every owned element down once and up once per step). bf16-mixed with offload
// (the CPU AdamW's bf16 rounding copied up: half the H2D bytes, counted exactly) equals
// bf16-mixed without offload on the host-staged space, bitwise (the host space runs no
// bf16). Every case runs again with the copies deferred (ZT_TEST_DEFER_COPIES=1: a copy
// lands only when waited for or ordered before compute), so a use of the parameters
// not ordered after their copies up reads stale values and breaks the equality. LoRA and
// QLoRA with bf16-mixed offloaded (the frozen base's fp32 values in host memory) equal
// their runs without offload bitwise, the base unchanged, and resume bitwise. The
// host-memory preflight refuses a pinned pool above the memlock limit with the numbers.
#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "support/expect_error.hpp"
#include "support/tmp_dir.hpp"
#include "zero/zero_fixtures.hpp"
#include "zt/core/log.hpp"
#include "zt/model/lora.hpp"

namespace zt::zero::testing {
namespace {

std::string device_dir() { return zt::testing::rank0_tmp_dir("zt-offload-device"); }

bool same(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}
size_t differing(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  size_t d = a.size() == b.size() ? 0 : 1;
  for (size_t u = 0; u < a.size() && u < b.size(); ++u) {
    if (a[u].size() != b[u].size()) return d + 1;
    for (size_t i = 0; i < a[u].size(); ++i) d += std::memcmp(&a[u][i], &b[u][i], sizeof(float)) != 0;
  }
  return d;
}

struct DeviceCase {
  int stage;
  offload::Home optimizer, params;
  bool tied = false;
  std::string precision = "fp32";  // train.precision
};

std::string name(const DeviceCase& c) {
  return strf("stage %d, optimizer %s, params %s%s, %s", c.stage,
              std::string(offload::home_name(c.optimizer)).c_str(),
              std::string(offload::home_name(c.params)).c_str(), c.tied ? ", tied" : "",
              c.precision.c_str());
}

EngineOptions options(const DeviceCase& c, const Hyper& h, EngineOptions::Device device,
                      bool offloaded, const std::string& dir) {
  EngineOptions o = engine_options(h, c.stage);
  o.device = device;
  o.precision = c.precision;
  if (offloaded) {
    o.offload.optimizer = c.optimizer;
    o.offload.params = c.params;
    o.offload.nvme_path = dir;
    o.offload.subgroup_bytes = 48 << 10;  // 4096 elements: every unit is many sub-groups
    o.offload.buffers = 3;
    o.offload.queue_depth = 4;
    o.offload.block_bytes = 64 << 10;
    o.offload.pinned_bytes = 4 << 20;     // within the 8 MiB memlock of a container
  }
  return o;
}

TEST(OffloadFromDevice, HostStagedEqualsHostAndNoOffloadBitForBit) {
  const int n = world_size();
  Hyper h;
  h.T = 16;
  h.accum = 2;
  h.steps = 4;
  h.grad_clip = 0.5;  // clipped steps: the host copies are scaled as the space's own
  using offload::Home;
  const std::string dir = device_dir();
  const DeviceCase cases[] = {
      {1, Home::kCpu, Home::kNone},  {1, Home::kNvme, Home::kNone}, {2, Home::kCpu, Home::kNone},
      {2, Home::kNvme, Home::kNone}, {3, Home::kCpu, Home::kNone},  {3, Home::kNvme, Home::kNone},
      {3, Home::kCpu, Home::kCpu},   {3, Home::kNvme, Home::kNvme}, {3, Home::kCpu, Home::kNvme},
      {3, Home::kCpu, Home::kNone, true},
      // bf16-mixed: the bf16 compute weights are cast from the parameters the offloaded
      // step copied up. Only a device-like space runs it, so the reference is the
      // host-staged engine without offload.
      {1, Home::kCpu, Home::kNone, false, "bf16-mixed"},
      {2, Home::kNvme, Home::kNone, false, "bf16-mixed"},
      {3, Home::kCpu, Home::kNone, false, "bf16-mixed"},
      {3, Home::kNvme, Home::kNone, false, "bf16-mixed"},
      {3, Home::kCpu, Home::kCpu, false, "bf16-mixed"},
      {3, Home::kNvme, Home::kNvme, false, "bf16-mixed"},
      {3, Home::kCpu, Home::kNone, true, "bf16-mixed"},
  };
  // Per (stage, tied, precision): no offload, on the host space (host-staged for bf16).
  std::map<std::tuple<int, bool, std::string>, EngineRun> plain;
  // Per (stage, optimizer, params, tied): the fp32 run's H2D bytes per step, which
  // bf16-mixed halves (the same copies, or the same primary gathers of offloaded shards).
  std::map<std::tuple<int, offload::Home, offload::Home, bool>, std::vector<uint64_t>> fp32_h2d;
  std::vector<std::pair<DeviceCase, bool>> runs;  // (case, copies deferred)
  for (const DeviceCase& c : cases) {
    runs.emplace_back(c, false);
    runs.emplace_back(c, true);
  }
  for (const auto& [c, defer] : runs) {
    SCOPED_TRACE(name(c) + (defer ? ", copies deferred" : ""));
    const bool bf16 = c.precision != "fp32";
    const model::Config cfg = reduced_config(c.tied);
    Comms cm = make_comms(0);
    const auto key = std::make_tuple(c.stage, c.tied, c.precision);
    if (!plain.count(key)) {
      const EngineOptions::Device d = bf16 ? EngineOptions::Device::kHostStaged : EngineOptions::Device::kHost;
      Engine e(cfg, *cm.world, nullptr, nullptr, options(c, h, d, false, dir), h.init,
               bf16 ? cm.world.get() : nullptr);
      plain[key] = engine_run(e, cfg, h, h.steps);
    }
    // The host space with the same offload (fp32 only: the host space runs no bf16 weights).
    EngineRun on_host;
    if (!bf16) {
      Engine host(cfg, *cm.world, nullptr, nullptr,
                  options(c, h, EngineOptions::Device::kHost, true, dir), h.init);
      on_host = engine_run(host, cfg, h, h.steps);
    }
    if (defer) {
      ASSERT_EQ(::setenv("ZT_TEST_DEFER_COPIES", "1", 1), 0);
    }
    Engine staged(cfg, *cm.world, nullptr, nullptr,
                  options(c, h, EngineOptions::Device::kHostStaged, true, dir), h.init,
                  cm.world.get());
    ASSERT_EQ(::unsetenv("ZT_TEST_DEFER_COPIES"), 0);
    const EngineRun from_device = engine_run(staged, cfg, h, h.steps);
    const EngineRun& ref = plain[key];

    if (!bf16) {
      EXPECT_TRUE(same(from_device.losses, on_host.losses));
      EXPECT_TRUE(same(from_device.norms, on_host.norms));
      EXPECT_EQ(differing(from_device.params, on_host.params), 0u) << "vs the host space with offload";
    }
    EXPECT_TRUE(same(from_device.losses, ref.losses));
    EXPECT_TRUE(same(from_device.norms, ref.norms));
    EXPECT_EQ(differing(from_device.params, ref.params), 0u) << "vs the host space without offload";
    int clipped = 0;
    for (double norm : ref.norms) clipped += norm > h.grad_clip ? 1 : 0;
    EXPECT_GT(clipped, 0) << "no step was clipped: the test would not see the host scaling";

    // What moved: every owned element down once per step (fp32) and, unless the shards
    // are offloaded (they come up before each primary gather instead), up once (fp32, or
    // bf16 with bf16-mixed: half the bytes).
    const uint64_t up_size = bf16 ? sizeof(zt::bf16) : sizeof(float);
    const auto h2d_key = std::make_tuple(c.stage, c.optimizer, c.params, c.tied);
    uint64_t owned_bytes = 0, shard_bytes = 0;
    for (int u = 0; u < staged.partition().num_units(); ++u) {
      owned_bytes += static_cast<uint64_t>(staged.partition().unit(u).owned) * sizeof(float);
      shard_bytes += static_cast<uint64_t>(staged.partition().unit(u).shard) * sizeof(float);
    }
    for (size_t s = 0; s < from_device.stats.size(); ++s) {
      const OffloadTimes& t = from_device.stats[s].offload;
      EXPECT_TRUE(t.active);
      EXPECT_FALSE(ref.stats[s].offload.active);
      EXPECT_EQ(t.d2h_bytes, owned_bytes) << "step " << s + 1;
      if (c.params == Home::kNone)
        EXPECT_EQ(t.h2d_bytes, owned_bytes / sizeof(float) * up_size) << "step " << s + 1;
      else  // each unit's shard before each of its primary gathers: at least once per step
        EXPECT_GE(t.h2d_bytes, shard_bytes / sizeof(float) * up_size) << "step " << s + 1;
      if (!bf16 && !defer) fp32_h2d[h2d_key].push_back(t.h2d_bytes);
      if (bf16 && fp32_h2d.count(h2d_key)) {  // the same copies as fp32's, at half the bytes
        EXPECT_EQ(2 * t.h2d_bytes, fp32_h2d[h2d_key].at(s)) << "step " << s + 1;
      }
      EXPECT_GT(t.adam_s, 0.0);
      if (defer) continue;  // deferred copies are waited for: stalls, and times at landing
      EXPECT_GT(t.d2h_s, 0.0);
      EXPECT_GT(t.h2d_s, 0.0);
      EXPECT_EQ(t.stall_s, 0.0) << "synchronous copies never leave anything to wait for";
      if (bf16) continue;
      const OffloadTimes& ht = on_host.stats[s].offload;
      EXPECT_TRUE(ht.active);
      EXPECT_EQ(ht.d2h_bytes + ht.h2d_bytes, 0u) << "the host space copies nothing";
      EXPECT_EQ(ht.d2h_s + ht.h2d_s + ht.stall_s, 0.0);
      EXPECT_GT(ht.adam_s, 0.0);
    }
    if (world_rank() == 0 && !defer)
      std::printf("[ device ] np %d %-40s loss %.6f -> %.6f; step 1 d2h %llu B %.6f s, adam %.6f s, "
                  "h2d %llu B %.6f s\n",
                  n, name(c).c_str(), from_device.losses.front(), from_device.losses.back(),
                  static_cast<unsigned long long>(from_device.stats[0].offload.d2h_bytes),
                  from_device.stats[0].offload.d2h_s, from_device.stats[0].offload.adam_s,
                  static_cast<unsigned long long>(from_device.stats[0].offload.h2d_bytes),
                  from_device.stats[0].offload.h2d_s);
  }
  if (world_rank() == 0) ::rmdir(dir.c_str());
}

// The checkpoint view: every unit's owned() slice after 2 steps of an engine of `o`,
// written into a fresh engine of another seed, after_load(), 2 more steps: bit for bit
// the 4 straight steps (losses and every unit).
void expect_round_trip(const model::Config& cfg, const EngineOptions& o, const Hyper& h) {
  Comms cm = make_comms(0);
  EngineRun want;  // (one engine alive at a time: they share offload.nvme_path)
  {
    Engine straight(cfg, *cm.world, nullptr, nullptr, o, h.init, cm.world.get());
    want = engine_run(straight, cfg, h, 4);
  }
  std::vector<std::vector<float>> sp, sm, sv;  // per unit [owned] (frozen units: no m, v)
  {
    Engine a(cfg, *cm.world, nullptr, nullptr, o, h.init, cm.world.get());
    engine_run(a, cfg, h, 2);
    std::vector<OwnedSlice> saved;
    for (int u = 0; u < a.partition().num_units(); ++u) saved.push_back(a.owned(u));
    for (const OwnedSlice& sl : saved) {
      sp.emplace_back(sl.params.begin(), sl.params.end());
      sm.emplace_back(sl.m.begin(), sl.m.end());
      sv.emplace_back(sl.v.begin(), sl.v.end());
    }
  }
  model::InitOptions other = h.init;
  other.seed += 99;
  Engine b(cfg, *cm.world, nullptr, nullptr, o, other, cm.world.get());
  std::vector<OwnedSlice> loading;
  for (int u = 0; u < b.partition().num_units(); ++u) loading.push_back(b.owned(u));
  for (size_t u = 0; u < loading.size(); ++u) {
    ASSERT_EQ(loading[u].m.size(), sm[u].size()) << "unit " << u;
    std::copy(sp[u].begin(), sp[u].end(), loading[u].params.begin());
    std::copy(sm[u].begin(), sm[u].end(), loading[u].m.begin());
    std::copy(sv[u].begin(), sv[u].end(), loading[u].v.begin());
  }
  b.after_load();
  if (o.lora.method == model::FinetuneMethod::kQlora) {
    // QLoRA's units hold no targeted W: the base comes separately (a base file in a run,
    // ckpt::load_weights), here the whole model's values of engine a's init, unit by unit.
    const model::ParamLayout whole(cfg);
    std::vector<float> unit;  // [numel] of whole's unit u
    b.set_qlora_base([&](int u) -> std::span<const float> {
      unit.resize(static_cast<size_t>(whole.unit(u).numel));
      model::init_unit<float>(whole, u, h.init, unit);
      return unit;
    });
  }
  b.set_steps_done(2);
  const EngineRun resumed = engine_run(b, cfg, h, 2, 2);
  EXPECT_TRUE(same(resumed.losses, {want.losses[2], want.losses[3]}));
  EXPECT_EQ(differing(resumed.params, want.params), 0u);
}


// LoRA / QLoRA with bf16-mixed offloaded from a device (docs/zero.md "Frozen units"):
// the store holds the adapters' master and moments, the frozen base's fp32 values stay in
// host memory (or in the shards' home with offload.params) and its bf16 copy came up once.
// Against the host-staged run without offload: losses, norms and every unit bitwise
// (copies deferred too); the base bitwise its initial values; gather_full_params (the
// fp32 base, from host memory) and QLoRA's quantisation of it read the same floats.
model::LoraConfig lora_of(model::FinetuneMethod m) {
  model::LoraConfig l;
  l.method = m;
  l.rank = 4;
  l.alpha = 8.0;
  l.targets = model::kProjectionTargets;  // every projection and lm_head
  return l;
}

TEST(OffloadFromDevice, LoraBf16EqualsNoOffloadBitForBit) {
  using offload::Home;
  Hyper h;
  h.T = 16;
  h.accum = 2;
  h.steps = 3;
  const std::string dir = device_dir();
  struct LoraCase {
    DeviceCase c;
    model::FinetuneMethod method;
  };
  const model::FinetuneMethod lora = model::FinetuneMethod::kLora, qlora = model::FinetuneMethod::kQlora;
  const LoraCase cases[] = {
      {{1, Home::kCpu, Home::kNone, false, "bf16-mixed"}, lora},
      {{2, Home::kNvme, Home::kNone, false, "bf16-mixed"}, lora},
      {{3, Home::kCpu, Home::kNone, false, "bf16-mixed"}, lora},
      {{3, Home::kCpu, Home::kCpu, false, "bf16-mixed"}, lora},
      {{3, Home::kNvme, Home::kNvme, true, "bf16-mixed"}, lora},
      {{2, Home::kCpu, Home::kNone, false, "bf16-mixed"}, qlora},
      {{3, Home::kNvme, Home::kNone, false, "bf16-mixed"}, qlora},
      {{3, Home::kCpu, Home::kNvme, false, "bf16-mixed"}, qlora},
  };
  for (const LoraCase& lc : cases) {
    const DeviceCase& c = lc.c;
    const model::Config cfg = reduced_config(c.tied);
    Comms cm = make_comms(0);
    EngineOptions plain_o = options(c, h, EngineOptions::Device::kHostStaged, false, dir);
    plain_o.lora = lora_of(lc.method);
    EngineRun ref;
    std::unique_ptr<model::Parameters<float>> initial;  // every unit before any step
    {
      Engine e(cfg, *cm.world, nullptr, nullptr, plain_o, h.init, cm.world.get());
      initial = std::make_unique<model::Parameters<float>>(e.model().layout());
      e.gather_full_params(*initial);
      ref = engine_run(e, cfg, h, h.steps);
    }
    for (bool defer : {false, true}) {
      SCOPED_TRACE(name(c) + (lc.method == qlora ? ", qlora" : ", lora") +
                   (defer ? ", copies deferred" : ""));
      EngineOptions o = options(c, h, EngineOptions::Device::kHostStaged, true, dir);
      o.lora = plain_o.lora;
      if (defer) {
        ASSERT_EQ(::setenv("ZT_TEST_DEFER_COPIES", "1", 1), 0);
      }
      Engine staged(cfg, *cm.world, nullptr, nullptr, o, h.init, cm.world.get());
      ASSERT_EQ(::unsetenv("ZT_TEST_DEFER_COPIES"), 0);
      const EngineRun got = engine_run(staged, cfg, h, h.steps);
      EXPECT_TRUE(same(got.losses, ref.losses));
      EXPECT_TRUE(same(got.norms, ref.norms));
      EXPECT_EQ(differing(got.params, ref.params), 0u) << "vs the host-staged run without offload";
      const model::ParamLayout& layout = staged.model().layout();
      ASSERT_EQ(got.params.size(), static_cast<size_t>(layout.num_units()));
      size_t base_changed = 0, adapters_changed = 0;
      for (int u = 0; u < layout.num_units(); ++u) {
        const std::span<const float> want = initial->params(u);
        const std::vector<float>& now = got.params[static_cast<size_t>(u)];
        ASSERT_EQ(now.size(), want.size()) << "unit " << u;
        const bool same_bits = std::memcmp(now.data(), want.data(), want.size_bytes()) == 0;
        if (layout.frozen(u)) base_changed += same_bits ? 0 : 1;
        else adapters_changed += same_bits ? 0 : 1;
      }
      EXPECT_EQ(base_changed, 0u) << "a frozen unit changed";
      EXPECT_EQ(adapters_changed, 1u) << "the adapters did not train";
      EXPECT_TRUE(got.stats.back().offload.active);
    }
  }
  if (world_rank() == 0) ::rmdir(dir.c_str());
}

// The checkpoint view with bf16-mixed offloaded from a device: every unit's owned()
// slice after 2 steps (the store's master, m, v), written into a fresh engine of another
// seed, after_load() (the master's bf16 rounding into the bf16 compute copy, as the copy
// up writes it), 2 more steps = 4 straight steps, bit for bit. The same with LoRA and
// QLoRA (base and adapters both from the other seed until loaded): the frozen units'
// slices are their fp32 values from host memory or the shards' home, no moments; after
// the load their bf16 rounding comes up once; QLoRA's units hold no targeted W, so its
// base is given as a load of the base gives it (Engine::set_qlora_base) and quantised.
TEST(OffloadFromDevice, Bf16CheckpointRoundTripBitForBit) {
  using offload::Home;
  Hyper h;
  h.T = 16;
  h.accum = 2;
  const std::string dir = device_dir();
  const DeviceCase cases[] = {{2, Home::kCpu, Home::kNone, false, "bf16-mixed"},
                              {3, Home::kNvme, Home::kNone, false, "bf16-mixed"},
                              {3, Home::kCpu, Home::kCpu, true, "bf16-mixed"}};
  for (const DeviceCase& c : cases)
    for (model::FinetuneMethod m : {model::FinetuneMethod::kFull, model::FinetuneMethod::kLora,
                                    model::FinetuneMethod::kQlora}) {
      SCOPED_TRACE(name(c) + (m == model::FinetuneMethod::kFull ? "" : m == model::FinetuneMethod::kLora ? ", lora" : ", qlora"));
      EngineOptions o = options(c, h, EngineOptions::Device::kHostStaged, true, dir);
      if (m != model::FinetuneMethod::kFull) o.lora = lora_of(m);
      expect_round_trip(reduced_config(c.tied), o, h);
    }
  if (world_rank() == 0) ::rmdir(dir.c_str());
}

// RLIMIT_MEMLOCK lowered in this process (as `prlimit --memlock` does from outside) below
// the pinned pool: the engine refuses before allocating it, with the numbers.
TEST(OffloadFromDevice, PreflightRefusesAPinnedPoolAboveTheMemlockLimit) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_MEMLOCK, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = 1 << 20;  // 1 MiB (lowering the soft limit needs no privilege)
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < low.rlim_cur) low.rlim_cur = saved.rlim_max;
  ASSERT_EQ(::setrlimit(RLIMIT_MEMLOCK, &low), 0);
  const model::Config cfg = reduced_config();
  Hyper h;
  Comms cm = make_comms(0);
  const DeviceCase c{2, offload::Home::kCpu, offload::Home::kNone};
  EngineOptions o = options(c, h, EngineOptions::Device::kHostStaged, true, "");
  o.offload.pinned_bytes = 4 << 20;
  zt::testing::expect_input_error(
      [&] { Engine e(cfg, *cm.world, nullptr, nullptr, o, h.init, cm.world.get()); },
      {"host memory for the offloaded state: needed ", "MemAvailable ", "memlock limit 1M",
       "pinned pool of 4M", "offload.pinned_bytes", "ulimit -l"});
  // The host space pins nothing: the same limit is no obstacle.
  o.device = EngineOptions::Device::kHost;
  EXPECT_NO_THROW({ Engine e(cfg, *cm.world, nullptr, nullptr, o, h.init); });
  // Within the limit, the host-staged engine starts.
  o.device = EngineOptions::Device::kHostStaged;
  o.offload.pinned_bytes = 1 << 20;
  EXPECT_NO_THROW({ Engine e(cfg, *cm.world, nullptr, nullptr, o, h.init, cm.world.get()); });
  ASSERT_EQ(::setrlimit(RLIMIT_MEMLOCK, &saved), 0);
}

// The pool must hold two sub-groups of fp32 values; params offloaded on a device need the
// CPU AdamW (offload.optimizer) to update them.
TEST(OffloadFromDevice, BadCombinationsAreRefusedByName) {
  const model::Config cfg = reduced_config();
  Hyper h;
  Comms cm = make_comms(0);
  EngineOptions o = options({2, offload::Home::kCpu, offload::Home::kNone}, h,
                            EngineOptions::Device::kHostStaged, true, "");
  o.offload.subgroup_bytes = 6 << 20;  // 512 Ki elements: 2 MiB of fp32 each
  o.offload.pinned_bytes = 2 << 20;
  zt::testing::expect_input_error(
      [&] { Engine e(cfg, *cm.world, nullptr, nullptr, o, h.init, cm.world.get()); },
      {"offload.pinned_bytes = 2M holds fewer than two sub-groups", "offload.subgroup_bytes"});
  o = options({3, offload::Home::kNone, offload::Home::kCpu}, h, EngineOptions::Device::kHostStaged,
              true, "");
  zt::testing::expect_input_error(
      [&] { Engine e(cfg, *cm.world, nullptr, nullptr, o, h.init, cm.world.get()); },
      {"offload.params = cpu with offload.optimizer = none and the engine on the host-staged",
       "offload.optimizer = cpu or nvme"});
}

}  // namespace
}  // namespace zt::zero::testing
