// Checkpoints from device state (issue 17): the engine on a space the host cannot read
// (the GPU; here the host-staged space, which serves checkpoint slices through host
// copies exactly as the device space does) writes the same file as the engine on the
// host, and either file resumes on either space at any world size, bit for bit.
//
// np 2 (the fixture, WriteAtTwo): stage 3. An uninterrupted host run of 6 steps is the
// reference. A host engine and a host-staged engine each train 3 steps and save; the two
// files hold the same bits (serial reader). Each file resumed on each space (4 runs)
// trains steps 4-6 with losses and final parameters equal (==) to the uninterrupted run.
// np 1 (stage 0) and np 4 (stage 3 + hpZ over 2 simulated nodes), ResumeElsewhere: each
// file resumed on each space; the 4 runs are equal to each other (==), their loaded
// parameters and moments equal the file's.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "ckpt_fixtures.hpp"
#include "zt/ckpt/checkpoint.hpp"
#include "zt/ckpt/serial.hpp"
#include "zt/zero/engine.hpp"

namespace {

using namespace zt::ckpt::testing;
using Device = zt::zero::EngineOptions::Device;

std::string shared_dir() { return (std::filesystem::current_path() / "device_state").string(); }
std::string file_of(Device writer) {
  return shared_dir() + (writer == Device::kHost ? "/host" : "/staged") + "/step-3.h5";
}
const char* name_of(Device d) { return d == Device::kHost ? "host" : "host-staged"; }

// The layout of each world size: np 2 stage 3 flat, np 4 stage 3 + hpZ 2, np 1 stage 0.
std::vector<std::string> layout_keys(int world) {
  switch (world) {
    case 4: return {"zero.stage=3", "zero.hpz_partition_size=2"};
    case 2: return {"zero.stage=3"};
    default: return {"zero.stage=0"};
  }
}
int ranks_per_node(int world) { return world == 4 ? 2 : 0; }

struct Trained {
  std::vector<double> losses;              // per step
  std::vector<std::vector<float>> params;  // per unit, at the end
};

// An engine of this world size's layout on `device`; the host-memory control
// communicator carries its host values (as beside NCCL).
zt::zero::Engine make_engine(Comms& c, Device device, uint64_t seed_offset = 0,
                             const std::string& precision = "fp32") {
  const zt::train::TrainConfig t = small_config(world_size(), layout_keys(world_size()));
  zt::zero::EngineOptions o = t.zero;
  o.device = device;
  o.precision = precision;
  return zt::zero::Engine(t.model, *c.world, c.node.get(), c.cross.get(), o,
                          zt::model::InitOptions{t.seed + seed_offset, t.init_std, true},
                          c.world.get());
}

// Steps [first, last) on this rank's fixed pseudo-random batches (a function of step,
// micro-step and rank only, so every space sees the same ones); then the full parameters.
Trained train_steps(zt::zero::Engine& e, int first, int last) {
  const zt::train::TrainConfig t = small_config(world_size(), layout_keys(world_size()));
  const int64_t B = t.micro_batch, T = t.seq_len;
  std::vector<int32_t> tokens(static_cast<size_t>(B * T)), targets(tokens.size());  // [B, T]
  Trained r;
  for (int step = first; step < last; ++step) {
    for (int64_t m = 0; m < t.accum; ++m) {
      uint64_t s = 977 * static_cast<uint64_t>(step) + 31 * static_cast<uint64_t>(m) +
                   static_cast<uint64_t>(world_rank()) * 7919 + 1;
      for (size_t i = 0; i < tokens.size(); ++i) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        tokens[i] = static_cast<int32_t>((s >> 33) % 256);
        targets[i] = static_cast<int32_t>((s >> 13) % 256);
      }
      e.micro_step(tokens, targets, B, T, false, 1.0 / static_cast<double>(t.accum));
    }
    r.losses.push_back(e.step(1e-3 * (1.0 + 0.1 * step)).loss);
  }
  zt::model::Parameters<float> full(e.model().layout());
  e.gather_full_params(full);
  for (int u = 0; u < full.num_units(); ++u) r.params.emplace_back(full.params(u).begin(), full.params(u).end());
  return r;
}

// Loads `path` into a fresh engine on `reader` (initialised differently, so nothing of
// the file can come from the init), checks the loaded parameters and owned moments
// against the serial reader, and trains steps 4-6.
Trained resume(Comms& c, Device reader, const std::string& path, int* unequal) {
  zt::zero::Engine e = make_engine(c, reader, /*seed_offset=*/1);
  const zt::ckpt::TrainState st = zt::ckpt::load(e, c.mpi, path);
  EXPECT_EQ(st.step, 3);
  EXPECT_EQ(e.steps_done(), 3);
  zt::model::Parameters<float> full(e.model().layout());
  e.gather_full_params(full);
  const zt::ckpt::FullCheckpoint f = zt::ckpt::read_full(path);
  for (int u = 0; u < full.num_units(); ++u) {
    const size_t i = static_cast<size_t>(u);
    *unequal += !same_bits(std::span<const float>(f.params[i]), full.params(u));
    const zt::zero::OwnedSlice o = e.owned(u);  // host copies on the host-staged space
    const auto at = [&](const std::vector<float>& v) {
      return std::span<const float>(v).subspan(static_cast<size_t>(o.begin), static_cast<size_t>(o.count));
    };
    *unequal += !same_bits(at(f.exp_avg[i]), o.m);
    *unequal += !same_bits(at(f.exp_avg_sq[i]), o.v);
  }
  return train_steps(e, 3, 6);
}

int differing(const Trained& a, const Trained& b) {
  int d = a.losses == b.losses ? 0 : 1;
  for (size_t u = 0; u < b.params.size(); ++u) d += same_bits(a.params[u], b.params[u]) ? 0 : 1;
  return d;
}

// Each file resumed on each space: 4 runs, equal (==) to `reference` (or to the first
// of them when there is none).
void resume_everywhere(Comms& c, const Trained* reference) {
  std::vector<Trained> runs;
  int unequal = 0;
  for (Device writer : {Device::kHost, Device::kHostStaged})
    for (Device reader : {Device::kHost, Device::kHostStaged}) {
      runs.push_back(resume(c, reader, file_of(writer), &unequal));
      const Trained& ref = reference ? *reference : runs.front();
      const int d = differing(runs.back(), ref);
      EXPECT_EQ(d, 0) << "written on " << name_of(writer) << ", resumed on " << name_of(reader)
                      << ": losses or units differing";
      if (world_rank() == 0)
        std::printf("[device-state] np %d written on %-11s resumed on %-11s: steps 4-6 losses "
                    "%.9g %.9g %.9g, %d differences from the %s\n",
                    world_size(), name_of(writer), name_of(reader), runs.back().losses[0],
                    runs.back().losses[1], runs.back().losses[2], d,
                    reference ? "uninterrupted run" : "host-written, host-resumed run");
    }
  EXPECT_EQ(unequal, 0) << "loaded parameters or moments differing from the file";
}

TEST(DeviceState, WriteAtTwo) {
  if (world_size() != 2) GTEST_SKIP() << "the fixture runs at np 2";
  omp_set_num_threads(1);
  if (world_rank() == 0) std::filesystem::remove_all(shared_dir());
  Comms c = make_comms(ranks_per_node(2));
  // The uninterrupted reference.
  zt::zero::Engine whole = make_engine(c, Device::kHost);
  const Trained uninterrupted_head = train_steps(whole, 0, 3);
  const Trained uninterrupted = train_steps(whole, 3, 6);
  // 3 steps on each space, saved.
  for (Device writer : {Device::kHost, Device::kHostStaged}) {
    zt::zero::Engine e = make_engine(c, writer);
    const Trained head = train_steps(e, 0, 3);
    EXPECT_EQ(differing(head, uninterrupted_head), 0) << name_of(writer) << ": steps 1-3";
    const std::string dir = std::filesystem::path(file_of(writer)).parent_path().string();
    const zt::ckpt::TrainState st = train_state(small_config(2, layout_keys(2)), 3);
    const zt::ckpt::SaveResult saved = zt::ckpt::save(e, c.mpi, dir, st, 0, 7);
    ASSERT_EQ(saved.path, file_of(writer));
  }
  // The two files hold the same tensors.
  const zt::ckpt::FullCheckpoint fh = zt::ckpt::read_full(file_of(Device::kHost));
  const zt::ckpt::FullCheckpoint fs = zt::ckpt::read_full(file_of(Device::kHostStaged));
  int unequal = 0;
  for (size_t u = 0; u < fh.params.size(); ++u) {
    unequal += !same_bits(fh.params[u], fs.params[u]);
    unequal += !same_bits(fh.exp_avg[u], fs.exp_avg[u]);
    unequal += !same_bits(fh.exp_avg_sq[u], fs.exp_avg_sq[u]);
  }
  EXPECT_EQ(unequal, 0) << "tensors differing between the host- and host-staged-written files";
  resume_everywhere(c, &uninterrupted);
}

TEST(DeviceState, ResumeElsewhere) {
  if (world_size() == 2) GTEST_SKIP() << "np 2 writes";
  omp_set_num_threads(1);
  ASSERT_TRUE(std::filesystem::exists(file_of(Device::kHostStaged)))
      << "run test_ckpt_device_state.np2 first";
  Comms c = make_comms(ranks_per_node(world_size()));
  resume_everywhere(c, nullptr);
}

float bf16_round(float x) { return static_cast<float>(zt::bf16(x)); }

// train.precision = bf16-true through a checkpoint file, at this world size's layout, on
// the host-staged space (which serves the slices as the device does). The file has the
// format of every precision: fp32 datasets, the parameters holding the widened bf16
// values (docs/checkpoint-format.md). A bf16-true run saved after 3 steps and resumed
// by a fresh bf16-true engine trains steps 4-6 bit for bit like the uninterrupted run;
// the same file resumed in fp32 (host) loads exactly those values; an fp32 file resumed
// as bf16-true loads their bf16 rounding (moments exactly).
TEST(DeviceState, Bf16TrueSavesBf16ValuesAndResumesExactly) {
  omp_set_num_threads(1);
  const int n = world_size();
  Comms c = make_comms(ranks_per_node(n));
  const std::string dir = fresh_dir("bf16_true_np" + std::to_string(n));
  const zt::ckpt::TrainState st = train_state(small_config(n, layout_keys(n)), 3);
  zt::zero::Engine whole = make_engine(c, Device::kHostStaged, 0, "bf16-true");
  train_steps(whole, 0, 3);
  const std::string path = zt::ckpt::save(whole, c.mpi, dir + "/bf16", st, 0, 7).path;
  const Trained uninterrupted = train_steps(whole, 3, 6);
  zt::zero::Engine e32 = make_engine(c, Device::kHost);
  train_steps(e32, 0, 3);
  const std::string path32 = zt::ckpt::save(e32, c.mpi, dir + "/fp32", st, 0, 7).path;

  const zt::ckpt::FullCheckpoint f = zt::ckpt::read_full(path);
  const zt::ckpt::FullCheckpoint f32 = zt::ckpt::read_full(path32);
  size_t not_bf16 = 0;
  for (const std::vector<float>& u : f.params)
    for (float x : u) not_bf16 += bf16_round(x) != x ? 1 : 0;
  EXPECT_EQ(not_bf16, 0u) << "saved bf16-true parameters that are not bf16 values";

  int unequal = 0;
  // Loads `file` into a fresh engine (another init) and compares its parameters with
  // `want` and its owned moments with the file's.
  const auto load = [&](zt::zero::Engine& e, const std::string& file,
                        const zt::ckpt::FullCheckpoint& full, bool round) {
    zt::ckpt::load(e, c.mpi, file);
    zt::model::Parameters<float> got(e.model().layout());
    e.gather_full_params(got);
    for (int u = 0; u < got.num_units(); ++u) {
      std::vector<float> want = full.params[static_cast<size_t>(u)];
      if (round) std::transform(want.begin(), want.end(), want.begin(), bf16_round);
      unequal += !same_bits(std::span<const float>(want), got.params(u));
      const zt::zero::OwnedSlice o = e.owned(u);
      const auto at = [&](const std::vector<float>& v) {
        return std::span<const float>(v).subspan(static_cast<size_t>(o.begin), static_cast<size_t>(o.count));
      };
      unequal += !same_bits(at(full.exp_avg[static_cast<size_t>(u)]), o.m);
      unequal += !same_bits(at(full.exp_avg_sq[static_cast<size_t>(u)]), o.v);
    }
  };
  zt::zero::Engine resumed = make_engine(c, Device::kHostStaged, 1, "bf16-true");
  load(resumed, path, f, false);
  const Trained next = train_steps(resumed, 3, 6);
  EXPECT_EQ(differing(next, uninterrupted), 0) << "bf16-true resumed: steps 4-6";
  zt::zero::Engine as_fp32 = make_engine(c, Device::kHost, 1);
  load(as_fp32, path, f, false);
  zt::zero::Engine from_fp32 = make_engine(c, Device::kHostStaged, 1, "bf16-true");
  load(from_fp32, path32, f32, true);
  EXPECT_EQ(unequal, 0) << "loaded parameters or moments differing from the file";
  if (world_rank() == 0)
    std::printf("[device-state] np %d bf16-true: saved %zu parameter values, all bf16; resumed "
                "steps 4-6 losses %.9g %.9g %.9g (uninterrupted %.9g %.9g %.9g)\n",
                n, [&] { size_t k = 0; for (const auto& u : f.params) k += u.size(); return k; }(),
                next.losses[0], next.losses[1], next.losses[2], uninterrupted.losses[0],
                uninterrupted.losses[1], uninterrupted.losses[2]);
}

}  // namespace
