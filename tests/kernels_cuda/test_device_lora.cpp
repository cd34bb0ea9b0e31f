// LoRA and QLoRA on the GPU model (DeviceModel::bind_lora / bind_qlora) against the CPU
// model with the same adapters (Model<float>::bind_lora / bind_qlora, itself checked by
// finite differences in tests/model/test_lora.cpp): the loss, every adapter's gradient
// and the forward-only loss of `tiny` B2 x T32, untied and tied, all eight targets
// (lm_head included) and a subset, dropout 0 and > 0 (the same masks: one counter-based
// rule, zt/kernels/dropout.hpp), recompute off and on; the base's gradient buffers not
// written (no dW GEMM, norm or embedding gradient with adapters bound). QLoRA: the NF4
// dequantisation is the CPU's bit for bit, so the tolerance is the GEMMs'. Qwen3.5's
// Gated DeltaNet projections and output-gated q as targets (tiny_qwen35).
// Tolerances, as the DeviceModel tests': fp32 loss 1e-5, gradients 1e-4 (per adapter,
// relative to its largest value); bf16-mixed against the fp32 CPU model on the same
// bf16-rounded values, loss 1e-2, gradients 5e-2 (all adapters as one buffer).
// The dropout kernel against the CPU's rule bit for bit; the workspace against the
// formula zt estimate shares (zt/model/device_workspace.hpp), on a GPU and without one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cuda_test_util.hpp"
#include "model_params.hpp"
#include "zt/kernels/cuda/dropout.hpp"
#include "zt/kernels/dropout.hpp"
#include "zt/model/device_model.hpp"
#include "zt/model/device_workspace.hpp"
#include "zt/model/init.hpp"
#include "zt/model/lora.hpp"
#include "zt/model/model.hpp"

namespace zt::kernels::cuda::testing {
namespace {

using model::Config;
using model::LoraConfig;
using model::LoraLayout;
using model::LoraTarget;
using model::ParamLayout;

constexpr uint32_t kAllTargets = model::kProjectionTargets;
constexpr uint8_t kSentinel = 0x5A;  // the base's gradient bytes before (and after) a step

uint32_t targets_of(std::initializer_list<LoraTarget> ts) {
  uint32_t m = 0;
  for (LoraTarget t : ts) m |= 1u << static_cast<int>(t);
  return m;
}

LoraConfig lora_config(uint32_t targets, double dropout, bool qlora, int64_t rank = 8) {
  LoraConfig l;
  l.method = qlora ? model::FinetuneMethod::kQlora : model::FinetuneMethod::kLora;
  l.rank = rank;
  l.alpha = 8.0;
  l.dropout = dropout;
  l.targets = targets;
  return l;
}

struct LoraCase {
  bool tied = false;
  uint32_t targets = kAllTargets;
  double dropout = 0.0;
  bool recompute = false;
  bool qlora = false;
  bool unit_grads = true;  // bind sentinel gradient buffers to the units (else nullptr)
  int64_t rank = 8;
  bool mixtral = false;  // tiny_mixtral(4, 2): a MoE base (targets: attention's and lm_head)
  bool qwen35 = false;   // tiny_qwen35: Gated DeltaNet layers l l l, then a full one

  std::string tag() const {
    return std::string(qlora ? "qlora" : "lora") + (mixtral ? " mixtral" : "") +
           (qwen35 ? " qwen3_5_text" : "") +
           (tied ? " tied" : " untied") +
           (targets == kAllTargets ? " all targets" : " a subset of targets") + " dropout " +
           std::to_string(dropout).substr(0, 4) + (recompute ? " recompute" : "") + " rank " +
           std::to_string(rank);
  }
};

class DeviceLoraTest : public GpuTest {
 protected:
  // DeviceModel<TP, TG> with adapters against Model<float> on the same values (rounded
  // to TP first).
  template <class TP, class TG>
  void check(const LoraCase& c, double loss_tol, double grad_tol, bool per_adapter) {
    Config cfg = c.mixtral ? tiny_mixtral(4, 2)
                 : c.qwen35 ? tiny_qwen35(c.tied)
                            : Config::preset("tiny");
    cfg.tied_embeddings = c.tied;
    const ParamLayout layout(cfg);
    const int64_t B = 2, Tn = 32, N = B * Tn;
    const std::string tag = c.tag() + (std::is_same_v<TP, float> ? " fp32" : " bf16-mixed");
    model::Parameters<float> cpu(layout);
    cpu.init({.seed = seed_});
    std::vector<int32_t> tokens(N), targets(N);
    for (int64_t n = 0; n < N; ++n) {
      tokens[n] = randint(0, static_cast<int32_t>(cfg.vocab) - 1);
      targets[n] = n % 11 == 5 ? -1 : randint(0, static_cast<int32_t>(cfg.vocab) - 1);
    }

    model::DeviceModel<TP, TG> gpu(cfg, B, Tn);
    std::vector<DeviceBuffer<TP>> dp;
    std::vector<DeviceBuffer<uint8_t>> dg;  // the units' gradients, as bytes
    for (int u = 0; u < layout.num_units(); ++u) {
      Vec p(cpu.params(u).begin(), cpu.params(u).end());
      dp.push_back(to_device<TP>(p));  // rounds p to TP
      std::copy(p.begin(), p.end(), cpu.params(u).begin());
      dg.emplace_back(c.unit_grads ? p.size() * sizeof(TG) : 0);
      dg.back().fill_bytes(kSentinel);
      gpu.bind_unit(u, dp.back().data(), reinterpret_cast<TG*>(dg.back().data()));
    }
    model::Model<float> ref(cfg, B, Tn);
    for (int u = 0; u < layout.num_units(); ++u) ref.bind_unit(u, cpu.params(u), {});

    const LoraLayout ll(cfg, lora_config(c.targets, c.dropout, c.qlora, c.rank));
    Vec lp = randn(static_cast<size_t>(ll.numel()), 0.05);  // B != 0: dA carries signal
    DeviceBuffer<TP> dlp = to_device<TP>(lp);                // rounds lp to TP
    const std::vector<float> lpf(lp.begin(), lp.end());
    std::vector<float> lg(lpf.size(), 0.0f);
    DeviceBuffer<TG> dlg(lpf.size());
    dlg.fill_bytes(0);
    ref.bind_lora(ll, lpf, lg);
    gpu.bind_lora(ll, dlp.data(), dlg.data());
    std::vector<std::span<const float>> units;  // [units]
    for (int u = 0; u < layout.num_units(); ++u) units.push_back(cpu.params(u));
    std::optional<model::QloraBase> q;
    if (c.qlora) {
      q.emplace(ll, layout, units);
      ref.bind_qlora(*q);
      gpu.bind_qlora(*q);
    }
    ref.set_lora_stream(seed_ + 1);
    gpu.set_lora_stream(seed_ + 1);

    const double want = ref.loss_and_grad(tokens, targets, B, Tn, c.recompute);
    const double got = gpu.loss_and_grad(tokens, targets, B, Tn, c.recompute);
    const double le = std::abs(got - want) / std::abs(want);
    std::printf("[gpu vs cpu] %s loss %.8f vs %.8f rel err %.3e (tol %.0e)\n", tag.c_str(), got,
                want, le, loss_tol);
    EXPECT_LT(le, loss_tol) << tag;
    const Vec gd = to_host(dlg);
    const Vec gw(lg.begin(), lg.end());
    expect_close(gd, gw, grad_tol, tag + " adapter grads");
    if (per_adapter) {
      double worst = 0;
      for (const auto& a : ll.adapters()) {
        const int64_t end = a.b_offset + a.out * ll.lora().rank;  // A then B of this adapter
        const double err = rel_to_max(Vec(gd.begin() + a.a_offset, gd.begin() + end),
                                      Vec(gw.begin() + a.a_offset, gw.begin() + end));
        worst = std::max(worst, err);
        EXPECT_LT(err, grad_tol) << tag << " " << a.name;
      }
      std::printf("[gpu vs cpu] %s worst adapter rel err %.3e (tol %.0e)\n", tag.c_str(), worst,
                  grad_tol);
    }
    // The frozen base: not one byte of its gradient buffers written.
    for (int u = 0; u < layout.num_units(); ++u) {
      ZT_CUDA_CHECK(cudaDeviceSynchronize());
      const std::vector<uint8_t> bytes = dg[static_cast<size_t>(u)].to_host();
      size_t written = 0;
      for (uint8_t b : bytes) written += b != kSentinel;
      EXPECT_EQ(written, 0u) << tag << " unit " << layout.unit(u).name;
    }
    // Forward only (no dropout in eval) on both.
    const double ewant = ref.loss(tokens, targets, B, Tn);
    const double egot = gpu.loss(tokens, targets, B, Tn);
    EXPECT_LT(std::abs(egot - ewant) / std::abs(ewant), loss_tol) << tag << " forward-only loss";
    if (c.dropout > 0.0) {
      EXPECT_NE(want, ewant) << tag << ": dropout changed nothing";
    }
  }
};

TEST_F(DeviceLoraTest, Fp32AllTargetsUntiedAndTied) {
  for (bool tied : {false, true})
    check<float, float>({.tied = tied}, 1e-5, 1e-4, true);
}

TEST_F(DeviceLoraTest, Fp32DropoutRecompute) {
  for (bool recompute : {false, true}) {
    check<float, float>({.tied = false, .dropout = 0.1, .recompute = recompute}, 1e-5, 1e-4, true);
    check<float, float>({.tied = true, .dropout = 0.1, .recompute = recompute}, 1e-5, 1e-4, true);
  }
  // A subset of targets (no lm_head), units bound without gradient buffers at all, an odd
  // rank.
  check<float, float>({.targets = targets_of({LoraTarget::kQ, LoraTarget::kV, LoraTarget::kDown}),
                       .dropout = 0.3, .unit_grads = false, .rank = 3},
                      1e-5, 1e-4, true);
}

// A mixture-of-experts base (Mixtral, aux loss on): adapters on attention and lm_head (the
// CPU model refuses the MLP targets there), LoRA and QLoRA, recompute; the frozen router and
// experts get no gradient (sentinel), the aux loss's gradient reaches the adapters through
// the router's input.
TEST_F(DeviceLoraTest, MixtralBaseAttentionTargetsFp32) {
  const uint32_t attn = targets_of({LoraTarget::kQ, LoraTarget::kK, LoraTarget::kV,
                                    LoraTarget::kO, LoraTarget::kLmHead});
  check<float, float>({.targets = attn, .mixtral = true}, 1e-5, 1e-4, true);
  check<float, float>({.targets = attn, .dropout = 0.1, .recompute = true, .qlora = true,
                       .mixtral = true},
                      1e-5, 1e-4, true);
}

// Qwen3.5 (tiny_qwen35): adapters on the Gated DeltaNet layers' in_proj_qkv, in_proj_z,
// in_proj_b, in_proj_a and out_proj, the full layer's q (its output gate's rows too), k,
// v, o, the MLPs and lm_head; the frozen conv1d, A_log, dt_bias and gated norm get no
// gradient (sentinel); LoRA, then QLoRA with dropout and recompute.
TEST_F(DeviceLoraTest, Qwen35AllTargetsFp32) {
  const uint32_t all = kAllTargets | targets_of({LoraTarget::kInQkv, LoraTarget::kInZ,
                                                 LoraTarget::kInB, LoraTarget::kInA,
                                                 LoraTarget::kOutProj});
  check<float, float>({.targets = all, .qwen35 = true}, 1e-5, 1e-4, true);
  check<float, float>({.targets = all, .dropout = 0.1, .recompute = true, .qlora = true,
                       .qwen35 = true},
                      1e-5, 1e-4, true);
}

TEST_F(DeviceLoraTest, QloraFp32MatchesCpuQlora) {
  check<float, float>({.tied = false, .qlora = true}, 1e-5, 1e-4, true);
  check<float, float>({.tied = true, .dropout = 0.1, .recompute = true, .qlora = true}, 1e-5,
                      1e-4, true);
}

TEST_F(DeviceLoraTest, Bf16MixedTracksFp32) {
  check<bf16_t, float>({.tied = false, .dropout = 0.1}, 1e-2, 5e-2, false);
  check<bf16_t, float>({.tied = true, .recompute = true}, 1e-2, 5e-2, false);
  check<bf16_t, float>({.tied = false, .dropout = 0.1, .qlora = true}, 1e-2, 5e-2, false);
}

// Bindings the CPU model refuses are refused here too, by name: QLoRA before adapters, a
// layout of another model, a training step without adapter gradients.
TEST_F(DeviceLoraTest, RefusesBadBindings) {
  const Config cfg = Config::preset("tiny");
  const ParamLayout layout(cfg);
  model::Parameters<float> P(layout);
  P.init({.seed = 2});
  std::vector<std::span<const float>> units;
  std::vector<DeviceBuffer<float>> dp;
  model::DeviceModel<float, float> gpu(cfg, 1, 8);
  for (int u = 0; u < layout.num_units(); ++u) {
    units.push_back(P.params(u));
    Vec p(P.params(u).begin(), P.params(u).end());
    dp.push_back(to_device<float>(p));
    gpu.bind_unit(u, dp.back().data(), nullptr);
  }
  const LoraLayout ll(cfg, lora_config(kAllTargets, 0.0, true));
  const model::QloraBase q(ll, layout, units);
  EXPECT_THROW(gpu.bind_qlora(q), Error);  // no adapters bound yet
  Config other = cfg;
  other.hidden = 256;
  other.intermediate = 1024;
  const LoraLayout wide(other, lora_config(kAllTargets, 0.0, false));
  DeviceBuffer<float> dlp(static_cast<size_t>(wide.numel()));
  dlp.fill_bytes(0);
  try {
    gpu.bind_lora(wide, dlp.data(), nullptr);
    ADD_FAILURE() << "a LoraLayout of another model accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bind_lora"), std::string::npos) << e.what();
  }
  gpu.bind_lora(ll, dlp.data(), nullptr);  // eval only: no gradient buffer
  std::vector<int32_t> tok(8, 1), tgt(8, 2);
  EXPECT_GT(gpu.loss(tok, tgt, 1, 8), 0.0);
  EXPECT_THROW(gpu.loss_and_grad(tok, tgt, 1, 8), Error);
}

// The workspace after steps with and without recompute is the shared formula with the
// adapters' and the dequantised weight's buffers counted.
template <class TP>
void workspace_is_the_formula(bool qlora, double dropout) {
  const Config cfg = Config::preset("tiny");
  const ParamLayout layout(cfg);
  const int64_t B = 2, Tn = 24, N = B * Tn;
  model::Parameters<float> init(layout);
  init.init({.seed = 7});
  const LoraConfig lc = lora_config(kAllTargets, dropout, qlora);
  const LoraLayout ll(cfg, lc);
  model::DeviceModel<TP, float> gpu(cfg, B, Tn);
  std::vector<DeviceBuffer<TP>> dp;
  std::vector<std::span<const float>> units;
  for (int u = 0; u < layout.num_units(); ++u) {
    Vec p(init.params(u).begin(), init.params(u).end());
    dp.push_back(to_device<TP>(p));
    gpu.bind_unit(u, dp.back().data(), nullptr);
    units.push_back(init.params(u));
  }
  Vec lp(static_cast<size_t>(ll.numel()), 0.01);
  DeviceBuffer<TP> dlp = to_device<TP>(lp);
  DeviceBuffer<float> dlg(lp.size());
  dlg.fill_bytes(0);
  gpu.bind_lora(ll, dlp.data(), dlg.data());
  const model::QloraBase q(ll, layout, units);
  if (qlora) gpu.bind_qlora(q);
  std::vector<int32_t> tok(static_cast<size_t>(N), 3), tgt(static_cast<size_t>(N), 5);
  const size_t elem = sizeof(TP);
  for (bool recompute : {true, false}) {
    gpu.loss_and_grad(tok, tgt, B, Tn, recompute);
    EXPECT_EQ(gpu.workspace_bytes(),
              model::device_workspace_bytes(cfg, N, elem, recompute, lc, qlora))
        << "qlora " << qlora << " dropout " << dropout << " recompute " << recompute;
  }
}

TEST_F(DeviceLoraTest, WorkspaceIsTheEstimateFormula) {
  for (bool qlora : {false, true})
    for (double dropout : {0.0, 0.1}) {
      workspace_is_the_formula<float>(qlora, dropout);
      workspace_is_the_formula<bf16_t>(qlora, dropout);
    }
}

// The dropout kernel keeps exactly the CPU rule's elements (dropout_kept, the one
// definition src/model/lora_apply.cpp uses) and scales them as the fp32 CPU model does:
// fp32 bit for bit, bf16 the fp32 value rounded; the backward adds into dx. Packed and
// misaligned (scalar) paths, a tail.
class DropoutGpu : public GpuTest {};

TEST_F(DropoutGpu, MatchesCpuMasksBitForBit) {
  const double p = 0.3;
  const uint64_t stream = model::init_stream(seed_, "model.layers.0.self_attn.q_proj");
  const float keep = static_cast<float>(1.0 / (1.0 - p));
  for (size_t n : {size_t{4099}, size_t{7}}) {
    for (size_t off : {size_t{0}, size_t{1}}) {
      Vec x = randn(n), d0 = randn(n);
      auto dx = to_device_at<float>(x, off);
      auto dd = to_device_at<float>(d0, off);
      auto out = poisoned<float>(n + off);
      dropout_forward<float>(at(out, off), at(dx, off), static_cast<int64_t>(n), stream, p);
      dropout_backward<float>(at(dd, off), at(dx, off), static_cast<int64_t>(n), stream, p);
      const Vec fo = from(to_host(out), off), bo = from(to_host(dd), off);
      size_t diff = 0, kept = 0;
      for (size_t i = 0; i < n; ++i) {
        const bool k = kernels::dropout_kept(stream, static_cast<int64_t>(i), p);
        kept += k;
        const float xi = static_cast<float>(x[i]);
        const float f = k ? xi * keep : 0.0f;
        const float b = static_cast<float>(d0[i]) + (k ? xi * keep : 0.0f);
        diff += static_cast<float>(fo[i]) != f || static_cast<float>(bo[i]) != b;
      }
      std::printf("dropout f32 n %zu offset %zu: kept %zu, %zu values differ\n", n, off, kept,
                  diff);
      EXPECT_EQ(diff, 0u);
      EXPECT_GT(kept, 0u);
      EXPECT_LT(kept, n);
      // bf16: the fp32 product rounded once.
      Vec xb = x;
      auto bx = to_device_at<bf16_t>(xb, off);
      auto bout = poisoned<bf16_t>(n + off);
      dropout_forward<bf16_t>(at(bout, off), at(bx, off), static_cast<int64_t>(n), stream, p);
      const Vec go = from(to_host(bout), off);
      size_t bdiff = 0;
      for (size_t i = 0; i < n; ++i) {
        const bool k = kernels::dropout_kept(stream, static_cast<int64_t>(i), p);
        const float w = k ? static_cast<float>(zt::bf16(static_cast<float>(xb[i]) * keep)) : 0.0f;
        bdiff += static_cast<float>(go[i]) != w;
      }
      EXPECT_EQ(bdiff, 0u) << "bf16 n " << n << " offset " << off;
    }
  }
}

// Without a device: the formula's LoRA terms are what bind_lora / bind_qlora allocate,
// computed independently: the widest adapter input and the largest W the QloraBase
// quantised (bind_qlora sizes its one dequantised weight from the base itself).
TEST(DeviceLoraWorkspace, FormulaCountsTheAdaptersAndOneDequantisedWeight) {
  const Config cfg = Config::preset("tiny");  // C 128, H*D 128, G*D 64, I 512, V 256
  const ParamLayout layout(cfg);
  model::Parameters<float> P(layout);
  P.init({.seed = 1});
  std::vector<std::span<const float>> units;
  for (int u = 0; u < layout.num_units(); ++u) units.push_back(P.params(u));
  const int64_t N = 48;
  for (uint32_t targets : {kAllTargets, targets_of({LoraTarget::kQ, LoraTarget::kV})}) {
    const LoraConfig lc = lora_config(targets, 0.1, true);
    const LoraLayout ll(cfg, lc);
    int64_t max_in = 0;
    for (const auto& a : ll.adapters()) max_in = std::max(max_in, a.in);
    const model::QloraBase q(ll, layout, units);
    int64_t widest = 0;
    for (const auto& a : ll.adapters()) widest = std::max(widest, q.find(a.layer, a.target)->n);
    const model::DeviceLoraSizes z = model::DeviceLoraSizes::of(cfg, lc, N, true);
    EXPECT_EQ(z.xd, static_cast<size_t>(N * max_in));
    EXPECT_EQ(z.u, static_cast<size_t>(N * lc.rank));
    EXPECT_EQ(z.du, z.u);
    EXPECT_EQ(z.w, static_cast<size_t>(widest));
    // tiny: all targets -> down's in (I = 512), lm_head's W (256 x 128 = 32768) and
    // gate/up/down's (512 x 128 = 65536) the widest; q, v -> in C = 128, q's 128 x 128.
    EXPECT_EQ(z.w, targets == kAllTargets ? 65536u : 16384u);
    EXPECT_EQ(z.xd, static_cast<size_t>(N) * (targets == kAllTargets ? 512u : 128u));
    // No dropout: no dropout(x) buffer; LoRA without QLoRA: no weight workspace.
    const model::DeviceLoraSizes z0 =
        model::DeviceLoraSizes::of(cfg, lora_config(targets, 0.0, false), N, false);
    EXPECT_EQ(z0.xd, 0u);
    EXPECT_EQ(z0.w, 0u);
    EXPECT_EQ(model::device_workspace_bytes(cfg, N, 2, true, lc, true),
              model::device_workspace_bytes(cfg, N, 2, true) + 2 * (z.xd + z.u + z.du + z.w));
  }
}

}  // namespace
}  // namespace zt::kernels::cuda::testing

namespace zt::kernels::cuda::testing {
namespace {

// The engine's view of the GPU model with adapters (make_device_model(..., lora)) against
// the host model's (make_host_model(..., lora), Model<float>::bind_lora underneath): the
// same ParamLayout(cfg, lora); the hook sequence, adapters' unit first and last; the
// loss and the adapters' gradients (fp32: 1e-5 / 1e-4) of two micro-steps and the
// forward-only loss, QLoRA with dropout, all targets. Bound as stage 3 binds: every unit
// (the adapters' unit too) at its before_use, bind_qlora before the adapters' first
// binding (deferred), the base with no gradient views.
TEST_F(DeviceLoraTest, TrainableWrapperMatchesHostTrainable) {
  const Config cfg = Config::preset("tiny");
  const int64_t B = 2, Tn = 32, N = B * Tn;
  const LoraConfig lc = lora_config(kAllTargets, 0.1, /*qlora=*/true);
  std::unique_ptr<model::TrainableModel> host = model::make_host_model(cfg, B, Tn, lc);
  std::unique_ptr<model::TrainableModel> dev = model::make_device_model(cfg, B, Tn, "fp32", nullptr, lc);
  const ParamLayout& layout = host->layout();
  const int a = layout.adapter_unit();
  ASSERT_GE(a, 0);
  ASSERT_EQ(dev->layout().num_units(), layout.num_units());
  ASSERT_EQ(dev->layout().adapter_unit(), a);

  // Values: the base initialised, the adapters random (B != 0: dA carries signal). The
  // run's units (QLoRA's: without the targeted W) hold the whole model's initial values
  // of their tensors (init by name and element); the NF4 base comes from the whole's.
  const ParamLayout base(cfg);
  model::Parameters<float> init(base), held(layout);
  init.init({.seed = seed_});
  held.init({.seed = seed_});
  std::vector<std::vector<float>> hp(static_cast<size_t>(layout.num_units()));  // per unit [numel]
  std::vector<DeviceBuffer<float>> dp;                                           // per unit [numel]
  for (int u = 0; u < layout.num_units(); ++u) {
    ASSERT_EQ(dev->layout().unit(u).numel, layout.unit(u).numel);
    if (u == a) {
      const Vec r = randn(static_cast<size_t>(layout.unit(u).numel), 0.05);
      hp[static_cast<size_t>(u)].assign(r.begin(), r.end());
    } else {
      hp[static_cast<size_t>(u)].assign(held.params(u).begin(), held.params(u).end());
    }
    Vec v(hp[static_cast<size_t>(u)].begin(), hp[static_cast<size_t>(u)].end());
    dp.push_back(to_device<float>(v));
  }
  const size_t an = static_cast<size_t>(layout.unit(a).numel);
  std::vector<float> hg(an, 0.0f);  // [adapters] the host model's adapter gradients
  DeviceBuffer<float> dg(an);       // [adapters] the device model's
  dg.fill_bytes(0);

  // QLoRA before any binding: both models defer it to the adapters' first binding.
  std::vector<std::span<const float>> units;
  for (int u = 0; u < base.num_units(); ++u) units.push_back(init.params(u));
  const model::QloraBase q(LoraLayout(cfg, lc), base, units);
  host->bind_qlora(q);
  dev->bind_qlora(q);

  std::vector<std::string> seen[2];  // [host, device] the hook sequences
  auto hooks = [&](int which) {
    model::UnitHooks h;
    h.before_use = [&, which](int u) {
      seen[which].push_back("before " + std::to_string(u));
      const size_t i = static_cast<size_t>(u);
      const int64_t n = layout.unit(u).numel;
      if (which == 0)
        host->bind_unit(u, model::host_view(std::span<const float>(hp[i])),
                        u == a ? model::host_view(std::span<float>(hg)) : model::MutView{});
      else
        dev->bind_unit(u, {dp[i].data(), n, DType::kF32, model::Space::kDevice},
                       u == a ? model::MutView{dg.data(), n, DType::kF32, model::Space::kDevice}
                              : model::MutView{});
    };
    h.after_use = [&, which](int u) { seen[which].push_back("after " + std::to_string(u)); };
    h.grad_ready = [&, which](int u) { seen[which].push_back("grad " + std::to_string(u)); };
    return h;
  };
  host->set_hooks(hooks(0));
  dev->set_hooks(hooks(1));

  std::vector<int32_t> tokens(N), targets(N);
  for (int64_t n = 0; n < N; ++n) {
    tokens[n] = randint(0, static_cast<int32_t>(cfg.vocab) - 1);
    targets[n] = randint(0, static_cast<int32_t>(cfg.vocab) - 1);
  }
  for (uint64_t stream : {seed_ + 1, seed_ + 2}) {  // two micro-steps: gradients accumulate
    host->set_dropout_stream(stream);
    dev->set_dropout_stream(stream);
    const double want = host->loss_and_grad(tokens, targets, B, Tn, false, 1.0);
    const double got = dev->loss_and_grad(tokens, targets, B, Tn, false, 1.0);
    std::printf("[gpu vs cpu] trainable qlora dropout 0.1 loss %.8f vs %.8f rel err %.3e\n", got,
                want, std::abs(got - want) / std::abs(want));
    EXPECT_LT(std::abs(got - want) / std::abs(want), 1e-5);
  }
  expect_close(to_host(dg), Vec(hg.begin(), hg.end()), 1e-4, "trainable adapter grads");
  const double ewant = host->loss(tokens, targets, B, Tn);
  const double egot = dev->loss(tokens, targets, B, Tn);
  EXPECT_LT(std::abs(egot - ewant) / std::abs(ewant), 1e-5) << "forward-only loss";
  EXPECT_EQ(seen[1], seen[0]);
  ASSERT_FALSE(seen[1].empty());
  EXPECT_EQ(seen[1].front(), "before " + std::to_string(a));
  // A model built without adapters refuses QLoRA by name.
  std::unique_ptr<model::TrainableModel> plain = model::make_device_model(cfg, B, Tn, "fp32", nullptr);
  EXPECT_THROW(plain->bind_qlora(q), InputError);
}

}  // namespace
}  // namespace zt::kernels::cuda::testing
