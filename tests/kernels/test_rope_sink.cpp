// Partial rotary RoPE, yarn's attention factor in the tables, attention sinks (gpt-oss)
// and attention logit soft-capping (Gemma 2's): finite-difference gradient checks in double (five-point, h = 1e-3, relative
// error bound 1e-6 as test_ops_gradcheck.cpp), the sinks' gradient included; the sink
// forward against a direct softmax with the sink column; the decode path against the
// forward. transformers' values: rope_attention_peer_test.py.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>

#include "gradcheck_expect.hpp"
#include "zt/kernels/cpu.hpp"

namespace zt::kernels::cpu {
namespace {

using testing::check_all;
using testing::dot;
using testing::ErrStats;
using testing::randn;
using Vec = std::vector<double>;

using testing::expect_ok;
using testing::kFloor;
using testing::kH;
using testing::kTol;

// gpt-oss's rope_scaling (yarn, factor 32): attention factor 0.1 ln 32 + 1 in the tables.
RopeScaling gpt_oss_yarn() {
  RopeScaling s;
  s.type = "yarn";
  s.factor = 32;
  s.original_context = 4096;
  s.truncate = false;
  return s;
}

// Partial rotary (rd < D) with yarn's scaled tables: the rotary dims rotate and scale, the
// others pass through bit for bit; the backward is the transposed map.
TEST(RopePartial, GradcheckAndPassThrough) {
  const int64_t B = 2, T = 5, nh = 3, D = 12;
  for (const int64_t rd : {int64_t{4}, int64_t{8}, D}) {
    const std::string tag = "rope rd " + std::to_string(rd) + " of " + std::to_string(D);
    Vec cs(T * rd / 2), sn(T * rd / 2);
    rope_table(cs.data(), sn.data(), T, rd, 150000.0, gpt_oss_yarn());
    const double a = rope_attention_factor(gpt_oss_yarn());
    EXPECT_NEAR(a, 0.1 * std::log(32.0) + 1, 1e-15);
    EXPECT_NEAR(cs[0], a, 1e-15);  // position 0: cos 1, scaled
    auto x = randn(B * T * nh * D, 41), R = randn(B * T * nh * D, 42);
    auto fwd = [&](const Vec& in) {
      Vec y = in;
      rope_forward(y.data(), cs.data(), sn.data(), B, T, nh, D, nullptr, rd);
      return y;
    };
    const Vec y = fwd(x);
    for (int64_t v = 0; v < B * T * nh; ++v)
      for (int64_t i = rd; i < D; ++i) EXPECT_EQ(y[v * D + i], x[v * D + i]) << tag;
    for (int64_t v = 0; v < B * T * nh; ++v) {  // the rotary part's norm scales by a
      double n0 = 0, n1 = 0;
      for (int64_t i = 0; i < rd; ++i) {
        n0 += x[v * D + i] * x[v * D + i];
        n1 += y[v * D + i] * y[v * D + i];
      }
      EXPECT_NEAR(std::sqrt(n1), a * std::sqrt(n0), 1e-12) << tag;
    }
    auto f = [&] { return dot(fwd(x), R); };
    Vec dx = R;
    rope_backward(dx.data(), cs.data(), sn.data(), B, T, nh, D, nullptr, rd);
    expect_ok(check_all(f, x, dx, kH, kFloor), tag + " dx");
  }
}

// Direct softmax with the sink column: out[b, t, h] = sum_s p_s v_s, the sink's weight
// dropped, keys lo..t with lo from the window; with cap > 0 each scaled score z becomes
// cap tanh(z / cap) first (transformers' eager attention of Gemma 2 / 3).
Vec direct_sink_attention(const Vec& q, const Vec& k, const Vec& v, const Vec& sink, int64_t B,
                          int64_t T, int64_t H, int64_t G, int64_t D, int64_t w,
                          double cap = 0) {
  Vec out(q.size(), 0.0);
  const double scale = 1 / std::sqrt(static_cast<double>(D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t g = h / (H / G), lo = w > 0 ? std::max<int64_t>(0, t - w + 1) : 0;
        Vec e(static_cast<size_t>(t + 1 - lo));
        double den = std::exp(sink[h]);
        for (int64_t s = lo; s <= t; ++s) {
          double d = 0;
          for (int64_t i = 0; i < D; ++i)
            d += q[((b * T + t) * H + h) * D + i] * k[((b * T + s) * G + g) * D + i];
          const double z = cap > 0 ? cap * std::tanh(d * scale / cap) : d * scale;
          den += (e[s - lo] = std::exp(z));
        }
        for (int64_t s = lo; s <= t; ++s)
          for (int64_t i = 0; i < D; ++i)
            out[((b * T + t) * H + h) * D + i] += e[s - lo] / den * v[((b * T + s) * G + g) * D + i];
      }
  return out;
}

double max_abs_diff(const Vec& a, const Vec& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

// Sinks with GQA, MHA, sliding windows and packed positions: forward against the direct
// softmax, the decode path against the forward, and dq, dk, dv, dsink against finite
// differences (written and accumulated dsink).
TEST(AttentionSink, ForwardDecodeAndGradcheck) {
  const int64_t B = 2, T = 7, D = 4;
  const std::vector<int32_t> pos = {0, 1, 2, 3, 4, 0, 1, /**/ 0, 1, 0, 1, 2, 3, 4};
  for (const auto& [H, G] : {std::pair<int64_t, int64_t>{4, 2}, {2, 2}, {3, 1}})
    for (const int64_t w : {int64_t{0}, int64_t{1}, int64_t{3}})
      for (const int32_t* p : {static_cast<const int32_t*>(nullptr), pos.data()}) {
        const std::string tag = "sink H" + std::to_string(H) + " G" + std::to_string(G) +
                                " window " + std::to_string(w) + (p ? " packed" : "");
        auto q = randn(B * T * H * D, 51), k = randn(B * T * G * D, 52);
        auto v = randn(B * T * G * D, 53), R = randn(B * T * H * D, 54);
        auto sink = randn(H, 55, 1.5);
        auto f = [&] {
          Vec out(q.size()), probs(B * H * T * T);
          attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), B, T, H, G,
                            D, p, w, sink.data());
          return dot(out, R);
        };
        Vec out(q.size()), probs(B * H * T * T);
        attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), B, T, H, G, D,
                          p, w, sink.data());
        if (!p) {
          EXPECT_LT(max_abs_diff(out, direct_sink_attention(q, k, v, sink, B, T, H, G, D, w)),
                    1e-13)
              << tag;
          Vec dec(T * H * D), scores(H * T);  // batch 0, 3 positions, then one at a time
          attention_decode(dec.data(), scores.data(), q.data(), k.data(), v.data(), 3, 0, H, G,
                           D, w, sink.data());
          for (int64_t t = 3; t < T; ++t)
            attention_decode(dec.data() + t * H * D, scores.data(), q.data() + t * H * D,
                             k.data(), v.data(), 1, t, H, G, D, w, sink.data());
          EXPECT_LT(max_abs_diff(dec, Vec(out.begin(), out.begin() + T * H * D)), 1e-13) << tag;
        }
        Vec dq(q.size(), 0.0), dk(k.size(), 0.0), dv(v.size(), 0.0), ds(H, 7.0);
        Vec scratch(attention_backward_scratch(T, omp_get_max_threads()));
        attention_backward(dq.data(), dk.data(), dv.data(), scratch.data(), R.data(), q.data(),
                           k.data(), v.data(), probs.data(), B, T, H, G, D, false, ds.data());
        expect_ok(check_all(f, q, dq, kH, kFloor), tag + " dq");
        expect_ok(check_all(f, k, dk, kH, kFloor), tag + " dk");
        expect_ok(check_all(f, v, dv, kH, kFloor), tag + " dv");
        expect_ok(check_all(f, sink, ds, kH, kFloor), tag + " dsink");
        Vec acc(H, 1.0);  // accumulate: adds to what is there
        attention_backward(dq.data(), dk.data(), dv.data(), scratch.data(), R.data(), q.data(),
                           k.data(), v.data(), probs.data(), B, T, H, G, D, true, acc.data());
        for (int64_t h = 0; h < H; ++h) EXPECT_NEAR(acc[h], 1.0 + ds[h], 1e-14) << tag;
      }
}

// Attention logit soft-capping, with and without sinks, windows and packed positions:
// forward against the direct capped softmax, decode against the forward, dq, dk, dv,
// dsink against finite differences. Scores reach several times the cap (q scaled by 2),
// so the cap bends them; a different cap moves the output.
TEST(AttentionSoftcap, ForwardDecodeAndGradcheck) {
  const int64_t B = 2, T = 7, D = 4, H = 4, G = 2;
  const double cap = 1.0;
  const std::vector<int32_t> pos = {0, 1, 2, 3, 4, 0, 1, /**/ 0, 1, 0, 1, 2, 3, 4};
  for (const bool with_sink : {false, true})
    for (const int64_t w : {int64_t{0}, int64_t{3}})
      for (const int32_t* p : {static_cast<const int32_t*>(nullptr), pos.data()}) {
        const std::string tag = std::string("softcap") + (with_sink ? " sink" : "") +
                                " window " + std::to_string(w) + (p ? " packed" : "");
        auto q = randn(B * T * H * D, 71, 2.0), k = randn(B * T * G * D, 72);
        auto v = randn(B * T * G * D, 73), R = randn(B * T * H * D, 74);
        auto sink = randn(H, 75, 1.5);
        const double* sk = with_sink ? sink.data() : nullptr;
        const auto run = [&](double c) {
          Vec out(q.size()), probs(B * H * T * T);
          attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), B, T, H, G,
                            D, p, w, sk, c);
          return std::pair{out, probs};
        };
        auto f = [&] { return dot(run(cap).first, R); };
        const auto [out, probs] = run(cap);
        EXPECT_GT(max_abs_diff(out, run(1.2 * cap).first), 1e-3) << tag;
        if (!p) {
          const Vec none(H, -INFINITY);
          EXPECT_LT(max_abs_diff(out, direct_sink_attention(q, k, v, with_sink ? sink : none, B,
                                                            T, H, G, D, w, cap)),
                    1e-13)
              << tag;
          Vec dec(T * H * D), scores(H * T);  // batch 0, 3 positions, then one at a time
          attention_decode(dec.data(), scores.data(), q.data(), k.data(), v.data(), 3, 0, H, G,
                           D, w, sk, cap);
          for (int64_t t = 3; t < T; ++t)
            attention_decode(dec.data() + t * H * D, scores.data(), q.data() + t * H * D,
                             k.data(), v.data(), 1, t, H, G, D, w, sk, cap);
          EXPECT_LT(max_abs_diff(dec, Vec(out.begin(), out.begin() + T * H * D)), 1e-13) << tag;
        }
        Vec dq(q.size(), 0.0), dk(k.size(), 0.0), dv(v.size(), 0.0), ds(H, 7.0);
        Vec scratch(attention_backward_scratch(T, omp_get_max_threads()));
        attention_backward(dq.data(), dk.data(), dv.data(), scratch.data(), R.data(), q.data(),
                           k.data(), v.data(), probs.data(), B, T, H, G, D, false,
                           with_sink ? ds.data() : nullptr, cap);
        expect_ok(check_all(f, q, dq, kH, kFloor), tag + " dq");
        expect_ok(check_all(f, k, dk, kH, kFloor), tag + " dk");
        expect_ok(check_all(f, v, dv, kH, kFloor), tag + " dv");
        if (with_sink) expect_ok(check_all(f, sink, ds, kH, kFloor), tag + " dsink");
      }
}

// A sink of -inf weight (very negative) is no sink; a large one takes most of each row.
TEST(AttentionSink, LimitsOfTheSinkLogit) {
  const int64_t B = 1, T = 5, H = 2, G = 1, D = 4;
  auto q = randn(B * T * H * D, 61), k = randn(B * T * G * D, 62), v = randn(B * T * G * D, 63);
  Vec plain(q.size()), sunk(q.size()), probs(B * H * T * T);
  attention_forward(plain.data(), probs.data(), q.data(), k.data(), v.data(), B, T, H, G, D);
  const Vec none = {-1e4, -1e4};
  attention_forward(sunk.data(), probs.data(), q.data(), k.data(), v.data(), B, T, H, G, D,
                    nullptr, 0, none.data());
  EXPECT_LT(max_abs_diff(plain, sunk), 1e-15);
  const Vec big = {40.0, 40.0};
  attention_forward(sunk.data(), probs.data(), q.data(), k.data(), v.data(), B, T, H, G, D,
                    nullptr, 0, big.data());
  for (double x : sunk) EXPECT_LT(std::abs(x), 1e-12);
}

}  // namespace
}  // namespace zt::kernels::cpu
