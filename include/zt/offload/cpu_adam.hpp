#pragma once
// The CPU AdamW of the offload store: one kernel for every home (device = host on CPU
// builds, pinned host, NVMe sub-groups), SIMD with runtime dispatch (AVX-512, AVX2,
// scalar) and OpenMP over tiles. It updates the fp32 master, exp_avg and exp_avg_sq in
// place and writes the parameter copy the model computes with (fp32 and/or bf16) in the
// same pass.
//
// Every level computes exactly the floats of kernels::cpu::adamw_step's formula, in its
// operation order, without fused multiply-adds (this file's translation unit is built
// with -ffp-contract=off) and with IEEE sqrt and division, so all levels agree bit for
// bit and the engine gives the same parameters whatever the home (docs/offload.md):
//   m = b1 m + (1 - b1) g;  v = b2 v + ((1 - b2) g) g
//   p = p (1 - lr wd) - ((lr / bc1) m) / (sqrt(v) (1 / sqrt(bc2)) + eps)
#include <cstdint>
#include <span>
#include <string_view>

#include "zt/core/dtype.hpp"
#include "zt/model/layout.hpp"
#include "zt/model/optimizer.hpp"

namespace zt::offload {

enum class Isa : uint8_t { kScalar, kAvx2, kAvx512 };

std::string_view isa_name(Isa isa);  // "scalar", "avx2", "avx512"
// "scalar" / "avx2" / "avx512"; throws zt::InputError naming the valid values.
Isa parse_isa(std::string_view text);
bool isa_supported(Isa isa);  // the CPU runs it (cpuid)
// The best level the CPU supports, or the one named by the environment variable
// ZT_CPU_ADAM_ISA (scalar|avx2|avx512) when set; a forced level the CPU lacks throws
// zt::InputError.
Isa default_isa();

// The per-call scalars, derived in double from the hyper-parameters as the reference does.
struct AdamScalars {
  float b1, one_minus_b1, b2, one_minus_b2, decay, step_size, inv_sqrt_bc2, eps;
};
AdamScalars adam_scalars(double lr, double beta1, double beta2, double eps, double weight_decay,
                         int64_t step);

// Where the update writes its parameter copy (either may be null).
struct ParamCopy {
  float* f32 = nullptr;  // [n] fp32 copy (the CPU engine's compute parameters)
  bf16* half = nullptr;  // [n] bf16 copy (a GPU engine's compute parameters)
};

// master, grad, m, v: [n]. master, m, v are updated in place; out receives the new
// master (rounded to bf16 for out.half). OpenMP over tiles of 16 Ki elements.
void adamw(const AdamScalars& s, float* master, const float* grad, float* m, float* v,
           ParamCopy out, int64_t n, Isa isa);

// model::adamw_unit_slice with this kernel: elements [begin, begin + n) of unit u, weight
// decay per tensor from the layout (norm weights undecayed). step is 1-based.
void adamw_unit_slice(const model::ParamLayout& layout, int u, int64_t begin,
                      std::span<float> master, std::span<const float> grad, std::span<float> m,
                      std::span<float> v, ParamCopy out, const model::AdamWConfig& cfg,
                      int64_t step, Isa isa);

}  // namespace zt::offload
