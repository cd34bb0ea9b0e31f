// moe_tool IN OUT: runs zt's mixture-of-experts block (kernels/moe.hpp) in float32 for
// moe_peer_test.py. IN (little-endian): int64 N, C, I, E, k; float64 coef; then float32
// x [N, C], router [E, C], gate_up [E, 2I, C], down [E, C, I], R [N, C]. OUT: float32
// out [N, C], int32 idx [N, k], float64 aux, float32 dx [N, C], drouter [E, C],
// dgate_up [E, 2I, C], ddown [E, C, I]: the gradients of L = sum(out * R) + coef * aux.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "zt/kernels/linear.hpp"
#include "zt/kernels/moe.hpp"

namespace k = zt::kernels::cpu;

namespace {

template <class T>
std::vector<T> take(std::ifstream& in, int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(T)));
  if (!in) throw std::runtime_error("moe_tool: input too short");
  return v;
}

template <class T>
void put(std::ofstream& out, const std::vector<T>& v) {
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: moe_tool IN OUT\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  const auto dims = take<int64_t>(in, 5);
  const int64_t N = dims[0], C = dims[1], I = dims[2], E = dims[3], K = dims[4];
  const double coef = take<double>(in, 1)[0];
  const auto x = take<float>(in, N * C), Wr = take<float>(in, E * C);
  const auto gate_up = take<float>(in, E * 2 * I * C), down = take<float>(in, E * C * I);
  const auto R = take<float>(in, N * C);

  std::vector<float> logits(N * E), probs(N * E), w(N * K), out(N * C);  // [N,E] [N,E] [N,k] [N,C]
  std::vector<float> gu(N * K * 2 * I), h(N * K * I), y(N * K * C);        // saved activations
  std::vector<int32_t> idx(N * K);                                          // [N, k]
  std::vector<double> tokens(E, 0.0), prob_sum(E, 0.0);                     // [E]
  k::moe_router_logits(logits.data(), x.data(), Wr.data(), N, C, E);
  k::moe_route(probs.data(), idx.data(), w.data(), logits.data(), N, E, K);
  k::moe_experts_forward(out.data(), gu.data(), h.data(), y.data(), x.data(), gate_up.data(),
                         down.data(), idx.data(), w.data(), N, C, I, E, K);
  k::moe_aux_accumulate(tokens.data(), prob_sum.data(), probs.data(), idx.data(), N, E, K);
  const double aux = k::moe_aux_loss(tokens.data(), prob_sum.data(), static_cast<double>(N), E);

  std::vector<float> dx(N * C, 0.f), dWr(E * C, 0.f), dgu(gate_up.size(), 0.f), ddown(down.size(), 0.f);
  std::vector<float> dw(N * K), dprob(E), dlogits(N * E);
  k::moe_experts_backward(dx.data(), dgu.data(), ddown.data(), dw.data(), R.data(), x.data(),
                          gate_up.data(), down.data(), idx.data(), w.data(), gu.data(), h.data(),
                          y.data(), N, C, I, E, K);
  k::moe_aux_dprob(dprob.data(), tokens.data(), static_cast<double>(N), E, coef);
  k::moe_route_backward(dlogits.data(), dw.data(), dprob.data(), probs.data(), idx.data(), w.data(),
                        N, E, K);
  k::linear_backward(dx.data(), dWr.data(), dlogits.data(), x.data(), Wr.data(), N, C, E);

  std::ofstream o(argv[2], std::ios::binary);
  put(o, out);
  put(o, idx);
  put(o, std::vector<double>{aux});
  put(o, dx);
  put(o, dWr);
  put(o, dgu);
  put(o, ddown);
  if (!o) throw std::runtime_error("moe_tool: cannot write the output");
  return 0;
}
