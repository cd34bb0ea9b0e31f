#pragma once
// The adapters' share of a projection's forward and backward on the GPU (private to
// zt_model_cuda): src/model/lora_apply.hpp's LoraApply on device buffers, called by
// DeviceModel right after the base projection's GEMM. Math (lora.hpp), s = lora.scale():
//   u  = s dropout(x) A^T                             [N, r]   (s in the GEMM's alpha)
//   y += u B^T                                        [N, out] (the GEMM's beta = 1)
//   du = s dy B,  dB += dy^T u,  dA += du^T dropout(x),  dx += dropout'(du A)
// Dropout masks come from zt/kernels/dropout.hpp, the CPU's rule, under the stream of
// set_stream (the CPU's masks for the same stream). QLoRA: each targeted W is read from a
// device copy of the NF4 base, dequantised into one workspace just before its GEMM.
#include <cstdint>
#include <optional>
#include <vector>

#include "zt/kernels/cuda/buffer.hpp"
#include "zt/kernels/cuda/gemm.hpp"
#include "zt/kernels/cuda/nf4.hpp"
#include "zt/model/config.hpp"
#include "zt/model/lora.hpp"

namespace zt::model::detail {

template <class T, class G>
class DeviceLora {
 public:
  // All GEMMs go through `gemm`, all work is enqueued on `stream` (the model's).
  DeviceLora(const Config& cfg, kernels::cuda::Gemm& gemm, cudaStream_t stream)
      : cfg_(cfg), gemm_(gemm), stream_(stream) {}

  // params/grads: device [layout.numel()] (grads nullptr: forward only). rows: the
  // workspace's rows now (it grows with ensure).
  void bind(const LoraLayout& layout, const T* params, G* grads, int64_t rows);
  bool bound() const { return layout_.has_value(); }
  // The adapter on `target` of block `layer`, or nullptr (none bound, not targeted, or
  // the adapters switched off).
  const LoraAdapterInfo* find(int layer, LoraTarget target) const {
    return layout_ && on_ ? layout_->find(layer, target) : nullptr;
  }
  // Off: the frozen base alone (QLoRA: its NF4 base), as PEFT's disable_adapter() and the
  // CPU's LoraApply::set_enabled: DPO's reference model without a second copy.
  void set_enabled(bool on) { on_ = on; }
  void set_stream(uint64_t mask_stream) { mask_stream_ = mask_stream; }
  // QLoRA: uploads the NF4 weights `base` holds (codes, absmax codes, scales); W of those
  // projections comes from them from now on.
  void bind_qlora(const QloraBase& base);
  bool has_qlora() const { return !nf4_.empty(); }
  // Workspace for N rows (no-op once it holds that many).
  void ensure(int64_t N);

  // The base weight of (layer, target): W itself, or with QLoRA its dequantised copy in
  // the one weight workspace (valid until the next call).
  const T* weight(int layer, LoraTarget target, const T* W);
  // y [N, a.out] += the adapter's output for x [N, a.in]; dropout when train.
  void forward(const LoraAdapterInfo& a, T* y, const T* x, int64_t N, bool train);
  // dy [N, a.out], x [N, a.in] (the forward's input): adds dA, dB into the bound grads and
  // the adapter's share of dx [N, a.in] into dx (which holds the base's share).
  void backward(const LoraAdapterInfo& a, T* dx, const T* dy, const T* x, int64_t N, bool train);

  size_t workspace_bytes() const { return xd_.bytes() + u_.bytes() + du_.bytes() + w_.bytes(); }

 private:
  // dropout(x) [N, in] in xd_ (x itself when no dropout applies).
  const T* dropped(const LoraAdapterInfo& a, const T* x, int64_t N, bool train);
  // u_ [N, r] = s dropped(x) A^T.
  void down(const LoraAdapterInfo& a, const T* xd, int64_t N);
  bool dropout_on(bool train) const { return train && layout_->lora().dropout > 0.0; }

  // One NF4 weight on the device (shapes as kernels::nf4::Quantized).
  struct Nf4Weight {
    kernels::cuda::DeviceBuffer<uint8_t> codes;         // [ceil(n / 2)]
    kernels::cuda::DeviceBuffer<uint8_t> absmax_codes;  // [ceil(n / 64)]
    kernels::cuda::DeviceBuffer<float> absmax_scale;    // [ceil(ceil(n / 64) / 256)]
    float offset = 0.0f;
    int64_t n = 0;
  };

  Config cfg_;
  kernels::cuda::Gemm& gemm_;
  cudaStream_t stream_;
  std::optional<LoraLayout> layout_;
  const T* params_ = nullptr;  // device [layout.numel()]
  G* grads_ = nullptr;         // device [layout.numel()] or nullptr
  uint64_t mask_stream_ = 0;
  bool on_ = true;  // set_enabled
  int64_t rows_ = 0;                        // rows the workspace holds
  kernels::cuda::DeviceBuffer<T> xd_;       // [N, max in] dropout(x), then du A (dropout only)
  kernels::cuda::DeviceBuffer<T> u_, du_;   // [N, r] each
  std::vector<Nf4Weight> nf4_;              // the NF4 base's weights
  std::vector<int> nf4_index_;              // [(L + 1) * kNumLoraTargets] -> nf4_ or -1
  kernels::cuda::DeviceBuffer<T> w_;        // [max out * in] one dequantised W (QLoRA)
};

}  // namespace zt::model::detail
