#pragma once
// A roofline model of one bf16 training micro-step on one GPU (`zt estimate --gpu NAME`):
// every kernel of the step (src/kernels/cuda, in the order DeviceModel launches them) with
// its FLOPs and bytes moved, timed as
//     t = max(flops / (peak_bf16 * eff_compute), bytes / (bandwidth * eff_memory))
// against a row of data/gpus.csv, summed into a predicted micro-step time and MFU. See
// docs/estimate.md ("Step time") for every formula and docs/cuda.md for the kernel list.
//
// What it leaves out, so a measurement can be held against it: communication (ZeRO
// gathers / reduce-scatters: one GPU, stage 0), kernel launch gaps, the embedding, the
// gradient-norm and clipping pass, and the optimizer's share of a step when gradients are
// accumulated (the AdamW row is per optimizer step).
#include <cstdint>
#include <string>
#include <vector>

#include "zt/estimate/gpus.hpp"
#include "zt/model/config.hpp"

namespace zt::estimate {

// Efficiencies: the share of the GPU's peak a kernel of each kind reaches (stated, not
// measured; the GPU verification issue holds them against a device).
struct Efficiency {
  double gemm = 0.70;            // cuBLASLt bf16 GEMMs of these sizes, of the tensor-core peak
  double attention_fwd = 0.55;   // cuDNN fused SDPA forward (flash attention), of the peak
  double attention_bwd = 0.40;   // cuDNN fused SDPA backward
  double attention_cuda_core = 0.30;  // zt's own attention kernel, of the CUDA-core fp32 peak
  double cuda_core_ratio = 1.0 / 15.0;  // CUDA-core fp32 peak / dense bf16 tensor-core peak
  double memory = 0.80;          // element-wise kernels, of the memory bandwidth
};

enum class Bound { kCompute, kMemory };

struct KernelTime {
  std::string name;     // "qkv_proj fwd", "attention bwd (cudnn)", ...
  int64_t count = 0;    // launches per micro-step (per layer kernels: layers)
  double flops = 0;     // all launches together
  double bytes = 0;     // all launches together
  double seconds = 0;   // all launches together, max of the two bounds
  Bound bound = Bound::kMemory;
};

struct StepTime {
  std::vector<KernelTime> kernels;
  double tokens = 0;            // B * T of the micro-step
  double seconds = 0;           // sum of the kernels (the optimizer row included)
  double model_flops = 0;       // Config::flops_per_token(T) * tokens (6 N + attention)
  double executed_flops = 0;    // sum of the kernels' flops (causal attention, recompute)
  double mfu = 0;               // model_flops / (seconds * peak)
  double tokens_per_second = 0;
  bool cudnn_attention = true;  // the attention rows assume cuDNN's fused SDPA
};

// The micro-step of B sequences of T tokens (T capped at the context) with bf16
// activations and weights and fp32 master weights + AdamW moments (bf16-mixed), with or
// without recompute (the blocks' forward run twice), on `gpu` (bf16_tflops and
// bandwidth_gb_s > 0, else zt::InputError). cudnn_attention: the attention rows run on the
// tensor cores (cuDNN: bf16 and head_dim % 8 == 0); false: zt's CUDA-core kernel.
StepTime step_time(const model::Config& cfg, int64_t B, int64_t T, bool recompute,
                   const GpuSpec& gpu, bool cudnn_attention, const Efficiency& eff = {});

// Whether zt takes cuDNN's fused attention for this model in bf16 (head_dim % 8 == 0 and
// <= 128, no sinks and no attention soft-cap: the rule of zt::kernels::cuda::attention_path
// and its launchers when cuDNN loads).
bool cudnn_attention_expected(const model::Config& cfg);

}  // namespace zt::estimate
