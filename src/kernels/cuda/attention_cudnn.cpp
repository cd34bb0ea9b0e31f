// Causal GQA attention through cuDNN's fused SDPA (flash attention on the tensor cores),
// built with the cuDNN frontend's graph API; compiled only when CMake found the frontend
// headers (ZT_HAVE_CUDNN_FRONTEND). libcudnn is dlopened on first use
// (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING): when it is missing or older than 9, every shape
// takes zt's kernel and one warning says why.
//
// zt's layouts map onto cuDNN's [B, heads, S, D] logical dims with strides, no copies:
//   q, out, dq, dout [B, Tn, H, D]  -> dims {B, H, Tn, D}, strides {Tn*H*D, D, H*D, 1}
//   k, v, dk, dv     [B, Tn, G, D]  -> dims {B, G, Tn, D}, strides {Tn*G*D, D, G*D, 1}
//   lse              [B, H, Tn] f32 -> cuDNN's softmax stats {B, H, Tn, 1} (natural-log
//                                      log-sum-exp of the scaled scores, as zt's kernel)
// One graph per (direction, shape, device), built once and cached; one workspace per
// (device, stream), grown to the largest graph's need.
#include <dlfcn.h>

#include <cudnn_frontend.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/kernels/cuda/attention.hpp"
#include "zt/kernels/cuda/buffer.hpp"
#include "zt/kernels/cuda/check.hpp"

namespace cudnn_frontend {
// The frontend's dynamic loader resolves every cuDNN symbol through this handle.
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend

namespace zt::kernels::cuda::detail {
namespace {

namespace fe = cudnn_frontend;

// Tensor uids of the graphs' variant packs.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

[[noreturn]] void cudnn_fail(const char* call, cudnnStatus_t rc, const char* file, int line) {
  fail_call(call, strf("%s (%s)", fe::detail::get_error_string(rc), where_device().c_str()),
            "rerun with CUDNN_LOGLEVEL_DBG=3 CUDNN_LOGDEST_DBG=stderr for cuDNN's own log, or "
            "with ZT_ATTENTION=zt to run zt's attention kernel instead of cuDNN's",
            file, line);
}
#define ZT_CUDNN_CHECK(call)                                                   \
  do {                                                                         \
    const cudnnStatus_t zt_cudnn_rc_ = (call);                                 \
    if (zt_cudnn_rc_ != CUDNN_STATUS_SUCCESS) cudnn_fail(#call, zt_cudnn_rc_, __FILE__, __LINE__); \
  } while (0)

struct Loaded {
  std::string why_not;  // "" when usable
  size_t version = 0;
};

const Loaded& loaded() {
  static const Loaded l = [] {
    Loaded r;
    // ZT_CUDNN_LIB names another library file (tests: a missing one, for the fallback).
    const char* env = std::getenv("ZT_CUDNN_LIB");
    const std::string lib = env && *env ? env : "libcudnn.so.9";
    void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      r.why_not = strf("%s did not load: %s", lib.c_str(), e ? e : "unknown dlopen error");
    } else {
      fe::cudnn_dlhandle = h;
      try {
        r.version = fe::detail::get_backend_version();
        if (r.version < 90000)
          r.why_not = strf("cuDNN %zu is older than 9.0, which zt's fused attention needs",
                           r.version);
      } catch (const std::exception& e) {
        r.why_not = strf("libcudnn loaded but cudnnGetVersion failed: %s", e.what());
      }
    }
    if (!r.why_not.empty())
      log::warn("attention: " + r.why_not +
                "; attention runs on zt's own CUDA-core kernel (slower: install cuDNN 9, "
                "e.g. python3 -m pip install nvidia-cudnn-cu13, and put its lib/ on "
                "LD_LIBRARY_PATH)");
    return r;
  }();
  return l;
}

// dev, B, T, H, G, D, sliding window (0: none)
using ShapeKey = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;

struct Cache {
  std::mutex mu;
  std::map<int, cudnnHandle_t> handles;                                // per device
  std::map<std::pair<bool, ShapeKey>, std::shared_ptr<fe::graph::Graph>> graphs;  // bwd?, shape
  std::map<ShapeKey, std::string> failed;                              // shape -> why
  std::map<std::pair<int, cudaStream_t>, DeviceBuffer<std::byte>> workspaces;
  std::string disabled;  // why cuDNN cannot be used after all (no handle): "" while usable
};
Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: graphs outlive static destruction order
  return *c;
}

int current_device() {
  int d = 0;
  ZT_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

// The device's handle; nullptr (c.disabled says why, warned once) when cuDNN loaded but
// cannot create one (e.g. its sub-libraries or the driver do not fit): zt's kernel then.
cudnnHandle_t handle_for(Cache& c, int dev) {
  auto it = c.handles.find(dev);
  if (it != c.handles.end()) return it->second;
  cudnnHandle_t h = nullptr;
  const cudnnStatus_t rc = fe::detail::create_handle(&h);
  if (rc != CUDNN_STATUS_SUCCESS) {
    c.disabled = strf("cudnnCreate failed on device %d: %s", dev, fe::detail::get_error_string(rc));
    log::warn("attention: " + c.disabled + "; attention runs on zt's own kernel");
    return nullptr;
  }
  c.handles.emplace(dev, h);
  return h;
}

std::string shape_name(const ShapeKey& k) {
  const auto [dev, B, Tn, H, G, D, W] = k;
  return strf("B=%lld T=%lld H=%lld G=%lld D=%lld window=%lld on device %d",
              static_cast<long long>(B), static_cast<long long>(Tn), static_cast<long long>(H),
              static_cast<long long>(G), static_cast<long long>(D), static_cast<long long>(W),
              dev);
}

std::shared_ptr<fe::graph::Graph> make_graph(bool backward, const ShapeKey& key,
                                             cudnnHandle_t handle, std::string* why) {
  const auto [dev, B, Tn, H, G, D, W] = key;
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto tensor = [&](const char* name, Uid uid, int64_t heads) {
    return graph->tensor(fe::graph::Tensor_attributes()
                             .set_name(name)
                             .set_uid(uid)
                             .set_dim({B, heads, Tn, D})
                             .set_stride({Tn * heads * D, D, heads * D, 1}));
  };
  auto Q = tensor("Q", kQ, H);
  auto K = tensor("K", kK, G);
  auto V = tensor("V", kV, G);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  if (!backward) {
    auto opts = fe::graph::SDPA_attributes()
                    .set_name("zt_attention_forward")
                    .set_generate_stats(true)
                    .set_causal_mask(true)
                    .set_attn_scale(scale);
    // sliding window: keys s with s + W > t (the frontend's diagonal band, col + left_bound
    // > row), as zt's kernels and transformers
    if (W > 0) opts.set_diagonal_band_left_bound(static_cast<int>(W));
    auto [O, stats] = graph->sdpa(Q, K, V, opts);
    O->set_output(true).set_uid(kO).set_dim({B, H, Tn, D}).set_stride({Tn * H * D, D, H * D, 1});
    stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT)
        .set_dim({B, H, Tn, 1}).set_stride({H * Tn, Tn, 1, 1});
  } else {
    auto O = tensor("O", kO, H);
    auto dO = tensor("dO", kDO, H);
    auto stats = graph->tensor(fe::graph::Tensor_attributes()
                                   .set_name("stats")
                                   .set_uid(kStats)
                                   .set_dim({B, H, Tn, 1})
                                   .set_stride({H * Tn, Tn, 1, 1})
                                   .set_data_type(fe::DataType_t::FLOAT));
    auto opts = fe::graph::SDPA_backward_attributes()
                    .set_name("zt_attention_backward")
                    .set_causal_mask(true)
                    .set_attn_scale(scale);
    if (W > 0) opts.set_diagonal_band_left_bound(static_cast<int>(W));
    auto [dQ, dK, dV] = graph->sdpa_backward(Q, K, V, O, dO, stats, opts);
    dQ->set_output(true).set_uid(kDQ).set_dim({B, H, Tn, D}).set_stride({Tn * H * D, D, H * D, 1});
    dK->set_output(true).set_uid(kDK).set_dim({B, G, Tn, D}).set_stride({Tn * G * D, D, G * D, 1});
    dV->set_output(true).set_uid(kDV).set_dim({B, G, Tn, D}).set_stride({Tn * G * D, D, G * D, 1});
  }
  // Each step reports why it failed; the first failure ends the build.
  auto step = [&](const char* what, fe::error_t e) {
    if (e.is_good()) return true;
    *why = strf("%s: %s", what, e.get_message().c_str());
    return false;
  };
  if (step("validate", graph->validate()) &&
      step("build_operation_graph", graph->build_operation_graph(handle)) &&
      step("create_execution_plans", graph->create_execution_plans({fe::HeurMode_t::A})) &&
      step("check_support", graph->check_support(handle)) &&
      step("build_plans", graph->build_plans(handle)))
    return graph;
  return nullptr;
}

// Runs the graph for (backward, shape) with the given pointers; false when cuDNN cannot
// build it (remembered, warned once per shape).
bool run(bool backward, int64_t B, int64_t Tn, int64_t H, int64_t G, int64_t D, int64_t W,
         std::unordered_map<int64_t, void*>& pack, cudaStream_t stream) {
  if (!loaded().why_not.empty()) return false;
  ZT_CHECK(G > 0 && H % G == 0,
           strf("attention with H=%lld, G=%lld", static_cast<long long>(H),
                static_cast<long long>(G)),
           "the query heads must be a multiple of the kv heads");
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  const int dev = current_device();
  const ShapeKey key{dev, B, Tn, H, G, D, W};
  if (c.failed.count(key) || !c.disabled.empty()) return false;
  cudnnHandle_t handle = handle_for(c, dev);
  if (!handle) return false;
  auto& graph = c.graphs[{backward, key}];
  if (!graph) {
    std::string why;
    try {
      graph = make_graph(backward, key, handle, &why);
    } catch (const std::exception& ex) {  // the frontend throws on loader failures
      graph = nullptr;
      why = ex.what();
    }
    if (!graph) {
      c.graphs.erase({backward, key});
      c.failed.emplace(key, why);
      log::warn(strf("attention: cuDNN has no fused %s plan for %s (%s); this shape runs on "
                     "zt's own kernel",
                     backward ? "backward" : "forward", shape_name(key).c_str(), why.c_str()));
      return false;
    }
  }
  int64_t ws_bytes = 0;
  {
    auto e = graph->get_workspace_size(ws_bytes);
    if (!e.is_good())
      fail_call("cudnn_frontend::graph::Graph::get_workspace_size", e.get_message(),
                "a cuDNN frontend / library mismatch; rerun with ZT_ATTENTION=zt", __FILE__,
                __LINE__);
  }
  auto& ws = c.workspaces[{dev, stream}];
  if (ws.size() < static_cast<size_t>(ws_bytes))
    ws = DeviceBuffer<std::byte>(static_cast<size_t>(ws_bytes), "the cuDNN attention workspace");
  ZT_CUDNN_CHECK(fe::detail::set_stream(handle, stream));
  auto e = graph->execute(handle, pack, ws.size() ? ws.data() : nullptr);
  if (!e.is_good())
    fail_call(backward ? "cuDNN SDPA backward (execute)" : "cuDNN SDPA forward (execute)",
              strf("%s (%s, %s)", e.get_message().c_str(), shape_name(key).c_str(),
                   where_device().c_str()),
              "rerun with CUDNN_LOGLEVEL_DBG=3 CUDNN_LOGDEST_DBG=stderr for cuDNN's log, or "
              "with ZT_ATTENTION=zt to run zt's attention kernel instead",
              __FILE__, __LINE__);
  return true;
}

void* mut(const void* p) { return const_cast<void*>(p); }  // cuDNN's pack takes void*

}  // namespace

std::string cudnn_attention_load(size_t* version) {
  const Loaded& l = loaded();
  *version = l.version;
  if (!l.why_not.empty()) return l.why_not;
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.disabled;
}

bool cudnn_attention_shape_failed(int64_t B, int64_t Tn, int64_t H, int64_t G, int64_t D,
                                  int64_t window) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.failed.count(ShapeKey{dev, B, Tn, H, G, D, window}) > 0;
}

bool cudnn_attention_forward(bf16_t* out, float* lse, const bf16_t* q, const bf16_t* k,
                             const bf16_t* v, int64_t B, int64_t Tn, int64_t H, int64_t G,
                             int64_t D, int64_t window, cudaStream_t stream) {
  std::unordered_map<int64_t, void*> pack = {
      {kQ, mut(q)}, {kK, mut(k)}, {kV, mut(v)}, {kO, out}, {kStats, lse}};
  return run(false, B, Tn, H, G, D, window, pack, stream);
}

bool cudnn_attention_backward(bf16_t* dq, bf16_t* dk, bf16_t* dv, const bf16_t* dout,
                              const bf16_t* out, const bf16_t* q, const bf16_t* k,
                              const bf16_t* v, const float* lse, int64_t B, int64_t Tn,
                              int64_t H, int64_t G, int64_t D, int64_t window,
                              cudaStream_t stream) {
  std::unordered_map<int64_t, void*> pack = {
      {kQ, mut(q)},   {kK, mut(k)},     {kV, mut(v)}, {kO, mut(out)}, {kDO, mut(dout)},
      {kStats, mut(lse)}, {kDQ, dq}, {kDK, dk}, {kDV, dv}};
  return run(true, B, Tn, H, G, D, window, pack, stream);
}

}  // namespace zt::kernels::cuda::detail
