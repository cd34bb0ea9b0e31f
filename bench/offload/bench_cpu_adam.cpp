// CPU AdamW throughput of the offload store's kernel, and the STREAM-triad bandwidth of
// this machine measured in the same process (the bound: bytes one step must move /
// triad rate). One JSON line per run. Driven by bench/offload/run_cpu_adam.py, which
// runs DeepSpeed's DeepSpeedCPUAdam beside it (never a test).
//   bench_cpu_adam --n 33554432 --threads 2 --iters 20 [--isa avx512] [--copy none|f32|bf16]
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "zt/offload/cpu_adam.hpp"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// CPU seconds of the whole process (all threads): on a shared, loaded machine this leaves
// out the time the threads were not running.
double cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"CPU AdamW of zt's offload store vs the STREAM-triad bound"};
  int64_t n = 32 << 20;
  int threads = 1, iters = 20;
  std::string isa_text = "best", copy = "none";
  app.add_option("--n", n, "parameters");
  app.add_option("--threads", threads, "OpenMP threads");
  app.add_option("--iters", iters, "timed steps (and triads)");
  app.add_option("--isa", isa_text, "best, scalar, avx2, avx512");
  app.add_option("--copy", copy, "parameter copy written in the same pass: none, f32, bf16");
  int64_t triad_n = 160 << 20;
  app.add_option("--triad-n", triad_n,
                 "elements of each triad array (STREAM: 3 arrays >= 4x the last-level cache; "
                 "default 160 Mi floats = 1.9 GiB for this VM's 480 MiB L3)");
  CLI11_PARSE(app, argc, argv);
  omp_set_num_threads(threads);
  const zt::offload::Isa isa = isa_text == "best" ? zt::offload::default_isa() : zt::offload::parse_isa(isa_text);
  const size_t N = static_cast<size_t>(n);

  // p, g, m, v [N]; first touch by the threads that use them (static schedule)
  std::vector<float> p(N), g(N), m(N), v(N), out32(copy == "f32" ? N : 0);
  std::vector<zt::bf16> out16(copy == "bf16" ? N : 0);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    p[static_cast<size_t>(i)] = 0.01f * static_cast<float>(i % 97);
    g[static_cast<size_t>(i)] = 1e-3f * static_cast<float>(i % 13) - 6e-3f;
    m[static_cast<size_t>(i)] = 0.0f;
    v[static_cast<size_t>(i)] = 0.0f;
  }
  zt::offload::ParamCopy out;
  if (copy == "f32") out.f32 = out32.data();
  if (copy == "bf16") out.half = out16.data();
  std::vector<double> t_adam, c_adam;
  for (int it = -2; it < iters; ++it) {  // 2 warm-up steps
    const auto s = zt::offload::adam_scalars(1e-3, 0.9, 0.95, 1e-8, 0.1, it + 3);
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_now();
    zt::offload::adamw(s, p.data(), g.data(), m.data(), v.data(), out, n, isa);
    if (it >= 0) {
      t_adam.push_back(seconds_since(t0));
      c_adam.push_back(cpu_now() - c0);
    }
  }

  // STREAM triad a = b + s c over float arrays of N elements: 12 bytes per element
  // (STREAM's convention: write-allocate traffic not counted).
  const int64_t tn = std::max(triad_n, n);
  std::vector<float> a(static_cast<size_t>(tn)), b(static_cast<size_t>(tn)), c(static_cast<size_t>(tn));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < tn; ++i) {
    a[static_cast<size_t>(i)] = 0.0f;
    b[static_cast<size_t>(i)] = 1.0f;
    c[static_cast<size_t>(i)] = 2.0f;
  }
  std::vector<double> t_triad, c_triad;
  const float scalar = 3.0f;
  for (int it = -2; it < iters; ++it) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_now();
    float* __restrict pa = a.data();
    const float* __restrict pb = b.data();
    const float* __restrict pc = c.data();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < tn; ++i) pa[i] = pb[i] + scalar * pc[i];
    if (it >= 0) {
      t_triad.push_back(seconds_since(t0));
      c_triad.push_back(cpu_now() - c0);
    }
  }
  const double bytes_step = static_cast<double>(n) * (28.0 + (copy == "f32" ? 4 : copy == "bf16" ? 2 : 0));
  const double triad_rate = 12.0 * static_cast<double>(tn) / median(t_triad);
  const double adam = median(t_adam);
  const double bound = bytes_step / triad_rate;
  std::printf("{\"impl\": \"zt\", \"isa\": \"%s\", \"copy\": \"%s\", \"n\": %lld, \"threads\": %d, "
              "\"median_s\": %.6f, \"min_s\": %.6f, \"triad_GBps\": %.3f, \"triad_best_GBps\": %.3f, "
              "\"bytes_per_step\": %.0f, \"bound_s\": %.6f, \"fraction_of_bound\": %.3f, "
              "\"cpu_median_s\": %.6f, \"triad_cpu_GBps\": %.3f, \"check\": %g}\n",
              std::string(zt::offload::isa_name(isa)).c_str(), copy.c_str(), static_cast<long long>(n),
              threads, adam, *std::min_element(t_adam.begin(), t_adam.end()), triad_rate / 1e9,
              12.0 * static_cast<double>(tn) / *std::min_element(t_triad.begin(), t_triad.end()) / 1e9,
              bytes_step, bound, bound / adam, median(c_adam),
              12.0 * static_cast<double>(tn) * threads / median(c_triad) / 1e9,
              static_cast<double>(p[N / 3] + a[static_cast<size_t>(tn) / 2]));
  return 0;
}
