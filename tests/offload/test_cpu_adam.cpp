// The CPU AdamW of the offload store against the scalar reference kernel
// (kernels::cpu::adamw_step, and model::adamw_unit_slice for per-tensor decay), bit for
// bit, at every SIMD level this CPU runs; the parameter copies (fp32, bf16) against the
// master; the level chosen through ZT_CPU_ADAM_ISA. Each SIMD level is its own test
// (CpuAdam/Level.*/scalar|avx2|avx512); a level this CPU lacks is a GTEST_SKIP naming
// it, which CTest reports as skipped.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "support/expect_error.hpp"
#include "zt/kernels/adamw.hpp"
#include "zt/model/config.hpp"
#include "zt/model/layout.hpp"
#include "zt/model/optimizer.hpp"
#include "zt/offload/cpu_adam.hpp"

namespace zt::offload {

// The level's name in test names and messages (gtest would print "1-byte object <01>").
void PrintTo(Isa isa, std::ostream* os) { *os << isa_name(isa); }

namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> x(n);
  for (float& e : x) e = d(rng);
  return x;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class Level : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << "this CPU lacks the " << isa_name(GetParam()) << " level";
  }
};

TEST_P(Level, EqualsTheReferenceBitForBit) {
  const size_t n = 100003;  // several OpenMP tiles and a ragged SIMD tail
  {
    const Isa isa = GetParam();
    std::vector<float> p = randn(n, 1, 0.05f), m(n, 0.0f), v(n, 0.0f);
    std::vector<float> rp = p, rm = m, rv = v;
    std::vector<float> copy(n);
    std::vector<bf16> half(n);
    for (int64_t step = 1; step <= 5; ++step) {
      const std::vector<float> g = randn(n, 100 + static_cast<uint32_t>(step), 1e-2f);
      const double lr = 1e-3 * static_cast<double>(step), wd = 0.1;
      kernels::cpu::adamw_step(rp.data(), g.data(), rm.data(), rv.data(), static_cast<int64_t>(n),
                               lr, 0.9, 0.95, 1e-8, wd, step);
      adamw(adam_scalars(lr, 0.9, 0.95, 1e-8, wd, step), p.data(), g.data(), m.data(), v.data(),
            ParamCopy{copy.data(), half.data()}, static_cast<int64_t>(n), isa);
      ASSERT_TRUE(same_bits(p, rp)) << "master differs at step " << step;
      ASSERT_TRUE(same_bits(m, rm)) << "exp_avg differs at step " << step;
      ASSERT_TRUE(same_bits(v, rv)) << "exp_avg_sq differs at step " << step;
      ASSERT_TRUE(same_bits(copy, p)) << "fp32 copy differs from the master";
      for (size_t i = 0; i < n; ++i) {
        // bf16: the top 16 bits of the float, rounded to nearest even (independent formula)
        uint32_t u;
        std::memcpy(&u, &p[i], 4);
        const double exact = p[i];
        uint32_t hb = static_cast<uint32_t>(half[i].bits) << 16;
        float h;
        std::memcpy(&h, &hb, 4);
        const double ulp = std::ldexp(1.0, std::ilogb(exact) - 7);
        ASSERT_LE(std::fabs(h - exact), 0.5 * ulp) << "bf16 copy not rounded to nearest at " << i;
      }
    }
  }
}

TEST_P(Level, Bf16CopyKeepsNanAndInf) {
  {
    const Isa isa = GetParam();
    std::vector<float> p = {1.0f, 2.0f, 3.0f}, m(3, 0.0f), v(3, 0.0f);
    p.resize(32, 0.5f);
    m.resize(32, 0.0f);
    v.resize(32, 0.0f);
    std::vector<float> g(32, 0.01f);
    g[1] = std::nanf("");
    g[2] = INFINITY;
    std::vector<bf16> half(32);
    adamw(adam_scalars(1e-3, 0.9, 0.95, 1e-8, 0.0, 1), p.data(), g.data(), m.data(), v.data(),
          ParamCopy{nullptr, half.data()}, 32, isa);
    EXPECT_TRUE(std::isnan(static_cast<float>(half[1]))) << isa_name(isa);
    EXPECT_TRUE(std::isnan(p[2]) || std::isinf(p[2]));
    EXPECT_EQ(half[5].bits, bf16::from_float(p[5])) << isa_name(isa);
  }
}

TEST_P(Level, UnitSliceEqualsModelAdamwPerTensorDecay) {
  model::Config c = model::Config::preset("tiny");
  model::ParamLayout layout(c);
  const int u = layout.block_unit(1);
  const int64_t numel = layout.unit(u).numel;
  // A slice that starts inside the input norm and ends inside the MLP: decayed and
  // undecayed tensors both.
  const int64_t begin = 37, count = numel - 1000;
  {
    const Isa isa = GetParam();
    std::vector<float> p = randn(static_cast<size_t>(count), 7, 0.05f);
    p[0] = 1.0f;  // a norm weight
    std::vector<float> m(p.size(), 0.0f), v(p.size(), 0.0f), rp = p, rm = m, rv = v, copy(p.size());
    model::AdamWConfig cfg{3e-3, 0.9, 0.95, 1e-8, 0.1};
    for (int64_t step = 1; step <= 3; ++step) {
      const std::vector<float> g = randn(p.size(), 50 + static_cast<uint32_t>(step), 1e-2f);
      model::adamw_unit_slice<float>(layout, u, begin, rp, g, rm, rv, cfg, step);
      adamw_unit_slice(layout, u, begin, p, g, m, v, ParamCopy{copy.data(), nullptr}, cfg, step, isa);
      ASSERT_TRUE(same_bits(p, rp));
      ASSERT_TRUE(same_bits(m, rm));
      ASSERT_TRUE(same_bits(v, rv));
      ASSERT_TRUE(same_bits(copy, p));
    }
  }
}

TEST_P(Level, ForcedByEnvironment) {
  ::setenv("ZT_CPU_ADAM_ISA", std::string(isa_name(GetParam())).c_str(), 1);
  EXPECT_EQ(default_isa(), GetParam());
  ::unsetenv("ZT_CPU_ADAM_ISA");
}

INSTANTIATE_TEST_SUITE_P(CpuAdam, Level, ::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512),
                         [](const ::testing::TestParamInfo<Isa>& i) { return std::string(isa_name(i.param)); });

TEST(CpuAdam, UnknownLevelInTheEnvironmentIsRefused) {
  ::setenv("ZT_CPU_ADAM_ISA", "sse9", 1);
  zt::testing::expect_input_error([] { (void)default_isa(); }, {"sse9", "scalar, avx2, avx512"});
  ::unsetenv("ZT_CPU_ADAM_ISA");
  EXPECT_TRUE(isa_supported(default_isa()));
}

}  // namespace
}  // namespace zt::offload
