// The roofline model of a bf16 micro-step (see zt/estimate/step_time.hpp and
// docs/estimate.md "Step time"). Shapes: B batch, T sequence, N = B*T rows, C hidden,
// H heads, G kv heads, D head_dim, HD = H*D, GD = G*D, I intermediate, V vocab, L layers.
#include "zt/estimate/step_time.hpp"

#include <algorithm>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::estimate {
namespace {

constexpr double kAct = 2;     // bf16 activations, weights, gradients (bytes per element)
constexpr double kF32 = 4;     // fp32 statistics, master weights, moments

enum class Kind { kGemm, kAttentionFwd, kAttentionBwd, kCudaCore, kMemory };

class Builder {
 public:
  Builder(const GpuSpec& gpu, const Efficiency& eff, bool cudnn)
      : gpu_(gpu), eff_(eff), cudnn_(cudnn) {}

  // One row: `count` launches of `flops` and `bytes` each.
  void add(const std::string& name, Kind kind, int64_t count, double flops, double bytes) {
    KernelTime k;
    k.name = name;
    k.count = count;
    k.flops = flops * static_cast<double>(count);
    k.bytes = bytes * static_cast<double>(count);
    const double peak = gpu_.bf16_tflops * 1e12;
    double rate = 0;  // FLOP/s this kind reaches; 0: memory-only row
    switch (kind) {
      case Kind::kGemm: rate = peak * eff_.gemm; break;
      case Kind::kAttentionFwd:
        rate = cudnn_ ? peak * eff_.attention_fwd
                      : peak * eff_.cuda_core_ratio * eff_.attention_cuda_core;
        break;
      case Kind::kAttentionBwd:
        rate = cudnn_ ? peak * eff_.attention_bwd
                      : peak * eff_.cuda_core_ratio * eff_.attention_cuda_core;
        break;
      case Kind::kCudaCore: rate = peak * eff_.cuda_core_ratio * eff_.attention_cuda_core; break;
      case Kind::kMemory: break;
    }
    const double t_compute = rate > 0 ? k.flops / rate : 0;
    const double t_memory = k.bytes / (gpu_.bandwidth_gb_s * 1e9 * eff_.memory);
    k.seconds = std::max(t_compute, t_memory);
    k.bound = t_compute > t_memory ? Bound::kCompute : Bound::kMemory;
    rows_.push_back(std::move(k));
  }

  // A bf16 GEMM out [n, m] = in [n, k] x W [k, m]: forward, or backward (dX and dW).
  void gemm(const std::string& name, int64_t count, double n, double k, double m, bool backward) {
    if (!backward)
      add(name + " fwd", Kind::kGemm, count, 2 * n * k * m, kAct * (n * k + k * m + n * m));
    else
      add(name + " bwd", Kind::kGemm, count, 4 * n * k * m,
          kAct * (2 * n * m + 2 * n * k + 2 * k * m));
  }

  std::vector<KernelTime> take() { return std::move(rows_); }

 private:
  const GpuSpec& gpu_;
  Efficiency eff_;
  bool cudnn_;
  std::vector<KernelTime> rows_;
};

// A Gated DeltaNet layer's kernels (Qwen3.5; zt's CUDA kernels, on the CUDA cores): the
// projections in_proj_qkv, z, b, a [C -> Cc + VD + 2 Hv] and out_proj [VD -> C], the
// conv1d + SiLU over Cc channels (kernel K), the chunked rule (per value head and token
// 2 c (2 Dk + Dv) inside a chunk of c = 64 and 6 Dk Dv against the state, as
// Config::flops_per_token; its backward recomputes each chunk: twice the forward) and the
// gated norm over VD. Cc = 2 Hk Dk + Hv Dv, VD = Hv Dv.
void delta_rows(Builder& k, const model::Config& c, double N, int64_t count, bool backward) {
  const double C = static_cast<double>(c.hidden), Cc = static_cast<double>(c.linear_conv_dim());
  const double Hv = static_cast<double>(c.linear_value_heads);
  const double dk = static_cast<double>(c.linear_key_dim), dv = static_cast<double>(c.linear_value_dim);
  const double KD = static_cast<double>(c.linear_key_heads) * dk, VD = Hv * dv;
  const double K = static_cast<double>(c.linear_conv_kernel);
  const double rule = N * Hv * (2.0 * 64.0 * (2.0 * dk + dv) + 6.0 * dk * dv);
  const double rule_bytes = kAct * N * (2 * KD + 2 * VD) + kF32 * 2 * N * Hv;  // q k v out; g beta
  const char* dir = backward ? " bwd" : " fwd";
  const double f = backward ? 2 : 1;  // a backward reads and writes about twice the forward
  auto mixer = [&] {  // the conv, the rule and the norm (one direction)
    k.add(std::string("conv1d+silu") + dir, Kind::kMemory, count, f * (2 * K + 4) * N * Cc,
          f * kAct * 2 * N * Cc);
    k.add(std::string("gated delta rule") + dir + " (zt kernel)", Kind::kCudaCore, count,
          f * rule, f * rule_bytes);
    k.add(std::string("gated norm") + dir, Kind::kMemory, count, f * 6 * N * VD,
          f * kAct * 3 * N * VD);
  };
  if (!backward) {
    k.gemm("delta in_proj", count, N, C, Cc + VD + 2 * Hv, false);
    mixer();
    k.gemm("delta out_proj", count, N, VD, C, false);
  } else {
    k.gemm("delta out_proj", count, N, VD, C, true);
    mixer();
    k.gemm("delta in_proj", count, N, C, Cc + VD + 2 * Hv, true);
  }
}

}  // namespace

bool cudnn_attention_expected(const model::Config& cfg) {
  const int64_t D = cfg.head_dim();
  return D % 8 == 0 && D <= 128 && !cfg.attention_sinks() && cfg.attn_logit_softcap <= 0;
}

StepTime step_time(const model::Config& cfg, int64_t B, int64_t T_in, bool recompute,
                   const GpuSpec& gpu, bool cudnn_attention, const Efficiency& eff) {
  if (gpu.bf16_tflops <= 0 || gpu.bandwidth_gb_s <= 0)
    throw InputError(strf("GPU %s has no bf16 peak or memory bandwidth in gpus.csv",
                          gpu.name.c_str()),
                     "the step-time model needs both; pick a GPU with bf16 (e.g. h100-sxm)");
  const int64_t T = std::min(T_in, cfg.context);
  const double b = static_cast<double>(B), t = static_cast<double>(T);
  const double N = b * t, C = static_cast<double>(cfg.hidden);
  const double H = static_cast<double>(cfg.heads), D = static_cast<double>(cfg.head_dim());
  const double HD = H * D, GD = static_cast<double>(cfg.kv_dim());
  const double I = static_cast<double>(cfg.intermediate), V = static_cast<double>(cfg.vocab);
  const int64_t L = cfg.layers;
  int64_t Ld = 0;  // Gated DeltaNet layers (Qwen3.5); the other La attend
  for (int64_t l = 0; l < L; ++l) Ld += cfg.linear(l) ? 1 : 0;
  const int64_t La = L - Ld;
  const double QP = static_cast<double>(cfg.q_proj_dim());  // q_proj's rows (with the output gate)
  const std::string att = cudnn_attention ? " (cudnn)" : " (zt kernel)";

  Builder k(gpu, eff, cudnn_attention);
  // The blocks' forward (twice per layer with recompute: once in the forward, once before
  // the block's backward).
  const int64_t fwd_count = recompute ? 2 * L : L, att_fwd = recompute ? 2 * La : La;
  const double norm_fwd_bytes = kAct * 4 * N * C + kF32 * N;  // x, residual -> sum, y; rstd
  k.add("rmsnorm+residual fwd", Kind::kMemory, 2 * fwd_count, 4 * N * C, norm_fwd_bytes);
  if (La > 0) {
    k.gemm("qkv_proj", att_fwd, N, C, QP + 2 * GD, false);
    k.add("rope fwd", Kind::kMemory, att_fwd, 3 * N * (HD + GD),
          kAct * 2 * N * (HD + GD) + kF32 * t * D);
    // causal: half of the T x T scores, QK^T and PV each 2 B H T^2 D / 2
    k.add("attention fwd" + att, Kind::kAttentionFwd, att_fwd, 2 * b * H * t * t * D,
          kAct * (2 * N * HD + 2 * N * GD) + kF32 * b * H * t);
    k.gemm("o_proj", att_fwd, N, HD, C, false);
  }
  if (Ld > 0) delta_rows(k, cfg, N, recompute ? 2 * Ld : Ld, false);
  k.gemm("gate_up_proj", fwd_count, N, C, 2 * I, false);
  k.add("swiglu fwd", Kind::kMemory, fwd_count, 4 * N * I, kAct * 3 * N * I);
  k.gemm("down_proj", fwd_count, N, I, C, false);
  // head
  k.add("final rmsnorm fwd", Kind::kMemory, 1, 4 * N * C, kAct * 2 * N * C + kF32 * N);
  k.gemm("lm_head", 1, N, C, V, false);
  // logits read twice (max/sum, then dlogits), dlogits written over them
  k.add("cross_entropy (fused dlogits)", Kind::kMemory, 1, 4 * N * V, kAct * 3 * N * V);
  // backward
  k.gemm("lm_head", 1, N, C, V, true);
  const double norm_bwd_bytes = kAct * 5 * N * C + kF32 * N;  // dout, x, w -> dx; dout, x -> dw
  k.add("final rmsnorm bwd", Kind::kMemory, 1, 6 * N * C, norm_bwd_bytes);
  k.gemm("down_proj", L, N, I, C, true);
  k.add("swiglu bwd", Kind::kMemory, L, 10 * N * I, kAct * 5 * N * I);
  k.gemm("gate_up_proj", L, N, C, 2 * I, true);
  k.add("rmsnorm bwd", Kind::kMemory, 2 * L, 6 * N * C, norm_bwd_bytes);
  if (La > 0) {
    k.gemm("o_proj", La, N, HD, C, true);
    // FA2 backward: 5 T x T products (S, dP recomputed; dV, dQ, dK) against the forward's 2
    k.add("attention bwd" + att, Kind::kAttentionBwd, La, 5 * b * H * t * t * D,
          kAct * (4 * N * HD + 4 * N * GD) + kF32 * 2 * b * H * t);
    k.add("rope bwd", Kind::kMemory, La, 3 * N * (HD + GD),
          kAct * 2 * N * (HD + GD) + kF32 * t * D);
    k.gemm("qkv_proj", La, N, C, QP + 2 * GD, true);
  }
  if (Ld > 0) delta_rows(k, cfg, N, Ld, true);
  // optimizer: fp32 master p, m, v read and written, bf16 grad read, bf16 copy written
  const double P = static_cast<double>(cfg.num_params());
  k.add("adamw (per optimizer step)", Kind::kMemory, 1, 12 * P,
        P * (kF32 * 3 + kAct + kF32 * 3 + kAct));

  StepTime s;
  s.kernels = k.take();
  s.tokens = N;
  s.cudnn_attention = cudnn_attention;
  for (const KernelTime& r : s.kernels) {
    s.seconds += r.seconds;
    s.executed_flops += r.flops;
  }
  s.model_flops = cfg.flops_per_token(T) * N;
  s.mfu = s.model_flops / (s.seconds * gpu.bf16_tflops * 1e12);
  s.tokens_per_second = N / s.seconds;
  return s;
}

}  // namespace zt::estimate
