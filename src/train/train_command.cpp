// `zt train [--config FILE.toml] [--set key=value ...]`: the training command.
//
// Order of work: configuration (before MPI, so a bad key fails fast with exit 2 on every
// rank), MPI runtime, OpenMP threads, data (the shipped corpus is converted by rank 0
// into the cache on first use while the others wait), the loop, the sample.
#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "commands.hpp"
#include "zt/ckpt/preemption.hpp"
#include "zt/comm/mpi_comm.hpp"
#include "zt/core/config.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/data/corpus.hpp"
#include "zt/data/sampler.hpp"
#include "zt/data/text.hpp"
#include "zt/data/tokenizer.hpp"
#include "zt/runtime/mpi_check.hpp"
#include "zt/runtime/runtime.hpp"
#include "zt/train/config.hpp"
#include "zt/train/metrics.hpp"
#include "zt/train/trainer.hpp"
#include "zt/zero/stats.hpp"

namespace zt::apps {
namespace {

// A byte-level model can emit any byte; keep the terminal sane: printable ASCII, newlines
// and tabs as they are, every other byte as \xNN.
std::string printable(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const unsigned char c : text) {
    if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f)) {
      out += static_cast<char>(c);
    } else {
      out += strf("\\x%02x", c);
    }
  }
  return out;
}

namespace fs = std::filesystem;

struct TrainArgs {
  std::string config_file;
  std::vector<std::string> sets;
  bool help_config = false;
  bool print_config = false;
  int ranks_per_node = 0;
};

// OpenMP threads per rank: train.threads when > 0; else OMP_NUM_THREADS when set; else
// the cores this rank is bound to, or (unbound) the host's cores shared by its ranks.
int choose_threads(int configured, int ranks_on_node) {
  if (configured > 0) return configured;
  if (const char* env = std::getenv("OMP_NUM_THREADS"); env && *env) return omp_get_max_threads();
  cpu_set_t set;
  CPU_ZERO(&set);
  const int bound = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  const int host = static_cast<int>(std::thread::hardware_concurrency());
  if (bound > 0 && bound < host) return bound;
  return std::max(1, host / std::max(1, ranks_on_node));
}

// Runs `work` (on rank 0 only, or on every rank), then all ranks agree on whether it
// failed anywhere: a rank that failed rethrows its own error, the others throw one that
// points to it. So no rank is left waiting in a collective for a rank that is gone.
template <class F>
void collectively(const runtime::Runtime& rt, bool rank0_only, F work) {
  int code = 0;  // 0 ok, else the zt::ExitCode of this rank's error
  std::exception_ptr error;
  if (!rank0_only || rt.topology().world_rank == 0) {
    try {
      work();
    } catch (const Error& e) {
      code = static_cast<int>(e.exit_code());
      error = std::current_exception();
    } catch (...) {  // std::filesystem_error, bad_alloc, ...: still tell the others
      code = static_cast<int>(ExitCode::kFailed);
      error = std::current_exception();
    }
  }
  ZT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &code, 1, MPI_INT, MPI_MAX, rt.world()));
  if (error) std::rethrow_exception(error);
  if (code != 0)
    throw Error(rank0_only ? "rank 0 failed (its message above says why)"
                           : "another rank failed (its message above says why)",
                "", static_cast<ExitCode>(code));
}

// The embedded default's data: rank 0 converts the shipped corpus into the cache (once,
// atomically: a unique .tmp then rename) while the other ranks wait, then all learn the
// path from rank 0.
std::string prepare_shipped_data(const runtime::Runtime& rt) {
  std::string path;
  collectively(rt, /*rank0_only=*/true, [&] {
    const std::string corpus = data::find_shipped_corpus();
    path = data::cached_tokens_path(corpus);
    std::error_code ec;
    if (fs::exists(path, ec)) return;
    const fs::path dir = fs::path(path).parent_path();
    fs::create_directories(dir, ec);
    if (ec)
      throw InputError("cannot create the cache folder '" + dir.string() + "': " + ec.message(),
                       "set XDG_CACHE_HOME to a writable folder, or convert the corpus "
                       "yourself and set data.path");
    log::info("zt train: converting " + corpus + " -> " + path + " (first use)");
    data::convert_text_to_tokens({corpus}, path,
                                 data::WriteOptions{".tmp." + std::to_string(::getpid())});
  });
  int len = static_cast<int>(path.size());
  ZT_MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT, 0, rt.world()));
  path.resize(static_cast<size_t>(len));
  ZT_MPI_CHECK(MPI_Bcast(path.data(), len, MPI_CHAR, 0, rt.world()));
  return path;
}

std::string mib(size_t bytes) { return strf("%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0)); }

nlohmann::json step_json(const train::StepRecord& r) {
  nlohmann::json j = {{"step", r.step},
                      {"loss", r.loss},
                      {"lr", r.lr},
                      {"grad_norm", r.grad_norm},
                      {"clip_coef", r.clip_coef},
                      {"tokens_per_s", r.tokens_per_s},
                      {"mfu", r.mfu},
                      {"step_time_s", r.step_time_s},
                      {"tokens", r.tokens_seen},
                      {"rss_bytes", r.rss_bytes},
                      {"peak_rss_bytes", r.peak_rss_bytes},
                      {"comm_intra_node_bytes", r.intra_node_bytes},
                      {"comm_inter_node_bytes", r.inter_node_bytes}};
  nlohmann::json groups;
  for (int g = 0; g < zero::kGroupCount; ++g)
    groups[std::string(zero::group_name(static_cast<zero::Group>(g)))] = r.comm_bytes[g];
  j["comm_bytes"] = groups;
  const zero::MemoryStats& m = r.zero_memory;
  j["memory"] = {{"full_params", m.full_params},       {"param_shards", m.param_shards},
                 {"secondary_shards", m.secondary_shards}, {"grads", m.grads},
                 {"optimizer", m.optimizer},           {"gather_buffers", m.gather_buffers},
                 {"grad_buffers", m.grad_buffers},     {"comm_buffers", m.comm_buffers},
                 {"activations", m.activations},       {"model_states", m.model_states()},
                 {"total", m.total()},                 {"peak_total", m.peak_total}};
  if (r.eval_loss) j["eval_loss"] = *r.eval_loss;
  return j;
}

// Decimal bytes, as the comm layer reports bandwidth: "0 B", "812 kB", "8.39 MB".
std::string bytes_si(uint64_t b) {
  const double x = static_cast<double>(b);
  if (x < 1e3) return strf("%.0f B", x);
  if (x < 1e6) return strf("%.0f kB", x / 1e3);
  if (x < 1e9) return strf("%.2f MB", x / 1e6);
  return strf("%.2f GB", x / 1e9);
}

std::string step_line(const train::StepRecord& r, int64_t steps) {
  const zero::MemoryStats& m = r.zero_memory;
  return strf("step %5lld/%lld | loss %.4f | lr %.2e | grad norm %6.3f%s | %8.0f tok/s | MFU %5.1f%% "
              "| mem %s (peak %s) | comm intra %s inter %s | states %s + work %s (peak %s) | %.3f s",
              static_cast<long long>(r.step), static_cast<long long>(steps), r.loss, r.lr,
              r.grad_norm, r.clip_coef < 1.0 ? " (clipped)" : "", r.tokens_per_s, 100.0 * r.mfu,
              mib(r.rss_bytes).c_str(), mib(r.peak_rss_bytes).c_str(),
              bytes_si(r.intra_node_bytes).c_str(), bytes_si(r.inter_node_bytes).c_str(),
              mib(m.model_states()).c_str(), mib(m.total() - m.model_states()).c_str(),
              mib(m.peak_total).c_str(), r.step_time_s);
}

int run_train(const TrainArgs& args) {
  const config::Schema schema = train::train_schema();
  if (args.help_config) {
    std::fputs(("Keys of `zt train` (set them in a TOML file given to --config, or with "
                "--set key=value):\n\n" + schema.help()).c_str(), stdout);
    return 0;
  }
  // Configuration errors are the same on every rank: exit 2 before MPI starts.
  const config::Config cfg = config::load(schema, args.config_file, args.sets);

  // --ranks-per-node wins over the runtime.ranks_per_node key.
  const int ranks_per_node = args.ranks_per_node > 0
                                 ? args.ranks_per_node
                                 : static_cast<int>(cfg.get_int("runtime.ranks_per_node"));
  runtime::Runtime rt(runtime::Options{ranks_per_node, cfg.get_bool("ckpt.async")});
  const runtime::Topology& topo = rt.topology();
  train::TrainConfig tc = train::resolve(cfg, topo.world_size);
  // zero.* against the ranks (the same verdict on every rank, before any collective):
  // exit 2 naming the key and its valid values.
  tc.zero.validate(topo.world_size, topo.local_size);
  if (args.print_config) log::info(cfg.to_toml());

  const int threads = choose_threads(tc.threads, topo.local_size);
  omp_set_num_threads(threads);

  if (tc.data_path.empty()) tc.data_path = prepare_shipped_data(rt);
  data::TokenFile tokens;
  collectively(rt, /*rank0_only=*/false, [&] { tokens = data::read_token_file(tc.data_path); });

  // World, plus this rank's node and its peers on other nodes for the engine's
  // hierarchical collectives and hpZ (the engine splits private copies of each).
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(tc.comm_timeout_s * 1000.0));
  std::unique_ptr<comm::Comm> comm = comm::make_mpi_comm(rt.world());
  std::unique_ptr<comm::Comm> node_comm = comm::make_mpi_comm(rt.node());
  std::unique_ptr<comm::Comm> cross_comm = comm::make_mpi_comm(rt.cross());
  for (comm::Comm* c : {comm.get(), node_comm.get(), cross_comm.get()}) c->set_timeout(timeout);

  bool measured = false;
  if (tc.peak_tflops <= 0) {
    double peak = train::measure_cpu_peak_flops();
    comm->all_reduce(&peak, &peak, 1, DType::kF64, comm::ReduceOp::kAvg);
    tc.peak_tflops = peak / 1e12;
    measured = true;
  }

  std::ofstream metrics;
  if (!tc.metrics_path.empty())
    collectively(rt, /*rank0_only=*/true, [&] {
      metrics.open(tc.metrics_path, std::ios::out | std::ios::trunc);
      if (!metrics)
        throw InputError("cannot write the metrics file '" + tc.metrics_path + "' (log.metrics)",
                         "check that its folder exists and is writable");
    });

  const data::Split split = data::split_tail(tokens.tokens.size(), tc.eval_fraction);
  log::info(strf("zt train: model %s (%lld parameters), %d rank%s x %d thread%s",
                 tc.model.name.c_str(), static_cast<long long>(tc.model.num_params()),
                 topo.world_size, topo.world_size == 1 ? "" : "s", threads,
                 threads == 1 ? "" : "s"));
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
  log::info(strf("  MFU against %.1f GFLOP/s per rank (%s); %.2f MFLOP per token (6N + 12LHQT)",
                 tc.peak_tflops * 1e3,
                 measured ? "measured fp32 GEMM" : "train.peak_tflops",
                 tc.model.flops_per_token(tc.seq_len) / 1e6));

  const int64_t steps = tc.steps;
  const int64_t every = tc.log_every;
  const auto t_start = std::chrono::steady_clock::now();
  train::TrainHooks hooks;
  hooks.on_step = [&](const train::StepRecord& r) {
    if (topo.world_rank != 0) return;
    if (r.step == 1 || r.step == steps || r.step % every == 0) log::info(step_line(r, steps));
    if (r.eval_loss) {
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
      log::info(strf("eval  step %lld | eval loss %.4f | elapsed %.1f s",
                     static_cast<long long>(r.step), *r.eval_loss, elapsed));
    }
    if (metrics.is_open()) {
      metrics << step_json(r).dump() << '\n';
      metrics.flush();
      if (!metrics) {  // only rank 0 knows: end the whole job rather than leave others waiting
        log::error("writing the metrics file '" + tc.metrics_path + "' failed (log.metrics)\n"
                   "  HINT: check free disk space");
        rt.abort(static_cast<int>(ExitCode::kFailed));
      }
    }
  };

  // SIGTERM / SIGUSR1 (Slurm's warning before a kill) only set a flag from here on: the
  // loop agrees on it at the next step boundary, saves a checkpoint and ends (exit 0).
  const ckpt::PreemptionSignals preemption;
  const train::TrainResult result =
      train::train(tc, *comm, tokens, hooks,
                   train::NodeComms{node_comm.get(), cross_comm.get(), rt.world()});
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  const train::StepRecord& last = result.steps.back();
  if (result.stopped) {
    log::info(strf("stopped at step %lld of %lld after %.1f s; resume with --set ckpt.resume=auto",
                   static_cast<long long>(last.step), static_cast<long long>(steps), total));
    return 0;
  }
  log::info(strf("done: %lld steps in %.1f s, final loss %.4f",
                 static_cast<long long>(result.steps.size()), total, last.loss) +
            (last.eval_loss ? strf(", eval loss %.4f", *last.eval_loss) : std::string()));
  if (!result.sample.empty()) {
    log::info(strf("sample (%lld tokens, temperature %g, seed %llu):",
                   static_cast<long long>(tc.sample_tokens), tc.sample_temperature,
                   static_cast<unsigned long long>(tc.sample_seed)));
    log::info("----------------------------------------");
    log::info(printable(tc.sample_prompt +
                        data::ByteTokenizer::decode(std::span<const int32_t>(result.sample))));
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
                  "the runtime.ranks_per_node key)");
  return [args]() { return run_train(*args); };
}

}  // namespace zt::apps
