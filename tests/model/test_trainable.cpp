// The engine's model interface on the host (zt/model/trainable.hpp): the host model gives
// bit for bit what Model<float> gives (loss, gradients, logits), and refuses a buffer of
// another space, dtype or size by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "zt/core/error.hpp"
#include "zt/model/model.hpp"
#include "zt/model/trainable.hpp"

namespace zt::model {
namespace {

TEST(TrainableModel, HostModelEqualsModelBitForBit) {
  const Config cfg = Config::preset("tiny");
  const ParamLayout layout(cfg);
  Parameters<float> a(layout), b(layout);
  a.init({.seed = 7});
  b.init({.seed = 7});
  const int64_t B = 2, T = 16, N = B * T;
  std::vector<int32_t> tokens(N), targets(N);
  for (int64_t n = 0; n < N; ++n) {
    tokens[n] = static_cast<int32_t>((n * 37 + 11) % cfg.vocab);
    targets[n] = n % 7 == 3 ? -1 : static_cast<int32_t>((n * 53 + 5) % cfg.vocab);
  }
  Model<float> ref(cfg, B, T);
  a.bind(ref);
  a.zero_grads();
  const double want = ref.loss_and_grad(tokens, targets, B, T, false, 0.5);

  std::unique_ptr<TrainableModel> m = make_host_model(cfg, B, T);
  EXPECT_EQ(m->space(), Space::kHost);
  EXPECT_EQ(m->param_dtype(), DType::kF32);
  b.zero_grads();
  for (int u = 0; u < layout.num_units(); ++u)
    m->bind_unit(u, host_view(std::span<const float>(b.params(u))), host_view(b.grads(u)));
  const double got = m->loss_and_grad(tokens, targets, B, T, false, 0.5);
  EXPECT_EQ(got, want);
  for (int u = 0; u < layout.num_units(); ++u) {
    const std::span<const float> ga = a.grads(u), gb = b.grads(u);
    ASSERT_TRUE(std::equal(ga.begin(), ga.end(), gb.begin())) << layout.unit(u).name;
  }
  EXPECT_EQ(m->loss(tokens, targets, B, T), ref.loss(tokens, targets, B, T));
  std::vector<float> lw(static_cast<size_t>(cfg.vocab)), lg(lw.size());
  ref.logits_last(std::span<const int32_t>(tokens).first(T), T, lw);
  m->logits_last(std::span<const int32_t>(tokens).first(T), T, host_view(std::span<float>(lg)));
  EXPECT_EQ(lw, lg);
  EXPECT_EQ(m->workspace_bytes(), ref.workspace_bytes());
}

TEST(TrainableModel, HostModelRefusesOtherSpacesDtypesAndSizes) {
  const Config cfg = Config::preset("tiny");
  std::unique_ptr<TrainableModel> m = make_host_model(cfg, 1, 8);
  std::vector<float> p(static_cast<size_t>(m->layout().unit(1).numel));
  const int64_t n = static_cast<int64_t>(p.size());
  const auto message = [&](const ConstView& v) {
    try {
      m->bind_unit(1, v, {});
    } catch (const InputError& e) {
      return e.message();
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({p.data(), n, DType::kF32, Space::kDevice}),
            "unit 1 parameters: a device buffer of float, this model takes host buffers of float");
  EXPECT_NE(message({p.data(), n, DType::kBF16, Space::kHost}).find("bfloat16"), std::string::npos);
  EXPECT_NE(message({p.data(), n - 1, DType::kF32, Space::kHost}).find("elements, expected"),
            std::string::npos);
  EXPECT_EQ(message({p.data(), n, DType::kF32, Space::kHost}), "no error");
}

}  // namespace
}  // namespace zt::model
