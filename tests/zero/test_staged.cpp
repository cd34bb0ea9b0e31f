// The device orchestration on a CPU: the engine on the host-staged space (host memory,
// every collective through the pinned-host staging path a device space takes on the MPI
// backend) trains bit for bit like the engine on the host space (the direct path), at
// stages 0-3, hpZ, qwZ/qgZ and bf16 reductions, flat and over simulated nodes; its host
// values (the norm) go over the host-memory control communicator, as beside NCCL. Losses,
// gradient norms, final parameters, the step's traffic per communicator and the memory
// figures must be equal (==, not within a tolerance). Checkpoint slices, a resume from
// them and logits_last, which the host-staged space serves through host copies as a
// device does, are equal too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "staged_fixtures.hpp"
#include "zero_fixtures.hpp"
#include "zt/core/error.hpp"

namespace zt::zero::testing {
namespace {

EngineRun run(const StagedCase& c, EngineOptions::Device device, const model::Config& cfg,
              const Hyper& h, Traffic* traffic, MemoryStats* memory) {
  Comms comms = make_comms(c.rpn);
  Engine e = make_engine(c, device, cfg, h, comms);
  EngineRun r = engine_run(e, cfg, h, h.steps);
  *traffic = e.traffic();
  *memory = e.memory();
  return r;
}

TEST(Staged, HostStagedSpaceTrainsBitwiseLikeTheHostSpace) {
  const int n = world_size();
  const model::Config cfg = reduced_config();
  Hyper h;
  h.accum = 2;
  h.steps = 3;
  const std::vector<StagedCase> cases = {
      {"stage0", 0, 0, 1},
      {"stage1 rpn2", 1, 2, 1},
      {"stage2", 2, 0, 1},
      {"stage2 rpn2 bf16", 2, 2, 1, false, false, DType::kBF16},
      {"stage3", 3, 0, 1},
      {"stage3 rpn2 hpZ", 3, 2, 0},
      {"stage3 rpn2 hpZ qwZ qgZ", 3, 2, 0, true, true},
  };
  for (const StagedCase& c : cases) {
    if (c.rpn > 0 && n % c.rpn != 0) continue;
    Traffic t_direct, t_staged;
    MemoryStats m_direct, m_staged;
    const EngineRun direct = run(c, EngineOptions::Device::kHost, cfg, h, &t_direct, &m_direct);
    const EngineRun staged =
        run(c, EngineOptions::Device::kHostStaged, cfg, h, &t_staged, &m_staged);
    EXPECT_EQ(staged.losses, direct.losses) << c.name;
    EXPECT_EQ(staged.norms, direct.norms) << c.name;
    ASSERT_EQ(staged.params.size(), direct.params.size());
    size_t differ = 0;
    for (size_t u = 0; u < direct.params.size(); ++u)
      for (size_t i = 0; i < direct.params[u].size(); ++i)
        differ += staged.params[u][i] != direct.params[u][i] ? 1 : 0;
    EXPECT_EQ(differ, 0u) << c.name << ": parameters differing from the direct path";
    for (int g = 0; g < kGroupCount; ++g)
      EXPECT_EQ(t_staged.bytes(static_cast<Group>(g)), t_direct.bytes(static_cast<Group>(g)))
          << c.name << ": bytes sent on " << group_name(static_cast<Group>(g));
    EXPECT_EQ(m_staged.total(), m_direct.total()) << c.name << ": engine memory";
    if (world_rank() == 0)
      std::printf("[ staged ] np %d %-24s losses %.6f -> %.6f, %zu parameters differ, "
                  "%llu bytes sent (direct %llu)\n",
                  n, c.name.c_str(), staged.losses.front(), staged.losses.back(), differ,
                  static_cast<unsigned long long>(t_staged.total_bytes()),
                  static_cast<unsigned long long>(t_direct.total_bytes()));
  }
}

// A world that takes device memory needs the host-memory control communicator.
TEST(Staged, DeviceMemoryWorldWithoutControlCommunicatorIsRefused) {
  Comms comms = make_comms(0);
  Hyper h;
  EngineOptions o = engine_options(h, 0);
  o.device = EngineOptions::Device::kHostStaged;
  try {
    Engine e(reduced_config(), *comms.world, nullptr, nullptr, o, h.init);
    FAIL() << "no error";
  } catch (const zt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no host-memory control communicator"), std::string::npos)
        << e.what();
  }
}

// Checkpoints and logits through the device path on the host-staged space (owned()
// hands out host copies that the next engine call writes back): the slices equal the
// direct engine's, a fresh host-staged engine loaded from the direct engine's slices
// continues exactly like it, and logits_last is equal.
TEST(Staged, CheckpointSlicesResumeAndLogitsThroughHostCopies) {
  const int n = world_size();
  const model::Config cfg = reduced_config();
  Hyper h;
  h.accum = 2;
  h.steps = 2;
  for (const StagedCase& c : {StagedCase{"stage0", 0, 0, 1}, StagedCase{"stage3 rpn2 hpZ", 3, 2, 0}}) {
    if (c.rpn > 0 && n % c.rpn != 0) continue;
    Comms comms = make_comms(c.rpn);
    Engine direct = make_engine(c, EngineOptions::Device::kHost, cfg, h, comms);
    Engine staged = make_engine(c, EngineOptions::Device::kHostStaged, cfg, h, comms);
    Engine fresh = make_engine(c, EngineOptions::Device::kHostStaged, cfg, h, comms);
    engine_run(direct, cfg, h, h.steps);
    engine_run(staged, cfg, h, h.steps);
    const int units = direct.partition().num_units();
    size_t differ = 0;
    const auto count_differ = [&](std::span<const float> a, std::span<const float> b) {
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i] ? 1 : 0;
    };
    for (int u = 0; u < units; ++u) {
      const OwnedSlice d = direct.owned(u), s = staged.owned(u), f = fresh.owned(u);
      count_differ(s.params, d.params);
      count_differ(s.m, d.m);
      count_differ(s.v, d.v);
      std::copy(d.params.begin(), d.params.end(), f.params.begin());
      std::copy(d.m.begin(), d.m.end(), f.m.begin());
      std::copy(d.v.begin(), d.v.end(), f.v.begin());
    }
    EXPECT_EQ(differ, 0u) << c.name << ": checkpoint slices differing from the direct path";
    fresh.after_load();
    fresh.set_steps_done(direct.steps_done());
    const EngineRun next_direct = engine_run(direct, cfg, h, 1, h.steps);
    const EngineRun next_fresh = engine_run(fresh, cfg, h, 1, h.steps);
    EXPECT_EQ(next_fresh.losses, next_direct.losses) << c.name;
    EXPECT_EQ(next_fresh.params, next_direct.params) << c.name;
    const Batch b = make_batch(0, 1, h.T, cfg.vocab);
    std::vector<float> ld(static_cast<size_t>(cfg.vocab)), lf(ld.size());
    direct.logits_last(b.tokens, h.T, ld);
    fresh.logits_last(b.tokens, h.T, lf);
    EXPECT_EQ(lf, ld) << c.name << ": logits_last";
    if (world_rank() == 0)
      std::printf("[ staged ] np %d %-16s checkpoint slices: %zu values differ; resumed step "
                  "loss %.9f (direct %.9f)\n",
                  n, c.name.c_str(), differ, next_fresh.losses[0], next_direct.losses[0]);
  }
}

// The engine's device ordering branch on a CPU. NCCL's requests can order the compute
// stream (Request::order_before) without blocking the host; the engine then keeps the
// handle and waits for it at the end of the pass (check_retired). Host backends cannot,
// so the host spaces never take that branch. This host-memory communicator's requests
// say they can (after completing on the host: there is no device to wait on), so the
// engine on the host space takes the device branch: the results must stay bitwise those
// of plain MPI, and every kept request must be waited on by the end of its pass.
struct OrderStats {
  long kept = 0;     // requests compute was "ordered after" (order_before returned true)
  long checked = 0;  // kept requests the host waited on afterwards
};

class OrderingRequest final : public comm::Request {
 public:
  OrderingRequest(comm::Handle inner, OrderStats& st) : inner_(std::move(inner)), st_(st) {}
  void wait() override {
    if (!done_) inner_->wait();
    done_ = true;
    if (kept_ && !checked_) {
      checked_ = true;
      ++st_.checked;
    }
  }
  bool test() override {
    if (!done_ && inner_->test()) done_ = true;
    return done_;
  }
  bool order_before(void*) override {
    if (!done_) inner_->wait();  // the host's stand-in for the device's event wait
    done_ = true;
    kept_ = true;
    ++st_.kept;
    return true;
  }

 private:
  comm::Handle inner_;
  OrderStats& st_;
  bool done_ = false, kept_ = false, checked_ = false;
};

class OrderingComm final : public comm::Comm {
 public:
  OrderingComm(std::unique_ptr<comm::Comm> inner, OrderStats& st) : inner_(std::move(inner)), st_(st) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string_view backend() const override { return inner_->backend(); }
  comm::Memory memory() const override { return comm::Memory::kHost; }
  comm::Handle iall_reduce(const void* s, void* r, size_t n, DType t, comm::ReduceOp op) override {
    return wrap(inner_->iall_reduce(s, r, n, t, op));
  }
  comm::Handle iall_gather(const void* s, void* r, size_t n, DType t) override {
    return wrap(inner_->iall_gather(s, r, n, t));
  }
  comm::Handle ireduce_scatter(const void* s, void* r, size_t n, DType t,
                               comm::ReduceOp op) override {
    return wrap(inner_->ireduce_scatter(s, r, n, t, op));
  }
  comm::Handle ibroadcast(void* b, size_t n, DType t, int root) override {
    return wrap(inner_->ibroadcast(b, n, t, root));
  }
  comm::Handle isend(const void* b, size_t n, DType t, int peer) override {
    return wrap(inner_->isend(b, n, t, peer));
  }
  comm::Handle irecv(void* b, size_t n, DType t, int peer) override {
    return wrap(inner_->irecv(b, n, t, peer));
  }
  void barrier() override { inner_->barrier(); }
  std::unique_ptr<comm::Comm> split(int color, int key) override {
    std::unique_ptr<comm::Comm> sub = inner_->split(color, key);
    if (!sub) return nullptr;
    return std::make_unique<OrderingComm>(std::move(sub), st_);
  }

 private:
  comm::Handle wrap(comm::Handle h) {
    counters_ = inner_->counters();  // the engine's traffic figures read these
    return std::make_unique<OrderingRequest>(std::move(h), st_);
  }
  std::unique_ptr<comm::Comm> inner_;
  OrderStats& st_;
};

TEST(Staged, DeviceOrderingBranchKeepsHandlesAndTrainsBitwise) {
  const int n = world_size();
  Hyper h;
  h.accum = 2;
  h.steps = 3;
  const std::vector<StagedCase> cases = {
      {"stage0", 0, 0, 1},
      {"stage1 rpn2", 1, 2, 1},
      {"stage2 rpn2 bf16", 2, 2, 1, false, false, DType::kBF16},
      {"stage3", 3, 0, 1},
      {"stage3 rpn2 hpZ", 3, 2, 0},
      {"stage3 rpn2 hpZ qwZ qgZ", 3, 2, 0, true, true},
  };
  for (const StagedCase& c : cases) {
    if (c.rpn > 0 && n % c.rpn != 0) continue;
    // Tied embeddings: two units in use at once (and, under qgZ, a head shard wholly in
    // the padding: Lossy.TiedEmbeddingsWithShardsInThePadding).
    const model::Config cfg = reduced_config(/*tied=*/true);
    Comms plain = make_comms(c.rpn);
    Engine direct = make_engine(c, EngineOptions::Device::kHost, cfg, h, plain);
    const EngineRun want = engine_run(direct, cfg, h, h.steps);

    Comms base = make_comms(c.rpn);
    OrderStats st;
    Comms ordering;
    ordering.world = std::make_unique<OrderingComm>(std::move(base.world), st);
    if (base.node) ordering.node = std::make_unique<OrderingComm>(std::move(base.node), st);
    if (base.cross) ordering.cross = std::make_unique<OrderingComm>(std::move(base.cross), st);
    Engine e = make_engine(c, EngineOptions::Device::kHost, cfg, h, ordering);
    const EngineRun got = engine_run(e, cfg, h, h.steps);
    EXPECT_EQ(got.losses, want.losses) << c.name;
    EXPECT_EQ(got.norms, want.norms) << c.name;
    EXPECT_EQ(got.params, want.params) << c.name;
    EXPECT_GT(st.kept, 0) << c.name << ": the engine never took the device branch";
    EXPECT_EQ(st.checked, st.kept) << c.name << ": kept requests never waited on";
    if (world_rank() == 0)
      std::printf("[ staged ] np %d %-24s ordering branch: %ld requests kept, %ld checked at "
                  "the end of their pass; losses %.6f -> %.6f\n",
                  n, c.name.c_str(), st.kept, st.checked, got.losses.front(), got.losses.back());
  }
}

}  // namespace
}  // namespace zt::zero::testing
