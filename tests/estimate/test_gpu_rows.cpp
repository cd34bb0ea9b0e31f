// `zt estimate` GPU rows against the engine's own accounting on the device path: the
// ZeRO engine on the host-staged space (host memory treated as a device's: the buffers,
// the bf16 compute copies and gathers, the offload copies and staging of the device
// path; src/zero/memory.cpp) after one step, train.precision fp32, bf16-mixed and
// bf16-true (no offload: refused with it), stages
// 0-3, stage 3 + hpZ (np 4 as 2 simulated nodes), qgZ / bf16 reductions, and offload of
// the optimizer (cpu, nvme) and stage-3 parameters (cpu, nvme). Every category of
// Engine::memory() equals the estimate's Device::kGpu row to the byte. The activations
// are the GPU model's (the host-staged model is the CPU one): they are checked against
// DeviceModel::workspace_bytes() on a GPU (tests/kernels_cuda).
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "support/tmp_dir.hpp"
#include "zero/plan_check.hpp"
#include "zero/zero_fixtures.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/estimate/estimate.hpp"
#include "zt/model/device_workspace.hpp"
#include "zt/model/lora.hpp"
#include "zt/model/model.hpp"

namespace zt::zero::testing {
namespace {

using offload::Home;

struct Case {
  int stage;
  std::string precision;
  Home optimizer = Home::kNone, params = Home::kNone;
  int rpn = 0;  // simulated ranks per node (0: one node)
  int hpz = 1;  // zero.hpz_partition_size
  bool qgz = false, bf16_reduce = false;
  model::FinetuneMethod lora = model::FinetuneMethod::kFull;  // lora / qlora: adapters only trained
};

std::string name(const Case& c) {
  return strf("stage %d %s, optimizer %s, params %s, hpz %d%s%s%s", c.stage, c.precision.c_str(),
              std::string(offload::home_name(c.optimizer)).c_str(),
              std::string(offload::home_name(c.params)).c_str(), c.hpz, c.qgz ? ", qgZ" : "",
              c.bf16_reduce ? ", bf16 reduce" : "",
              c.lora == model::FinetuneMethod::kLora    ? ", lora"
              : c.lora == model::FinetuneMethod::kQlora ? ", qlora"
                                                        : "");
}

// A directory for the NVMe files, the same on every rank; removed after.
std::string nvme_dir() { return zt::testing::rank0_tmp_dir("zt-est-gpu"); }

void compare(const Case& c, const std::string& dir) {
  SCOPED_TRACE(name(c));
  const model::Config cfg = reduced_config();
  Hyper h;
  h.B = 2;
  Comms cm = make_comms(c.rpn);
  EngineOptions o = engine_options(h, c.stage);
  o.device = EngineOptions::Device::kHostStaged;
  o.precision = c.precision;
  o.hpz_partition_size = c.hpz;
  o.quantize_grads = c.qgz;
  if (c.qgz) o.quantize_block = 64;
  if (c.bf16_reduce) o.reduce_dtype = DType::kBF16;
  o.offload.optimizer = c.optimizer;
  o.offload.params = c.params;
  o.offload.nvme_path = dir;
  o.offload.subgroup_bytes = 48 << 10;  // 4096 elements: units of several sub-groups
  o.offload.buffers = 3;
  o.offload.pinned_bytes = 1 << 20;  // two sub-groups and the staging, under a memlock limit
  if (c.lora != model::FinetuneMethod::kFull) {  // rank 4, dropout (its workspace), every target
    o.lora.method = c.lora;
    o.lora.rank = 4;
    o.lora.dropout = 0.1;
    o.lora.targets = model::kProjectionTargets;
  }
  // The host-memory control communicator carries the host values on the staged path.
  Engine e(cfg, *cm.world, cm.node.get(), cm.cross.get(), o, h.init, cm.world.get());
  for (int s = 0; s < 1; ++s) {
    const Batch b = make_batch(world_rank() * h.B, h.B, h.T, cfg.vocab);
    e.micro_step(b.tokens, b.targets, h.B, h.T, false, 1.0);
    e.step(h.lr(s));
  }
  const MemoryStats m = e.memory();
  expect_plan_allocated(e, cfg);  // every rank: the engine allocated its plan

  estimate::Setup s;
  s.model = cfg;
  s.micro_batch = h.B;
  s.seq_len = h.T;
  s.gpus_per_node = c.rpn > 0 ? c.rpn : world_size();
  s.nodes = world_size() / s.gpus_per_node;
  s.device = estimate::Device::kGpu;
  s.zero = o;
  const estimate::Row r = estimate::estimate_row(s, c.stage, c.hpz, static_cast<estimate::Offload>(c.optimizer),
                                                 static_cast<estimate::Offload>(c.params));
  EXPECT_EQ(r.hpz, e.hpz());
  if (world_rank() == 0)
    std::printf("[ gpu rows ] np %d %s: params %llu, grads %llu, optimizer %llu, work %llu, host %llu "
                "(engine: %zu, %zu, %zu, %zu)\n",
                world_size(), name(c).c_str(), static_cast<unsigned long long>(r.param_bytes),
                static_cast<unsigned long long>(r.grad_bytes),
                static_cast<unsigned long long>(r.optimizer_bytes),
                static_cast<unsigned long long>(r.working()),
                static_cast<unsigned long long>(r.host_bytes),
                m.full_params + m.param_shards + m.secondary_shards, m.grads, m.optimizer,
                m.gather_buffers + m.grad_buffers + m.comm_buffers);
  // The store's host buffers round each unit's owned elements: the estimate is rank 0's
  // partition (the last rank may own fewer elements). Without offload every rank's
  // buffers are the same size.
  // bf16-true's AdamW work buffer is the widest slice this rank updates: rank 0's too.
  if (world_rank() != 0 && (c.optimizer != Home::kNone || c.params != Home::kNone ||
                            c.precision == "bf16-true"))
    return;
  // params: full units + bf16 copies (stages 0-2), or shards / device staging + the host
  // shard (stage 3), + hpZ secondaries.
  // QLoRA's NF4 base is held whole at every stage: QloraBase::bytes() of the model's base.
  const size_t nf4 = qlora_base_bytes(cfg, o.lora);
  EXPECT_EQ(m.full_params, c.stage <= 2 ? r.param_bytes : nf4);
  EXPECT_EQ(m.full_params + m.param_shards + m.secondary_shards, r.param_bytes + r.host_param_bytes);
  EXPECT_EQ(m.grads, r.grad_bytes);
  // optimizer: m, v on the device, or the offload store's host bytes.
  EXPECT_EQ(m.optimizer, r.optimizer_bytes + (r.host_bytes - r.host_param_bytes));
  EXPECT_EQ(m.gather_buffers, r.gather_bytes);
  EXPECT_EQ(m.grad_buffers, r.grad_buffer_bytes);
  EXPECT_EQ(m.comm_buffers, r.comm_bytes);
  // Activations: the GPU model's workspace from the formula the device model sizes its
  // buffers with, in the compute dtype.
  // With adapters: the DeviceLora workspace on top (DeviceModel::workspace_bytes()).
  const size_t elem = c.precision == "fp32" ? 4 : 2;
  if (o.lora.enabled())
    EXPECT_EQ(r.activation_bytes,
              model::device_workspace_bytes(cfg, h.B * h.T, elem, false, o.lora,
                                            c.lora == model::FinetuneMethod::kQlora));
  else
    EXPECT_EQ(r.activation_bytes, model::device_workspace_bytes(cfg, h.B * h.T, elem, false));
}

TEST(EstimateGpuRows, EqualTheEngineOnTheDevicePathByCategory) {
  const std::string dir = nvme_dir();
  for (int stage = 0; stage <= 3; ++stage) compare({stage, "bf16-true"}, dir);
  compare({2, "bf16-true", Home::kNone, Home::kNone, 0, 1, false, true}, dir);  // bf16 reductions
  compare({3, "bf16-true", Home::kNone, Home::kNone, 0, 1, true}, dir);         // qgZ
  if (world_size() == 4) compare({3, "bf16-true", Home::kNone, Home::kNone, 2, 0}, dir);  // hpZ
  for (const char* p : {"fp32", "bf16-mixed"}) {
    for (int stage = 0; stage <= 3; ++stage) compare({stage, p}, dir);
    compare({2, p, Home::kNone, Home::kNone, 0, 1, false, true}, dir);  // bf16 reductions
    compare({3, p, Home::kNone, Home::kNone, 0, 1, true}, dir);         // qgZ
    compare({1, p, Home::kCpu}, dir);
    compare({2, p, Home::kNvme}, dir);
    compare({3, p, Home::kCpu, Home::kCpu}, dir);
    compare({3, p, Home::kNvme, Home::kNvme}, dir);
    compare({3, p, Home::kCpu, Home::kNvme}, dir);
    if (world_size() == 4) {
      compare({3, p, Home::kNone, Home::kNone, 2, 0}, dir);  // hpZ over 2 nodes of 2
      compare({3, p, Home::kCpu, Home::kNone, 2, 2}, dir);   // hpZ + optimizer offload
    }
  }
  if (world_rank() == 0) ::rmdir(dir.c_str());
}

// LoRA / QLoRA (docs/zero.md "Frozen units"): the frozen base held, the adapters' unit
// trained, one more gather / reduce slot, QLoRA's NF4 base; with offload (fp32 and
// bf16-mixed) the store holds the adapters' state only, the shards of every unit when
// they move, and with bf16-mixed the frozen units' fp32 values in host memory.
TEST(EstimateGpuRows, LoraAndQloraEqualTheEngineByCategory) {
  const std::string dir = nvme_dir();
  for (model::FinetuneMethod m : {model::FinetuneMethod::kLora, model::FinetuneMethod::kQlora}) {
    for (const char* p : {"fp32", "bf16-mixed", "bf16-true"})
      for (int stage = 0; stage <= 3; ++stage)
        compare({stage, p, Home::kNone, Home::kNone, 0, 1, false, false, m}, dir);
    for (const char* p : {"fp32", "bf16-mixed"}) {
      compare({1, p, Home::kCpu, Home::kNone, 0, 1, false, false, m}, dir);
      compare({2, p, Home::kNvme, Home::kNone, 0, 1, false, false, m}, dir);
      compare({3, p, Home::kCpu, Home::kNone, 0, 1, false, false, m}, dir);
      compare({3, p, Home::kCpu, Home::kCpu, 0, 1, false, false, m}, dir);
      compare({3, p, Home::kNvme, Home::kNvme, 0, 1, false, false, m}, dir);
      compare({3, p, Home::kCpu, Home::kNvme, 0, 1, false, false, m}, dir);
      if (world_size() == 4) compare({3, p, Home::kCpu, Home::kNone, 2, 2, false, false, m}, dir);  // + hpZ
    }
  }
  if (world_rank() == 0) ::rmdir(dir.c_str());
}

// bf16-true with offload: refused by name, as the engine does; its rows stop before them.
TEST(EstimateGpuRows, Bf16TrueWithOffloadIsRefusedByName) {
  estimate::Setup s;
  s.model = reduced_config();
  s.zero.precision = "bf16-true";
  try {
    estimate::estimate_row(s, 2, 1, estimate::Offload::kCpu, estimate::Offload::kNone);
    ADD_FAILURE() << "no error";
  } catch (const zt::InputError& err) {
    EXPECT_NE(std::string(err.what()).find("train.precision = bf16-true"), std::string::npos) << err.what();
  }
  for (const estimate::Row& r : estimate::estimate_all(s))
    EXPECT_EQ(r.optimizer, estimate::Offload::kNone);
}

}  // namespace
}  // namespace zt::zero::testing
