#pragma once
// Deterministic, sharding-independent initialisation. Element i of tensor NAME is a pure
// function of (seed, NAME, i): a counter-based hash (splitmix64 finaliser over
// seed, FNV-1a(NAME) and i) gives two uniforms, Box-Muller turns them into one standard
// normal, which is scaled by the tensor's std. So any rank can fill any slice of any
// unit, in any order, and get the values a single process would.
//
//   RMSNorm weights          1
//   every other weight       N(0, std)                    std = InitOptions::std (0.02)
//   o_proj, down_proj        N(0, std / sqrt(2 * layers)) when scale_residual (GPT-2 style;
//                            these two write into the residual stream, 2 per block)
#include <cstdint>
#include <span>
#include <string_view>

#include "zt/model/layout.hpp"

namespace zt::model {

struct InitOptions {
  uint64_t seed = 1234;
  double std = 0.02;
  bool scale_residual = true;
};

// The standard normal for element i of tensor `name` (before scaling). Pure function.
double init_standard_normal(uint64_t seed, std::string_view name, int64_t i);
// The counter-based stream of tensor `name` under `seed`, and its uniform in (0, 1] at
// counter i (53 random bits): the LoRA A init and dropout masks draw from it. Pure.
uint64_t init_stream(uint64_t seed, std::string_view name);
double uniform_at(uint64_t stream, int64_t i);

// The std used for a tensor (0 for kOnes).
double init_std(const TensorInfo& t, const Config& cfg, const InitOptions& opt);

// Value of element i of tensor t.
double init_value(const TensorInfo& t, const Config& cfg, const InitOptions& opt, int64_t i);

// Fills out[j] = value of element (begin + j) of tensor t.
template <class T>
void init_tensor(const TensorInfo& t, const Config& cfg, const InitOptions& opt, int64_t begin,
                 std::span<T> out);

// Fills out[j] = element (begin + j) of unit u's flat buffer (any slice: a shard).
// out.size() + begin must not exceed the unit's numel (throws zt::Error otherwise).
template <class T>
void init_unit_slice(const ParamLayout& layout, int u, const InitOptions& opt, int64_t begin,
                     std::span<T> out);

// Whole unit: init_unit_slice(layout, u, opt, 0, out) with out.size() == unit numel.
template <class T>
void init_unit(const ParamLayout& layout, int u, const InitOptions& opt, std::span<T> out);

}  // namespace zt::model
