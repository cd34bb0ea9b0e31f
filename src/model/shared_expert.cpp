// qwen2_moe's shared expert on CPU (transformers' Qwen2MoeSparseMoeBlock): beside the
// routed experts, every token goes through one more SwiGLU of width S, scaled by a
// sigmoid gate of its own,
//   out += sigmoid(x g^T) * down(silu(gate x) * up x)      g [1, C] (shared_expert_gate)
// with x the block's post-attention norm output (a.xn2). moe_block.cpp calls it after the
// routed sum; its backward adds to dxn after the router's.
#include <cmath>

#include "model_impl.hpp"

namespace zt::model {

template <class R>
void Model<R>::Impl::shared_expert_forward(int l, const R* p, R* out, BlockActs<R>& a,
                                           int64_t N) {
  const int64_t C = cfg.hidden, S = cfg.shared_expert_intermediate;
  const BlockOffsets& o = layout.block_offsets(l);
  cpu::linear_forward(a.sgate.data(), a.xn2.data(), p + o.shared_gate, N, C, S);
  cpu::linear_forward(a.sup.data(), a.xn2.data(), p + o.shared_up, N, C, S);
  cpu::swiglu_forward(a.sh.data(), a.sgate.data(), a.sup.data(), N * S);
  cpu::linear_forward(a.sy.data(), a.sh.data(), p + o.shared_down, N, S, C);
  cpu::linear_forward(a.sg.data(), a.xn2.data(), p + o.shared_expert_gate, N, C, 1);
  for (int64_t n = 0; n < N; ++n) {
    const R s = R(1) / (R(1) + std::exp(-a.sg.data()[n]));
    a.sg.data()[n] = s;
    const R* y = a.sy.data() + n * C;
    R* row = out + n * C;
    for (int64_t c = 0; c < C; ++c) row[c] += s * y[c];
  }
}

template <class R>
void Model<R>::Impl::shared_expert_backward(int u, const R* p, BlockActs<R>& a, int64_t N) {
  const int64_t C = cfg.hidden, S = cfg.shared_expert_intermediate;
  const BlockOffsets& o = layout.block_offsets(layout.unit(u).layer);
  const auto g = [&](int64_t off) { return base_grad_or_null(u, off); };
  // out = s * y: d y = s * dout; d logit = s (1 - s) * <dout, y>.
  for (int64_t n = 0; n < N; ++n) {
    const R s = a.sg.data()[n];
    const R* dout = dres.data() + n * C;
    const R* y = a.sy.data() + n * C;
    R* dy = dshared.data() + n * C;
    R dot = 0;
    for (int64_t c = 0; c < C; ++c) {
      dy[c] = s * dout[c];
      dot += dout[c] * y[c];
    }
    dshared_gate.data()[n] = s * (R(1) - s) * dot;
  }
  cpu::linear_backward(dh.data(), g(o.shared_down), dshared.data(), a.sh.data(), p + o.shared_down,
                     N, S, C, /*accumulate_dx=*/false);
  cpu::swiglu_backward(dgate.data(), dup.data(), dh.data(), a.sgate.data(), a.sup.data(), N * S,
                     /*accumulate=*/false);
  cpu::linear_backward(dxn.data(), g(o.shared_gate), dgate.data(), a.xn2.data(), p + o.shared_gate,
                     N, C, S);
  cpu::linear_backward(dxn.data(), g(o.shared_up), dup.data(), a.xn2.data(), p + o.shared_up, N, C,
                     S);
  cpu::linear_backward(dxn.data(), g(o.shared_expert_gate), dshared_gate.data(), a.xn2.data(),
                     p + o.shared_expert_gate, N, C, 1);
}

#define ZT_SHARED_EXPERT_INSTANTIATE(R)                                                      \
  template void Model<R>::Impl::shared_expert_forward(int, const R*, R*, BlockActs<R>&,      \
                                                      int64_t);                              \
  template void Model<R>::Impl::shared_expert_backward(int, const R*, BlockActs<R>&, int64_t);
ZT_SHARED_EXPERT_INSTANTIATE(float)
ZT_SHARED_EXPERT_INSTANTIATE(double)
#undef ZT_SHARED_EXPERT_INSTANTIATE

}  // namespace zt::model
