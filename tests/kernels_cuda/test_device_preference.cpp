// The preference objectives (DPO, ORPO; issue 40) on the GPU model (DeviceModel::
// set_row_objective / set_adapters_enabled / row_logps) against the CPU model in double
// (Model's, itself checked against TRL: docs/finetune.md "DPO and ORPO"), both handing
// their rows' summed log-probs to the one pair loss (train::dpo_value, train::orpo_value):
//   - one DPO step with LoRA on all eight targets (the reference: the base, adapters off)
//     on tiny llama, qwen2 (q/k/v biases) and qwen3 (q/k norms, head_dim 32, biases), and
//     on attention's and lm_head on tiny Mixtral (mixture of experts, aux loss);
//   - one ORPO step on full weights, tiny llama and qwen2, with orpo.nll = sequence (the
//     chosen rows' prompt targets are context targets, model.hpp RowObjective: a second
//     sum per row and its gradient) and orpo.nll = completion.
// Compared: each row's log-prob and count, the reference's, the objective's value, TRL's
// metrics and every gradient (the units', or the adapters'). Two pairs, the prompt
// masked, biases and norm weights drawn off their init (model_params.hpp). Tolerance
// 1e-5 relative (per buffer, to its largest value): fp32 on the GPU against double on the
// CPU, sums over at most 128 terms (the log-probs are summed in double on both sides).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda_test_util.hpp"
#include "model_params.hpp"
#include "zt/model/device_model.hpp"
#include "zt/model/lora.hpp"
#include "zt/model/model.hpp"
#include "zt/train/preference.hpp"

namespace zt::kernels::cuda::testing {
namespace {

using model::Config;
using model::ParamLayout;

// One preference step on both models: the rows' log-probs, the value, the metrics and
// every gradient (with LoRA: the adapters', all eight targets, dropout 0).
class DevicePreferenceTest : public GpuTest {
 protected:
  static constexpr int64_t kB = 4, kT = 24;  // two pairs (rows 2p chosen, 2p + 1 rejected)

  // Random rows with the prompt (the first 6 + p positions of pair p's rows) masked, as
  // pairs-to-tokens masks it; context: the chosen rows' prompt targets are context
  // targets -2 - token instead (PairObjective::fill for orpo.nll = sequence).
  void pair_batch(const Config& cfg, bool context, std::vector<int32_t>& tokens,
                  std::vector<int32_t>& targets) {
    tokens.resize(static_cast<size_t>(kB * kT));
    targets.resize(tokens.size());
    for (int64_t b = 0; b < kB; ++b)
      for (int64_t t = 0; t < kT; ++t) {
        const auto n = static_cast<size_t>(b * kT + t);
        tokens[n] = randint(0, static_cast<int32_t>(cfg.vocab) - 1);
        const int32_t next = randint(0, static_cast<int32_t>(cfg.vocab) - 1);
        targets[n] = t >= 6 + b / 2 ? next : context && b % 2 == 0 ? -2 - next : -1;
      }
  }

  struct Side {                          // one side's results
    std::vector<double> ref_logp, logp;  // [B] the reference's and the policy's
    std::vector<int64_t> count;          // [B]; [2B] with context targets (their sums after)
    size_t objective_sums = 0;           // the sums the model handed the objective
    double value = 0;
    train::PairMetrics metrics;
    std::vector<Vec> grads;  // per unit (the adapters' last with LoRA)
  };

  // One step of `objective` (DPO with LoRA when lora, else ORPO on full weights) on the
  // CPU model in double and on DeviceModel<float, float>, each with its own reference
  // log-probs (DPO: the base, adapters off) and the same pair loss.
  void step(const Config& cfg, const train::PreferenceConfig& pc, bool lora,
            const std::string& tag) {
    const ParamLayout layout(cfg);
    model::Parameters<float> init(layout);
    init.init({.seed = seed_});
    draw_off_init(init, layout, rng_, 0.1, 3.0);  // biases N(0, 0.3)
    const bool dpo = lora;  // DPO with LoRA, ORPO on full weights
    const bool sequence = !dpo && pc.orpo_sequence_nll;
    const size_t sums = sequence ? 2 * kB : kB;
    std::vector<int32_t> tokens, targets;
    pair_batch(cfg, sequence, tokens, targets);
    int64_t chosen = 0;  // the chosen rows' NLL targets: own and (sequence) context ones
    for (int64_t b = 0; b < kB; b += 2)
      for (int64_t t = 0; t < kT; ++t) chosen += targets[static_cast<size_t>(b * kT + t)] != -1;
    const double nll_weight = 1.0 / static_cast<double>(chosen);
    model::LoraConfig lc;
    lc.method = model::FinetuneMethod::kLora;
    lc.rank = 4;
    lc.alpha = 8.0;
    lc.targets = model::kProjectionTargets;
    if (cfg.moe())  // the device model takes no adapters on the experts: attention's and lm_head
      lc.targets &= ~((1u << static_cast<int>(model::LoraTarget::kGate)) |
                      (1u << static_cast<int>(model::LoraTarget::kUp)) |
                      (1u << static_cast<int>(model::LoraTarget::kDown)));
    const model::LoraLayout ll(cfg, lc);
    Vec lp = randn(static_cast<size_t>(ll.numel()), 0.05);  // B != 0: the adapters count
    round_all<float>(lp);

    // objective(model side): the one pair loss, on either model's rows
    const auto run = [&](auto& m, Side& s) {
      s.ref_logp.assign(kB, 0.0);
      s.logp.assign(sums, 0.0);
      s.count.assign(sums, 0);
      if (dpo) {
        m.set_adapters_enabled(false);
        m.row_logps(tokens, targets, kB, kT, {}, s.ref_logp, std::span(s.count).first(kB));
        m.set_adapters_enabled(true);
      }
      m.row_logps(tokens, targets, kB, kT, {}, s.logp, s.count);
      const std::vector<double> ref =
          dpo ? s.ref_logp : std::vector<double>{};
      m.set_row_objective([&](std::span<const double> logp, std::span<const int64_t> count,
                              std::span<double> dlogp) {
        s.objective_sums = logp.size();  // as PairObjective::row_value: [B + b] context
        const size_t h = logp.size() == 2 * kB ? kB : logp.size();
        return dpo ? train::dpo_value(pc, logp.first(h), count.first(h), ref, dlogp.first(h), s.metrics)
                   : train::orpo_value(pc, logp.first(h), count.first(h), nll_weight, dlogp.first(h),
                                       s.metrics, logp.subspan(h), dlogp.subspan(h));
      });
      s.value = m.loss_and_grad(tokens, targets, kB, kT, false, 0.5);
      m.set_row_objective({});
    };

    Side cpu_side, gpu_side;
    {  // the CPU model in double
      model::Parameters<double> P(layout);
      for (int u = 0; u < layout.num_units(); ++u)
        std::copy(init.params(u).begin(), init.params(u).end(), P.params(u).begin());
      model::Model<double> m(cfg, kB, kT);
      P.bind(m);
      P.zero_grads();
      std::vector<double> lpd(lp.begin(), lp.end()), lg(lp.size(), 0.0);
      if (lora) m.bind_lora(ll, lpd, lg);
      run(m, cpu_side);
      for (int u = 0; u < layout.num_units() && !lora; ++u)
        cpu_side.grads.emplace_back(P.grads(u).begin(), P.grads(u).end());
      if (lora) cpu_side.grads.emplace_back(lg.begin(), lg.end());
    }
    {  // the GPU model in fp32
      std::vector<DeviceBuffer<float>> dp, dg;
      model::DeviceModel<float, float> m(cfg, kB, kT);
      for (int u = 0; u < layout.num_units(); ++u) {
        Vec p(init.params(u).begin(), init.params(u).end());
        dp.push_back(to_device<float>(p));
        dg.emplace_back(p.size());
        dg.back().fill_bytes(0);
        m.bind_unit(u, dp.back().data(), lora ? nullptr : dg.back().data());
      }
      DeviceBuffer<float> dlp = to_device<float>(lp), dlg(lp.size());
      dlg.fill_bytes(0);
      if (lora) m.bind_lora(ll, dlp.data(), dlg.data());
      run(m, gpu_side);
      for (int u = 0; u < layout.num_units() && !lora; ++u)
        gpu_side.grads.push_back(to_host(dg[static_cast<size_t>(u)]));
      if (lora) gpu_side.grads.push_back(to_host(dlg));
    }

    EXPECT_EQ(cpu_side.objective_sums, sums) << tag;
    EXPECT_EQ(gpu_side.objective_sums, sums) << tag << ": the context targets' sums";
    if (sequence) {
      EXPECT_GT(cpu_side.count[kB], 0) << tag << ": no context target counted (the test's data)";
    }
    EXPECT_EQ(gpu_side.count, cpu_side.count) << tag;
    expect_close(gpu_side.logp, cpu_side.logp, 1e-5, tag + " row log-probs");
    if (dpo) {
      expect_close(gpu_side.ref_logp, cpu_side.ref_logp, 1e-5, tag + " reference log-probs");
      EXPECT_GT(rel_to_max(cpu_side.logp, cpu_side.ref_logp), 1e-4)
          << tag << ": the adapters do not move the log-probs (the reference is not seen)";
    }
    const double ve = std::abs(gpu_side.value - cpu_side.value) / std::abs(cpu_side.value);
    std::printf("[gpu vs cpu] %s value %.8f vs %.8f rel err %.3e (tol 1e-05)\n", tag.c_str(),
                gpu_side.value, cpu_side.value, ve);
    EXPECT_LT(ve, 1e-5) << tag;
    const auto& a = gpu_side.metrics;
    const auto& b = cpu_side.metrics;
    expect_close(
        {a.rewards_chosen, a.rewards_rejected, a.margins, a.logps_chosen, a.logps_rejected},
        {b.rewards_chosen, b.rewards_rejected, b.margins, b.logps_chosen, b.logps_rejected}, 1e-5,
        tag + " metrics");
    EXPECT_EQ(a.accuracies, b.accuracies) << tag;
    ASSERT_EQ(gpu_side.grads.size(), cpu_side.grads.size());
    for (size_t i = 0; i < cpu_side.grads.size(); ++i)
      expect_close(gpu_side.grads[i], cpu_side.grads[i], 1e-5,
                   tag + (lora ? std::string(" adapter grads")
                               : " grad " + layout.unit(static_cast<int>(i)).name));
  }
};

// LoRA on the family models (all eight targets, the adapters' forward and backward around
// the biases and q/k norms), through a DPO step.
TEST_F(DevicePreferenceTest, DpoLoraOnFamilies) {
  train::PreferenceConfig dpo;
  dpo.beta = 0.5;
  step(tiny_family("qwen3", 32, true), dpo, true, "dpo lora qwen3 fp32");
  step(tiny_family("qwen2", 0, false), dpo, true, "dpo lora qwen2 fp32");
}
// Mixtral (E 4, k 2, the aux loss in the value, as the CPU model's): DPO with LoRA on
// attention and lm_head over the frozen experts, ORPO on full weights (router and experts
// trained).
TEST_F(DevicePreferenceTest, DpoLoraAndOrpoOnMixtral) {
  train::PreferenceConfig dpo;
  dpo.beta = 0.5;
  step(tiny_mixtral(4, 2), dpo, true, "dpo lora mixtral fp32");
  train::PreferenceConfig orpo;
  orpo.orpo_lambda = 0.5;
  orpo.orpo_sequence_nll = true;
  step(tiny_mixtral(4, 2), orpo, false, "orpo full mixtral fp32 nll=sequence");
}
TEST_F(DevicePreferenceTest, DpoLoraStepMatchesCpu) {
  train::PreferenceConfig dpo;
  dpo.beta = 0.5;
  dpo.label_smoothing = 0.1;
  step(tiny_family("llama", 0, false), dpo, true, "dpo lora llama fp32");
}
TEST_F(DevicePreferenceTest, OrpoFullStepMatchesCpu) {
  train::PreferenceConfig orpo;
  orpo.orpo_lambda = 0.5;
  orpo.orpo_sequence_nll = true;  // the default: context targets, two sums per row
  step(tiny_family("llama", 0, false), orpo, false, "orpo full llama fp32 nll=sequence");
  step(tiny_family("qwen2", 0, false), orpo, false, "orpo full qwen2 fp32 nll=sequence");
  orpo.orpo_sequence_nll = false;
  step(tiny_family("llama", 0, false), orpo, false, "orpo full llama fp32 nll=completion");
}

}  // namespace
}  // namespace zt::kernels::cuda::testing
