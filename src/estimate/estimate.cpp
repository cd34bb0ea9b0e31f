// Memory estimates per ZeRO stage / hpZ / offload choice (see estimate.hpp and
// docs/estimate.md). The sizes mirror the engine's buffers (src/zero/engine.cpp) and the
// model's workspace (src/model/model.cpp); the engine's padding comes from zero::Partition.
#include "zt/estimate/estimate.hpp"

#include <algorithm>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/kernels/nf4.hpp"
#include "zt/model/device_workspace.hpp"
#include "zt/model/layout.hpp"
#include "zt/model/lora.hpp"
#include "zt/offload/host_buffer.hpp"
#include "zt/offload/store.hpp"
#include "zt/zero/partition.hpp"
#include "zt/zero/quantize.hpp"

namespace zt::estimate {
namespace {

using u64 = uint64_t;

u64 to_u64(int64_t x) { return static_cast<u64>(std::max<int64_t>(x, 0)); }

// Element sizes of what the engine allocates (src/zero/engine.cpp). Both devices keep
// fp32 master parameters, gradients, gradient buffers and AdamW m + v (4 + 4 + 8 B per
// parameter); with train.precision = bf16-mixed (GPU only) the model binds bf16 weights:
// a bf16 copy of each full unit at stages 0-2, bf16 gather buffers and hpZ secondaries at
// stage 3, and a bf16 activation workspace.
struct Precision {
  u64 param = 4;      // fp32 parameters (the master copy)
  u64 grad = 4;       // fp32 gradients and gradient shards
  u64 optimizer = 8;  // AdamW m + v
  u64 buffer = 4;     // gradient buffers
  u64 compute = 4;    // the weights the model binds: gather buffers, hpZ secondaries
  u64 copy = 0;       // bf16 copy of each full unit at stages 0-2 (bf16-mixed)
  u64 activation = 4; // activation workspace
};

// train.precision as the engine builds it (zt/zero/options.hpp): fp32 everywhere;
// bf16-mixed and bf16-true on the GPU (on the CPU the host space refuses them, as here).
// bf16-true stores its parameters in bf16 with no fp32 master (full units at stages 0-2,
// shards at 3); gradients and moments stay fp32 (docs/zero.md, "bf16-true").
Precision precision_of(const Setup& s) {
  const std::string& name = s.zero.precision;
  if (name == "fp32") return {};
  if (name == "bf16-mixed" && s.device == Device::kGpu) return {4, 4, 8, 4, 2, 2, 2};
  if (name == "bf16-true" && s.device == Device::kGpu) return {2, 4, 8, 4, 2, 0, 2};
  if (s.device == Device::kCpu)
    throw InputError("train.precision = " + name + " with --device cpu",
                     "zt's CPU engine trains fp32 only: set train.precision = fp32, or "
                     "estimate --device gpu");
  throw InputError("train.precision = " + name + ": the ZeRO engine does not build it",
                   "set train.precision = bf16-mixed (bf16 weights, fp32 master weights, "
                   "gradients and moments) or fp32");
}

// The engine refuses offload with bf16-true (its store keeps an fp32 master).
[[noreturn]] void refuse_bf16_true_offload() {
  throw InputError("offload.optimizer / offload.params with train.precision = bf16-true",
                   "the engine refuses it (the offload store keeps an fp32 master, which "
                   "bf16-true has not): set both to none, or train.precision = bf16-mixed");
}

// Elements of one transformer block's saved activations (BlockActs in model.cpp); routed
// false: without the routed experts' rows (expert parallelism keeps them per layer).
u64 block_acts(const model::Config& c, int64_t N, int64_t BHTT, bool routed = true) {
  const int64_t HD = c.heads * c.head_dim(), GD = c.kv_dim();
  const int64_t qk_norm = c.qk_norm() ? N * (HD + GD + c.heads + c.kv_heads) : 0;  // qr kr rstd_q rstd_k
  // The MLP's: gate, up, h [N, I]; with experts rprobs [N, E], ridx, rw [N, k] and each
  // routed row's gu [2I], h [I], y [C] (model_impl.hpp; I the expert width), the shared
  // expert's gate, up, h [N, S], y [N, C] and gate [N], and the dense layers' three too
  // when some layers are dense.
  const int64_t K = c.experts_per_token, S = c.shared_expert_intermediate;
  const int64_t dense = 3 * N * c.intermediate;
  const int64_t routed_rows = routed ? N * c.experts + 2 * N * K + N * K * (3 * c.expert_width() + c.hidden) : 0;
  const int64_t mlp = c.moe() ? routed_rows +
                                    (c.shared_expert() ? 3 * N * S + N * c.hidden + N : 0) +
                                    (c.dense_layers() ? dense : 0)
                              : dense;
  return to_u64(N * c.hidden + N + N * HD + 2 * N * GD + BHTT + N * HD + 2 * N * c.hidden + N +
                mlp + qk_norm);
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
  const int64_t N = B * T, C = c.hidden, V = c.vocab, I = c.intermediate;
  const int64_t HD = c.heads * c.head_dim(), GD = c.kv_dim();
  const int64_t BHTT = B * c.heads * T * T;
  u64 e = 0;
  e += to_u64(2 * T * (c.head_dim() / 2));          // RoPE cos, sin: [T, D/2] each (grown to T)
  e += to_u64((c.layers + 1) * N * C);               // residual stream [L+1, N, C]
  e += to_u64(N * C + N);                            // final norm output + rstd
  e += to_u64(N * V);                                // logits / dlogits [N, V]
  const bool ep = expert_parallel > 1 && c.moe();
  e += block_acts(c, N, BHTT, !ep);                  // shared: eval and recompute
  if (!recompute) e += to_u64(c.layers) * block_acts(c, N, BHTT, !ep);  // saved [L]
  // (one beside the shared block for eval and recompute, and one per layer without)
  if (ep) e += to_u64(recompute ? 1 : c.layers + 1) * expert_parallel_layer(c, N, expert_parallel);
  // backward scratch: dres, dxn [N, C]; datt, dq [N, H*D]; dk, dv [N, G*D]; dh, dgate,
  // dup [N, I]; attention backward scratch T*T per thread
  // (with experts instead of dh, dgate, dup: router logits and their gradient [N, E], dw
  // [N, k], the aux gradient [E], and the recomputed sum [N, C])
  e += to_u64(2 * N * C + 2 * N * HD + 2 * N * GD);
  // (and with experts dh, dgate, dup [N, max(I of dense layers, S of the shared expert)],
  // the shared expert's dy [N, C] and gate gradient [N])
  const int64_t width = std::max(c.dense_layers() ? I : 0, c.shared_expert_intermediate);
  e += c.moe() ? to_u64(2 * N * c.experts + N * c.experts_per_token +
                        (c.router_aux_loss ? c.experts : 0) + (recompute ? N * C : 0) +
                        3 * N * width + (c.shared_expert() ? N * C + N : 0))
               : to_u64(3 * N * I);
  e += to_u64(T * T * std::max(threads, 0));
  return e * static_cast<u64>(elem_bytes);
}

// The engine's offload (src/zero/engine_offload.cpp, src/offload/store.cpp), on either
// device: with the optimizer offloaded the engine keeps no m, v; the store holds master +
// m + v in host memory (offload.optimizer = cpu) or sub-group buffers in host memory and
// the rest on NVMe. Parameters move at stage 3 with offload.params = nvme, and on the GPU
// with cpu too (on the CPU host memory is where they are): the engine keeps a staging
// shard per gather slot on the device plus one unit's shard in host memory, and the store
// holds the shards (cpu) or a bounce buffer (nvme). The engine counts the store's host
// bytes as optimizer and the host shard as param_shards; on the GPU those are host
// memory (Row::host_bytes, Row::host_param_bytes), on the CPU the rank's one memory.
// `more_blocks`: blocks beyond those of `part`, each the same as its unit 1. `all`:
// every unit held, padded; `adapters`: LoRA's adapters' unit, padded (0: none). With
// LoRA (docs/zero.md "Frozen units") the store holds the adapters' state only (a frozen
// unit's count is 0), the shards of every unit when they move, and QLoRA's NF4 base stays
// in full_params whatever moves.
static void offload_rows(Row& r, const Setup& s, const zero::Partition& part, int64_t more_blocks,
                         u64 gather_slots, u64 all, u64 adapters, u64 shard, u64 compute) {
  offload::Options o = s.zero.offload;
  o.optimizer = static_cast<offload::Home>(r.optimizer);
  o.params = static_cast<offload::Home>(r.params);
  const bool gpu = s.device == Device::kGpu;
  if (o.params == offload::Home::kCpu && !gpu) o.params = offload::Home::kNone;
  std::vector<int64_t> owned, shards;
  int64_t max_shard = 0;
  for (int u = 0; u < part.num_units(); ++u) {
    owned.push_back(part.unit(u).owned);
    shards.push_back(part.unit(u).shard);
    max_shard = std::max(max_shard, part.unit(u).shard);
  }
  // One entry per unit: 16 bytes per block (the files' per-unit rounding needs them).
  owned.insert(owned.begin() + 1, static_cast<size_t>(more_blocks), part.unit(1).owned);
  shards.insert(shards.begin() + 1, static_cast<size_t>(more_blocks), part.unit(1).shard);
  u64 frozen_owned = 0;  // LoRA: the frozen units' owned elements (rank 0's)
  const model::LoraConfig& lora = s.zero.lora;
  if (lora.enabled()) {  // the base's units frozen (no state); the adapters' unit last
    for (int64_t& c : owned) {
      frozen_owned += to_u64(c);
      c = 0;
    }
    const int64_t a_shard = static_cast<int64_t>(adapters / static_cast<u64>(s.world()));
    owned.push_back(std::min(model::LoraLayout(s.model, lora).numel(), a_shard));
    shards.push_back(a_shard);
    max_shard = std::max(max_shard, a_shard);
  }
  const bool params_moved = o.params != offload::Home::kNone;
  if (!params_moved) shards.clear();
  if (o.optimizer == offload::Home::kNone && o.params == offload::Home::kNone) return;
  const u64 store_host = offload::store_host_bytes(o, owned, shards);
  if (o.optimizer != offload::Home::kNone) r.optimizer_bytes = 0;
  // bf16 weights offloaded from a GPU: the CPU AdamW's bf16 rounding comes up into the
  // bf16 compute copy, and the engine drops the fp32 device copy (the master is the
  // store's): stages 1-2 keep the bf16 full units, stage 3 a bf16 shard, or with the
  // shards offloaded no staging (each comes up into its gather buffer). LoRA's frozen
  // units have no master in the store: their fp32 owned slices go to host memory (unless
  // their shards moved to the store).
  const bool half_up = gpu && compute == 2 && o.optimizer != offload::Home::kNone;
  if (half_up && r.stage <= 2) r.param_bytes -= 4 * all;
  if (half_up && r.stage == 3 && !params_moved) r.param_bytes -= (4 - compute) * shard;
  u64 host_param = 0;
  if (params_moved) {
    // QLoRA's NF4 base (it stays) + the staging [slots, max shard] (none with half_up)
    r.param_bytes = qlora_base_bytes(s.model, lora) + (half_up ? 0 : 4 * gather_slots * to_u64(max_shard));
    host_param = 4 * to_u64(max_shard);                      // one unit's shard on the host
  } else if (half_up) {
    host_param = 4 * frozen_owned;  // LoRA's frozen fp32 values (0 without LoRA)
  }
  if (gpu) {
    r.host_bytes = store_host + host_param;
    r.host_param_bytes = host_param;
  } else {
    r.optimizer_bytes += store_host;
    r.param_bytes += host_param;
  }
  r.nvme_bytes = offload::nvme_file_bytes(o, owned, shards);
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
  if (s.device == Device::kGpu && params != Offload::kNone && optimizer == Offload::kNone)
    throw InputError(strf("offload.params = %s with offload.optimizer = none on the GPU",
                          std::string(offload_name(params)).c_str()),
                     "the engine refuses it (the update would need the shards on the device): "
                     "set offload.optimizer = cpu or nvme, or offload.params = none");
  if (hpz > 1 && params != Offload::kNone)
    throw InputError("hpZ with parameter offload is not estimated",
                     "the secondary copy lives on the GPU; use one or the other");

  const model::LoraConfig& lora = s.zero.lora;
  const Precision p = precision_of(s);
  const bool bf16_true = p.param == 2;
  if (bf16_true && (optimizer != Offload::kNone || params != Offload::kNone)) refuse_bf16_true_offload();
  if (p.compute == 2 && o.quantize_weights)
    throw InputError("zero.quantize_weights = true with train.precision = " + o.precision,
                     "the engine refuses qwZ with bf16 compute weights: set "
                     "zero.quantize_weights = false (the bf16 gather already halves the bytes)");
  // Every block is the same unit: partition the model cut to at most 2 blocks and count
  // the other blocks from one, so time and memory do not grow with model.layers.
  model::Config cut = s.model;
  cut.layers = std::min<int64_t>(s.model.layers, 2);
  const int64_t more_blocks = s.model.layers - cut.layers;
  // QLoRA's base units leave out the targeted W (held as NF4 only: qlora_base_bytes).
  const model::ParamLayout layout =
      ep > 1 ? model::ParamLayout::expert_slice(cut, ep, 0) : model::lora_base_layout(cut, lora);
  const int align = (o.quantize_weights || o.quantize_grads) ? o.quantize_block : 16;
  const zero::Partition part(layout, n, 0, align, hpz, 0);
  const zero::UnitPartition& block = part.unit(1);  // units: embedding, blocks..., head
  // every unit, padded
  const u64 full = to_u64(part.total_padded()) + to_u64(more_blocks) * to_u64(block.padded);
  // LoRA (docs/zero.md "Frozen units"): the base units above keep their parameters
  // only; the adapters' unit (LoraLayout's numel, padded as any unit) is trainable.
  const u64 adapters = lora.enabled()
      ? to_u64(zero::padded_numel(model::LoraLayout(s.model, lora).numel(), n, align)) : 0;
  const u64 maxp = std::max(to_u64(part.max_padded()), adapters);  // largest padded unit
  const u64 maxg = lora.enabled() ? adapters : maxp;  // largest trainable one (gradients)
  const bool tied = s.model.tied_embeddings;

  Row r;
  r.stage = stage;
  r.hpz = hpz;
  r.optimizer = optimizer;
  r.params = params;

  // Model states (engine.cpp: full_params / param_shard / secondary / grads / m, v).
  const u64 all = full + adapters;  // every unit held, padded
  const u64 trained = lora.enabled() ? adapters : full;  // the units with gradients and moments
  r.param_bytes = stage <= 2 ? (p.param + p.copy) * all : p.param * (all / static_cast<u64>(n));
  if (hpz > 1) r.param_bytes += p.compute * (all / static_cast<u64>(hpz));
  // (counted in full_params; on the GPU the model's device copy of it, DeviceLora's: the
  // engine's host QloraBase it is uploaded from is not in host_bytes)
  r.param_bytes += qlora_base_bytes(s.model, lora);
  r.grad_bytes = p.grad * (stage <= 1 ? trained : trained / static_cast<u64>(n));
  r.optimizer_bytes = p.optimizer * (stage == 0 ? trained : trained / static_cast<u64>(n));

  // Working buffers: stage 3 gathers prefetch + 1 (+1 tied) full units; stages 2-3 hold
  // 1 + 2 in flight (+1 tied) gradient buffers of the largest trainable unit (LoRA: the
  // adapters' unit); comm staging per slot. The adapters' unit holds one more of each
  // for the whole pass.
  const u64 extra = lora.enabled() ? 1u : 0u;
  const u64 gather_slots = static_cast<u64>(o.prefetch + (tied ? 2 : 1)) + extra;
  const u64 reduce_slots = (stage >= 2 ? 3u + (tied ? 1u : 0u) : 2u) + (stage >= 2 ? extra : 0u);
  if (stage == 3) r.gather_bytes = p.compute * gather_slots * maxp;
  if (stage >= 2) r.grad_buffer_bytes = p.buffer * reduce_slots * maxg;
  if (bf16_true) {  // fp32 work buffer of AdamW: the widest slice it updates (stage 0: a unit)
    int64_t widest = 0;
    if (lora.enabled()) {  // the adapters' unit only (rank 0's slice, as Partition cuts it)
      const int64_t numel = model::LoraLayout(s.model, lora).numel();
      widest = stage == 0 ? numel : std::min(numel, static_cast<int64_t>(adapters) / n);
    } else {
      for (int u = 0; u < layout.num_units(); ++u)
        widest = std::max(widest, stage == 0 ? part.unit(u).numel : part.unit(u).owned);
    }
    r.grad_buffer_bytes += 4 * to_u64(widest);
  }
  const u64 packed = zero::packed_bytes(maxp, static_cast<size_t>(o.quantize_block));
  const u64 packed_g = zero::packed_bytes(maxg, static_cast<size_t>(o.quantize_block));
  if (stage == 3 && o.quantize_weights) r.comm_bytes += gather_slots * packed;
  if (o.quantize_grads) r.comm_bytes += 2 * reduce_slots * packed_g;
  else if (o.reduce_dtype == DType::kBF16) r.comm_bytes += 2 * reduce_slots * maxg;

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
      r.activation_bytes = model::device_workspace_bytes(s.model, N, p.activation, false, lora, qlora);
      r.activation_recompute_bytes =
          model::device_workspace_bytes(s.model, N, p.activation, true, lora, qlora);
    } else {
      r.activation_bytes = model::device_workspace_bytes(s.model, N, p.activation, false);
      r.activation_recompute_bytes = model::device_workspace_bytes(s.model, N, p.activation, true);
    }
    r.library_bytes = model::DeviceLibraryWorkspaces::of(s.model, N, p.activation).bytes();
  }

  offload_rows(r, s, part, more_blocks, gather_slots, all, adapters, all / static_cast<u64>(n),
               p.compute);
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
    if (s.zero.offload.optimizer != offload::Home::kNone || s.zero.offload.params != offload::Home::kNone)
      refuse_bf16_true_offload();
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

}  // namespace zt::estimate
