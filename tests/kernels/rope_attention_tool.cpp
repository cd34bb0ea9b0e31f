// rope_attention_tool MODE IN OUT: zt's CPU RoPE and attention kernels in float64 for
// rope_attention_peer_test.py. All numbers little-endian float64.
//   rope:      IN  type (0 default, 1 yarn), theta, rd, factor, beta_fast, beta_slow,
//                  original_max_position_embeddings, truncate (0/1), mscale, mscale_all_dim,
//                  attention_factor, T, nh, D, then x [T, nh, D] (positions 0 .. T-1)
//              OUT rope_attention_factor, rope_inv_freq [rd/2], y [T, nh, D]
//   attention: IN  B, T, H, G, D, window, softcap, sinks (0/1), then q [B, T, H, D],
//                  k, v [B, T, G, D], and sink [H] when sinks is 1
//              OUT out [B, T, H, D] (attention_forward with the soft-cap and the sinks)
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "zt/kernels/attention.hpp"
#include "zt/kernels/rope.hpp"

namespace k = zt::kernels;

namespace {

std::vector<double> take(std::ifstream& in, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(double)));
  if (!in) throw std::runtime_error("rope_attention_tool: input too short");
  return v;
}

void put(std::ofstream& out, const std::vector<double>& v) {
  out.write(reinterpret_cast<const char*>(v.data()),
            static_cast<std::streamsize>(v.size() * sizeof(double)));
}

int64_t whole(double x) { return static_cast<int64_t>(x); }

void rope(std::ifstream& in, std::ofstream& out) {
  const auto h = take(in, 14);
  k::RopeScaling s;
  s.type = h[0] == 1 ? "yarn" : "default";
  const double theta = h[1];
  const int64_t rd = whole(h[2]);
  s.factor = h[3];
  s.beta_fast = h[4];
  s.beta_slow = h[5];
  s.original_context = whole(h[6]);
  s.truncate = h[7] != 0;
  s.mscale = h[8];
  s.mscale_all_dim = h[9];
  s.attention_factor = h[10];
  const int64_t T = whole(h[11]), nh = whole(h[12]), D = whole(h[13]);
  std::vector<double> x = take(in, T * nh * D);
  std::vector<double> cos(static_cast<size_t>(T * rd / 2)), sin(cos.size());
  k::cpu::rope_table(cos.data(), sin.data(), T, rd, theta, s);
  k::cpu::rope_forward(x.data(), cos.data(), sin.data(), 1, T, nh, D, nullptr, rd);
  put(out, {k::rope_attention_factor(s)});
  put(out, k::rope_inv_freq(rd, theta, s));
  put(out, x);
}

void attention(std::ifstream& in, std::ofstream& out) {
  const auto h = take(in, 8);
  const int64_t B = whole(h[0]), T = whole(h[1]), H = whole(h[2]), G = whole(h[3]),
                D = whole(h[4]), window = whole(h[5]);
  const auto q = take(in, B * T * H * D), kk = take(in, B * T * G * D), v = take(in, B * T * G * D);
  const auto sink = h[7] != 0 ? take(in, H) : std::vector<double>();
  std::vector<double> o(q.size()), probs(static_cast<size_t>(B * H * T * T));
  k::cpu::attention_forward(o.data(), probs.data(), q.data(), kk.data(), v.data(), B, T, H, G, D,
                            nullptr, window, sink.empty() ? nullptr : sink.data(), h[6]);
  put(out, o);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: rope_attention_tool rope|attention IN OUT\n");
    return 2;
  }
  std::ifstream in(argv[2], std::ios::binary);
  std::ofstream out(argv[3], std::ios::binary);
  if (!in || !out) {
    std::fprintf(stderr, "rope_attention_tool: cannot open %s or %s\n", argv[2], argv[3]);
    return 2;
  }
  const std::string mode = argv[1];
  if (mode == "rope") {
    rope(in, out);
  } else if (mode == "attention") {
    attention(in, out);
  } else {
    std::fprintf(stderr, "rope_attention_tool: mode %s is not rope or attention\n", argv[1]);
    return 2;
  }
  return out ? 0 : 1;
}
