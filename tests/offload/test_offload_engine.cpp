// The ZeRO engine with its optimizer state (and stage-3 parameter shards) in each
// offload home against the same engine without offload: 20 steps of the real `tiny`
// preset give the same losses and parameters bit for bit (the CPU AdamW is one kernel
// for every home; the store only moves bytes). Also: a checkpoint round trip through
// owned() / after_load() of an NVMe-offloaded engine, and the offload.* validation.
#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "support/expect_error.hpp"
#include "zt/core/log.hpp"
#include "zero/zero_fixtures.hpp"
#include "zt/estimate/estimate.hpp"

namespace zt::zero::testing {
namespace {

// A directory for this test run's NVMe files (the same on every rank: rank 0's pid).
std::string nvme_dir(const std::string& tag) {
  int pid = static_cast<int>(::getpid());
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  const char* tmp = std::getenv("TMPDIR");
  const std::string base = std::string(tmp && *tmp ? tmp : "/tmp") + "/zt-offload-test-" + std::to_string(pid);
  ::mkdir(base.c_str(), 0700);
  const std::string dir = base + "/" + tag;
  ::mkdir(dir.c_str(), 0700);
  MPI_Barrier(MPI_COMM_WORLD);
  return dir;
}

// Removes the test's directories (the stores unlink their files when destroyed).
void remove_dirs() {
  std::string base = nvme_dir("");  // collective: "<tmp>/zt-offload-test-<pid>/"
  base.pop_back();
  if (world_rank() == 0) {
    for (const char* d : {"equal", "ckpt-a", "ckpt-b", "estimate"}) ::rmdir((base + "/" + d).c_str());
    ::rmdir(base.c_str());
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

offload::Options small_store(offload::Home opt_home, offload::Home params_home, const std::string& dir) {
  offload::Options o;
  o.optimizer = opt_home;
  o.params = params_home;
  o.nvme_path = dir;
  o.subgroup_bytes = 48 << 10;  // 4096 elements: every unit is many sub-groups
  o.buffers = 3;
  o.queue_depth = 4;
  o.block_bytes = 64 << 10;
  return o;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}
bool same_bits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t u = 0; u < a.size(); ++u)
    if (a[u].size() != b[u].size() ||
        std::memcmp(a[u].data(), b[u].data(), a[u].size() * sizeof(float)) != 0)
      return false;
  return true;
}

Hyper tiny_hyper() {
  Hyper h;
  h.B = 1;
  h.T = 32;
  h.accum = 2;
  h.steps = 20;
  return h;
}

struct Case {
  int stage;
  offload::Home optimizer, params;
  int buffers;
};

TEST(OffloadEngine, EveryHomeEqualsNoOffloadBitForBit) {
  const model::Config cfg = model::Config::preset("tiny");
  const Hyper h = tiny_hyper();
  using offload::Home;
  const Case cases[] = {
      {1, Home::kCpu, Home::kNone, 3},  {1, Home::kNvme, Home::kNone, 3},
      {2, Home::kNvme, Home::kNone, 5}, {3, Home::kCpu, Home::kNone, 3},
      {3, Home::kNvme, Home::kNone, 3}, {3, Home::kNone, Home::kNvme, 3},
      {3, Home::kNvme, Home::kNvme, 4},
  };
  std::map<int, EngineRun> plain;  // per stage, no offload
  for (const Case& c : cases) {
    SCOPED_TRACE(strf("stage %d, optimizer %s, params %s", c.stage,
                      std::string(offload::home_name(c.optimizer)).c_str(),
                      std::string(offload::home_name(c.params)).c_str()));
    if (!plain.count(c.stage)) {
      Comms cm = make_comms(0);
      Engine e(cfg, *cm.world, nullptr, nullptr, engine_options(h, c.stage), h.init);
      plain[c.stage] = engine_run(e, cfg, h, h.steps);
    }
    Comms cm = make_comms(0);
    EngineOptions o = engine_options(h, c.stage);
    o.offload = small_store(c.optimizer, c.params, nvme_dir("equal"));
    o.offload.buffers = c.buffers;
    Engine e(cfg, *cm.world, nullptr, nullptr, o, h.init);
    const EngineRun r = engine_run(e, cfg, h, h.steps);
    const EngineRun& ref = plain[c.stage];
    EXPECT_TRUE(same_bits(r.losses, ref.losses)) << "losses differ; first: " << r.losses[0] << " vs " << ref.losses[0];
    EXPECT_TRUE(same_bits(r.params, ref.params)) << "parameters differ after " << h.steps << " steps";
    if (world_rank() == 0 && c.stage == 3 && c.optimizer == Home::kNvme) std::printf("%s\n", e.describe().c_str());
  }
  remove_dirs();
}

// qwZ gathers quantize the shard read from NVMe, padding included (a shard's padding
// must stay zero or the block scales change); at 4 ranks on 2 simulated nodes, hpZ
// secondaries are filled from those gathers. Still bitwise equal to no offload.
TEST(OffloadEngine, QuantizedAndHpzGathersFromNvmeShards) {
  const model::Config cfg = model::Config::preset("tiny");
  Hyper h = tiny_hyper();
  h.steps = 8;
  const int rpn = world_size() == 4 ? 2 : 0;
  {  // the engines (and their stores) end before the directories go
    EngineOptions base = engine_options(h, 3);
    base.quantize_weights = true;
    base.quantize_grads = true;
    Comms c0 = make_comms(rpn);
    Engine plain(cfg, *c0.world, c0.node.get(), c0.cross.get(), base, h.init);
    const EngineRun want = engine_run(plain, cfg, h, h.steps);
    EngineOptions o = base;
    o.offload = small_store(offload::Home::kNvme, offload::Home::kNvme, nvme_dir("equal"));
    Engine e(cfg, *c0.world, c0.node.get(), c0.cross.get(), o, h.init);  // one Runtime per process
    if (world_rank() == 0) std::printf("%s\n", e.describe().c_str());
    const EngineRun r = engine_run(e, cfg, h, h.steps);
    EXPECT_TRUE(same_bits(r.losses, want.losses));
    EXPECT_TRUE(same_bits(r.params, want.params));
  }
  remove_dirs();
}

// The loop of engine_run, from step s0 to s1 (batches and learning rate of those steps).
void run_steps(Engine& e, const model::Config& cfg, const Hyper& h, int s0, int s1) {
  const int n = world_size(), r = world_rank();
  for (int s = s0; s < s1; ++s) {
    for (int m = 0; m < h.accum; ++m) {
      const Batch b = make_batch(first_sequence(h, n, s, m, r), h.B, h.T, cfg.vocab);
      e.micro_step(b.tokens, b.targets, h.B, h.T, false, 1.0 / h.accum);
    }
    e.step(h.lr(s));
  }
}

std::vector<std::vector<float>> full_params(Engine& e) {
  model::Parameters<float> p(e.model().layout());
  e.gather_full_params(p);
  std::vector<std::vector<float>> out;
  for (int u = 0; u < p.num_units(); ++u) out.emplace_back(p.params(u).begin(), p.params(u).end());
  return out;
}

TEST(OffloadEngine, CheckpointRoundTripThroughOwnedSlices) {
  const model::Config cfg = model::Config::preset("tiny");
  Hyper h = tiny_hyper();
  using offload::Home;
  for (const Case& c : {Case{2, Home::kNvme, Home::kNone, 3}, Case{3, Home::kNvme, Home::kNvme, 3},
                        Case{3, Home::kNone, Home::kNvme, 3}}) {
    SCOPED_TRACE(strf("stage %d", c.stage));
    // Straight: 8 steps without offload.
    Comms c0 = make_comms(0);
    Engine straight(cfg, *c0.world, nullptr, nullptr, engine_options(h, c.stage), h.init);
    run_steps(straight, cfg, h, 0, 8);
    const auto want = full_params(straight);
    // Offloaded: 4 steps, "save" every owned slice, a fresh offloaded engine (another
    // seed) "loads" them, 4 more steps.
    Comms c1 = make_comms(0);
    EngineOptions o = engine_options(h, c.stage);
    o.offload = small_store(c.optimizer, c.params, nvme_dir("ckpt-a"));
    Engine a(cfg, *c1.world, nullptr, nullptr, o, h.init);
    run_steps(a, cfg, h, 0, 4);
    const int units = a.model().layout().num_units();
    // As the checkpoint code does: every unit's slice first, then the reads (or writes).
    std::vector<OwnedSlice> saved;
    for (int u = 0; u < units; ++u) saved.push_back(a.owned(u));
    std::vector<std::vector<float>> sp, sm, sv;
    for (int u = 0; u < units; ++u) {
      const OwnedSlice& s = saved[static_cast<size_t>(u)];
      sp.emplace_back(s.params.begin(), s.params.end());
      sm.emplace_back(s.m.begin(), s.m.end());
      sv.emplace_back(s.v.begin(), s.v.end());
    }
    o.offload.nvme_path = nvme_dir("ckpt-b");
    model::InitOptions other = h.init;
    other.seed += 99;
    Engine b(cfg, *c1.world, nullptr, nullptr, o, other);
    std::vector<OwnedSlice> loading;
    for (int u = 0; u < units; ++u) loading.push_back(b.owned(u));
    for (int u = 0; u < units; ++u) {
      const OwnedSlice& s = loading[static_cast<size_t>(u)];
      std::copy(sp[static_cast<size_t>(u)].begin(), sp[static_cast<size_t>(u)].end(), s.params.begin());
      std::copy(sm[static_cast<size_t>(u)].begin(), sm[static_cast<size_t>(u)].end(), s.m.begin());
      std::copy(sv[static_cast<size_t>(u)].begin(), sv[static_cast<size_t>(u)].end(), s.v.begin());
    }
    b.after_load();
    b.set_steps_done(4);
    run_steps(b, cfg, h, 4, 8);
    EXPECT_TRUE(same_bits(full_params(b), want));
    run_steps(a, cfg, h, 4, 8);  // a went on after its save: the same too
    EXPECT_TRUE(same_bits(full_params(a), want));
  }
  remove_dirs();
}

// `zt estimate --device cpu` offload rows against the engine's own peak after one step
// (Engine::memory: the store's host bytes count as optimizer): the same bytes.
TEST(OffloadEngine, EstimateRowsAreTheEngineAccounting) {
  const model::Config cfg = model::Config::preset("tiny");
  Hyper h = tiny_hyper();
  h.accum = 1;
  using offload::Home;
  for (const Case& c : {Case{1, Home::kCpu, Home::kNone, 3}, Case{2, Home::kNvme, Home::kNone, 3},
                        Case{3, Home::kNone, Home::kNvme, 3}, Case{3, Home::kNvme, Home::kNvme, 4}}) {
    SCOPED_TRACE(strf("stage %d, optimizer %s, params %s", c.stage,
                      std::string(offload::home_name(c.optimizer)).c_str(),
                      std::string(offload::home_name(c.params)).c_str()));
    Comms cm = make_comms(0);
    EngineOptions o = engine_options(h, c.stage);
    o.offload = small_store(c.optimizer, c.params, nvme_dir("estimate"));
    o.offload.buffers = c.buffers;
    Engine e(cfg, *cm.world, nullptr, nullptr, o, h.init);
    run_steps(e, cfg, h, 0, 1);
    estimate::Setup s;
    s.model = cfg;
    s.micro_batch = h.B;
    s.seq_len = h.T;
    s.gpus_per_node = world_size();
    s.device = estimate::Device::kCpu;
    s.zero = o;
    s.threads = 1;
    const estimate::Row r = estimate::estimate_row(s, c.stage, 1, static_cast<estimate::Offload>(c.optimizer),
                                                   static_cast<estimate::Offload>(c.params));
    const MemoryStats m = e.memory();
    if (world_rank() == 0)
      std::printf("stage %d optimizer %s params %s: estimate %llu B, engine %llu B; nvme %llu B\n", c.stage,
                  std::string(offload::home_name(c.optimizer)).c_str(), std::string(offload::home_name(c.params)).c_str(),
                  static_cast<unsigned long long>(r.total(false)), static_cast<unsigned long long>(m.peak_total),
                  static_cast<unsigned long long>(r.nvme_bytes));
    if (world_rank() == 0) {  // the estimate is rank 0's partition
      EXPECT_EQ(r.optimizer_bytes, m.optimizer);
      EXPECT_EQ(r.param_bytes, m.param_shards + m.full_params);
      EXPECT_EQ(r.total(false), m.peak_total);
    }
  }
  remove_dirs();
}

TEST(OffloadEngine, OptionsAreCheckedAgainstTheStage) {
  const model::Config cfg = model::Config::preset("tiny");
  const Hyper h = tiny_hyper();
  Comms cm = make_comms(0);
  EngineOptions o = engine_options(h, 2);
  o.offload.params = offload::Home::kNvme;
  o.offload.nvme_path = "/tmp";
  zt::testing::expect_input_error([&] { Engine e(cfg, *cm.world, nullptr, nullptr, o, h.init); },
                                  {"offload.params = nvme needs zero.stage = 3", "HINT"});
  o = engine_options(h, 0);
  o.offload.optimizer = offload::Home::kCpu;
  zt::testing::expect_input_error([&] { Engine e(cfg, *cm.world, nullptr, nullptr, o, h.init); },
                                  {"offload.optimizer = cpu needs zero.stage >= 1"});
  o = engine_options(h, 1);
  o.offload.optimizer = offload::Home::kNvme;
  zt::testing::expect_input_error([&] { Engine e(cfg, *cm.world, nullptr, nullptr, o, h.init); },
                                  {"offload.nvme_path is empty"});
}

}  // namespace
}  // namespace zt::zero::testing
