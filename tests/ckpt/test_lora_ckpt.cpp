// LoRA / QLoRA checkpoints (docs/checkpoint-format.md "Adapter checkpoints"):
//  - the file holds the adapters alone (no base tensor), their moments and /state, with
//    finetune, base_path and base_hash at the root;
//  - exact resume at the same world size: straight run == stop + resume (losses, grad
//    norms and the final file's adapters and moments bitwise), the base loaded again
//    from ckpt.init_from (or the file's base_path);
//  - at any world size: saved at np 2 and loaded at np 1 (and the other way round, on a
//    one-rank communicator inside the same job), adapters and moments bitwise equal to
//    the file;
//  - a resume on another base, with other lora.* keys, or of a whole-model file: exit 2
//    (zt::InputError) naming the files and hashes / keys.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <filesystem>

#include "ckpt_fixtures.hpp"
#include "zt/ckpt/adapters.hpp"
#include "zt/ckpt/checkpoint.hpp"
#include "zt/ckpt/publish.hpp"
#include "zt/ckpt/serial.hpp"
#include "zt/core/error.hpp"
#include "zt/model/lora.hpp"
#include "zt/model/model.hpp"
#include "zt/train/trainer.hpp"
#include "zt/zero/engine.hpp"

namespace {

using namespace zt::ckpt::testing;

const std::vector<std::string> kLora = {"finetune.method=lora", "lora.rank=4",
                                        "lora.targets=q,k,v,o,gate,up,down,lm_head"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A whole-model weights file of small_config's shape, initialised from `seed` (rank 0
// writes; everyone waits): a stand-in for a pre-trained base.
std::string write_base(const std::string& name, uint64_t seed, const std::vector<std::string>& extra = {}) {
  const std::string path = (std::filesystem::current_path() / (name + ".h5")).string();
  if (world_rank() == 0) {
    const zt::train::TrainConfig t = small_config(1, extra);
    zt::model::Parameters<float> p{zt::model::ParamLayout(t.model)};
    p.init(zt::model::InitOptions{seed, 0.02, true});
    std::filesystem::remove(path);
    zt::ckpt::write_weights_only(path, t.model, p);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return path;
}

// The resumed run's steps whose loss or gradient norm differs (bitwise) from the
// straight run's same steps.
int resumed_diffs(const zt::train::TrainResult& straight, const zt::train::TrainResult& resumed) {
  int diffs = 0;
  for (size_t s = 0; s < resumed.steps.size(); ++s) {
    const size_t at = static_cast<size_t>(resumed.first_step) + s;
    diffs += straight.steps[at].loss != resumed.steps[s].loss ||
             straight.steps[at].grad_norm != resumed.steps[s].grad_norm;
  }
  return diffs;
}

template <class F>
std::string input_error_of(F&& f) {
  try {
    f();
  } catch (const zt::InputError& e) {
    return e.what();
  }
  return "";
}

TEST(LoraCheckpoint, ExactResumeAdaptersOnlyAndBaseChecks) {
  omp_set_num_threads(1);
  const int world = world_size();
  Comms c = make_comms(0);
  const zt::train::NodeComms nodes{c.node.get(), c.cross.get(), c.mpi};
  const std::string base = write_base("lora_base_np" + std::to_string(world), 777);
  const std::string other = write_base("lora_other_np" + std::to_string(world), 778);
  const std::vector<std::string> run = with(
      kLora, {"zero.stage=" + std::to_string(world > 1 ? 3 : 0), "train.steps=12", "ckpt.init_from=" + base});
  const std::string np = "_np" + std::to_string(world);  // np 1 and 2 may run at once
  const std::string straight_dir = fresh_dir("lora_straight" + np);
  const std::string split_dir = fresh_dir("lora_split" + np);
  const auto straight = zt::train::train(small_config(world, with(run, {"ckpt.dir=" + straight_dir})),
                                         *c.world, corpus(), {}, nodes);
  const auto first = zt::train::train(
      small_config(world, with(run, {"ckpt.dir=" + split_dir, "ckpt.stop_after=6"})), *c.world,
      corpus(), {}, nodes);
  ASSERT_TRUE(first.stopped);
  // Resume (auto, with init_from: the requeued fine-tuning job) from step 6.
  const auto second = zt::train::train(
      small_config(world, with(run, {"ckpt.dir=" + split_dir, "ckpt.resume=auto"})), *c.world,
      corpus(), {}, nodes);
  ASSERT_EQ(second.first_step, 6);
  ASSERT_EQ(second.steps.size(), 6u);
  const int diffs = resumed_diffs(straight, second);
  EXPECT_EQ(diffs, 0) << "steps 7-12 differ from the straight run";
  EXPECT_LT(straight.steps.back().loss, straight.steps.front().loss);

  // The file: adapters only, the base named by path and hash.
  const std::string hash = zt::ckpt::base_hash(c.mpi, base);
  EXPECT_EQ(hash.size(), 16u);
  EXPECT_NE(hash, zt::ckpt::base_hash(c.mpi, other));
  if (world_rank() == 0) {
    const zt::ckpt::FullCheckpoint a = zt::ckpt::read_full(straight_dir + "/step-12.h5");
    const zt::ckpt::FullCheckpoint b = zt::ckpt::read_full(split_dir + "/step-12.h5");
    EXPECT_EQ(a.header.contents, "adapters");
    EXPECT_EQ(a.header.adapters.base_path, std::filesystem::absolute(base).string());
    EXPECT_EQ(a.header.adapters.base_hash, hash);
    EXPECT_EQ(a.header.adapters.finetune,
              R"({"alpha":16.0,"dropout":0.0,"method":"lora","rank":4,"rslora":false,)"
              R"("targets":["q","k","v","o","gate","up","down","lm_head"]})");
    ASSERT_EQ(a.params.size(), 1u);  // one unit: the adapters
    const zt::model::ParamLayout fl = zt::ckpt::file_layout(a.header);
    for (const zt::model::TensorInfo& t : fl.tensors())
      EXPECT_NE(t.name.find(".lora_"), std::string::npos) << t.name << " is not an adapter";
    EXPECT_TRUE(same_bits(a.params[0], b.params[0]));
    EXPECT_TRUE(same_bits(a.exp_avg[0], b.exp_avg[0]));
    EXPECT_TRUE(same_bits(a.exp_avg_sq[0], b.exp_avg_sq[0]));
    std::printf("[lora ckpt] %d ranks: steps 7-12 after resume %s; file %s holds %zu adapter "
                "tensors, base hash %s\n",
                world, diffs == 0 ? "bitwise equal" : "DIFFER", (split_dir + "/step-12.h5").c_str(),
                fl.tensors().size(), hash.c_str());
  }

  // Resume on another base: exit 2 naming both files and both hashes.
  const std::string msg = input_error_of([&] {
    zt::train::train(small_config(world, with(kLora, {"ckpt.dir=" + split_dir, "ckpt.resume=auto",
                                                      "train.steps=14", "ckpt.init_from=" + other})),
                     *c.world, corpus(), {}, nodes);
  });
  EXPECT_NE(msg.find(base), std::string::npos) << msg;
  EXPECT_NE(msg.find(other), std::string::npos) << msg;
  EXPECT_NE(msg.find(hash), std::string::npos) << msg;
  // Other lora.* keys: exit 2 naming the settings.
  const std::string rank_msg = input_error_of([&] {
    zt::train::train(small_config(world, with(kLora, {"ckpt.dir=" + split_dir, "ckpt.resume=auto",
                                                      "train.steps=14", "lora.rank=8"})),
                     *c.world, corpus(), {}, nodes);
  });
  EXPECT_NE(rank_msg.find("\"rank\":4"), std::string::npos) << rank_msg;
  // Without init_from the file's base_path is the base: resumes (steps 13-14).
  const auto third = zt::train::train(
      small_config(world, with(kLora, {"ckpt.dir=" + split_dir, "ckpt.resume=auto", "train.steps=14",
                                       "zero.stage=" + std::to_string(world > 1 ? 3 : 0)})),
      *c.world, corpus(), {}, nodes);
  EXPECT_EQ(third.first_step, 12);
  EXPECT_EQ(third.steps.size(), 2u);
  // A whole-model file is no LoRA resume; an adapters file is no init_from.
  EXPECT_NE(input_error_of([&] {
              zt::train::train(small_config(world, with(kLora, {"ckpt.dir=" + fresh_dir("lora_x" + np),
                                                                "ckpt.resume=" + base})),
                               *c.world, corpus(), {}, nodes);
            }).find("holds a whole model"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] {
              zt::train::train(small_config(world, with(kLora, {"ckpt.dir=" + fresh_dir("lora_y" + np),
                                                                "ckpt.init_from=" + split_dir + "/step-12.h5"})),
                               *c.world, corpus(), {}, nodes);
            }).find("is an adapters file"),
            std::string::npos);
}

// An engine of `t` on `comm` (world size comm's), trained 3 steps on fixed batches from
// the base, saved into dir; returns the file.
std::string train_and_save(const zt::train::TrainConfig& t, zt::comm::Comm& comm, MPI_Comm mpi,
                           const std::string& base, const std::string& dir) {
  zt::zero::Engine e(t.model, comm, nullptr, nullptr, t.zero, zt::model::InitOptions{t.seed, t.init_std, true});
  zt::ckpt::load_weights(e, mpi, base);
  train_fixed_batches(e, t, 99 + static_cast<uint64_t>(comm.rank()), 3);
  zt::ckpt::TrainState st = train_state(t, 3);
  st.base_path = base;
  st.base_hash = zt::ckpt::base_hash(mpi, base);
  return zt::ckpt::save(e, mpi, dir, st, 0, t.seed).path;
}

// Loads `file` into an engine of `t` on `comm` (another init seed) and compares the
// adapters and this rank's moments with the serial reader's: the number of unequal spans.
int load_and_compare(const zt::train::TrainConfig& t, zt::comm::Comm& comm, MPI_Comm mpi,
                     const std::string& base, const std::string& file) {
  zt::zero::Engine e(t.model, comm, nullptr, nullptr, t.zero, zt::model::InitOptions{t.seed + 5, t.init_std, true});
  zt::ckpt::load_weights(e, mpi, base);
  const zt::ckpt::TrainState st = zt::ckpt::load(e, mpi, file);
  EXPECT_EQ(st.step, 3);
  EXPECT_EQ(e.steps_done(), 3);
  const zt::ckpt::FullCheckpoint f = zt::ckpt::read_full(file);
  const int a = e.model().layout().adapter_unit();
  zt::model::Parameters<float> full(e.model().layout());
  e.gather_full_params(full);
  const zt::zero::OwnedSlice o = e.owned(a);
  const auto at = [&](const std::vector<float>& v) {
    return std::span<const float>(v).subspan(static_cast<size_t>(o.begin), static_cast<size_t>(o.count));
  };
  return !same_bits(std::span<const float>(f.params[0]), std::span<const float>(full.params(a))) +
         !same_bits(at(f.exp_avg[0]), o.m) + !same_bits(at(f.exp_avg_sq[0]), o.v);
}

const std::vector<std::string> kQlora = {"finetune.method=qlora", "lora.rank=4",
                                         "lora.targets=q,k,v,o,gate,up,down,lm_head"};

// QLoRA's base from a whole-model file (ckpt.init_from): the units without the targeted W
// read collectively, each unit's targeted W read whole into the NF4 quantiser. The
// engine's units hold the file's values of their tensors bit for bit, and it computes
// what the whole-model path computes (Model(cfg) on the file's units, QloraBase from
// them, the engine's adapters) bit for bit; a requeued QLoRA run (adapters file + base
// from init_from) resumes exactly. Stage 0 at np 1, stage 3 at np 2.
TEST(LoraCheckpoint, QloraBaseFromTheFileAndExactResume) {
  omp_set_num_threads(1);
  const int world = world_size();
  Comms c = make_comms(0);
  const std::string np = "_np" + std::to_string(world);
  const std::string stage = "zero.stage=" + std::to_string(world > 1 ? 3 : 0);
  const std::string base = write_base("qlora_base" + np, 991);
  for (const bool tied : {false, true}) {  // tied: lm_head's W is the embedding, in the units
    SCOPED_TRACE(tied ? "tied" : "untied");
    const std::vector<std::string> shape = {"model.tied_embeddings=" + std::string(tied ? "true" : "false")};
    const std::string file = tied ? write_base("qlora_base_tied" + np, 992, shape) : base;
    const zt::train::TrainConfig t = small_config(world, with(with(kQlora, shape), {stage}));
    zt::zero::Engine e(t.model, *c.world, nullptr, nullptr, t.zero, zt::model::InitOptions{t.seed, t.init_std, true});
    zt::ckpt::load_weights(e, c.mpi, file);
    train_fixed_batches(e, t, 7 + static_cast<uint64_t>(world_rank()), 2);  // adapters' B != 0
    const zt::model::ParamLayout& layout = e.model().layout();
    zt::model::Parameters<float> held(layout);
    e.gather_full_params(held);
    const zt::ckpt::FullCheckpoint f = zt::ckpt::read_full(file);
    const zt::model::ParamLayout whole(t.model);
    int unequal = 0;
    for (const zt::model::TensorInfo& x : layout.tensors()) {
      if (x.unit == layout.adapter_unit()) continue;
      const zt::model::TensorInfo& w = whole.find(x.name);
      unequal += !same_bits(held.params(x.unit).subspan(static_cast<size_t>(x.offset), static_cast<size_t>(x.numel)),
                            std::span<const float>(f.params[static_cast<size_t>(w.unit)])
                                .subspan(static_cast<size_t>(w.offset), static_cast<size_t>(w.numel)));
    }
    EXPECT_EQ(unequal, 0) << "units that differ from the base file";
    EXPECT_LT(layout.total_numel() - layout.unit(layout.adapter_unit()).numel, whole.total_numel());
    // The whole-model path on the engine's adapters.
    std::vector<std::span<const float>> spans;
    for (const auto& v : f.params) spans.push_back(v);
    const zt::model::LoraLayout ll(t.model, t.zero.lora);
    const zt::model::QloraBase q(ll, whole, spans);
    zt::model::Model<float> m(t.model, t.micro_batch, t.seq_len);
    for (int u = 0; u < whole.num_units(); ++u) m.bind_unit(u, f.params[static_cast<size_t>(u)], {});
    m.bind_lora(ll, held.params(layout.adapter_unit()), {});
    m.bind_qlora(q);
    std::vector<int32_t> tok(static_cast<size_t>(t.seq_len)), tgt(tok.size());  // [1, T]
    for (size_t i = 0; i < tok.size(); ++i) {
      tok[i] = static_cast<int32_t>((i * 7 + 3) % static_cast<size_t>(t.model.vocab));
      tgt[i] = static_cast<int32_t>((i * 5 + 1) % static_cast<size_t>(t.model.vocab));
    }
    const double want = m.loss(tok, tgt, 1, t.seq_len), got = e.eval_loss(tok, tgt, 1, t.seq_len);
    EXPECT_EQ(std::memcmp(&want, &got, sizeof want), 0) << want << " vs " << got;
  }

  // A requeued QLoRA run resumes exactly (the base again from init_from, the NF4 base
  // quantised from the file, not from fp32 units).
  const zt::train::NodeComms nodes{c.node.get(), c.cross.get(), c.mpi};
  const std::vector<std::string> run = with(kQlora, {stage, "train.steps=6", "ckpt.init_from=" + base});
  const std::string straight_dir = fresh_dir("qlora_straight" + np), split_dir = fresh_dir("qlora_split" + np);
  const auto straight = zt::train::train(small_config(world, with(run, {"ckpt.dir=" + straight_dir})),
                                         *c.world, corpus(), {}, nodes);
  const auto first = zt::train::train(
      small_config(world, with(run, {"ckpt.dir=" + split_dir, "ckpt.stop_after=3"})), *c.world, corpus(), {}, nodes);
  ASSERT_TRUE(first.stopped);
  const auto second = zt::train::train(
      small_config(world, with(run, {"ckpt.dir=" + split_dir, "ckpt.resume=auto"})), *c.world, corpus(), {}, nodes);
  ASSERT_EQ(second.first_step, 3);
  ASSERT_EQ(second.steps.size(), 3u);
  EXPECT_EQ(resumed_diffs(straight, second), 0) << "steps 4-6 differ from the straight run";
}

TEST(LoraCheckpoint, AnyWorldSize) {
  if (world_size() != 2) GTEST_SKIP() << "saves at np 2 and at np 1 (a one-rank communicator) in one job";
  omp_set_num_threads(1);
  const std::string base = write_base("lora_base_any", 4242);
  Comms c = make_comms(0);
  std::unique_ptr<zt::comm::Comm> self = zt::comm::make_mpi_comm(MPI_COMM_SELF);
  const zt::train::TrainConfig t2 = small_config(2, with(kLora, {"zero.stage=3"}));
  const zt::train::TrainConfig t1 = small_config(1, with(kLora, {"zero.stage=0"}));
  // np 2 -> np 1
  const std::string from2 = train_and_save(t2, *c.world, c.mpi, base, fresh_dir("lora_any2"));
  int unequal = 0;
  if (world_rank() == 0) unequal += load_and_compare(t1, *self, MPI_COMM_SELF, base, from2);
  // np 1 -> np 2
  const std::string dir1 = fresh_dir("lora_any1");
  std::string from1;
  if (world_rank() == 0) from1 = train_and_save(t1, *self, MPI_COMM_SELF, base, dir1);
  MPI_Barrier(MPI_COMM_WORLD);
  from1 = dir1 + "/step-3.h5";
  unequal += load_and_compare(t2, *c.world, c.mpi, base, from1);
  EXPECT_EQ(unequal, 0);
  if (world_rank() == 0)
    std::printf("[lora ckpt] saved at 2 ranks (stage 3) -> loaded at 1 (stage 0), and 1 -> 2: "
                "adapters + moments bitwise equal to the files: %s\n",
                unequal == 0 ? "yes" : "NO");
}

}  // namespace
