#pragma once
// Precision modes, named as LitGPT names them (the value of the config key
// `train.precision`, to be wired by the trainer; see docs/cuda.md):
//   fp32        fp32 weights, activations, gradients and optimizer state
//   bf16-mixed  bf16 compute (a bf16 copy of the weights, bf16 activations), fp32 master
//               weights, fp32 gradient accumulation, fp32 optimizer state
//   bf16-true   bf16 weights (the parameters themselves: no fp32 master) and activations;
//               fp32 optimizer state (m, v). DeviceModel<bf16, bf16> computes bf16
//               gradients; the ZeRO engine instead binds the bf16-mixed model (fp32
//               gradients, accumulated and reduced in fp32), stores the parameters as
//               bf16 and runs AdamW in fp32 on their widening, rounding each result back
//               to bf16 (docs/zero.md, "bf16-true")
// Header-only and free of CUDA, so CPU builds can parse and validate the key too.
#include <string>
#include <string_view>

#include "zt/core/error.hpp"

namespace zt::kernels {

enum class Precision { kFp32, kBf16Mixed, kBf16True };

inline std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kBf16Mixed: return "bf16-mixed";
    case Precision::kBf16True: return "bf16-true";
  }
  return "fp32";
}

// Throws zt::InputError naming the bad value and the accepted ones.
inline Precision parse_precision(std::string_view s) {
  if (s == "fp32" || s == "32-true") return Precision::kFp32;
  if (s == "bf16-mixed") return Precision::kBf16Mixed;
  if (s == "bf16-true") return Precision::kBf16True;
  throw InputError("train.precision = '" + std::string(s) + "' is not a precision mode",
                   "use fp32, bf16-mixed or bf16-true (LitGPT's names).");
}

// Whether the weights the kernels compute with are bf16 (a bf16 copy or the weights).
inline bool computes_in_bf16(Precision p) { return p != Precision::kFp32; }
// Whether fp32 master weights exist beside the compute weights.
inline bool has_fp32_master(Precision p) { return p == Precision::kBf16Mixed; }
// Whether parameter gradients are accumulated in fp32.
inline bool fp32_gradients(Precision p) { return p != Precision::kBf16True; }

}  // namespace zt::kernels
