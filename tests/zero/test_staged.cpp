// The device orchestration on a CPU: the engine on the host-staged space (host memory,
// every collective through the pinned-host staging path a device space takes on the MPI
// backend) trains bit for bit like the engine on the host space (the direct path), at
// stages 0-3, hpZ, qwZ/qgZ and bf16 reductions, flat and over simulated nodes. Losses,
// gradient norms, final parameters, the step's traffic per communicator and the memory
// figures must be equal (==, not within a tolerance).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "zero_fixtures.hpp"

namespace zt::zero::testing {
namespace {

struct StagedCase {
  std::string name;
  int stage;
  int rpn;      // simulated ranks per node (0: one node)
  int hpz;      // zero.hpz_partition_size (0: ranks per node, 1: off)
  bool qw = false, qg = false;
  DType reduce = DType::kF32;
};

EngineRun run(const StagedCase& c, EngineOptions::Device device, const model::Config& cfg,
              const Hyper& h, Traffic* traffic, MemoryStats* memory) {
  Comms comms = make_comms(c.rpn);
  EngineOptions o = engine_options(h, c.stage);
  o.hpz_partition_size = c.hpz;
  o.quantize_weights = c.qw;
  o.quantize_grads = c.qg;
  o.reduce_dtype = c.reduce;
  o.device = device;
  Engine e(cfg, *comms.world, comms.node.get(), comms.cross.get(), o, h.init);
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

}  // namespace
}  // namespace zt::zero::testing
