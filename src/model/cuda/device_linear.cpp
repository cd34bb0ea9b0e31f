// Qwen3.5's Gated DeltaNet mixer on the GPU (a linear_attention layer of the schedule,
// Config::linear(l)): the CUDA twin of src/model/linear_block.cpp, op for op. From the
// block's input norm a.xn1: in_proj_qkv -> causal depthwise conv1d + SiLU -> q | k | v;
// in_proj_z; in_proj_b and in_proj_a -> beta = sigmoid(b) and the log decay g (fp32);
// the gated delta rule in its chunked form (kernels::cuda::gated_delta_chunked_forward),
// keeping the state at each chunk's start for the backward; the gated RMSNorm with z;
// out_proj into `delta` (the block adds it to the residual). The projections go through
// proj_forward / proj_backward: their LoRA adapters (in_proj_qkv, in_proj_z, in_proj_b,
// in_proj_a, out_proj) apply as on the CPU. Under train.recompute the block's forward runs
// again in the backward (DeviceModel::loss_and_grad), the chunk starts with it. Packed rows
// are refused (upload_batch): the conv and the rule run over whole rows.
#include "device_model_impl.hpp"
#include "zt/kernels/cuda/gated_delta.hpp"

namespace zt::model {

static_assert(kc::kDeltaChunk == kDeltaChunkTokens, "DeviceBlockSizes counts 64-token chunks");
static_assert(kc::kDeltaMaxDim == Config::kMaxDeviceDeltaDim &&
                  kc::kDeltaMaxConvK == Config::kMaxDeviceConvKernel &&
                  kc::kDeltaMaxNormDim >= Config::kMaxDeviceDeltaDim,
              "Config::device_model_gap names the sizes the Gated DeltaNet kernels lack");
static_assert(kc::kDeltaPartials == static_cast<int>(DeviceLinearSizes::kPartials),
              "DeviceLinearSizes counts the kernels' row chunks");

namespace {

kc::DeltaShape delta_shape(const Config& c, int64_t B, int64_t Tn) {
  return {.B = B, .T = Tn, .Hk = c.linear_key_heads, .Hv = c.linear_value_heads,
          .Dk = c.linear_key_dim, .Dv = c.linear_value_dim, .chunk = kc::kDeltaChunk};
}

}  // namespace

template <class T, class G>
void DeviceModel<T, G>::Impl::linear_ensure(const DeviceLinearSizes& z) {
  lin_rows = kc::DeviceBuffer<T>(z.rows);
  lin_drows = kc::DeviceBuffer<T>(z.rows);
  lin_dy = kc::DeviceBuffer<T>(z.vd);
  lin_dout = kc::DeviceBuffer<T>(z.vd);
  lin_dz = kc::DeviceBuffer<T>(z.vd);
  lin_dq = kc::DeviceBuffer<T>(z.kd);
  lin_dk = kc::DeviceBuffer<T>(z.kd);
  lin_da = kc::DeviceBuffer<T>(z.hv);
  lin_db = kc::DeviceBuffer<T>(z.hv);
  lin_dg = kc::DeviceBuffer<float>(z.gates);
  lin_dbeta = kc::DeviceBuffer<float>(z.gates);
  lin_partial = kc::DeviceBuffer<float>(z.partial);
  lin_scratch = kc::DeviceBuffer<float>(z.rule);
}

// a.xn1 [N, C] -> delta [N, C] = out_proj(gated_norm(rule(...), z)); the activations into a.
template <class T, class G>
void DeviceModel<T, G>::Impl::linear_forward(int l, const T* p, detail::DeviceBlockActs<T>& a,
                                             int64_t B, int64_t Tn) {
  const int64_t N = B * Tn, C = cfg.hidden, Cc = cfg.linear_conv_dim();
  const int64_t Hv = cfg.linear_value_heads, Dv = cfg.linear_value_dim;
  const int64_t KD = cfg.linear_key_heads * cfg.linear_key_dim, VD = Hv * Dv;
  const BlockOffsets& o = layout.block_offsets(l);
  using LT = LoraTarget;  // proj_forward adds the layer's adapters (LoRA / QLoRA)
  const T* xn = a.xn1.data();
  proj_forward(l, LT::kInQkv, a.lqkv.data(), xn, p + o.lin_qkv, N, C, Cc);
  kc::causal_conv1d_silu_forward<T>(lin_rows.data(), a.lqkv.data(), p + o.lin_conv, nullptr, B, Tn,
                                    Cc, cfg.linear_conv_kernel, stream);
  copy_rows(a.lq.data(), KD, lin_rows.data(), Cc, KD, N);  // [q | k | v] -> q, k, v
  copy_rows(a.lk.data(), KD, lin_rows.data() + KD, Cc, KD, N);
  copy_rows(a.lv.data(), VD, lin_rows.data() + 2 * KD, Cc, VD, N);
  proj_forward(l, LT::kInZ, a.lz.data(), xn, p + o.lin_z, N, C, VD);
  proj_forward(l, LT::kInB, lin_db.data(), xn, p + o.lin_b, N, C, Hv);  // b, until the gates
  proj_forward(l, LT::kInA, a.la.data(), xn, p + o.lin_a, N, C, Hv);
  kc::delta_gates_forward<T>(a.lg.data(), a.lbeta.data(), a.la.data(), lin_db.data(),
                             p + o.lin_A_log, p + o.lin_dt_bias, N, Hv, stream);
  kc::gated_delta_chunked_forward<T>(a.lout.data(), nullptr, a.lstarts.data(),
                                     delta_shape(cfg, B, Tn), a.lq.data(), a.lk.data(),
                                     a.lv.data(), a.lg.data(), a.lbeta.data(), nullptr, stream);
  kc::gated_rmsnorm_forward<T>(a.ly.data(), a.lrstd.data(), a.lout.data(), a.lz.data(),
                               p + o.lin_norm, N * Hv, Dv, cfg.norm_eps, stream);
  proj_forward(l, LT::kOutProj, delta.data(), a.ly.data(), p + o.lin_out, N, VD, C);
}

// dres [N, C] (dL/d x_mid = dL/d delta) -> dxn [N, C] written (dL/d a.xn1); the mixer's
// parameter gradients into unit u's (none when LoRA freezes the base).
template <class T, class G>
void DeviceModel<T, G>::Impl::linear_backward(int l, int u, const T* p,
                                              detail::DeviceBlockActs<T>& a, int64_t B,
                                              int64_t Tn) {
  const int64_t N = B * Tn, C = cfg.hidden, Cc = cfg.linear_conv_dim();
  const int64_t Hv = cfg.linear_value_heads, Dv = cfg.linear_value_dim;
  const int64_t KD = cfg.linear_key_heads * cfg.linear_key_dim, VD = Hv * Dv;
  const BlockOffsets& o = layout.block_offsets(l);
  const auto g = [&](int64_t off) { return off < 0 ? nullptr : base_grad(u, off); };
  const kc::DeltaShape s = delta_shape(cfg, B, Tn);
  const int64_t need = kc::gated_delta_backward_scratch(s, /*with_starts=*/false);
  if (static_cast<size_t>(need) > lin_scratch.size())
    throw std::logic_error(strf("the Gated DeltaNet backward needs %lld floats of scratch, "
                                "DeviceLinearSizes counts %zu",
                                static_cast<long long>(need), lin_scratch.size()));
  using LT = LoraTarget;  // proj_backward: the adapters' gradients too
  const T* xn = a.xn1.data();
  proj_backward(l, LT::kOutProj, lin_dy.data(), g(o.lin_out), dres.data(), a.ly.data(),
                p + o.lin_out, N, VD, C, /*accumulate_dx=*/false);
  kc::gated_rmsnorm_backward<T, G>(lin_dout.data(), lin_dz.data(), g(o.lin_norm), lin_dy.data(),
                                   a.lout.data(), a.lz.data(), p + o.lin_norm, a.lrstd.data(),
                                   N * Hv, Dv, lin_partial.data(), stream);
  T* ldv = lin_dy.data();  // (d out_proj's input is read: it holds d v from here)
  kc::gated_delta_backward<T>(lin_dq.data(), lin_dk.data(), ldv, lin_dg.data(), lin_dbeta.data(),
                              nullptr, s, a.lq.data(), a.lk.data(), a.lv.data(), a.lg.data(),
                              a.lbeta.data(), nullptr, a.lstarts.data(), lin_dout.data(), nullptr,
                              lin_scratch.data(), stream);
  kc::delta_gates_backward<T, G>(lin_da.data(), lin_db.data(), g(o.lin_A_log), g(o.lin_dt_bias),
                                 lin_dg.data(), lin_dbeta.data(), a.lbeta.data(), a.la.data(),
                                 p + o.lin_A_log, p + o.lin_dt_bias, N, Hv, lin_partial.data(),
                                 stream);
  copy_rows(lin_rows.data(), Cc, lin_dq.data(), KD, KD, N);  // d q, d k, d v -> [N, Cc]
  copy_rows(lin_rows.data() + KD, Cc, lin_dk.data(), KD, KD, N);
  copy_rows(lin_rows.data() + 2 * KD, Cc, ldv, VD, VD, N);
  kc::causal_conv1d_silu_backward<T, G>(lin_drows.data(), g(o.lin_conv), nullptr, lin_rows.data(),
                                        a.lqkv.data(), p + o.lin_conv, nullptr, B, Tn, Cc,
                                        cfg.linear_conv_kernel, lin_partial.data(), stream);
  proj_backward(l, LT::kInQkv, dxn.data(), g(o.lin_qkv), lin_drows.data(), xn, p + o.lin_qkv, N,
                C, Cc, /*accumulate_dx=*/false);
  proj_backward(l, LT::kInZ, dxn.data(), g(o.lin_z), lin_dz.data(), xn, p + o.lin_z, N, C, VD,
                /*accumulate_dx=*/true);
  proj_backward(l, LT::kInB, dxn.data(), g(o.lin_b), lin_db.data(), xn, p + o.lin_b, N, C, Hv,
                /*accumulate_dx=*/true);
  proj_backward(l, LT::kInA, dxn.data(), g(o.lin_a), lin_da.data(), xn, p + o.lin_a, N, C, Hv,
                /*accumulate_dx=*/true);
}

#define ZT_DEVICE_LINEAR_INSTANTIATE(T, G)                                                     \
  template void DeviceModel<T, G>::Impl::linear_ensure(const DeviceLinearSizes&);              \
  template void DeviceModel<T, G>::Impl::linear_forward(int, const T*,                         \
                                                        detail::DeviceBlockActs<T>&, int64_t,  \
                                                        int64_t);                              \
  template void DeviceModel<T, G>::Impl::linear_backward(int, int, const T*,                   \
                                                         detail::DeviceBlockActs<T>&, int64_t, \
                                                         int64_t);
ZT_DEVICE_LINEAR_INSTANTIATE(float, float)
ZT_DEVICE_LINEAR_INSTANTIATE(kc::bf16_t, float)
ZT_DEVICE_LINEAR_INSTANTIATE(kc::bf16_t, kc::bf16_t)
#undef ZT_DEVICE_LINEAR_INSTANTIATE

}  // namespace zt::model
