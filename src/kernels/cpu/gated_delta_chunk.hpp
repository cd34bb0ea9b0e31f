#pragma once
// One chunk of the chunked gated delta rule for one (example, value head), shared by the
// forward (gated_delta.cpp) and the backward (gated_delta_backward.cpp) (private header).
//
// The algebra, for a chunk of L tokens (L <= chunk; the last chunk of a sequence is short:
// transformers pads it with zeros, which changes nothing before the padding and leaves the
// state as the short chunk does, so the short chunk is computed as it is, with no copy).
// Q, K the L2-normalised rows (Q also times Dk^-1/2), V the values, S [Dk, Dv] the state at
// the chunk's start, gam_i = g_0 + ... + g_i the cumulative log decay, E_i = exp(gam_i):
//   Dm[i, j] = exp(gam_i - gam_j)                           j <= i (0 above)
//   A = strictly lower of diag(beta) (K K^T) o Dm            M = I + A (unit lower)
//   [U | W] = M^-1 [diag(beta) V | diag(beta E) K]          (the UT transform)
//   Vn = U - W S                                             (what the old state misses)
//   P = lower of (Q K^T) o Dm                                (diagonal included)
//   O = diag(E) Q S + P Vn
//   S' = E_last S + (diag(E_last / E) K)^T Vn
// Token t's rows lie `stride` elements apart in the caller's [B, T, heads, D] buffers.
#include <cmath>
#include <cstdint>

#include "eigen_maps.hpp"
#include "zt/kernels/gated_delta.hpp"

namespace zt::kernels::cpu::detail {

// The raw inputs of one (example b, value head h) pair at token 0, with token strides.
template <class T>
struct DeltaHead {
  const T* q;     // q[b, 0, h / (Hv / Hk), 0]: rows Dk long, sq apart
  const T* k;     // k[b, 0, h / (Hv / Hk), 0]: rows Dk long, sq apart
  const T* v;     // v[b, 0, h, 0]: rows Dv long, sv apart
  const T* g;     // g[b, 0, h]: sg apart
  const T* beta;  // beta[b, 0, h]: sg apart
  int64_t sq, sv, sg;
};

// The views of (b, h) in the rule's buffers, and its starting state (state0's block or zeros).
template <class T>
DeltaHead<T> delta_head(const DeltaShape& s, int64_t b, int64_t h, const T* q, const T* k,
                        const T* v, const T* g, const T* beta);
template <class T>
RowMat<T> delta_state0(const DeltaShape& s, int64_t b, int64_t h, const T* state0);

inline constexpr double kL2Eps = 1e-6;  // transformers' l2norm eps

template <class T>
struct DeltaChunk {
  int64_t L = 0, Dk = 0, Dv = 0;
  RowMat<T> Q;    // [L, Dk] q / sqrt(|q|^2 + eps) * Dk^-1/2
  RowMat<T> K;    // [L, Dk] k / sqrt(|k|^2 + eps)
  RowMat<T> V;    // [L, Dv]
  Arr<T> rq, rk;  // [L] 1 / sqrt(|q|^2 + eps), 1 / sqrt(|k|^2 + eps)
  Arr<T> beta;    // [L]
  Arr<T> gam;     // [L] cumulative log decay inside the chunk
  Arr<T> E;       // [L] exp(gam)
  Arr<T> Et;      // [L] exp(gam_last - gam): the decay from each token to the chunk's end
  RowMat<T> Dm;   // [L, L] exp(gam_i - gam_j), lower (diagonal 1), 0 above
  RowMat<T> A;    // [L, L] the UT system's strictly lower part (M = I + A)
  RowMat<T> P;    // [L, L] the intra-chunk attention, lower with diagonal
  RowMat<T> X;    // [L, Dv + Dk] [U | W] = M^-1 [diag(beta) V | diag(beta E) K]
  RowMat<T> Vn;   // [L, Dv] U - W S

  auto U() const { return X.leftCols(Dv); }
  auto W() const { return X.rightCols(Dk); }

  // Loads tokens t0 .. t0 + L - 1 and computes Dm, A, X (and P when with_p).
  void load(const DeltaHead<T>& h, int64_t t0, int64_t len, int64_t dk, int64_t dv,
            bool with_p) {
    L = len, Dk = dk, Dv = dv;
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(Dk)));
    Q.resize(L, Dk), K.resize(L, Dk), V.resize(L, Dv);
    rq.resize(L), rk.resize(L), beta.resize(L), gam.resize(L), E.resize(L), Et.resize(L);
    T run = 0;
    for (int64_t i = 0; i < L; ++i) {
      const int64_t t = t0 + i;
      const auto qr = arr(h.q + t * h.sq, Dk);  // [Dk]
      const auto kr = arr(h.k + t * h.sq, Dk);  // [Dk]
      rq[i] = static_cast<T>(1.0 / std::sqrt(static_cast<double>(qr.square().sum()) + kL2Eps));
      rk[i] = static_cast<T>(1.0 / std::sqrt(static_cast<double>(kr.square().sum()) + kL2Eps));
      Q.row(i) = (qr * (rq[i] * scale)).matrix().transpose();
      K.row(i) = (kr * rk[i]).matrix().transpose();
      V.row(i) = arr(h.v + t * h.sv, Dv).matrix().transpose();
      beta[i] = h.beta[t * h.sg];
      run += h.g[t * h.sg];
      gam[i] = run;
    }
    E = gam.exp();
    Et = (gam[L - 1] - gam).exp();
    Dm.setZero(L, L);
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j <= i; ++j) Dm(i, j) = std::exp(gam[i] - gam[j]);
    A.noalias() = K * K.transpose();  // [L, L]
    A = (beta.matrix().asDiagonal() * A).cwiseProduct(Dm);
    A.template triangularView<Eigen::Upper>().setZero();  // strictly lower
    if (with_p) {
      P.noalias() = Q * K.transpose();
      P = P.cwiseProduct(Dm);  // Dm is 0 above the diagonal
    }
    X.resize(L, Dv + Dk);
    X.leftCols(Dv) = beta.matrix().asDiagonal() * V;
    X.rightCols(Dk) = (beta * E).matrix().asDiagonal() * K;
    A.template triangularView<Eigen::UnitLower>().solveInPlace(X);
  }

  // Vn = U - W S, for the state S [Dk, Dv] at the chunk's start.
  template <class M>
  void correct(const M& S) {
    Vn = U();
    Vn.noalias() -= W() * S;
  }

  // The state at the chunk's end, in place: S = E_last S + (diag(Et) K)^T Vn.
  template <class M>
  void advance(M& S) const {
    S *= E[L - 1];
    S.noalias() += (Et.matrix().asDiagonal() * K).transpose() * Vn;
  }
};

}  // namespace zt::kernels::cpu::detail
