// Expert parallelism (moe.expert_parallel = N; docs/zero.md "Expert parallelism") trains
// like N = 1, for every MoE family, one row each (EpFamily): the reduced Mixtral at
// stages 0-3, the reduced gpt-oss (router bias, top-k softmax, experts' biases, clamped
// SwiGLU) at stages 0, 2 and 3, and Qwen's blocks at stages 0-3: Qwen2-MoE (shared expert
// and its gate, a dense layer, top-k not renormalised), Qwen3-MoE (experts narrower than
// the MLP, a dense layer) and Qwen3.5-MoE (a Gated DeltaNet layer and a full one, shared
// expert). N = 2 at 2 and 4 ranks and N = 4 at 4 ranks (ZeRO over world / N), with and
// without the load-balancing loss in the loss and with accumulation, against the engine
// at the same stage with N = 1 on the same ranks and batches: every step's loss and
// gradient norm, and every parameter after the run (the experts gathered over the expert
// group). Bad values of the key are refused before anything is split, naming both numbers.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "zero_fixtures.hpp"
#include "zt/core/error.hpp"
#include "zt/model/moe_parallel.hpp"

namespace zt::zero::testing {
namespace {

// Relative, fp32 (the experts' sums run in another order): the losses within 1e-6; the
// gradient norms and parameters within kTol (AdamW's m / sqrt(v) turns the rounding of a
// small gradient into a visible step: after 6 steps the largest element's difference is
// up to some 1e-5 of its unit's largest value, the L2 some 1e-6).
constexpr double kLossTol = 1e-6;
constexpr double kTol = 1e-5;

// The MoE families, one row each: the block's parts that expert parallelism must keep.
struct EpFamily {
  const char* name;
  model::Config (*config)(bool aux);
};
const EpFamily kMixtral{"mixtral", [](bool aux) { return reduced_mixtral(false, aux); }};
const EpFamily kGptOss{"gpt_oss", reduced_gpt_oss};          // router/expert biases, clamped SwiGLU
const EpFamily kQwen2Moe{"qwen2_moe", reduced_qwen2_moe};    // shared expert, a dense layer
const EpFamily kQwen3Moe{"qwen3_moe", reduced_qwen3_moe};    // expert width, a dense layer
const EpFamily kQwen35Moe{"qwen3_5_moe", reduced_qwen35_moe};  // linear + full layers, shared expert

struct EpCase {
  int ep;
  int stage;
  int accum;
  bool aux;
  const EpFamily* family = &kMixtral;
};

std::string ep_name(const EpCase& c) {
  return std::string(c.family == &kMixtral ? "" : std::string(c.family->name) + "_") + "ep" +
         std::to_string(c.ep) + "_stage" + std::to_string(c.stage) + "_accum" +
         std::to_string(c.accum) + (c.aux ? "_aux" : "");
}

EngineRun run(const model::Config& cfg, const Hyper& h, int stage, int ep) {
  Comms comms = make_comms(0);
  EngineOptions o = engine_options(h, stage);
  o.expert_parallel = ep;
  Engine e(cfg, *comms.world, comms.node.get(), comms.cross.get(), o, h.init);
  if (ep > 1) {  // this rank's slice of the experts, ZeRO over world / N
    EXPECT_EQ(e.model().layout().expert_parts(), ep);
    EXPECT_EQ(e.model().layout().first_expert(), cfg.experts / ep * (world_rank() % ep));
    EXPECT_NE(e.describe().find("expert parallel"), std::string::npos) << e.describe();
  }
  return engine_run(e, cfg, h, h.steps);
}

class ExpertParallel : public ::testing::TestWithParam<EpCase> {};

TEST_P(ExpertParallel, MatchesExpertParallelOne) {
  const EpCase c = GetParam();
  const int n = world_size();
  if (n % c.ep != 0)
    GTEST_SKIP() << "moe.expert_parallel = " << c.ep << " needs a multiple of " << c.ep << " ranks";
  const model::Config cfg = c.family->config(c.aux);
  Hyper h;
  h.accum = c.accum;
  h.steps = 6;
  const EngineRun ref = run(cfg, h, c.stage, 1);
  const EngineRun got = run(cfg, h, c.stage, c.ep);
  const RunDiff d = run_diff(got, ref.losses, ref.norms, ref.params);
  if (world_rank() == 0)
    std::printf("[ ep ] np %d %-30s vs ep1: max rel diff loss %.2e norm %.2e params %.2e "
                "(L2 %.2e) (loss %.4f -> %.4f)\n",
                n, ep_name(c).c_str(), d.loss, d.norm, d.params, d.params_l2, got.losses.front(),
                got.losses.back());
  EXPECT_LT(d.loss, kLossTol);
  EXPECT_LT(d.norm, 10 * kTol);
  EXPECT_LT(d.params_l2, kTol);
  EXPECT_LT(d.params, 10 * kTol);
  // The routing statistics count every rank's tokens once (summed over the expert group).
  ASSERT_TRUE(got.stats.back().router.has_value());
  ASSERT_TRUE(ref.stats.back().router.has_value());
  EXPECT_EQ(got.stats.back().router->tokens, ref.stats.back().router->tokens);
  EXPECT_NEAR(got.stats.back().router->aux, ref.stats.back().router->aux, 1e-5);
}

std::vector<EpCase> cases() {
  std::vector<EpCase> v;
  for (int ep : {2, 4})
    for (int stage = 0; stage <= 3; ++stage) v.push_back({ep, stage, 1, false});
  for (int ep : {2, 4}) {
    v.push_back({ep, 3, 2, true});
    v.push_back({ep, 1, 2, true});
    for (int stage : {0, 3}) v.push_back({ep, stage, 1, false, &kGptOss});
    v.push_back({ep, 2, 2, true, &kGptOss});
  }
  // Qwen's blocks at every stage: stages 2-3 with the load-balancing loss, stage 2 with
  // accumulation.
  for (const EpFamily* f : {&kQwen2Moe, &kQwen3Moe, &kQwen35Moe})
    for (int ep : {2, 4})
      for (int stage = 0; stage <= 3; ++stage) v.push_back({ep, stage, stage == 2 ? 2 : 1, stage >= 2, f});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cover, ExpertParallel, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<EpCase>& i) { return ep_name(i.param); });

// What the key cannot be: refused by name with both numbers (before any communicator is
// split, the same on every rank).
TEST(ExpertParallelInput, RefusedWithBothNumbers) {
  EngineOptions o;
  o.expert_parallel = 3;
  const auto message = [&](int world, int64_t experts) -> std::string {
    try {
      o.validate_experts(world, experts);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message(4, 6).find("moe.expert_parallel = 3 does not divide the world of 4 ranks"),
            std::string::npos) << message(4, 6);
  o.expert_parallel = 2;
  EXPECT_NE(message(4, 3).find("moe.expert_parallel = 2 does not divide the model's 3 experts"),
            std::string::npos) << message(4, 3);
  EXPECT_NE(message(4, 0).find("does not divide the model's 0 experts"), std::string::npos);
  EXPECT_EQ(message(4, 4), "");
  o.device = EngineOptions::Device::kCuda;  // the GPU model has expert parallelism (fp32)
  EXPECT_EQ(message(4, 4), "");
  o.precision = "bf16-mixed";  // not bf16 yet, by name
  EXPECT_NE(message(4, 4).find("train.precision = bf16-mixed"), std::string::npos) << message(4, 4);
  o.precision = "fp32";
  o.device = EngineOptions::Device::kHostStaged;
  EXPECT_NE(message(4, 4).find("host-staged"), std::string::npos) << message(4, 4);
  o.device = EngineOptions::Device::kHost;
  o.hpz_partition_size = 2;
  EXPECT_NE(message(4, 4).find("zero.hpz_partition_size = 2"), std::string::npos);
  o.hpz_partition_size = 0;
  o.expert_parallel = 1;  // off: anything goes
  EXPECT_EQ(message(3, 0), "");
}

// The model's block, by the same rule `zt estimate` applies (EngineOptions::validate_experts
// with the model), on the host model and the GPU model alike: every MoE block zt has is
// taken (Qwen's expert width, top-k without renormalisation, dense layers, the shared
// expert, Qwen3.5's linear layers); a model without experts is refused by name.
TEST(ExpertParallelInput, TakesEveryMoeBlock) {
  const model::Config mixtral = reduced_mixtral();
  std::vector<model::Config> qwen(4, mixtral);
  for (model::Config& c : qwen) c.family = "qwen3_moe";
  qwen[0].moe_intermediate = mixtral.intermediate / 2;
  qwen[1].norm_topk_prob = false;
  qwen[2].mlp_only_layers = {0};
  qwen[3].family = "qwen2_moe";
  qwen[3].shared_expert_intermediate = 8;
  for (const model::Config& c : {reduced_gpt_oss(), reduced_qwen2_moe(), reduced_qwen3_moe(),
                                 reduced_qwen35_moe()})
    qwen.push_back(c);
  EngineOptions o;
  o.expert_parallel = 2;
  for (const EngineOptions::Device d : {EngineOptions::Device::kHost, EngineOptions::Device::kCuda}) {
    o.device = d;
    SCOPED_TRACE(d == EngineOptions::Device::kCuda ? "train.device = cuda" : "train.device = cpu");
    EXPECT_NO_THROW(o.validate_experts(4, mixtral));
    for (const model::Config& c : qwen) {
      c.validate();
      EXPECT_NO_THROW(o.validate_experts(4, c)) << c.family;
    }
  }
  try {
    model::check_expert_parallel_block(reduced_config(), 2);
    ADD_FAILURE() << "a model without experts accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("moe.expert_parallel = 2 with model family 'llama': the "
                                         "model has no routed experts"),
              std::string::npos) << e.what();
  }
}

// The engine refuses a bad value on every rank alike (a collective would hang otherwise).
TEST(ExpertParallelInput, EngineRefusesExpertsNotDivided) {
  const int n = world_size();
  Comms comms = make_comms(0);
  Hyper h;
  EngineOptions o = engine_options(h, 0);
  o.expert_parallel = n * 2;  // never divides the world
  model::Config cfg = reduced_mixtral();
  EXPECT_THROW(Engine(cfg, *comms.world, comms.node.get(), comms.cross.get(), o, h.init), InputError);
}

}  // namespace
}  // namespace zt::zero::testing
