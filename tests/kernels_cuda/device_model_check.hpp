#pragma once
// The GPU model against the CPU model (test helper, label gpu): DeviceModelTest::check_model
// runs one loss_and_grad of DeviceModel<TP, TG> and of Model<Real> on the same parameters
// and batch and compares the loss, the routing of a mixture of experts (tokens per expert
// exactly), every unit's gradient, the forward-only loss and the last position's logits
// (test_device_model.cpp, test_device_qwen_moe.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "cuda_test_util.hpp"
#include "model_params.hpp"
#include "zt/model/device_model.hpp"
#include "zt/model/model.hpp"

namespace zt::kernels::cuda::testing {

using model::Config;
using model::ParamLayout;

struct Batch {
  std::vector<int32_t> tokens, targets;
};

// Mixture of experts: the tokens per expert summed over the blocks equal (the same choices),
// rows equal, the aux loss within tol (relative).
inline void expect_same_routing(const model::RouterStats& want, const model::RouterStats& got,
                         double tol, const std::string& tag) {
  std::printf("[gpu vs cpu] %s router aux %.8f vs %.8f, imbalance %.4f vs %.4f\n", tag.c_str(),
              got.aux, want.aux, got.imbalance(), want.imbalance());
  EXPECT_EQ(got.tokens, want.tokens) << tag << " tokens per expert";
  EXPECT_EQ(got.rows, want.rows) << tag << " routed rows";
  EXPECT_GT(want.aux, 0.0) << tag;
  EXPECT_LT(std::abs(got.aux - want.aux) / want.aux, tol) << tag << " router aux";
}

class DeviceModelTest : public GpuTest {
 public:
  // A random batch (some targets ignored) drawn from the test's seeded generator.
  Batch batch(const Config& cfg, int64_t N) {
    Batch b;
    b.tokens.resize(N);
    b.targets.resize(N);
    for (int64_t n = 0; n < N; ++n) {
      b.tokens[n] = randint(0, static_cast<int32_t>(cfg.vocab) - 1);
      b.targets[n] = n % 11 == 5 ? -1 : randint(0, static_cast<int32_t>(cfg.vocab) - 1);
    }
    return b;
  }

 protected:
  // CPU model in Real on params (rounded to TP first) vs DeviceModel<TP, TG>; with
  // off_init, norm weights and biases drawn off their init (draw_off_init).
  template <class Real, class TP, class TG>
  void check_model(const Config& cfg, int64_t B, int64_t Tn, double loss_tol, double grad_tol,
                   const std::string& tag, bool off_init = false, bool recompute = false) {
    const ParamLayout layout(cfg);
    model::Parameters<float> init(layout);
    init.init({.seed = seed_});
    if (off_init) draw_off_init(init, layout, rng_, 0.1, 3.0);  // biases N(0, 0.3)
    const Batch data = batch(cfg, B * Tn);

    model::Parameters<Real> cpu(layout);
    std::vector<DeviceBuffer<TP>> dp;
    std::vector<DeviceBuffer<TG>> dg;
    model::DeviceModel<TP, TG> gpu(cfg, B, Tn);
    for (int u = 0; u < layout.num_units(); ++u) {
      Vec p(init.params(u).begin(), init.params(u).end());
      dp.push_back(to_device<TP>(p));  // rounds p to TP
      std::copy(p.begin(), p.end(), cpu.params(u).begin());
      dg.emplace_back(p.size());
      dg.back().fill_bytes(0);
      gpu.bind_unit(u, dp.back().data(), dg.back().data());
    }
    model::Model<Real> ref(cfg, B, Tn);
    cpu.bind(ref);
    cpu.zero_grads();
    const double ref_loss = ref.loss_and_grad(data.tokens, data.targets, B, Tn, recompute);
    const double got_loss = gpu.loss_and_grad(data.tokens, data.targets, B, Tn, recompute);
    const double le = std::abs(got_loss - ref_loss) / std::abs(ref_loss);
    std::printf("[gpu vs cpu] %s loss %.8f vs %.8f rel err %.3e (tol %.0e)\n", tag.c_str(),
                got_loss, ref_loss, le, loss_tol);
    EXPECT_LT(le, loss_tol) << tag;
    if (cfg.moe()) expect_same_routing(ref.router_stats(), gpu.router_stats(), loss_tol, tag);
    for (int u = 0; u < layout.num_units(); ++u) {
      const Vec want(cpu.grads(u).begin(), cpu.grads(u).end());
      expect_close(to_host(dg[static_cast<size_t>(u)]), want, grad_tol,
                   tag + " grad " + layout.unit(u).name);
    }
    const double eval = gpu.loss(data.tokens, data.targets, B, Tn);
    EXPECT_LT(std::abs(eval - ref_loss) / ref_loss, loss_tol) << tag << " forward-only loss";
    if (cfg.moe()) {  // the forward-only pass counts the same routing (the CPU's loss too)
      ref.loss(data.tokens, data.targets, B, Tn);
      expect_same_routing(ref.router_stats(), gpu.router_stats(), loss_tol, tag + " forward-only");
    }
    std::vector<Real> last(static_cast<size_t>(cfg.vocab));  // [V] of the first row
    const std::span<const int32_t> row(data.tokens.data(), static_cast<size_t>(Tn));
    ref.logits_last(row, Tn, last);
    DeviceBuffer<TP> out = poisoned<TP>(static_cast<size_t>(cfg.vocab));
    gpu.logits_last(row, Tn, out.data());
    expect_close(to_host(out), Vec(last.begin(), last.end()), grad_tol, tag + " logits_last");
  }
};

}  // namespace zt::kernels::cuda::testing
