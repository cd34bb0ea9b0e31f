// gated_delta_tool MODE IN OUT: zt's Gated DeltaNet CPU kernels in float64 for
// gated_delta_peer_test.py and bench/gated_delta_bench.py. All numbers little-endian float64.
//   rule:  IN  B, T, Hk, Hv, Dk, Dv, chunk, has_state0, then q, k [B, T, Hk, Dk],
//              v [B, T, Hv, Dv], g, beta [B, T, Hv], state0 [B, Hv, Dk, Dv] (if has_state0),
//              dout [B, T, Hv, Dv], dstate1 [B, Hv, Dk, Dv]
//         OUT  chunked out, state1; recurrent out, state1; the chunked form's backward:
//              dq, dk, dv, dg, dbeta, dstate0 (has_state0 only)
//   conv:  IN  B, T, C, K, has_past, then x [B, T, C], w [C, K], past [B, C, K - 1] (if has_past)
//         OUT  y [B, T, C]
//   decay: IN  N, Hv, then a [N, Hv], A_log, dt_bias [Hv]   OUT g [N, Hv]
//   norm:  IN  N, D, eps, then x, z [N, D], w [D]           OUT y [N, D]
//   time:  IN  as rule, then repeats   OUT the best seconds of one chunked forward + backward
//              (chunked forward, then backward) over the repeats
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "zt/kernels/gated_delta.hpp"

namespace k = zt::kernels::cpu;
using Vec = std::vector<double>;

namespace {

Vec take(std::ifstream& in, int64_t n) {
  Vec v(static_cast<size_t>(n));
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(double)));
  if (!in) throw std::runtime_error("gated_delta_tool: input too short");
  return v;
}

void put(std::ofstream& out, const Vec& v) {
  out.write(reinterpret_cast<const char*>(v.data()),
            static_cast<std::streamsize>(v.size() * sizeof(double)));
}

int64_t whole(double x) { return static_cast<int64_t>(x); }

struct Rule {
  k::DeltaShape s;
  bool has_state0 = false;
  Vec q, kk, v, g, beta, state0, dout, dstate1;
  explicit Rule(std::ifstream& in) {
    const auto h = take(in, 8);
    s = {.B = whole(h[0]), .T = whole(h[1]), .Hk = whole(h[2]), .Hv = whole(h[3]),
         .Dk = whole(h[4]), .Dv = whole(h[5]), .chunk = whole(h[6])};
    has_state0 = h[7] != 0;
    const int64_t nqk = s.B * s.T * s.Hk * s.Dk, nv = s.B * s.T * s.Hv * s.Dv,
                  nh = s.B * s.T * s.Hv, ns = s.B * s.Hv * s.Dk * s.Dv;
    q = take(in, nqk), kk = take(in, nqk), v = take(in, nv), g = take(in, nh), beta = take(in, nh);
    if (has_state0) state0 = take(in, ns);
    dout = take(in, nv), dstate1 = take(in, ns);
  }
  const double* st0() const { return has_state0 ? state0.data() : nullptr; }
  // The chunked forward and its backward; out, state1 and the gradients filled.
  void chunked(Vec& out, Vec& state1, std::vector<Vec>& grads) const {
    out.assign(v.size(), 0), state1.assign(dstate1.size(), 0);
    k::gated_delta_chunked_forward(s, q.data(), kk.data(), v.data(), g.data(), beta.data(),
                                   st0(), out.data(), state1.data());
    grads = {Vec(q.size()), Vec(kk.size()), Vec(v.size()), Vec(g.size()), Vec(beta.size()),
             Vec(has_state0 ? state0.size() : 0)};
    k::gated_delta_backward(s, q.data(), kk.data(), v.data(), g.data(), beta.data(), st0(),
                            dout.data(), dstate1.data(), grads[0].data(), grads[1].data(),
                            grads[2].data(), grads[3].data(), grads[4].data(),
                            has_state0 ? grads[5].data() : nullptr);
  }
};

void rule(std::ifstream& in, std::ofstream& out) {
  const Rule r(in);
  Vec o, s1, orr(r.v.size()), sr(r.dstate1.size());
  std::vector<Vec> grads;
  r.chunked(o, s1, grads);
  k::gated_delta_recurrent_forward(r.s, r.q.data(), r.kk.data(), r.v.data(), r.g.data(),
                                   r.beta.data(), r.st0(), orr.data(), sr.data());
  for (const Vec* x : {&o, &s1, &orr, &sr}) put(out, *x);
  for (const Vec& d : grads) put(out, d);
}

void time(std::ifstream& in, std::ofstream& out) {
  const Rule r(in);
  const int64_t repeats = whole(take(in, 1)[0]);
  double best = 1e300;
  Vec o, s1;
  std::vector<Vec> grads;
  for (int64_t i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    r.chunked(o, s1, grads);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  put(out, {best});
}

void conv(std::ifstream& in, std::ofstream& out) {
  const auto h = take(in, 5);
  const int64_t B = whole(h[0]), T = whole(h[1]), C = whole(h[2]), K = whole(h[3]);
  const auto x = take(in, B * T * C), w = take(in, C * K);
  const auto past = h[4] != 0 ? take(in, B * C * (K - 1)) : Vec();
  Vec y(x.size());
  k::causal_conv1d_silu_forward(B, T, C, K, x.data(), w.data(), past.empty() ? nullptr : past.data(),
                                y.data());
  put(out, y);
}

void decay(std::ifstream& in, std::ofstream& out) {
  const auto h = take(in, 2);
  const int64_t N = whole(h[0]), Hv = whole(h[1]);
  const auto a = take(in, N * Hv), A_log = take(in, Hv), dt = take(in, Hv);
  Vec g(a.size());
  k::delta_decay_forward(N, Hv, a.data(), A_log.data(), dt.data(), g.data());
  put(out, g);
}

void norm(std::ifstream& in, std::ofstream& out) {
  const auto h = take(in, 3);
  const int64_t N = whole(h[0]), D = whole(h[1]);
  const auto x = take(in, N * D), z = take(in, N * D), w = take(in, D);
  Vec y(x.size()), rstd(static_cast<size_t>(N));
  k::gated_rmsnorm_forward(N, D, x.data(), z.data(), w.data(), h[2], y.data(), rstd.data());
  put(out, y);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: gated_delta_tool rule|conv|decay|norm|time IN OUT\n");
    return 2;
  }
  std::ifstream in(argv[2], std::ios::binary);
  std::ofstream out(argv[3], std::ios::binary);
  if (!in || !out) {
    std::fprintf(stderr, "gated_delta_tool: cannot open %s or %s\n", argv[2], argv[3]);
    return 2;
  }
  const std::string mode = argv[1];
  if (mode == "rule") {
    rule(in, out);
  } else if (mode == "conv") {
    conv(in, out);
  } else if (mode == "decay") {
    decay(in, out);
  } else if (mode == "norm") {
    norm(in, out);
  } else if (mode == "time") {
    time(in, out);
  } else {
    std::fprintf(stderr, "gated_delta_tool: mode %s is not rule, conv, decay, norm or time\n",
                 argv[1]);
    return 2;
  }
  return out ? 0 : 1;
}
