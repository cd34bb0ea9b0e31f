// Linear layer without bias: y = x W^T and its backward, as Eigen GEMMs.
//
// Threading: Eigen's own GEMM threading is off (EIGEN_DONT_PARALLELIZE, see
// CMakeLists.txt): its threads wait for each other by spinning inside every product,
// which collapses when a core is shared with another process. With one OpenMP thread a
// product is one Eigen GEMM (fastest). With more, it is cut into a few large blocks
// (about 4, at least 256 rows or 128 columns each, fixed by the shape alone) handed to
// threads dynamically: a thread that loses its core delays only its own block, and the
// result is the same for any thread count >= 2 (it may differ from the one-thread result
// in the last bits: the blocks change Eigen's internal blocking).
#include "zt/kernels/linear.hpp"

#include <omp.h>

#include <algorithm>

#include "addressable.hpp"
#include "eigen_maps.hpp"

namespace zt::kernels::cpu {

namespace {

// Size of each of about 4 blocks of `n` rows (or columns), a multiple of 16, >= min_size.
int64_t block_size(int64_t n, int64_t min_size) {
  const int64_t quarter = ((n + 3) / 4 + 15) / 16 * 16;
  return std::max(min_size, quarter);
}

// Products smaller than this many multiply-adds, or a single thread: one GEMM call.
constexpr int64_t kParallelMacs = int64_t{1} << 22;

bool split(int64_t N, int64_t in, int64_t out) {
  return omp_get_max_threads() > 1 && !omp_in_parallel() && N * in * out >= kParallelMacs;
}

}  // namespace

template <class T>
void linear_forward(T* y, const T* x, const T* W, int64_t N, int64_t in, int64_t out) {
  detail::expect_elements(y, N * out, "linear_forward", "y");
  detail::expect_elements(x, N * in, "linear_forward", "x");
  detail::expect_elements(W, out * in, "linear_forward", "W");
  auto Y = detail::mat(y, N, out);          // [N, out]
  const auto X = detail::mat(x, N, in);     // [N, in]
  const auto Wm = detail::mat(W, out, in);  // [out, in]
  if (!split(N, in, out)) {
    Y.noalias() = X * Wm.transpose();
    return;
  }
  const int64_t rows = block_size(N, 256);
  const int64_t blocks = (N + rows - 1) / rows;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t r0 = b * rows, len = std::min(rows, N - r0);
    Y.middleRows(r0, len).noalias() = X.middleRows(r0, len) * Wm.transpose();
  }
}

template <class T>
void linear_backward(T* dx, T* dW, const T* dy, const T* x, const T* W, int64_t N, int64_t in,
                     int64_t out, bool accumulate_dx) {
  detail::expect_elements(dy, N * out, "linear_backward", "dy");
  if (dx) {
    detail::expect_elements(dx, N * in, "linear_backward", "dx");
    detail::expect_elements(W, out * in, "linear_backward", "W");
  }
  if (dW) {
    detail::expect_elements(dW, out * in, "linear_backward", "dW");
    detail::expect_elements(x, N * in, "linear_backward", "x");
  }
  const auto dY = detail::mat(dy, N, out);  // [N, out]
  const bool par = split(N, in, out);
  if (dx) {
    // dX [N, in] (+)= dY W, in blocks of rows
    auto dX = detail::mat(dx, N, in);
    const auto Wm = detail::mat(W, out, in);  // [out, in]
    const int64_t rows = par ? block_size(N, 256) : N;
    const int64_t blocks = (N + rows - 1) / rows;
#pragma omp parallel for schedule(dynamic, 1) if (par)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t r0 = b * rows, len = std::min(rows, N - r0);
      if (accumulate_dx) {
        dX.middleRows(r0, len).noalias() += dY.middleRows(r0, len) * Wm;
      } else {
        dX.middleRows(r0, len).noalias() = dY.middleRows(r0, len) * Wm;
      }
    }
  }
  if (dW) {
    // dW [out, in] += dY^T X, summed over all N rows; blocks cut the longer side of dW
    // (each block re-reads the other operand whole, so that one should be the smaller).
    auto dWm = detail::mat(dW, out, in);
    const auto X = detail::mat(x, N, in);  // [N, in]
    if (!par) {
      dWm.noalias() += dY.transpose() * X;
    } else if (out >= in) {
      const int64_t rows = block_size(out, 128);
      const int64_t blocks = (out + rows - 1) / rows;
#pragma omp parallel for schedule(dynamic, 1)
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t r0 = b * rows, len = std::min(rows, out - r0);
        dWm.middleRows(r0, len).noalias() += dY.middleCols(r0, len).transpose() * X;
      }
    } else {
      const int64_t cols = block_size(in, 128);
      const int64_t blocks = (in + cols - 1) / cols;
#pragma omp parallel for schedule(dynamic, 1)
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t c0 = b * cols, len = std::min(cols, in - c0);
        dWm.middleCols(c0, len).noalias() += dY.transpose() * X.middleCols(c0, len);
      }
    }
  }
}

template <class T>
void bias_forward(T* y, const T* b, int64_t N, int64_t out) {
  detail::expect_elements(y, N * out, "bias_forward", "y");
  detail::expect_elements(b, out, "bias_forward", "b");
  const auto bias = detail::mat(b, 1, out);  // [1, out]
#pragma omp parallel for schedule(static) if (N * out >= detail::kParallelMin)
  for (int64_t n = 0; n < N; ++n) detail::mat(y + n * out, 1, out) += bias;
}

template <class T>
void bias_backward(T* db, const T* dy, int64_t N, int64_t out) {
  detail::expect_elements(db, out, "bias_backward", "db");
  detail::expect_elements(dy, N * out, "bias_backward", "dy");
  // Parallel over columns: each db[c] is summed over rows in row order.
#pragma omp parallel for schedule(static) if (N * out >= detail::kParallelMin)
  for (int64_t c0 = 0; c0 < out; c0 += 64) {
    const int64_t c1 = std::min<int64_t>(out, c0 + 64);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = c0; c < c1; ++c) db[c] += dy[n * out + c];
  }
}

template void bias_forward<float>(float*, const float*, int64_t, int64_t);
template void bias_forward<double>(double*, const double*, int64_t, int64_t);
template void bias_backward<float>(float*, const float*, int64_t, int64_t);
template void bias_backward<double>(double*, const double*, int64_t, int64_t);
template void linear_forward<float>(float*, const float*, const float*, int64_t, int64_t, int64_t);
template void linear_forward<double>(double*, const double*, const double*, int64_t, int64_t,
                                     int64_t);
template void linear_backward<float>(float*, float*, const float*, const float*, const float*,
                                     int64_t, int64_t, int64_t, bool);
template void linear_backward<double>(double*, double*, const double*, const double*,
                                      const double*, int64_t, int64_t, int64_t, bool);

}  // namespace zt::kernels::cpu
