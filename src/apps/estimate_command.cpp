// `zt estimate [--config FILE] [--set k=v ...] [--gpus-per-node G] [--nodes N]
//              [--gpu NAME | --gpu-mem SIZE] [--cpu-mem SIZE] [--device gpu|cpu] [--json]`:
// bytes per GPU and per host for each ZeRO stage / hpZ / offload choice, and which fit.
// Reads the same configuration keys as `zt train` (its schema). Runs without MPI.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "options.hpp"
#include "zt/core/config.hpp"
#include "zt/core/error.hpp"
#include "zt/core/escape.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"
#include "zt/estimate/estimate.hpp"
#include "zt/estimate/gpus.hpp"
#include "zt/estimate/step_time.hpp"
#include "zt/train/config.hpp"
#include "zt/train/generate.hpp"
#include "zt/zero/config.hpp"

namespace zt::apps {
namespace {

using estimate::Device;
using estimate::Offload;
using estimate::Row;

struct Args {
  std::string config_file;
  std::vector<std::string> sets;
  int gpus_per_node = 1;
  int nodes = 1;
  std::string gpu;
  std::string gpu_mem;
  std::string cpu_mem = "512G";
  std::string device = "gpu";
  bool json = false;
};

uint64_t parse_size_flag(const std::string& text, const char* flag) {
  try {
    const uint64_t b = parse_size(text);
    if (b == 0) throw InputError("zero");
    return b;
  } catch (const InputError&) {
    throw InputError(strf("%s: bad size '%s'", flag, text.c_str()),
                     "give a positive size such as 80G, 80GiB, 512G or 1T (binary multiples)");
  }
}

// The table's unit: GiB, or MiB / KiB for small models (so the figures are not all 0.00).
BinaryUnit table_unit(uint64_t largest) {
  if (largest >= (1ull << 30)) return BinaryUnit::kGiB;
  if (largest >= (1ull << 20)) return BinaryUnit::kMiB;
  return BinaryUnit::kKiB;
}
std::string in(uint64_t b, BinaryUnit u) { return strf("%.2f", in_unit(b, u)); }
std::string gib(uint64_t b) { return in(b, BinaryUnit::kGiB); }

// `zt generate`'s memory for one sequence of train.seq_len positions (its preflight's count).
estimate::GenerationBytes generation_of(const estimate::Setup& s) {
  return estimate::generation_bytes(s.model, std::min(s.seq_len, s.model.context),
                                    static_cast<int64_t>(train::kPrefillChunk));
}

std::string config_name(const Row& r) {
  std::string s = strf("%d", r.stage);
  if (r.hpz > 1) s += strf("+hpZ%d", r.hpz);
  return s;
}

std::string fit_word(const estimate::Fit& f) {
  if (!f.host) return "does not fit (host)";
  if (f.device) return "fits";
  if (f.device_recompute) return "fits with recompute";
  return "does not fit";
}

struct Resolved {
  estimate::Setup setup;
  int configured_stage = 0;
  bool recompute = false;
  uint64_t device_bytes = 0, host_bytes = 0;
  std::optional<estimate::GpuSpec> gpu;
  // --device gpu with a family the GPU model does not run yet: what it lacks (the rows
  // then size the engine as if it did; train.device = cpu runs the family).
  std::string gpu_gap;
};

Resolved resolve(const Args& a) {
  if (a.gpus_per_node < 1)
    throw InputError(strf("--gpus-per-node: %d, must be >= 1", a.gpus_per_node),
                     "ranks (GPUs) per node, e.g. --gpus-per-node 8");
  if (a.nodes < 1)
    throw InputError(strf("--nodes: %d, must be >= 1", a.nodes), "nodes in the job, e.g. --nodes 2");
  // A world of more than 2^24 ranks is far beyond any cluster, and keeps every per-rank
  // count (ranks x shards, int world sizes) inside its type.
  constexpr int64_t kMaxWorld = int64_t{1} << 24;
  if (static_cast<int64_t>(a.gpus_per_node) * a.nodes > kMaxWorld)
    throw InputError(strf("--nodes %d x --gpus-per-node %d = %lld ranks: more than %lld", a.nodes,
                          a.gpus_per_node,
                          static_cast<long long>(static_cast<int64_t>(a.gpus_per_node) * a.nodes),
                          static_cast<long long>(kMaxWorld)),
                     "give the nodes and ranks per node of the job, e.g. --nodes 64 "
                     "--gpus-per-node 8");
  if (a.device != "gpu" && a.device != "cpu")
    throw InputError("--device: '" + a.device + "' is not gpu or cpu",
                     "gpu: the engine on a GPU (train.precision fp32, bf16-mixed or bf16-true); cpu: zt's fp32 CPU engine");
  Resolved r;
  if (!a.gpu.empty()) r.gpu = estimate::find_gpu(estimate::load_shipped_gpus(), a.gpu, "--gpu");
  r.device_bytes = !a.gpu_mem.empty() ? parse_size_flag(a.gpu_mem, "--gpu-mem")
                   : r.gpu           ? r.gpu->memory_bytes()
                                     : parse_size("80G");
  r.host_bytes = parse_size_flag(a.cpu_mem, "--cpu-mem");

  // The configuration of `zt train`: its schema (with the zero.* keys).
  config::Schema schema = train::train_schema();
  if (!schema.find("zero.stage")) zero::add_zero_keys(schema);
  const config::Config cfg = config::load(schema, a.config_file, a.sets);
  const train::TrainConfig tc = train::resolve(cfg, 1);  // world checks are train's business
  estimate::Setup& s = r.setup;
  s.model = tc.model;
  s.micro_batch = tc.micro_batch;
  s.seq_len = tc.seq_len;
  s.gpus_per_node = a.gpus_per_node;
  s.nodes = a.nodes;
  s.device = a.device == "cpu" ? Device::kCpu : Device::kGpu;
  s.zero = zero::zero_options(cfg);
  s.zero.offload = tc.zero.offload;  // the configured homes and the store's sizes
  s.zero.precision = tc.precision;    // train.precision: what the engine allocates
  s.zero.lora = tc.lora;              // finetune.*: the base frozen, the adapters' unit
  s.threads = tc.threads > 0 ? tc.threads : 1;
  r.configured_stage = s.zero.stage;
  r.recompute = tc.recompute;
  zero::EngineOptions checked = s.zero;  // an estimate writes nothing: no path needed
  if (checked.offload.nvme_path.empty()) checked.offload.nvme_path = "(estimate)";
  checked.validate(s.world(), s.gpus_per_node);
  // Expert parallelism with the configured hpZ, offload and model (the rows below try
  // other hpZ and offload choices; what the engine refuses must not become a row).
  checked.validate_experts(s.world(), s.model);
  if (s.device == Device::kGpu) {  // what the GPU model refuses (the engine's device space)
    s.model.validate_for_device(/*check_block=*/false);
    r.gpu_gap = s.model.device_model_gap();
    model::check_device_lora(s.zero.lora);
  }
  return r;
}

nlohmann::json row_json(const Row& row, const estimate::Fit& f) {
  return {{"stage", row.stage},
          {"hpz", row.hpz},
          {"offload_optimizer", std::string(estimate::offload_name(row.optimizer))},
          {"offload_params", std::string(estimate::offload_name(row.params))},
          {"per_gpu",
           {{"params", row.param_bytes},
            {"grads", row.grad_bytes},
            {"optimizer", row.optimizer_bytes},
            {"gather_buffers", row.gather_bytes},
            {"grad_buffers", row.grad_buffer_bytes},
            {"comm_buffers", row.comm_bytes},
            {"activations", row.activation_bytes},
            {"activations_recompute", row.activation_recompute_bytes},
            {"library_workspaces", row.library_bytes},
            {"model_states", row.model_states()},
            {"total", row.total(false)},
            {"total_recompute", row.total(true)}}},
          {"per_rank_host", row.host_bytes},
          {"per_rank_nvme", row.nvme_bytes},
          {"fits", f.fits(false)},
          {"fits_recompute", f.fits(true)}};
}

// The predicted micro-step (roofline model) for --gpu with bf16 (GPU device only).
std::optional<estimate::StepTime> predicted_step(const Resolved& r) {
  const estimate::Setup& s = r.setup;
  if (!r.gpu || s.device != Device::kGpu || r.gpu->bf16_tflops <= 0) return std::nullopt;
  if (s.model.moe()) return std::nullopt;  // the kernel list is the dense block's (GPU MoE: not yet)
  if (!r.gpu_gap.empty()) return std::nullopt;  // no GPU kernels for the family yet
  return estimate::step_time(s.model, s.micro_batch, s.seq_len, r.recompute, *r.gpu,
                             estimate::cudnn_attention_expected(s.model));
}

nlohmann::json step_json(const estimate::StepTime& t) {
  nlohmann::json kernels = nlohmann::json::array();
  for (const estimate::KernelTime& k : t.kernels)
    kernels.push_back({{"name", k.name},
                       {"count", k.count},
                       {"flops", k.flops},
                       {"bytes", k.bytes},
                       {"seconds", k.seconds},
                       {"bound", k.bound == estimate::Bound::kCompute ? "compute" : "memory"}});
  return {{"seconds", t.seconds},         {"mfu", t.mfu},
          {"tokens", t.tokens},           {"tokens_per_second", t.tokens_per_second},
          {"model_flops", t.model_flops}, {"executed_flops", t.executed_flops},
          {"cudnn_attention", t.cudnn_attention}, {"kernels", kernels}};
}

void print_step(const estimate::StepTime& t, const estimate::GpuSpec& gpu) {
  const estimate::Efficiency eff;
  std::printf("\nPredicted micro-step on one %s (roofline: each kernel max(FLOPs / (%.0f TFLOP/s x "
              "eff), bytes / (%.0f GB/s x %.2f)); GEMM eff %.2f, attention fwd/bwd %.2f/%.2f on "
              "cuDNN, zt's kernel %.2f of peak/%.0f; stage 0, no communication):\n",
              gpu.name.c_str(), gpu.bf16_tflops, gpu.bandwidth_gb_s, eff.memory, eff.gemm,
              eff.attention_fwd, eff.attention_bwd, eff.attention_cuda_core,
              1.0 / eff.cuda_core_ratio);
  std::printf("%-34s %6s %12s %12s %10s %6s  %s\n", "kernel", "count", "GFLOP", "MB", "ms",
              "share", "bound");
  for (const estimate::KernelTime& k : t.kernels)
    std::printf("%-34s %6lld %12.2f %12.2f %10.3f %5.1f%%  %s\n", k.name.c_str(),
                static_cast<long long>(k.count), k.flops / 1e9, k.bytes / 1e6, k.seconds * 1e3,
                100.0 * k.seconds / t.seconds,
                k.bound == estimate::Bound::kCompute ? "compute" : "memory");
  std::printf("step %.3f ms for %.0f tokens: %.0f tokens/s, MFU %.1f%% (model FLOPs 6N + "
              "attention = %.2f TFLOP per step)\n",
              t.seconds * 1e3, t.tokens, t.tokens_per_second, 100.0 * t.mfu, t.model_flops / 1e12);
}

int run(const Args& a) {
  const Resolved r = resolve(a);
  const estimate::Setup& s = r.setup;
  const std::vector<Row> rows = estimate::estimate_all(s);
  const uint64_t ranks = static_cast<uint64_t>(s.gpus_per_node);

  if (a.json) {
    nlohmann::json j;
    j["model"] = s.model.name;
    j["params"] = s.model.num_params();
    j["active_params"] = s.model.num_active_params();  // == params without experts
    j["device"] = std::string(estimate::device_name(s.device));
    j["gpus_per_node"] = s.gpus_per_node;
    j["nodes"] = s.nodes;
    j["expert_parallel"] = s.zero.expert_parallel;
    j["micro_batch"] = s.micro_batch;
    j["seq_len"] = std::min(s.seq_len, s.model.context);
    j["gpu_mem"] = r.device_bytes;
    j["cpu_mem"] = r.host_bytes;
    if (r.gpu) {
      j["gpu"] = r.gpu->name;
      j["gpu_bf16_tflops"] = r.gpu->bf16_tflops;
    }
    j["configured_stage"] = r.configured_stage;
    j["recompute"] = r.recompute;
    nlohmann::json list = nlohmann::json::array();
    for (const Row& row : rows) {
      list.push_back(row_json(row, estimate::check_fit(row, s, r.device_bytes, r.host_bytes)));
      if (!r.gpu_gap.empty()) list.back()["gpu_model_runs_family"] = false;
    }
    if (!r.gpu_gap.empty()) j["gpu_model_lacks"] = r.gpu_gap;
    j["rows"] = list;
    const estimate::GenerationBytes g = generation_of(s);
    j["generation"] = {{"positions", std::min(s.seq_len, s.model.context)}, {"cache", g.cache},
                       {"workspace", g.workspace}};
    if (const auto t = predicted_step(r)) j["step"] = step_json(*t);
    std::printf("%s\n", json_dump(j, 2).c_str());
    return 0;
  }

  const bool cpu = s.device == Device::kCpu;
  std::printf("Model %s: %lld parameters (%.2fB); %d node(s) x %d %s per node = %d ranks; "
              "micro batch %lld x seq %lld\n",
              s.model.name.c_str(), static_cast<long long>(s.model.num_params()),
              static_cast<double>(s.model.num_params()) / 1e9, s.nodes, s.gpus_per_node,
              cpu ? "ranks" : "GPUs", s.world(), static_cast<long long>(s.micro_batch),
              static_cast<long long>(std::min(s.seq_len, s.model.context)));
  if (s.model.moe())
    std::printf("Mixture of experts: %lld experts per block, %lld per token: %lld active "
                "parameters per token (%.2fB of %.2fB); FLOPs and MFU count the active ones\n",
                static_cast<long long>(s.model.experts),
                static_cast<long long>(s.model.experts_per_token),
                static_cast<long long>(s.model.num_active_params()),
                static_cast<double>(s.model.num_active_params()) / 1e9,
                static_cast<double>(s.model.num_params()) / 1e9);
  const estimate::GenerationBytes g = generation_of(s);
  std::printf("zt generate (fp32, one sequence of %lld positions): cache %s GiB (%s), workspace "
              "%s GiB\n",
              static_cast<long long>(std::min(s.seq_len, s.model.context)), gib(g.cache).c_str(),
              s.model.linear_layers()
                  ? "keys and values of the attention layers; each Gated DeltaNet layer's conv "
                    "inputs and recurrent state, whatever the length"
                  : "keys and values",
              gib(g.workspace).c_str());
  if (s.zero.expert_parallel > 1)
    std::printf("Expert parallelism: %d ranks per expert group (%lld experts per rank), ZeRO "
                "over the %d ranks of each group position; activations at balanced routing\n",
                s.zero.expert_parallel,
                static_cast<long long>(s.model.experts / s.zero.expert_parallel),
                s.world() / s.zero.expert_parallel);
  if (cpu)
    std::printf("Device cpu (zt's CPU engine, all fp32: params 4 + grads 4 + AdamW m,v 8 B/param); "
                "host memory %s GiB per node\n", gib(r.host_bytes).c_str());
  else
    std::printf("Device gpu%s: %s GiB per GPU%s; host %s GiB per node. train.precision = %s: %s\n",
                r.gpu ? (" " + r.gpu->name).c_str() : "", gib(r.device_bytes).c_str(),
                r.gpu && r.gpu->bf16_tflops > 0 ? strf(", peak %.0f bf16 TFLOP/s", r.gpu->bf16_tflops).c_str() : "",
                gib(r.host_bytes).c_str(), s.zero.precision.c_str(),
                s.zero.precision == "bf16-mixed"
                    ? "fp32 params 4 + grads 4 + AdamW m,v 8 B/param + bf16 weights (stages 0-2: "
                      "2 B/param copy; stage 3: gather buffers); bf16 activations"
                : s.zero.precision == "bf16-true"
                    ? "bf16 params 2 (no fp32 master) + fp32 grads 4 + AdamW m,v 8 B/param, "
                      "AdamW's fp32 work buffer in work; bf16 gathers and activations; no "
                      "offload rows"
                    : "fp32 params 4 + grads 4 + AdamW m,v 8 B/param; fp32 activations");
  if (s.zero.lora.enabled())
    std::printf("finetune.method = %s: the base is frozen (params only, as full training "
                "holds them); grads and AdamW m,v of the adapters only (%s)%s; offload stores the "
                "adapters' state\n",
                s.zero.lora.method == model::FinetuneMethod::kQlora ? "qlora" : "lora",
                model::trainable_banner(model::trainable_counts(s.model, s.zero.lora)).c_str(),
                s.zero.lora.method == model::FinetuneMethod::kQlora
                    ? "; the targeted W are held as their NF4 base only (params hold the "
                      "other base tensors + the NF4 base)" : "");
  if (!r.gpu_gap.empty())
    std::printf("Not yet runnable on the GPU: the GPU model does not have %s; every row below "
                "sizes the engine as if it did (train.device = cpu runs %s now).\n",
                r.gpu_gap.c_str(), s.model.family.c_str());
  uint64_t largest = 0;
  for (const Row& row : rows) largest = std::max(largest, row.total(false));
  const BinaryUnit u = table_unit(largest);
  std::printf("Sizes in %s per %s unless noted; act = activations of one micro-batch (rc: with "
              "recompute); work = gather + gradient + comm buffers.\n", unit_name(u), cpu ? "rank" : "GPU");
  std::printf("%-9s %-5s %-5s %9s %9s %9s %7s %9s %9s %9s %9s %10s %9s  %s\n", "stage", "opt", "param",
              "params", "grads", "optim", "work", "act", "act(rc)", "total", "total(rc)",
              "host/node", "nvme/rank", "fits");
  for (const Row& row : rows) {
    const estimate::Fit f = estimate::check_fit(row, s, r.device_bytes, r.host_bytes);
    const uint64_t host = cpu ? ranks * row.total(false) : ranks * row.host_bytes;
    std::printf("%-9s %-5s %-5s %9s %9s %9s %7s %9s %9s %9s %9s %10s %9s  %s\n",
                (config_name(row) + (row.stage == r.configured_stage && row.hpz == 1 &&
                                     static_cast<int>(row.optimizer) == static_cast<int>(s.zero.offload.optimizer) &&
                                     static_cast<int>(row.params) == static_cast<int>(s.zero.offload.params)
                                 ? "*" : "")).c_str(),
                std::string(estimate::offload_name(row.optimizer)).c_str(),
                std::string(estimate::offload_name(row.params)).c_str(), in(row.param_bytes, u).c_str(),
                in(row.grad_bytes, u).c_str(), in(row.optimizer_bytes, u).c_str(), in(row.working(), u).c_str(),
                in(row.activation_bytes, u).c_str(), in(row.activation_recompute_bytes, u).c_str(),
                in(row.total(false), u).c_str(), in(row.total(true), u).c_str(), in(host, u).c_str(),
                in(row.nvme_bytes, u).c_str(), fit_word(f).c_str());
  }
  std::printf("* the configured zero.stage and offload.*. \"fits with recompute\": only with train.recompute = "
              "true; \"(host)\": the node's host memory is too small.\n");
  if (!cpu)
    std::printf("Every row is the engine's own accounting (Engine::memory); offload rows: host/node = "
                "the offload store + one unit's parameter shard of each rank%s; total also counts "
                "the cuBLASLt and cuDNN attention workspaces (%s); not counted: CUDA context, "
                "allocator, NCCL, pinned staging.\n",
                s.zero.lora.enabled() && s.zero.precision == "bf16-mixed"
                    ? " (lora/qlora, shards not offloaded: + the frozen base's fp32 owned slices)"
                    : "",
                in(rows.empty() ? 0 : rows.front().library_bytes, u).c_str());
  else
    std::printf("Offload on the CPU engine: optim = the store's host memory (offload.subgroup_bytes x "
                "offload.buffers on nvme); host memory is the device, so offload.params = cpu is "
                "the same as none.\n");
  if (const auto t = predicted_step(r)) print_step(*t, *r.gpu);
  return 0;
}

}  // namespace

Run add_estimate_command(CLI::App& app) {
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "estimate", "memory per GPU / host for each ZeRO stage, hpZ and offload choice, and what fits");
  sub->add_option("--config", args->config_file, "TOML file of `zt train` keys");
  sub->add_option("--set", args->sets, "override one key: --set model.preset=llama-7b (repeatable)");
  sub->add_option("--gpus-per-node", args->gpus_per_node, "ranks (GPUs) per node (default 1)")
      ->check(int_in(1, 1 << 24));
  sub->add_option("--nodes", args->nodes, "nodes (default 1)")->check(int_in(1, 1 << 24));
  sub->add_option("--gpu", args->gpu, "a row of data/gpus.csv (memory and peak), e.g. h100-sxm");
  sub->add_option("--gpu-mem", args->gpu_mem, "memory per GPU, e.g. 80G (overrides --gpu; default 80G)")
      ->check(size_in(1, uint64_t{1} << 50));
  sub->add_option("--cpu-mem", args->cpu_mem, "host memory per node, e.g. 512G (default 512G)")
      ->check(size_in(1, uint64_t{1} << 50));
  sub->add_option("--device", args->device, "gpu (the engine on a GPU, train.precision) or cpu (zt's fp32 engine)");
  sub->add_flag("--json", args->json, "print JSON instead of the table");
  return [args]() { return run(*args); };
}

}  // namespace zt::apps
