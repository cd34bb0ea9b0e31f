// The adapters' share of a projection's forward and backward on the GPU (device_lora.hpp):
// op for op src/model/lora_apply.cpp, with the scale folded into the GEMMs' alpha.
#include "device_lora.hpp"

#include <algorithm>
#include <type_traits>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/kernels/cuda/dropout.hpp"
#include "zt/model/device_workspace.hpp"
#include "zt/model/init.hpp"

namespace zt::model::detail {

namespace kc = zt::kernels::cuda;

namespace {

// The slot of (layer, target) in a per-projection table; lm_head after the blocks.
size_t slot(const Config& c, int layer, LoraTarget t) {
  const int64_t l = t == LoraTarget::kLmHead ? c.layers : layer;
  return static_cast<size_t>(l * kNumLoraTargets + static_cast<int64_t>(t));
}

template <class T>
kc::DeviceBuffer<T> uploaded(const std::vector<T>& v, const char* what) {
  kc::DeviceBuffer<T> d(v.size(), what);
  d.upload(v);
  return d;
}

}  // namespace

template <class T, class G>
void DeviceLora<T, G>::bind(const LoraLayout& layout, const T* params, G* grads, int64_t rows) {
  if (LoraLayout(cfg_, layout.lora()).numel() != layout.numel()) {
    throw InputError(strf("bind_lora: the adapters' layout (%lld elements) is not one of model "
                          "%s",
                          static_cast<long long>(layout.numel()), cfg_.name.c_str()),
                     "build the LoraLayout from this model's config.");
  }
  if (!params) {
    throw InputError("bind_lora: no adapter parameters (nullptr)",
                     "pass a device buffer of LoraLayout::numel() elements.");
  }
  // The engine rebinds the adapters at every use at stage 3 (new pointers, the same
  // layout): then a bind only moves pointers, the workspace stays.
  const LoraConfig& now = layout.lora();
  const bool same = layout_ && layout_->numel() == layout.numel() &&
                    layout_->lora().method == now.method && layout_->lora().rank == now.rank &&
                    layout_->lora().alpha == now.alpha && layout_->lora().dropout == now.dropout &&
                    layout_->lora().rslora == now.rslora && layout_->lora().targets == now.targets;
  if (!same) {
    layout_.emplace(layout);
    rows_ = 0;  // the adapters' shapes may differ from the last layout's
  }
  params_ = params;
  grads_ = grads;
  ensure(rows);
}

template <class T, class G>
void DeviceLora<T, G>::ensure(int64_t N) {
  if (!layout_ || N <= rows_) return;
  // Sizes from the shared formula (zt/model/device_workspace.hpp), which zt estimate uses.
  const DeviceLoraSizes z = DeviceLoraSizes::of(cfg_, layout_->lora(), N, false);
  xd_ = kc::DeviceBuffer<T>(z.xd, "the LoRA dropout workspace");
  u_ = kc::DeviceBuffer<T>(z.u, "the LoRA workspace");
  du_ = kc::DeviceBuffer<T>(z.du, "the LoRA workspace");
  rows_ = N;
}

template <class T, class G>
void DeviceLora<T, G>::bind_qlora(const QloraBase& base) {
  LoraConfig q = layout_ ? layout_->lora() : LoraConfig{};
  q.method = FinetuneMethod::kQlora;
  check_qlora_dtype(q, std::is_same_v<T, float> ? DType::kF32 : DType::kBF16);
  if (!layout_) {
    throw Error("bind_qlora before bind_lora",
                "bind the adapters first: QLoRA quantises the projections they target.");
  }
  nf4_.clear();
  nf4_index_.assign(static_cast<size_t>((cfg_.layers + 1) * kNumLoraTargets), -1);
  int64_t widest = 0;
  for (int l = 0; l <= static_cast<int>(cfg_.layers); ++l) {
    for (int t = 0; t < kNumLoraTargets; ++t) {
      const auto target = static_cast<LoraTarget>(t);
      if ((l == cfg_.layers) != (target == LoraTarget::kLmHead)) continue;
      const kernels::nf4::Quantized* w = base.find(l, target);
      if (!w) continue;
      int64_t in = 0, out = 0;
      lora_target_dims(cfg_, target, in, out);
      if (w->n != in * out) {
        throw InputError(strf("bind_qlora: the NF4 weight of %s in layer %d holds %lld elements, "
                              "the model's W has %lld",
                              std::string(lora_module_name(target)).c_str(), l,
                              static_cast<long long>(w->n), static_cast<long long>(in * out)),
                         "quantise the QloraBase from this model's parameters.");
      }
      nf4_index_[slot(cfg_, l, target)] = static_cast<int>(nf4_.size());
      nf4_.push_back({uploaded(w->codes, "the NF4 base codes"),
                      uploaded(w->absmax_codes, "the NF4 base absmax codes"),
                      uploaded(w->absmax_scale, "the NF4 base scales"), w->offset, w->n});
      widest = std::max(widest, w->n);
    }
  }
  // One dequantised weight at a time: the widest W (DeviceLoraSizes::w).
  w_ = kc::DeviceBuffer<T>(static_cast<size_t>(widest), "the dequantised QLoRA weight");
}

template <class T, class G>
const T* DeviceLora<T, G>::weight(int layer, LoraTarget target, const T* W) {
  if (nf4_index_.empty()) return W;
  const int i = nf4_index_[slot(cfg_, layer, target)];
  if (i < 0) return W;
  const Nf4Weight& q = nf4_[static_cast<size_t>(i)];
  // Stream-ordered: the previous projection's GEMM has read w_ before this overwrites it.
  kc::dequantize_nf4<T>({q.codes.data(), q.absmax_codes.data(), q.absmax_scale.data(), q.offset,
                         q.n},
                        w_.data(), stream_);
  return w_.data();
}

template <class T, class G>
const T* DeviceLora<T, G>::dropped(const LoraAdapterInfo& a, const T* x, int64_t N, bool train) {
  if (!dropout_on(train)) return x;
  kc::dropout_forward<T>(xd_.data(), x, N * a.in, init_stream(mask_stream_, a.name),
                         layout_->lora().dropout, stream_);
  return xd_.data();
}

template <class T, class G>
void DeviceLora<T, G>::down(const LoraAdapterInfo& a, const T* xd, int64_t N) {
  const auto s = static_cast<float>(layout_->lora().scale());
  kc::linear_forward_scaled<T>(gemm_, u_.data(), xd, params_ + a.a_offset, N, a.in,
                               layout_->lora().rank, s, 0.0f, stream_);
}

template <class T, class G>
void DeviceLora<T, G>::forward(const LoraAdapterInfo& a, T* y, const T* x, int64_t N,
                               bool train) {
  ensure(N);
  down(a, dropped(a, x, N, train), N);
  kc::linear_forward_scaled<T>(gemm_, y, u_.data(), params_ + a.b_offset, N,
                               layout_->lora().rank, a.out, 1.0f, 1.0f, stream_);
}

template <class T, class G>
void DeviceLora<T, G>::backward(const LoraAdapterInfo& a, T* dx, const T* dy, const T* x,
                                int64_t N, bool train) {
  if (!grads_) {
    throw Error("the LoRA adapters have no gradient buffer",
                "bind_lora(layout, params, grads) with a gradient buffer before loss_and_grad.");
  }
  ensure(N);
  const int64_t r = layout_->lora().rank;
  const auto s = static_cast<float>(layout_->lora().scale());
  const T* A = params_ + a.a_offset;
  const T* Bm = params_ + a.b_offset;
  const T* xd = dropped(a, x, N, train);
  down(a, xd, N);  // recomputed: r columns, cheaper than keeping u per projection
  // du = s dy B; dB += dy^T u (u already carries the scale)
  kc::linear_dx_scaled<T>(gemm_, du_.data(), dy, Bm, N, r, a.out, s, 0.0f, stream_);
  kc::linear_backward<T, G>(gemm_, nullptr, grads_ + a.b_offset, dy, u_.data(), Bm, N, r, a.out,
                            true, stream_);
  if (!dropout_on(train)) {  // dA += du^T x, dx += du A
    kc::linear_backward<T, G>(gemm_, dx, grads_ + a.a_offset, du_.data(), xd, A, N, a.in, r,
                              /*accumulate_dx=*/true, stream_);
    return;
  }
  // dA += du^T dropout(x); then du A over dropout(x), which is no longer needed, and
  // through the dropout: dx += mask * keep * (du A).
  kc::linear_backward<T, G>(gemm_, nullptr, grads_ + a.a_offset, du_.data(), xd, A, N, a.in, r,
                            true, stream_);
  kc::linear_dx_scaled<T>(gemm_, xd_.data(), du_.data(), A, N, a.in, r, 1.0f, 0.0f, stream_);
  kc::dropout_backward<T>(dx, xd_.data(), N * a.in, init_stream(mask_stream_, a.name),
                          layout_->lora().dropout, stream_);
}

template class DeviceLora<float, float>;
template class DeviceLora<kc::bf16_t, float>;
template class DeviceLora<kc::bf16_t, kc::bf16_t>;

}  // namespace zt::model::detail
