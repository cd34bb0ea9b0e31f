// The backward of the chunked gated delta rule, written for its algebra (gated_delta_chunk.hpp),
// chunk by chunk from the last, recomputing each chunk from the state at its start.
//
// What it keeps: the state at each chunk's start, [B, Hv, T/chunk, Dk, Dv], from one pass of
// the state over the chunks (no outputs). Everything else a chunk needs (its decays, the UT
// system and its solve, the intra-chunk attention, U, W, Vn: O(chunk^2 + chunk (Dk + Dv)))
// is recomputed from that state when the chunk's turn comes. So the memory is T/chunk states
// instead of the T states (one per token) that autograd through the recurrent form keeps,
// or every chunk's chunk x chunk matrices that autograd through the chunked form keeps.
//
// The gradients of one chunk, with dO [L, Dv] and dS' [Dk, Dv] (of the state at its end):
//   dVn = P^T dO + Kd dS'                  (Kd = diag(Et) K)
//   dS  = Q^T diag(E) dO + E_last dS' - W^T dVn
//   dP  = dO Vn^T                          (on P's lower triangle)
//   [dVb | dKbe] = M^-T [dVn | -dVn S^T]   (Vb = diag(beta) V, Kbe = diag(beta E) K)
//   dA  = -(dVb U^T + dKbe W^T)            (on A's strictly lower triangle)
// then through Dm, E, Et to the cumulative decay gam, and dg = the reverse cumulative sum of
// dgam inside the chunk; q and k through the L2 normalisation.
#include <algorithm>
#include <cmath>
#include <vector>

#include "eigen_maps.hpp"
#include "gated_delta_chunk.hpp"
#include "zt/kernels/gated_delta.hpp"

namespace zt::kernels::cpu {

namespace {

using detail::Arr;
using detail::RowMat;

// Where one chunk's per-token gradients go (rows `stride` apart, as in the inputs).
template <class T>
struct ChunkGrads {
  T* dqn;    // [L, Dk] rows s.Hv * Dk apart: dq of this value head (normalisation undone)
  T* dkn;    // [L, Dk] the same for k
  T* dv;     // [L, Dv] rows Hv * Dv apart
  T* dg;     // [L] Hv apart
  T* dbeta;  // [L] Hv apart
  int64_t sqk, sv, sg;
};

// One chunk's backward: dS holds dS' on entry, the gradient of the chunk's start state on exit.
template <class T, class MO>
void chunk_backward(const detail::DeltaChunk<T>& c, const RowMat<T>& S, const MO& dO,
                    RowMat<T>& dS, const ChunkGrads<T>& out) {
  const int64_t L = c.L, Dk = c.Dk, Dv = c.Dv;
  const T eL = c.E[L - 1];
  const RowMat<T> Kd = c.Et.matrix().asDiagonal() * c.K;  // [L, Dk]
  RowMat<T> dVn = c.P.transpose() * dO;                   // [L, Dv]
  dVn.noalias() += Kd * dS;
  const RowMat<T> EdO = c.E.matrix().asDiagonal() * dO;   // [L, Dv]
  RowMat<T> dQ = EdO * S.transpose();                     // [L, Dk]
  const RowMat<T> QS = c.Q * S;                           // [L, Dv]
  Arr<T> dgam = EdO.cwiseProduct(QS).rowwise().sum().array();  // [L] from diag(E) Q S
  // the state's gradient at the chunk's start
  RowMat<T> dS0 = c.Q.transpose() * EdO;  // [Dk, Dv]
  dS0 += eL * dS;
  dS0.noalias() -= c.W().transpose() * dVn;
  // S' = E_last S + Kd^T Vn
  const RowMat<T> dKd = c.Vn * dS.transpose();  // [L, Dk]
  RowMat<T> dK = c.Et.matrix().asDiagonal() * dKd;  // [L, Dk]
  const Arr<T> kd = Kd.cwiseProduct(dKd).rowwise().sum().array();  // [L]
  dgam -= kd;
  dgam[L - 1] += eL * S.cwiseProduct(dS).sum() + kd.sum();
  // P = (Q K^T) o Dm
  RowMat<T> dP = dO * c.Vn.transpose();  // [L, L]
  const RowMat<T> HP = dP.cwiseProduct(c.P);  // [L, L] zero above the diagonal
  dgam += HP.rowwise().sum().array() - HP.colwise().sum().transpose().array();
  dP = dP.cwiseProduct(c.Dm);  // [L, L] dP o Dm, lower
  dQ.noalias() += dP * c.K;
  dK.noalias() += dP.transpose() * c.Q;
  // the UT transform: [U | W] = M^-1 [Vb | Kbe]
  RowMat<T> Y(L, Dv + Dk);  // [L, Dv + Dk] [dU | dW], then [dVb | dKbe]
  Y.leftCols(Dv) = dVn;
  Y.rightCols(Dk).noalias() = -dVn * S.transpose();
  c.A.transpose().template triangularView<Eigen::UnitUpper>().solveInPlace(Y);
  RowMat<T> dA = Y.leftCols(Dv) * c.U().transpose();  // [L, L]
  dA.noalias() += Y.rightCols(Dk) * c.W().transpose();
  dA = -dA;
  dA.template triangularView<Eigen::Upper>().setZero();  // A is strictly lower
  const Arr<T> kbe = Y.rightCols(Dk).cwiseProduct(c.K).rowwise().sum().array();  // [L]
  Arr<T> dbeta = Y.leftCols(Dv).cwiseProduct(c.V).rowwise().sum().array() + c.E * kbe;  // [L]
  dgam += c.beta * c.E * kbe;
  dK.noalias() += (c.beta * c.E).matrix().asDiagonal() * Y.rightCols(Dk);
  // A = diag(beta) (K K^T) o Dm
  const RowMat<T> HA = dA.cwiseProduct(c.A);  // [L, L]
  dgam += HA.rowwise().sum().array() - HA.colwise().sum().transpose().array();
  dA = dA.cwiseProduct(c.Dm);  // [L, L] dA o Dm
  const RowMat<T> KK = c.K * c.K.transpose();  // [L, L]
  dbeta += dA.cwiseProduct(KK).rowwise().sum().array();
  const RowMat<T> dAb = c.beta.matrix().asDiagonal() * dA;  // [L, L]
  dK.noalias() += dAb * c.K;
  dK.noalias() += dAb.transpose() * c.K;
  // write: v, beta, g (dg_t = sum over i >= t of dgam_i), q and k through the normalisation
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(Dk)));
  T run = 0;
  for (int64_t i = L - 1; i >= 0; --i) {
    run += dgam[i];
    out.dg[i * out.sg] = run;
    out.dbeta[i * out.sg] = dbeta[i];
    detail::arr(out.dv + i * out.sv, Dv) = c.beta[i] * Y.row(i).head(Dv).array();
    // dq = rq (scale dQ - Q (Q . dQ) / scale), dk = rk (dK - K (K . dK))
    const T qd = c.Q.row(i).dot(dQ.row(i)), kdk = c.K.row(i).dot(dK.row(i));
    detail::arr(out.dqn + i * out.sqk, Dk) =
        c.rq[i] * (scale * dQ.row(i).array() - c.Q.row(i).array() * (qd / scale));
    detail::arr(out.dkn + i * out.sqk, Dk) =
        c.rk[i] * (dK.row(i).array() - c.K.row(i).array() * kdk);
  }
  dS = dS0;
}

}  // namespace

template <class T>
void gated_delta_backward(const DeltaShape& s, const T* q, const T* k, const T* v, const T* g,
                          const T* beta, const T* state0, const T* dout, const T* dstate1,
                          T* dq, T* dk, T* dv, T* dg, T* dbeta, T* dstate0) {
  const int64_t nC = (s.T + s.chunk - 1) / s.chunk, DD = s.Dk * s.Dv;
  std::vector<T> starts(static_cast<size_t>(s.B * s.Hv * nC * DD));  // [B, Hv, nC, Dk, Dv]
  // dq, dk of each value head, before the sum over the heads of a key head: [B, T, Hv, Dk]
  std::vector<T> dqh(static_cast<size_t>(s.B * s.T * s.Hv * s.Dk)), dkh(dqh.size());
#pragma omp parallel for schedule(dynamic)
  for (int64_t bh = 0; bh < s.B * s.Hv; ++bh) {
    const int64_t b = bh / s.Hv, h = bh % s.Hv;
    const auto head = detail::delta_head(s, b, h, q, k, v, g, beta);
    detail::DeltaChunk<T> c;
    RowMat<T> S = detail::delta_state0(s, b, h, state0);  // [Dk, Dv]
    T* st = starts.data() + bh * nC * DD;                  // [nC, Dk, Dv]
    for (int64_t ci = 0; ci < nC; ++ci) {
      const int64_t t0 = ci * s.chunk, L = std::min(s.chunk, s.T - t0);
      detail::mat(st + ci * DD, s.Dk, s.Dv) = S;
      if (ci + 1 == nC) break;  // the last chunk's end state is not needed
      c.load(head, t0, L, s.Dk, s.Dv, false);
      c.correct(S);
      c.advance(S);
    }
    RowMat<T> dS = dstate1 ? RowMat<T>(detail::mat(dstate1 + bh * DD, s.Dk, s.Dv))
                           : RowMat<T>(RowMat<T>::Zero(s.Dk, s.Dv));  // [Dk, Dv]
    for (int64_t ci = nC - 1; ci >= 0; --ci) {
      const int64_t t0 = ci * s.chunk, L = std::min(s.chunk, s.T - t0);
      S = detail::mat(st + ci * DD, s.Dk, s.Dv);
      c.load(head, t0, L, s.Dk, s.Dv, true);
      c.correct(S);
      const int64_t row = (b * s.T + t0) * s.Hv + h;  // token t0 of (b, h) in [B, T, Hv]
      const auto dO = detail::mat(dout + row * s.Dv, L, s.Dv, s.Hv * s.Dv);  // [L, Dv]
      const ChunkGrads<T> o{dqh.data() + row * s.Dk, dkh.data() + row * s.Dk, dv + row * s.Dv,
                            dg + row, dbeta + row, s.Hv * s.Dk, s.Hv * s.Dv, s.Hv};
      chunk_backward(c, S, dO, dS, o);
    }
    if (dstate0) detail::mat(dstate0 + bh * DD, s.Dk, s.Dv) = dS;
  }
  // dq, dk [B, T, Hk, Dk]: the sum over the value heads each key head serves, in head order
  const int64_t group = s.Hv / s.Hk;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < s.B * s.T * s.Hk; ++r) {
    const int64_t bt = r / s.Hk, hk = r % s.Hk;
    auto oq = detail::arr(dq + r * s.Dk, s.Dk), ok = detail::arr(dk + r * s.Dk, s.Dk);
    const int64_t h0 = (bt * s.Hv + hk * group) * s.Dk;
    oq = detail::arr(dqh.data() + h0, s.Dk);
    ok = detail::arr(dkh.data() + h0, s.Dk);
    for (int64_t j = 1; j < group; ++j) {
      oq += detail::arr(dqh.data() + h0 + j * s.Dk, s.Dk);
      ok += detail::arr(dkh.data() + h0 + j * s.Dk, s.Dk);
    }
  }
}

#define ZT_GATED_DELTA_BWD(T)                                                                \
  template void gated_delta_backward<T>(const DeltaShape&, const T*, const T*, const T*,     \
                                        const T*, const T*, const T*, const T*, const T*, T*, \
                                        T*, T*, T*, T*, T*);
ZT_GATED_DELTA_BWD(float)
ZT_GATED_DELTA_BWD(double)
#undef ZT_GATED_DELTA_BWD

}  // namespace zt::kernels::cpu
