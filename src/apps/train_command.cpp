// `zt train [--config FILE.toml] [--set key=value ...]`: the training command.
//
// Order of work: configuration (before MPI, so a bad key fails fast with exit 2 on every
// rank), MPI runtime, device / precision / backend (train.device, comm.backend), OpenMP
// threads, data (the shipped corpus is converted by rank 0
// into the cache on first use while the others wait), the loop, the sample.
#include <omp.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "options.hpp"
#include "zt/ckpt/preemption.hpp"
#include "zt/comm/mpi_comm.hpp"
#include "zt/comm/nccl_comm.hpp"
#include "zt/core/checksum.hpp"
#include "zt/core/config.hpp"
#include "zt/core/error.hpp"
#include "zt/core/escape.hpp"
#include "zt/core/log.hpp"
#include "zt/core/progress.hpp"
#include "zt/data/corpus.hpp"
#include "zt/data/sampler.hpp"
#include "zt/data/tokenizer.hpp"
#include "zt/runtime/agree.hpp"
#include "zt/runtime/mpi_check.hpp"
#include "zt/runtime/runtime.hpp"
#include "zt/train/config.hpp"
#include "zt/train/device.hpp"
#include "zt/train/metrics.hpp"
#include "zt/train/report.hpp"
#include "zt/train/trainer.hpp"

namespace zt::apps {
namespace {

struct TrainArgs {
  std::string config_file;
  std::vector<std::string> sets;
  bool help_config = false;
  bool print_config = false;
  int ranks_per_node = 0;
};

// What this rank sees for choose_device: the build, its GPUs, and the world ranks on its
// physical host (not a simulated node: ranks of one host share its GPUs whatever the
// simulation).
train::DeviceFacts device_facts(const runtime::Runtime& rt) {
  train::DeviceFacts f;
  f.cuda_built = comm::nccl_available();  // the CUDA backend is built with NCCL
  f.nccl_built = f.cuda_built;
  f.nccl_version = comm::nccl_version();
  f.visible_gpus = rt.visible_devices();
  f.world_rank = rt.topology().world_rank;
  f.host = rt.topology().host;
  MPI_Comm host = MPI_COMM_NULL;
  ZT_MPI_CHECK(MPI_Comm_split_type(rt.world(), MPI_COMM_TYPE_SHARED, f.world_rank, MPI_INFO_NULL,
                                   &host));
  int size = 1;
  ZT_MPI_CHECK(MPI_Comm_size(host, &size));
  f.host_ranks.resize(static_cast<size_t>(size));  // [ranks on the host] ascending world ranks
  ZT_MPI_CHECK(MPI_Allgather(&f.world_rank, 1, MPI_INT, f.host_ranks.data(), 1, MPI_INT, host));
  ZT_MPI_CHECK(MPI_Comm_free(&host));
  return f;
}

// Every key of the resolved configuration, as the ranks compare it right after MPI
// starts (issue 36, class 2). No key may differ per rank: even log.metrics and
// train.threads (the first names rank 0's file, the second changes no collective) are
// compared, since a rank launched with a different one was launched with a different
// command line. runtime.ranks_per_node is the one in force (--ranks-per-node wins).
runtime::Settings resolved_settings(const config::Schema& schema, const config::Config& cfg,
                                    int ranks_per_node) {
  runtime::Settings s;
  for (const config::Key& k : schema.keys()) {
    std::string value = "(unset)";
    if (cfg.has(k.name)) {
      switch (k.type) {
        case config::Type::kInt: value = std::to_string(cfg.get_int(k.name)); break;
        case config::Type::kFloat: value = config::value_to_string(config::Value{cfg.get_float(k.name)}); break;
        case config::Type::kBool: value = cfg.get_bool(k.name) ? "true" : "false"; break;
        case config::Type::kString: value = cfg.get_string(k.name); break;
      }
    }
    if (k.name == "runtime.ranks_per_node") value = std::to_string(ranks_per_node);
    s.emplace_back(k.name, value);
  }
  return s;
}

// What identifies the token file's contents: sizes, tokenizer, and a hash of every token,
// loss-mask byte and document start (zt-xxh3, ~10 GB/s; once at start-up).
runtime::Settings data_identity(const data::TokenFile& t) {
  const auto hash = [](const auto& v) {
    return strf("%016llx", static_cast<unsigned long long>(xxh3_sum(std::as_bytes(std::span(v)))));
  };
  return {{"tokens", std::to_string(t.tokens.size())},
          {"vocab_size", std::to_string(t.vocab_size)},
          {"tokenizer", t.tokenizer},
          {"tokenizer_hash", t.tokenizer_hash},
          {"row_len", std::to_string(t.row_len)},
          {"token ids (zt-xxh3)", hash(t.tokens)},
          {"loss mask (zt-xxh3)", hash(t.loss_mask)},
          {"document starts (zt-xxh3)", hash(t.doc_starts)}};
}

// The start-up banner (rank 0): model, device, batch, data, optimizer, ZeRO, MFU reference.
void log_banner(const train::TrainConfig& tc, const runtime::Topology& topo,
                const data::TokenFile& tokens, int threads, bool measured,
                const std::string& device_line) {
  const data::Split split = data::split_of(tokens, tc.eval_fraction);
  log::info(strf("zt train: model %s (%lld parameters), %d rank%s x %d thread%s",
                 tc.model.name.c_str(), static_cast<long long>(tc.model.num_params()),
                 topo.world_size, topo.world_size == 1 ? "" : "s", threads,
                 threads == 1 ? "" : "s"));
  log::info("  " + device_line);
  log::info(strf("  batch: micro_batch %lld x %d ranks x accumulation %lld = global batch %lld "
                 "sequences x %lld tokens = %lld tokens/step; %lld steps",
                 static_cast<long long>(tc.micro_batch), topo.world_size,
                 static_cast<long long>(tc.accum), static_cast<long long>(tc.global_batch),
                 static_cast<long long>(tc.seq_len), static_cast<long long>(tc.tokens_per_step()),
                 static_cast<long long>(tc.steps)));
  log::info(strf("  data: %s (%zu tokens, tokenizer \"%s\", vocab %u): train %zu, held-out "
                 "tail %zu (data.eval_fraction %g)",
                 tc.data_path.c_str(), tokens.tokens.size(), tokens.tokenizer.c_str(),
                 tokens.vocab_size, split.train.size(), split.eval.size(), tc.eval_fraction));
  log::info(strf("  optimizer: AdamW lr %g -> %g (warm-up %lld, cosine), weight decay %g, "
                 "betas %g/%g, grad clip %g",
                 tc.lr, tc.min_lr, static_cast<long long>(tc.warmup), tc.weight_decay, tc.beta1,
                 tc.beta2, tc.grad_clip));
  log::info(strf("  zero: stage %d, %d node%s x %d rank%s%s; hpz_partition_size %d, prefetch %d, "
                 "quantize weights %s / grads %s, reduce %s",
                 tc.zero.stage, topo.node_count, topo.node_count == 1 ? "" : "s", topo.local_size,
                 topo.local_size == 1 ? "" : "s", topo.simulated ? " (simulated on one host)" : "",
                 tc.zero.hpz_partition_size, tc.zero.prefetch,
                 tc.zero.quantize_weights ? "on" : "off", tc.zero.quantize_grads ? "on" : "off",
                 tc.zero.reduce_dtype == DType::kF32 ? "fp32" : "bf16"));
  if (tc.lora.enabled()) {  // PEFT's print_trainable_parameters line, then what is frozen
    const model::LoraConfig& l = tc.lora;
    std::string targets;
    for (int t = 0; t < model::kNumLoraTargets; ++t)
      if (l.has_target(static_cast<model::LoraTarget>(t)))
        targets += (targets.empty() ? "" : ",") + std::string(model::lora_target_name(static_cast<model::LoraTarget>(t)));
    log::info(strf("  finetune: %s, rank %lld, alpha %g (scale %g), dropout %g, targets %s; the "
                   "base is frozen%s",
                   l.method == model::FinetuneMethod::kQlora ? "qlora" : "lora",
                   static_cast<long long>(l.rank), l.alpha, l.scale(), l.dropout, targets.c_str(),
                   l.method == model::FinetuneMethod::kQlora ? " (targeted W as NF4 + double quantisation)" : ""));
    log::info("  " + model::trainable_banner(model::trainable_counts(tc.model, l)));
  }
  log::info(strf("  MFU against %.1f GFLOP/s per rank (%s); %.2f MFLOP per token (6N + 12LHQT)",
                 tc.peak_tflops * 1e3,
                 measured ? "measured fp32 GEMM" : "train.peak_tflops",
                 tc.model.flops_per_token(tc.seq_len) / 1e6));
}

// The run's facts (the banner's), the first record of log.metrics and of the report's
// copy: {"step": first_step, "run": {...}} (train/report.hpp; docs/training.md).
std::string run_record(const train::TrainConfig& tc, const runtime::Topology& topo,
                       const data::TokenFile& tokens, int threads, const std::string& device_line,
                       int64_t first_step) {
  nlohmann::json run = {
      {"model", tc.model.name},
      {"parameters", tc.model.num_params()},
      {"layers", tc.model.layers},
      {"hidden", tc.model.hidden},
      {"ranks", topo.world_size},
      {"nodes", topo.node_count},
      {"threads_per_rank", threads},
      {"device", device_line},
      {"zero", strf("stage %d, hpz_partition_size %d, prefetch %d, quantize weights %s / grads %s, "
                    "reduce %s",
                    tc.zero.stage, tc.zero.hpz_partition_size, tc.zero.prefetch,
                    tc.zero.quantize_weights ? "on" : "off", tc.zero.quantize_grads ? "on" : "off",
                    tc.zero.reduce_dtype == DType::kF32 ? "fp32" : "bf16")},
      {"data", tc.data_path},
      {"data_tokens", tokens.tokens.size()},
      {"tokenizer", tokens.tokenizer},
      {"vocab", tc.model.vocab},
      {"batch", strf("micro_batch %lld x %d ranks x accumulation %lld = %lld sequences x %lld "
                     "tokens = %lld tokens/step",
                     static_cast<long long>(tc.micro_batch), topo.world_size,
                     static_cast<long long>(tc.accum), static_cast<long long>(tc.global_batch),
                     static_cast<long long>(tc.seq_len),
                     static_cast<long long>(tc.tokens_per_step()))},
      {"steps", tc.steps},
      {"optimizer", strf("AdamW lr %g -> %g (warm-up %lld, cosine), weight decay %g, grad clip %g",
                         tc.lr, tc.min_lr, static_cast<long long>(tc.warmup), tc.weight_decay,
                         tc.grad_clip)},
      {"mfu_peak_tflops_per_rank", tc.peak_tflops},
      {"first_step", first_step}};
  if (tc.lora.enabled())
    run["finetune"] = model::trainable_banner(model::trainable_counts(tc.model, tc.lora));
  return json_dump(nlohmann::json{{"step", first_step}, {"run", run}});
}

// What every step reports: rank 0 logs the step line (the first, every log.every-th and the
// last), the eval line, the JSON line of log.metrics (a failed write ends the job) and of
// the report's copy (log.report: a failure is a warning).
std::function<void(const train::StepRecord&)> step_reporter(
    const train::TrainConfig& tc, const runtime::Runtime& rt, train::MetricsFile& metrics,
    train::LiveReport& report, std::chrono::steady_clock::time_point t_start) {
  const int64_t steps = tc.steps, every = tc.log_every;
  const bool verbose = tc.log_verbose;
  return [&rt, &metrics, &report, t_start, steps, every, verbose](const train::StepRecord& r) {
    if (rt.topology().world_rank != 0) return;
    if (r.step == 1 || r.step == steps || r.step % every == 0)
      log::info(train::step_line(r, steps, verbose));
    report.record(train::step_json(r));
    if (r.eval_loss) {
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
      log::info(strf("eval  step %lld | eval loss %.4f | elapsed %.1f s",
                     static_cast<long long>(r.step), *r.eval_loss, elapsed));
    }
    if (metrics.is_open()) {
      try {
        metrics.write(r);
      } catch (const Error& e) {  // only rank 0 knows: end the whole job rather than leave others waiting
        log::error(e.message() + "\n  HINT: " + e.hint());
        rt.abort(static_cast<int>(ExitCode::kFailed));
      }
    }
  };
}

int run_train(const TrainArgs& args) {
  const config::Schema schema = train::train_schema();
  if (args.help_config) {
    std::fputs(("Keys of `zt train` (set them in a TOML file given to --config, or with "
                "--set key=value):\n\n" + schema.help()).c_str(), stdout);
    return 0;
  }
  // SIGTERM / SIGUSR1 (Slurm's warning before a kill) and SIGINT only set a flag from here
  // on, through MPI's start and end too (declared before the Runtime, so it outlives
  // MPI_Finalize: a second signal during the save or the shutdown is not fatal): the loop
  // agrees on it before the first step and at every step boundary, saves a checkpoint and
  // ends with exit 0; the final sample stops at the next token.
  const ckpt::PreemptionSignals preemption;
  // Configuration errors are the same on every rank: exit 2 before MPI starts.
  const config::Config cfg = config::load(schema, args.config_file, args.sets);
  set_progress_interval(cfg.get_float("log.progress_every"), "log.progress_every");

  // --ranks-per-node wins over the runtime.ranks_per_node key.
  const int ranks_per_node = args.ranks_per_node > 0
                                 ? args.ranks_per_node
                                 : static_cast<int>(cfg.get_int("runtime.ranks_per_node"));
  runtime::Options rt_options{ranks_per_node, cfg.get_bool("ckpt.async")};
  rt_options.same_on_every_rank = resolved_settings(schema, cfg, ranks_per_node);
  runtime::Runtime rt(rt_options);
  const runtime::Topology& topo = rt.topology();
  train::TrainConfig tc = train::resolve(cfg, topo.world_size);
  // Outputs against each other and the inputs (exit 2 naming both keys), before any work.
  refuse_collisions(train::path_uses(tc));
  // zero.* against the ranks (the same verdict on every rank, before any collective):
  // exit 2 naming the key and its valid values.
  tc.zero.validate(topo.world_size, topo.local_size);
  if (args.print_config) log::info(cfg.to_toml());
  if (topo.world_rank == 0)
    for (const std::string& w : train::inert_keys(cfg, tc)) log::warn(w);

  // train.device / train.precision / comm.backend against what this rank sees (exit 2
  // naming the key); on cuda the rank's GPU becomes current and the engine holds its
  // state in device memory.
  const train::DeviceFacts facts = device_facts(rt);
  const train::DeviceChoice device =
      train::choose_device(tc.device, tc.precision, tc.share_gpu, tc.comm_backend, facts);
  if (device.cuda) {
    runtime::cuda_set_device(device.gpu);
    tc.zero.device = zero::EngineOptions::Device::kCuda;
    tc.zero.precision = device.precision;
  }

  const int threads = train::resolve_threads(tc.threads, topo.local_size, "train.threads");
  omp_set_num_threads(threads);

  if (tc.data_path.empty()) tc.data_path = data::prepare_shipped_tokens(rt.world());
  data::TokenFile tokens;
  runtime::collectively(rt.world(), [&] { tokens = data::read_token_file(tc.data_path); });
  runtime::require_same(rt.world(), data_identity(tokens), "the data (data.path '" + tc.data_path + "')",
                        "every rank must read the same token file: a path on a shared file "
                        "system, or identical copies on each node");

  // World, plus this rank's node and its peers on other nodes for the engine's
  // hierarchical collectives and hpZ (the engine splits private copies of each).
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(tc.comm_timeout_s * 1000.0));
  std::unique_ptr<comm::Comm> comm = comm::make_mpi_comm(rt.world());
  std::unique_ptr<comm::Comm> node_comm = comm::make_mpi_comm(rt.node());
  std::unique_ptr<comm::Comm> cross_comm = comm::make_mpi_comm(rt.cross());
  for (comm::Comm* c : {comm.get(), node_comm.get(), cross_comm.get()}) c->set_timeout(timeout);
  // comm.backend = nccl: the engine's collectives over NCCL communicators bootstrapped
  // over MPI (the engine splits its node, cross and hpZ groups from these); the loop's
  // own host-memory collectives stay on MPI. With mpi on cuda the engine stages device
  // buffers through pinned host memory itself.
  std::unique_ptr<comm::Comm> nccl_world, nccl_node, nccl_cross;
  if (device.backend == "nccl") {
    nccl_world = comm::make_nccl_comm(rt.world());
    nccl_node = comm::make_nccl_comm(rt.node());
    nccl_cross = comm::make_nccl_comm(rt.cross());
    for (comm::Comm* c : {nccl_world.get(), nccl_node.get(), nccl_cross.get()}) c->set_timeout(timeout);
  }

  bool measured = false;
  if (device.cuda && tc.peak_tflops <= 0)
    log::warn("train.peak_tflops is 0: MFU is reported against this host's measured fp32 CPU "
              "GEMM, not the GPU; set train.peak_tflops to the GPU's peak");
  if (tc.peak_tflops <= 0) {
    tc.peak_tflops = train::peak_flops_per_rank(0, *comm) / 1e12;
    measured = true;
  }

  // log.metrics is opened once the resumed step is known (continued, never truncated);
  // so is the report's own copy in ckpt.dir/report (log.report, rank 0).
  train::MetricsFile metrics;
  train::LiveReport report;
  const bool root = topo.world_rank == 0;
  const std::string device_line = device.describe(facts.nccl_version);

  log_banner(tc, topo, tokens, threads, measured, device_line);

  const auto t_start = std::chrono::steady_clock::now();
  train::TrainHooks hooks;
  hooks.on_step = step_reporter(tc, rt, metrics, report, t_start);
  hooks.on_start = [&](int64_t first_step) {
    const std::string run = run_record(tc, topo, tokens, threads, device_line, first_step);
    if (!tc.metrics_path.empty())
      runtime::collectively(rt.world(), [&] {
        metrics.open(tc.metrics_path, first_step, tc.ckpt.overwrite);
        metrics.write_line(run);
      }, /*rank0_only=*/true);
    if (root && tc.log_report) report.open(tc.ckpt.dir + "/report", first_step, run);  // its own metrics.jsonl
  };
  // Each checkpoint: its record, then the report redrawn (rank 0).
  hooks.on_checkpoint = [&](const train::CheckpointRecord& c) {
    if (!root) return;
    const std::string line = train::checkpoint_json(c);
    if (metrics.is_open()) {
      try {
        metrics.write_line(line);
      } catch (const Error& e) {  // as a failed step record: end the whole job
        log::error(e.message() + "\n  HINT: " + e.hint());
        rt.abort(static_cast<int>(ExitCode::kFailed));
      }
    }
    report.record(line);
    report.write();
  };

  const train::TrainResult result =
      train::train(tc, *comm, tokens, hooks,
                   train::NodeComms{nccl_node ? nccl_node.get() : node_comm.get(),
                                    nccl_cross ? nccl_cross.get() : cross_comm.get(), rt.world(),
                                    nccl_world.get()});
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  if (root) report.write();  // the end of the run (log.report; a no-op when off)
  const int64_t steps = tc.steps;
  if (result.nothing_left) {
    log::info(strf("nothing is left to train: the checkpoint %s is at step %lld of train.steps = "
                   "%lld (a finished job; raise train.steps to continue it)",
                   result.checkpoint.empty() ? "resumed" : result.checkpoint.c_str(),
                   static_cast<long long>(result.first_step), static_cast<long long>(steps)));
    return 0;
  }
  if (result.stopped) {
    const int64_t at = result.steps.empty() ? result.first_step : result.steps.back().step;
    log::info(strf("stopped at step %lld of %lld after %.1f s; resume with --set ckpt.resume=auto",
                   static_cast<long long>(at), static_cast<long long>(steps), total));
    return 0;
  }
  const train::StepRecord& last = result.steps.back();
  log::info(strf("done: %lld steps in %.1f s, final loss %.4f",
                 static_cast<long long>(result.steps.size()), total, last.loss) +
            (last.eval_loss ? strf(", eval loss %.4f", *last.eval_loss) : std::string()));
  if (result.no_target_steps > 0)
    log::warn(strf("%lld steps had no target in their global batch and were skipped (no update)",
                   static_cast<long long>(result.no_target_steps)));
  if (result.skipped_at_end > 0) {  // not a run that trained: not exit 0 (issue 36, class 7)
    log::error(strf("the last %lld step%s took no update (NaN/Inf loss or gradient, or no target): "
                    "the run did not train at its end%s\n  HINT: lower train.lr or lora.alpha, raise "
                    "train.warmup, check the data's loss mask; the checkpoint holds the weights of "
                    "the last update",
                    static_cast<long long>(result.skipped_at_end), result.skipped_at_end == 1 ? "" : "s",
                    result.checkpoint.empty() ? "" : (" (saved: " + result.checkpoint + ")").c_str()));
    return static_cast<int>(ExitCode::kFailed);
  }
  if (ckpt::preemption_requested())
    log::info("a stop request came during the sample: it ended early (the checkpoint was saved "
              "before it)");
  if (!result.sample.empty()) {
    log::info(strf("sample (%lld tokens, temperature %g, seed %llu):",
                   static_cast<long long>(tc.sample_tokens), tc.sample_temperature,
                   static_cast<unsigned long long>(tc.sample_seed)));
    log::info("----------------------------------------");
    log::info(result.sample_text);
    log::info("----------------------------------------");
  }
  return 0;
}

}  // namespace

Run add_train_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "train",
      "Train a Llama-style model, data parallel over the MPI ranks. With no arguments: the "
      "tiny preset on the shipped corpus (data/tinyshakespeare.txt), then a sample.");
  auto args = std::make_shared<TrainArgs>();
  sub->add_option("--config", args->config_file, "TOML file of keys (see --help-config)");
  sub->add_option("--set", args->sets,
                  "override one key: --set train.lr=3e-4 (value parsed as TOML; bare words are "
                  "strings); repeatable, applied after the file, in order");
  sub->add_flag("--help-config", args->help_config, "list every key with type, default, description");
  sub->add_flag("--print-config", args->print_config, "print the resolved configuration (TOML)");
  sub->add_option("--ranks-per-node", args->ranks_per_node,
                  "simulate nodes of this many ranks on one host (0: physical hosts; overrides "
                  "the runtime.ranks_per_node key)")
      ->check(int_in(0, 1 << 24));
  return [args]() { return run_train(*args); };
}

}  // namespace zt::apps
