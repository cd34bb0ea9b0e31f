#pragma once
// Helpers for the GPU kernel tests (label gpu): a fixture that skips without a device,
// fresh random inputs (seed printed, ZT_TEST_SEED=... replays one), uploads that round
// to the element type and keep the rounded values for the reference, downloads as double,
// and the error measure max|got - ref| / max|ref| (infinite when anything is NaN, so an
// output left poisoned never passes).
//
// References are the CPU kernels (src/kernels/cpu) run in double on exactly the values
// the GPU saw. Tolerances: fp32 1e-5, bf16 1e-2 (relative to the buffer's largest value).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "zt/core/dtype.hpp"
#include "zt/core/error.hpp"
#include "zt/kernels/cuda/buffer.hpp"
#include "zt/kernels/cuda/check.hpp"
#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda::testing {

using Vec = std::vector<double>;

inline constexpr double kTolF32 = 1e-5;
inline constexpr double kTolBF16 = 1e-2;

template <class T>
constexpr double tolerance() {
  return std::is_same_v<T, float> ? kTolF32 : kTolBF16;
}
template <class T>
const char* type_name() {
  return std::is_same_v<T, float> ? "f32" : "bf16";
}

// Every test of a GpuTest fixture skips itself where no CUDA device is visible.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_count() == 0) GTEST_SKIP() << "no GPU visible";
    ZT_CUDA_CHECK(cudaSetDevice(0));
    const char* env = std::getenv("ZT_TEST_SEED");
    seed_ = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    std::printf("seed %llu (ZT_TEST_SEED=%llu replays it)\n",
                static_cast<unsigned long long>(seed_), static_cast<unsigned long long>(seed_));
    rng_.seed(seed_);
  }
  void TearDown() override {
    if (device_count() > 0) ZT_CUDA_CHECK(cudaDeviceSynchronize());
  }

  // n normal values with the given mean and standard deviation.
  Vec randn(size_t n, double scale = 1.0, double mean = 0.0) {
    std::normal_distribution<double> dist(mean, scale);
    Vec v(n);
    for (auto& x : v) x = dist(rng_);
    return v;
  }
  int32_t randint(int32_t lo, int32_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng_);
  }

  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

// Round-trip a double through the element type.
template <class T>
double round_to(double x) {
  if constexpr (std::is_same_v<T, float>) {
    return static_cast<double>(static_cast<float>(x));
  } else {
    return static_cast<double>(static_cast<float>(zt::bf16(static_cast<float>(x))));
  }
}

// Rounds v in place to T's values (so the double reference sees what the GPU sees).
template <class T>
void round_all(Vec& v) {
  for (auto& x : v) x = round_to<T>(x);
}

// A device copy of v as T (v rounded first, in place).
template <class T>
DeviceBuffer<T> to_device(Vec& v) {
  round_all<T>(v);
  std::vector<T> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const float f = static_cast<float>(v[i]);
    if constexpr (std::is_same_v<T, float>) {
      h[i] = f;
    } else {
      __nv_bfloat16_raw raw;
      raw.x = zt::bf16(f).bits;
      h[i] = raw;
    }
  }
  DeviceBuffer<T> d(v.size());
  d.upload(h);
  return d;
}

// A device copy of v (rounded in place) placed `off` elements into its buffer, behind
// zeros: at(buf, off) is then as misaligned as off elements make it (the packed kernels'
// scalar fallback). from(got, off) drops the leading elements of a download again.
template <class T>
DeviceBuffer<T> to_device_at(Vec& v, size_t off) {
  round_all<T>(v);
  Vec padded(off, 0.0);
  padded.insert(padded.end(), v.begin(), v.end());
  return to_device<T>(padded);
}
template <class T>
T* at(DeviceBuffer<T>& d, size_t off) {
  return d.data() + off;
}
inline Vec from(const Vec& got, size_t off) { return Vec(got.begin() + off, got.end()); }

inline DeviceBuffer<int32_t> to_device_i32(const std::vector<int32_t>& v) {
  DeviceBuffer<int32_t> d(v.size());
  d.upload(v);
  return d;
}

// A device int buffer's values on the host (after the device's work).
inline std::vector<int32_t> ints(const DeviceBuffer<int32_t>& d) {
  ZT_CUDA_CHECK(cudaDeviceSynchronize());
  return d.to_host();
}

// Device buffer of n elements poisoned with NaN (0xFF bytes): an unwritten output fails.
template <class T>
DeviceBuffer<T> poisoned(size_t n) {
  DeviceBuffer<T> d(n);
  d.fill_bytes(0xFF);
  return d;
}

template <class T>
Vec to_host(const DeviceBuffer<T>& d) {
  ZT_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<T> h = d.to_host();
  Vec v(h.size());
  for (size_t i = 0; i < h.size(); ++i) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      v[i] = static_cast<double>(h[i]);
    } else {
      zt::bf16 b;
      b.bits = static_cast<__nv_bfloat16_raw>(h[i]).x;
      v[i] = static_cast<double>(static_cast<float>(b));
    }
  }
  return v;
}

// max |got - ref| / max |ref|; +inf when sizes differ or got holds a NaN / inf.
inline double rel_to_max(const Vec& got, const Vec& ref) {
  if (got.size() != ref.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num = std::max(num, std::abs(got[i] - ref[i]));
    den = std::max(den, std::abs(ref[i]));
  }
  return den > 0 ? num / den : num;
}

inline void expect_close(const Vec& got, const Vec& ref, double tol, const std::string& what) {
  const double e = rel_to_max(got, ref);
  std::printf("[gpu vs cpu] %-40s rel err %.3e (tol %.0e)\n", what.c_str(), e, tol);
  EXPECT_LT(e, tol) << what;
}

}  // namespace zt::kernels::cuda::testing
