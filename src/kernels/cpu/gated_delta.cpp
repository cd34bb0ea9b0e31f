// The gated delta rule, forward: the chunked form (transformers' torch_chunk_gated_delta_rule:
// per chunk the UT transform's triangular solve, then the pass of the state from chunk to
// chunk; the algebra is in gated_delta_chunk.hpp) and the recurrent form (one token at a
// time). Work is split over (example, value head) pairs, each of which only one thread
// writes, so no result depends on the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "eigen_maps.hpp"
#include "gated_delta_chunk.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/kernels/gated_delta.hpp"

namespace zt::kernels::cpu {

namespace detail {

void check_delta_shape(const DeltaShape& s, const char* kernel) {
  ZT_CHECK(s.B >= 0 && s.T >= 0 && s.Hk > 0 && s.Hv > 0 && s.Hv % s.Hk == 0 && s.Dk > 0 &&
               s.Dv > 0 && s.chunk > 0,
           strf("%s: B %lld, T %lld, Hk %lld, Hv %lld, Dk %lld, Dv %lld, chunk %lld", kernel,
                static_cast<long long>(s.B), static_cast<long long>(s.T),
                static_cast<long long>(s.Hk), static_cast<long long>(s.Hv),
                static_cast<long long>(s.Dk), static_cast<long long>(s.Dv),
                static_cast<long long>(s.chunk)),
           "heads, head dims and the chunk must be positive and Hv a multiple of Hk");
}

template <class T>
DeltaHead<T> delta_head(const DeltaShape& s, int64_t b, int64_t h, const T* q, const T* k,
                        const T* v, const T* g, const T* beta) {
  const int64_t hk = h / (s.Hv / s.Hk);
  DeltaHead<T> d;
  d.q = q + (b * s.T * s.Hk + hk) * s.Dk;
  d.k = k + (b * s.T * s.Hk + hk) * s.Dk;
  d.v = v + (b * s.T * s.Hv + h) * s.Dv;
  d.g = g + b * s.T * s.Hv + h;
  d.beta = beta + b * s.T * s.Hv + h;
  d.sq = s.Hk * s.Dk;
  d.sv = s.Hv * s.Dv;
  d.sg = s.Hv;
  return d;
}

template <class T>
RowMat<T> delta_state0(const DeltaShape& s, int64_t b, int64_t h, const T* state0) {
  if (!state0) return RowMat<T>::Zero(s.Dk, s.Dv);
  return mat(state0 + (b * s.Hv + h) * s.Dk * s.Dv, s.Dk, s.Dv);
}

template DeltaHead<float> delta_head(const DeltaShape&, int64_t, int64_t, const float*,
                                     const float*, const float*, const float*, const float*);
template DeltaHead<double> delta_head(const DeltaShape&, int64_t, int64_t, const double*,
                                      const double*, const double*, const double*,
                                      const double*);
template RowMat<float> delta_state0(const DeltaShape&, int64_t, int64_t, const float*);
template RowMat<double> delta_state0(const DeltaShape&, int64_t, int64_t, const double*);

}  // namespace detail

namespace {

// fn(b, h, head, S) for every (example b, value head h), each pair on one thread: S [Dk, Dv]
// starts as state0's slice (or zeros) and, when state1 is given, ends there (state1 may be
// state0: each pair reads and writes only its own slice).
template <class T, class Fn>
void for_each_head(const DeltaShape& s, const char* kernel, const T* q, const T* k, const T* v,
                   const T* g, const T* beta, const T* state0, T* state1, const Fn& fn) {
  detail::check_delta_shape(s, kernel);
#pragma omp parallel for schedule(dynamic)
  for (int64_t bh = 0; bh < s.B * s.Hv; ++bh) {
    const detail::FlushSubnormals flush;
    const int64_t b = bh / s.Hv, h = bh % s.Hv;
    detail::RowMat<T> S = detail::delta_state0(s, b, h, state0);  // [Dk, Dv]
    fn(b, h, detail::delta_head(s, b, h, q, k, v, g, beta), S);
    if (state1) detail::mat(state1 + bh * s.Dk * s.Dv, s.Dk, s.Dv) = S;
  }
}

}  // namespace

template <class T>
void gated_delta_chunked_forward(const DeltaShape& s, const T* q, const T* k, const T* v,
                                 const T* g, const T* beta, const T* state0, T* out,
                                 T* state1) {
  // q, k [B, T, Hk, Dk], v [B, T, Hv, Dv], g, beta [B, T, Hv], state0 [B, Hv, Dk, Dv] or null,
  // out [B, T, Hv, Dv], state1 [B, Hv, Dk, Dv] or null
  for_each_head(s, "gated_delta_chunked_forward", q, k, v, g, beta, state0, state1,
                [&](int64_t b, int64_t h, const detail::DeltaHead<T>& head,
                    detail::RowMat<T>& S) {
    detail::RowMat<T> QS, Ot;  // [L, Dv]; Ot: the chunk's output, then copied out
    detail::DeltaChunk<T> c;
    for (int64_t t0 = 0; t0 < s.T; t0 += s.chunk) {
      const int64_t L = std::min(s.chunk, s.T - t0);
      c.load(head, t0, L, s.Dk, s.Dv, true);
      c.correct(S);
      auto O = detail::mat(out + ((b * s.T + t0) * s.Hv + h) * s.Dv, L, s.Dv, s.Hv * s.Dv);
      QS.noalias() = c.Q * S;
      // Products land in an aligned local, then copy: Eigen's vectorised evaluation into a
      // caller's buffer depends on its address (peeling), and so would the last bits.
      Ot = c.E.matrix().asDiagonal() * QS;
      Ot.noalias() += c.P * c.Vn;
      O = Ot;
      c.advance(S);
    }
  });
}

template <class T>
void gated_delta_recurrent_forward(const DeltaShape& s, const T* q, const T* k, const T* v,
                                   const T* g, const T* beta, const T* state0, T* out,
                                   T* state1) {
  // the same buffers as the chunked form
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(s.Dk)));
  for_each_head(s, "gated_delta_recurrent_forward", q, k, v, g, beta, state0, state1,
                [&](int64_t b, int64_t h, const detail::DeltaHead<T>& d, detail::RowMat<T>& S) {
    Eigen::Matrix<T, Eigen::Dynamic, 1> qt(s.Dk), kt(s.Dk);    // [Dk]
    Eigen::Matrix<T, 1, Eigen::Dynamic> delta(s.Dv), ot(s.Dv);  // [Dv]
    for (int64_t t = 0; t < s.T; ++t) {
      const auto qr = detail::arr(d.q + t * d.sq, s.Dk);  // [Dk]
      const auto kr = detail::arr(d.k + t * d.sq, s.Dk);  // [Dk]
      const double nq = static_cast<double>(qr.square().sum()) + detail::kL2Eps;
      const double nk = static_cast<double>(kr.square().sum()) + detail::kL2Eps;
      qt = (qr * static_cast<T>(1.0 / std::sqrt(nq)) * scale).matrix();
      kt = (kr * static_cast<T>(1.0 / std::sqrt(nk))).matrix();
      const auto vt = detail::arr(d.v + t * d.sv, s.Dv).matrix().transpose();  // [1, Dv]
      S *= std::exp(d.g[t * d.sg]);
      delta.noalias() = vt - kt.transpose() * S;
      delta *= d.beta[t * d.sg];
      S.noalias() += kt * delta;
      ot.noalias() = qt.transpose() * S;  // aligned local, then copied (as above)
      detail::arr(out + ((b * s.T + t) * s.Hv + h) * s.Dv, s.Dv) = ot.transpose().array();
    }
  });
}

#define ZT_GATED_DELTA_FWD(T)                                                                 \
  template void gated_delta_chunked_forward<T>(const DeltaShape&, const T*, const T*,         \
                                               const T*, const T*, const T*, const T*, T*,    \
                                               T*);                                           \
  template void gated_delta_recurrent_forward<T>(const DeltaShape&, const T*, const T*,       \
                                                 const T*, const T*, const T*, const T*, T*,  \
                                                 T*);
ZT_GATED_DELTA_FWD(float)
ZT_GATED_DELTA_FWD(double)
#undef ZT_GATED_DELTA_FWD

}  // namespace zt::kernels::cpu
