// CPU emulation of CUDA blocks for checking kernels without a GPU: every thread of a block is
// a std::thread; __syncthreads a barrier; warp shuffles through a per-warp exchange.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <barrier>
#include <cmath>
#include <functional>
#include <thread>
#include <vector>
#include <cstring>
#include <memory>
#include "zt/kernels/cuda/check.hpp"
#undef ZT_CUDA_CHECK
#define ZT_CUDA_CHECK(x) ((void)(x))
#undef ZT_CUDA_LAUNCH_CHECK
#define ZT_CUDA_LAUNCH_CHECK(x) ((void)0)
#undef __global__
#define __global__
#undef __device__
#define __device__
#undef __host__
#define __host__
#undef __forceinline__
#define __forceinline__ inline
#undef __shared__
#define __shared__ static
#define __launch_bounds__(...)

namespace emu {
struct D3 { unsigned x = 1, y = 1, z = 1; };
inline thread_local D3 threadIdx_, blockIdx_, blockDim_, gridDim_;
inline std::vector<float> dyn_smem;
struct Block {
  std::unique_ptr<std::barrier<>> bar;
  std::vector<std::unique_ptr<std::barrier<>>> wbar;
  std::vector<std::vector<double>> xch;
};
inline Block* block = nullptr;
inline void sync() { block->bar->arrive_and_wait(); }
inline void syncwarp() { block->wbar[threadIdx_.x / 32]->arrive_and_wait(); }
template <class V>
V shfl_xor(V v, int o) {
  const int w = threadIdx_.x / 32, l = threadIdx_.x % 32;
  block->xch[w][l] = static_cast<double>(v);
  syncwarp();
  V r = static_cast<V>(block->xch[w][l ^ o]);
  syncwarp();
  return r;
}
inline D3 mk(dim3 d) { return D3{d.x, d.y, d.z}; }
inline D3 mk(unsigned x) { return D3{x, 1, 1}; }
inline D3 mk(int x) { return D3{static_cast<unsigned>(x), 1, 1}; }
inline D3 mk(long x) { return D3{static_cast<unsigned>(x), 1, 1}; }
template <class F, class G, class B>
void launch(F&& f, G grid_, B block_, size_t smem = 0, cudaStream_t = nullptr) {
  const D3 grid = mk(grid_), blk = mk(block_);
  const unsigned nt = blk.x * blk.y;
  dyn_smem.assign(smem / 4 + 1, std::nanf(""));
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        Block b;
        b.bar = std::make_unique<std::barrier<>>(nt);
        const unsigned nw = (nt + 31) / 32;
        for (unsigned w = 0; w < nw; ++w) {
          b.wbar.push_back(std::make_unique<std::barrier<>>(std::min(32u, nt - w * 32)));
          b.xch.emplace_back(32, 0.0);
        }
        block = &b;
        std::vector<std::thread> ts;
        for (unsigned t = 0; t < nt; ++t)
          ts.emplace_back([&, t] {
            threadIdx_ = D3{t % blk.x, t / blk.x, 1};
            blockIdx_ = D3{bx, by, bz};
            blockDim_ = blk;
            gridDim_ = grid;
            f();
          });
        for (auto& t : ts) t.join();
      }
}
}  // namespace emu
#define threadIdx emu::threadIdx_
#define blockIdx emu::blockIdx_
#define blockDim emu::blockDim_
#define gridDim emu::gridDim_
#define __syncthreads() emu::sync()
#define __syncwarp(...) emu::syncwarp()
#define __shfl_xor_sync(m, v, o) emu::shfl_xor(v, o)
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
#define cudaGetDevice(p) (*(p) = 0, cudaSuccess)
#define cudaDeviceGetAttribute(p, a, d) (*(p) = 232448, cudaSuccess)
#define cudaFuncSetAttribute(...) cudaSuccess
