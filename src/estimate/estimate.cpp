// Memory estimates per ZeRO stage / hpZ / offload choice (see estimate.hpp and
// docs/estimate.md). The engine's buffers come from the plan it allocates from
// (zt/zero/plan.hpp); the activations are the model's workspace, from the sizes it
// allocates from (zt/model/cpu_workspace.hpp, zt/model/device_workspace.hpp).
#include "zt/estimate/estimate.hpp"

#include <algorithm>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/kernels/nf4.hpp"
#include "zt/model/cpu_workspace.hpp"
#include "zt/model/device_workspace.hpp"
#include "zt/model/layout.hpp"
#include "zt/model/lora.hpp"
#include "zt/model/model.hpp"
#include "zt/zero/plan.hpp"

namespace zt::estimate {
namespace {

using u64 = uint64_t;

u64 to_u64(int64_t x) { return static_cast<u64>(std::max<int64_t>(x, 0)); }

// train.precision as the engine builds it (zt/zero/options.hpp): fp32 everywhere;
// bf16-mixed (bf16 compute weights) and bf16-true (bf16 stored parameters, no fp32
// master) on the GPU; on the CPU the host space refuses them, as here. The activation
// workspace is in the compute dtype.
struct Precision {
  zero::PlanSpace space;
  u64 activation = 4;
};

Precision precision_of(const Setup& s) {
  const std::string& name = s.zero.precision;
  const bool gpu = s.device == Device::kGpu;
  const zero::PlanSpace space{!gpu, false, false, "GPU"};
  if (name == "fp32") return {space, 4};
  if (name == "bf16-mixed" && gpu) return {{false, true, false, "GPU"}, 2};
  if (name == "bf16-true" && gpu) return {{false, true, true, "GPU"}, 2};
  if (!gpu)
    throw InputError("train.precision = " + name + " with --device cpu",
                     "zt's CPU engine trains fp32 only: set train.precision = fp32, or "
                     "estimate --device gpu");
  throw InputError("train.precision = " + name + ": the ZeRO engine does not build it",
                   "set train.precision = bf16-mixed (bf16 weights, fp32 master weights, "
                   "gradients and moments) or fp32");
}

// LoRA's scratch in the CPU model's workspace (src/model/lora_apply.cpp, each buffer
// grown to the largest adapter it served, rounded to 64 bytes): u and du [N, r], t [N,
// max(in, out)], dropout(x) [N, in] with dropout, QLoRA's dequantised W [out, in], and the
// experts' merged stacks and their gradients.
u64 lora_scratch_bytes(const model::Config& c, const model::LoraConfig& l, int64_t N, int elem) {
  const model::LoraLayout ll(c, l);
  int64_t in = 0, io = 0, w = 0;
  for (const model::LoraAdapterInfo& a : ll.adapters()) {
    in = std::max(in, a.in);
    io = std::max({io, a.in, a.out});
    w = std::max(w, a.in * a.out);
  }
  const auto rounded = [&](int64_t n) { return (to_u64(n) * static_cast<u64>(elem) + 63) / 64 * 64; };
  u64 b = 2 * rounded(N * l.rank) + rounded(N * io);
  if (l.dropout > 0) b += rounded(N * in);
  if (l.method == model::FinetuneMethod::kQlora) b += (to_u64(w) * 4 + 63) / 64 * 64;  // fp32 always
  // Adapters on the experts (src/model/lora_experts.hpp): each targeted stack [E, out, in]
  // merged with its adapter, and its gradient in the backward (one of each per target).
  for (const model::LoraAdapterInfo& a : ll.adapters())
    if (a.layer == 0 && model::is_expert_target(a.target)) b += 2 * rounded(a.experts * a.out * a.in);
  return b;
}

// QLoRA's NF4 base: every targeted W quantised (model::QloraBase::bytes).
u64 qlora_base_bytes(const model::Config& c, const model::LoraConfig& l) {
  if (l.method != model::FinetuneMethod::kQlora) return 0;
  u64 b = 0;
  const model::LoraLayout ll(c, l);  // (a named object: adapters() is a reference into it)
  for (const model::LoraAdapterInfo& a : ll.adapters())
    b += to_u64(kernels::nf4::quantized_bytes(a.in * a.out));
  return b;
}

}  // namespace

std::string_view device_name(Device d) { return d == Device::kCpu ? "cpu" : "gpu"; }

std::string_view offload_name(Offload o) {
  switch (o) {
    case Offload::kNone: return "none";
    case Offload::kCpu: return "cpu";
    case Offload::kNvme: return "nvme";
  }
  return "?";
}

std::string Row::label() const {
  std::string s = strf("stage %d", stage);
  if (hpz > 1) s += strf(" + hpZ %d", hpz);
  if (optimizer != Offload::kNone || params != Offload::kNone)
    s += strf(", offload optimizer %s, params %s", std::string(offload_name(optimizer)).c_str(),
              std::string(offload_name(params)).c_str());
  return s;
}

// Elements one ExpertParallelMoe keeps (src/model/moe_parallel.hpp) at balanced routing
// (R = S = N k rows received): probs [N, E], w [S], idx [S], order [S] (int64: 2), the
// received rows xr [R, C], gu [R, 2I], h [R, I], y [R, C], their experts [R], the outputs
// back ys [S, C], the rows per rank [2 P] (size_t: 2 each) and the statistics [2 E]
// (double: 2 each).
u64 expert_parallel_layer(const model::Config& c, int64_t N, int p) {
  const int64_t S = N * c.experts_per_token, C = c.hidden, I = c.expert_width();
  return to_u64(N * c.experts + 4 * S + S * (2 * C + 3 * I) + S + S * C + 4 * p + 4 * c.experts);
}

uint64_t activation_bytes(const model::Config& c, int64_t B, int64_t T_in, bool recompute,
                          int elem_bytes, int threads, int expert_parallel) {
  const int64_t T = std::min(T_in, c.context);
  const int64_t N = B * T, C = c.hidden, V = c.vocab;
  const u64 elem = static_cast<u64>(elem_bytes);
  const bool ep = expert_parallel > 1 && c.moe();
  // The blocks, as the model sizes them (zt/model/cpu_workspace.hpp): the shared one (eval
  // and recompute: every kind of layer the model has) and, without recompute, each layer's
  // own (its kind's buffers only: a Gated DeltaNet layer's grow linearly with T).
  u64 b = model::CpuBlockSizes::of(c, B, T, -1, !ep).bytes(elem);
  for (int64_t l = 0; !recompute && l < c.layers; ++l)
    b += model::CpuBlockSizes::of(c, B, T, l, !ep).bytes(elem);
  u64 e = 0;
  const int64_t tables = c.rope_local_theta > 0 ? 4 : 2;  // cos, sin (and the sliding layers')
  e += to_u64(tables * T * (c.rotary_dim() / 2));     // RoPE: [T, rotary_dim/2] each (grown to T)
  e += to_u64((c.layers + 1) * N * C);               // residual stream [L+1, N, C]
  e += to_u64(N * C + N);                            // final norm output + rstd
  e += to_u64(N * V);                                // logits / dlogits [N, V]
  if (c.final_logit_softcap > 0) e += to_u64(N * V);  // the capped logits (Gemma)
  // (one beside the shared block for eval and recompute, and one per routed layer without:
  // a dense layer's never grows)
  if (ep)
    e += to_u64(recompute ? 1 : c.moe_layer_count() + 1) * expert_parallel_layer(c, N, expert_parallel);
  // The backward's scratch (model::CpuScratchSizes) and, with experts, the router logits
  // and their gradient [N, E], dw [N, k], the aux gradient [E] and the recomputed sum [N, C].
  e += to_u64(model::CpuScratchSizes::of(c, B, T, std::max(threads, 0)).elements());
  if (c.moe())
    e += to_u64(2 * N * c.experts + N * c.experts_per_token + (c.router_aux_loss ? c.experts : 0) +
                (recompute ? N * C : 0));
  return b + e * elem;
}

Row estimate_row(const Setup& s, int stage, int hpz_request, Offload optimizer, Offload params) {
  if (stage < 0 || stage > 3)
    throw InputError(strf("ZeRO stage %d does not exist", stage), "zero.stage is 0, 1, 2 or 3");
  if (optimizer != Offload::kNone && stage < 1)
    throw InputError("optimizer offload needs ZeRO stage >= 1",
                     "the offloaded optimizer state is this rank's shard");
  if (params != Offload::kNone && stage < 3)
    throw InputError("parameter offload needs ZeRO stage 3", "only stage 3 shards parameters");
  // Expert parallelism (docs/zero.md): groups of ep ranks split the experts, ZeRO runs
  // over the n = world / ep ranks of each group position, on expert slices.
  const int ep = std::max(1, s.zero.expert_parallel);
  const int n = s.world() / ep;
  zero::EngineOptions o = s.zero;
  o.stage = stage;
  o.hpz_partition_size = hpz_request;
  o.offload.optimizer = offload::Home::kNone;  // the row's homes are checked above; the
  o.offload.params = offload::Home::kNone;     // store's sizes come from s.zero.offload
  // The configuration's qwZ / qgZ apply to the rows whose stage supports them (qwZ:
  // stage 3; qgZ: stages 1-3): a stage-3 config with both still gets its stage 0-2 rows.
  if (stage < 3) o.quantize_weights = false;
  if (stage < 1) o.quantize_grads = false;
  o.validate(s.world(), s.gpus_per_node);
  o.validate_experts(s.world(), s.model.moe() ? s.model.experts : 0);
  if (ep > 1 && s.device == Device::kGpu)
    throw InputError(strf("moe.expert_parallel = %d with --device gpu", ep),
                     "the GPU rows do not count the expert-parallel layers' device buffers: "
                     "estimate --device cpu (the same model states) or moe.expert_parallel = 1");
  const int hpz = o.effective_hpz(s.world(), s.gpus_per_node);
  if (hpz > 1 && params != Offload::kNone)
    throw InputError("hpZ with parameter offload is not estimated",
                     "the secondary copy lives on the GPU; use one or the other");

  // The engine's buffers, from the plan it allocates from (zt/zero/plan.hpp), with the
  // row's offload homes; it refuses what the engine refuses.
  const model::LoraConfig& lora = s.zero.lora;
  const Precision p = precision_of(s);
  o.offload.optimizer = static_cast<offload::Home>(optimizer);
  o.offload.params = static_cast<offload::Home>(params);
  const zero::BufferPlan plan = zero::plan_model(s.model, n, hpz, o, p.space);
  const zero::MemoryStats b = plan.bytes();
  const u64 host_param = plan.host_param_bytes();

  Row r;
  r.stage = stage;
  r.hpz = hpz;
  r.optimizer = optimizer;
  r.params = params;
  // QLoRA's NF4 base is held whole (the engine counts it in full_params; on the GPU the
  // model's device copy of it, DeviceLora's: the engine's host QloraBase it is uploaded
  // from is not in host_bytes).
  r.param_bytes = b.full_params + b.param_shards + b.secondary_shards - host_param +
                  qlora_base_bytes(s.model, lora);
  r.grad_bytes = b.grads;
  r.optimizer_bytes = b.optimizer - plan.store_host;
  r.gather_bytes = b.gather_buffers;
  r.grad_buffer_bytes = b.grad_buffers;
  r.comm_bytes = b.comm_buffers;
  // The offload store's host bytes and the host shard: host memory on the GPU
  // (Row::host_bytes), the rank's one memory on the CPU.
  if (s.device == Device::kGpu) {
    r.host_bytes = plan.store_host + host_param;
    r.host_param_bytes = host_param;
  } else {
    r.optimizer_bytes += plan.store_host;
    r.param_bytes += host_param;
  }
  r.nvme_bytes = plan.nvme;

  if (s.device == Device::kCpu) {
    r.activation_bytes = activation_bytes(s.model, s.micro_batch, s.seq_len, false,
                                          static_cast<int>(p.activation), s.threads, ep);
    r.activation_recompute_bytes = activation_bytes(s.model, s.micro_batch, s.seq_len, true,
                                                    static_cast<int>(p.activation), s.threads, ep);
    if (lora.enabled()) {
      const u64 extra_act = lora_scratch_bytes(s.model, lora, s.micro_batch * std::min(s.seq_len, s.model.context),
                                               static_cast<int>(p.activation));
      r.activation_bytes += extra_act;
      r.activation_recompute_bytes += extra_act;
    }
  } else {  // the GPU model's workspace, from the formula it sizes its buffers with
    const int64_t N = s.micro_batch * std::min(s.seq_len, s.model.context);
    if (lora.enabled()) {  // + the adapters' workspace (and QLoRA's one dequantised W)
      const bool qlora = lora.method == model::FinetuneMethod::kQlora;
      r.activation_bytes = model::device_workspace_bytes(s.model, N, p.activation, false, lora, qlora,
                                                          s.micro_batch);
      r.activation_recompute_bytes =
          model::device_workspace_bytes(s.model, N, p.activation, true, lora, qlora, s.micro_batch);
    } else {
      r.activation_bytes =
          model::device_workspace_bytes(s.model, N, p.activation, false, s.micro_batch);
      r.activation_recompute_bytes =
          model::device_workspace_bytes(s.model, N, p.activation, true, s.micro_batch);
    }
    r.library_bytes = model::DeviceLibraryWorkspaces::of(s.model, N, p.activation).bytes();
  }

  return r;
}

std::vector<Row> estimate_all(const Setup& s) {
  std::vector<Row> rows;
  for (int stage = 0; stage <= 3; ++stage) rows.push_back(estimate_row(s, stage, 1, Offload::kNone, Offload::kNone));
  const int hpz_request = s.zero.hpz_partition_size > 1 ? s.zero.hpz_partition_size : 0;
  zero::EngineOptions o = s.zero;
  o.stage = 3;
  o.hpz_partition_size = hpz_request;
  const bool hpz_on = o.effective_hpz(s.world(), s.gpus_per_node) > 1;
  // Expert parallelism has no hpZ and no offload (EngineOptions::validate_experts).
  if (s.zero.expert_parallel > 1) return rows;
  if (hpz_on) rows.push_back(estimate_row(s, 3, hpz_request, Offload::kNone, Offload::kNone));
  if (s.zero.precision == "bf16-true") {  // the engine refuses offload with it
    zero::check_buffer_options(s.zero, precision_of(s).space);
    return rows;
  }
  if (s.device == Device::kCpu) {  // host memory is the device: offload cpu = none for params
    for (int stage = 1; stage <= 3; ++stage)
      for (Offload opt : {Offload::kCpu, Offload::kNvme})
        rows.push_back(estimate_row(s, stage, 1, opt, Offload::kNone));
    for (Offload opt : {Offload::kNone, Offload::kCpu, Offload::kNvme})
      rows.push_back(estimate_row(s, 3, 1, opt, Offload::kNvme));
    return rows;
  }
  for (int stage = 1; stage <= 3; ++stage)
    for (Offload opt : {Offload::kCpu, Offload::kNvme})
      rows.push_back(estimate_row(s, stage, 1, opt, Offload::kNone));
  if (hpz_on) rows.push_back(estimate_row(s, 3, hpz_request, Offload::kCpu, Offload::kNone));
  for (Offload par : {Offload::kCpu, Offload::kNvme})
    for (Offload opt : {Offload::kCpu, Offload::kNvme})
      rows.push_back(estimate_row(s, 3, 1, opt, par));
  return rows;
}

Fit check_fit(const Row& r, const Setup& s, uint64_t device_bytes, uint64_t host_bytes) {
  const u64 ranks = static_cast<u64>(s.gpus_per_node);
  Fit f;
  if (s.device == Device::kCpu) {
    f.device = ranks * r.total(false) <= host_bytes;
    f.device_recompute = ranks * r.total(true) <= host_bytes;
    f.host = true;
  } else {
    f.device = r.total(false) <= device_bytes;
    f.device_recompute = r.total(true) <= device_bytes;
    f.host = ranks * r.host_bytes <= host_bytes;
  }
  return f;
}

GenerationBytes generation_bytes(const model::Config& c, int64_t capacity, int64_t chunk) {
  const int64_t n = std::min(capacity, chunk), C = c.hidden;
  const u64 rope = 4 * to_u64((c.rope_local_theta > 0 ? 2 : 1) *
                              std::min(c.context, 2 * capacity) * c.rotary_dim());
  // the residual stream [L+1, n, C], the head's [n, C] and logits [n, V], one block of every
  // mixer the model has (the attention's [H, n, n] scores), the decode scores [H, capacity]
  const u64 scratch =
      4 * to_u64((c.layers + 1) * n * C + 2 * n * C + n * c.vocab + c.heads * capacity) +
      model::CpuBlockSizes::of(c, 1, n).bytes(4);
  return {model::KvCache<float>::bytes(c, capacity), rope + scratch};
}

}  // namespace zt::estimate
