// The data-parallel training loop over the ZeRO engine (see trainer.hpp).
#include "zt/train/trainer.hpp"

#include <sys/resource.h>

#include <chrono>
#include <fstream>
#include <new>
#include <optional>
#include <sstream>
#include <span>
#include <vector>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"
#include "zt/data/sampler.hpp"
#include "checkpoints.hpp"
#include "zt/train/generate.hpp"
#include "zt/train/metrics.hpp"
#include "zt/train/schedule.hpp"
#include "zt/zero/engine.hpp"

namespace zt::train {
namespace {

using Clock = std::chrono::steady_clock;

// A micro-batch of B sequences of T tokens, read from the token file.
struct Batch {
  std::vector<int32_t> tokens;   // [B, T]
  std::vector<int32_t> targets;  // [B, T], tokens shifted by one
};

// Fills sequence i of the batch from data[start, start + T].
void fill_row(Batch& b, size_t i, size_t T, const std::vector<uint32_t>& data, size_t start) {
  for (size_t t = 0; t < T; ++t) {
    b.tokens[i * T + t] = static_cast<int32_t>(data[start + t]);
    b.targets[i * T + t] = static_cast<int32_t>(data[start + t + 1]);
  }
}

void check_data_fits(const TrainConfig& cfg, const data::TokenFile& data, const data::Split& split) {
  if (static_cast<int64_t>(data.vocab_size) > cfg.model.vocab)
    throw InputError(strf("dataset '%s' has vocab_size %u, more than the model's vocabulary %lld",
                          cfg.data_path.c_str(), data.vocab_size,
                          static_cast<long long>(cfg.model.vocab)),
                     "set model.vocab to at least the dataset's vocab_size, or use a dataset "
                     "made with the model's tokenizer");
  const size_t need = static_cast<size_t>(cfg.global_batch * cfg.seq_len + 1);
  if (split.train.size() < need)
    throw InputError(strf("dataset '%s': its training part holds %zu tokens, one global batch "
                          "needs train.global_batch x train.seq_len + 1 = %zu",
                          cfg.data_path.c_str(), split.train.size(), need),
                     "use a larger dataset or lower train.global_batch / train.seq_len "
                     "(data.eval_fraction takes the tail for evaluation)");
  if (cfg.eval_fraction > 0 && split.eval.size() < static_cast<size_t>(cfg.seq_len + 1))
    throw InputError(strf("dataset '%s': its held-out tail (data.eval_fraction = %g) holds %zu "
                          "tokens, one eval sequence needs train.seq_len + 1 = %lld",
                          cfg.data_path.c_str(), cfg.eval_fraction, split.eval.size(),
                          static_cast<long long>(cfg.seq_len + 1)),
                     "raise data.eval_fraction, lower train.seq_len, or use a larger dataset");
}

// The step's comm bytes and memory figures into rec: the maximum over ranks of each (one
// all_reduce of doubles; byte counts stay exact below 2^53).
void reduce_max_over_ranks(comm::Comm& comm, const Memory& mem, const zero::StepStats& stats,
                           StepRecord& rec) {
  const zero::MemoryStats& z = stats.memory;
  std::vector<double> v = {static_cast<double>(mem.rss_bytes), static_cast<double>(mem.peak_rss_bytes),
                           static_cast<double>(stats.traffic.intra_node_bytes()),
                           static_cast<double>(stats.traffic.inter_node_bytes()),
                           static_cast<double>(z.full_params), static_cast<double>(z.param_shards),
                           static_cast<double>(z.secondary_shards), static_cast<double>(z.grads),
                           static_cast<double>(z.optimizer), static_cast<double>(z.gather_buffers),
                           static_cast<double>(z.grad_buffers), static_cast<double>(z.comm_buffers),
                           static_cast<double>(z.activations), static_cast<double>(z.peak_total)};
  for (int g = 0; g < zero::kGroupCount; ++g)
    v.push_back(static_cast<double>(stats.traffic.bytes(static_cast<zero::Group>(g))));
  comm.all_reduce(v.data(), v.data(), v.size(), DType::kF64, comm::ReduceOp::kMax);
  size_t i = 0;
  const auto next = [&] { return static_cast<size_t>(v[i++]); };
  rec.rss_bytes = next();
  rec.peak_rss_bytes = next();
  rec.intra_node_bytes = next();
  rec.inter_node_bytes = next();
  zero::MemoryStats& m = rec.zero_memory;
  m.full_params = next();
  m.param_shards = next();
  m.secondary_shards = next();
  m.grads = next();
  m.optimizer = next();
  m.gather_buffers = next();
  m.grad_buffers = next();
  m.comm_buffers = next();
  m.activations = next();
  m.peak_total = next();
  for (int g = 0; g < zero::kGroupCount; ++g) rec.comm_bytes[g] = next();
}

// MemAvailable of /proc/meminfo in bytes; 0 where unavailable.
size_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream fields(line.substr(13));
      size_t kib = 0;
      fields >> kib;
      return kib * 1024;
    }
  return 0;
}

std::string gib(double bytes) { return format_binary(static_cast<uint64_t>(bytes), BinaryUnit::kGiB, 2); }

// The error for a failed host allocation: what was being allocated (and its size when
// known), what the machine had free, and how to find a configuration that fits.
Error out_of_memory(const TrainConfig& cfg, const std::string& what) {
  rlimit as{};
  const bool limited = getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY;
  return Error(strf("out of host memory while allocating %s; MemAvailable %s (/proc/meminfo)%s, "
                    "this rank's peak RSS %s",
                    what.c_str(), gib(static_cast<double>(mem_available())).c_str(),
                    limited ? strf(", address-space limit (ulimit -v) %s",
                                   gib(static_cast<double>(as.rlim_cur)).c_str()).c_str()
                            : "",
                    gib(static_cast<double>(process_memory().peak_rss_bytes)).c_str()),
               strf("`zt estimate --config <this TOML> --gpus %d` prints the memory per rank of "
                    "each ZeRO stage and whether it fits; try zero.stage = 3, more ranks, "
                    "train.recompute = true or a smaller train.micro_batch",
                    cfg.world));
}

// The fp32 model states the engine allocates per rank, by the ZeRO paper's count with
// fp32 parameters, gradients and two AdamW moments (4 bytes each, Ψ parameters, n ranks):
// stage 0: 16Ψ; 1: 8Ψ + 8Ψ/n; 2: 4Ψ + 12Ψ/n; 3: 16Ψ/n (buffers come on top).
double model_state_bytes(const TrainConfig& cfg) {
  const double psi = static_cast<double>(cfg.model.num_params());
  const double n = static_cast<double>(cfg.world);
  switch (cfg.zero.stage) {
    case 0: return 16 * psi;
    case 1: return 8 * psi + 8 * psi / n;
    case 2: return 4 * psi + 12 * psi / n;
    default: return 16 * psi / n;
  }
}

}  // namespace

TrainResult train(const TrainConfig& cfg, comm::Comm& comm, const data::TokenFile& data,
                  const TrainHooks& hooks, const NodeComms& nodes) {
  ZT_CHECK(cfg.world == comm.size(), "TrainConfig.world differs from the communicator size",
           "resolve the configuration with the world size of the comm that trains");
  const int rank = comm.rank();
  const int world = comm.size();
  const size_t B = static_cast<size_t>(cfg.micro_batch);
  const size_t T = static_cast<size_t>(cfg.seq_len);

  const data::Split split = data::split_tail(data.tokens.size(), cfg.eval_fraction);
  check_data_fits(cfg, data, split);
  const data::Sampler sampler(split.train, T, static_cast<size_t>(cfg.global_batch), cfg.seed);
  // Held-out windows; none when data.eval_fraction is 0 (no evaluation).
  std::optional<data::EvalWindows> eval_windows;
  if (cfg.eval_fraction > 0) eval_windows.emplace(split.eval, T);

  // The engine: it initialises the parameters from train.seed (a pure function of seed,
  // tensor and index: every rank fills what it holds with the values one process would
  // have) and validates zero.* against the ranks before any collective.
  std::optional<zero::Engine> engine_storage;
  try {
    engine_storage.emplace(cfg.model, comm, nodes.node, nodes.cross, cfg.zero,
                           model::InitOptions{cfg.seed, cfg.init_std, true});
  } catch (const std::bad_alloc&) {
    throw out_of_memory(cfg, strf("the ZeRO engine for %s (%lld parameters, stage %d over %d "
                                  "ranks): about %s of fp32 model states per rank",
                                  cfg.model.name.c_str(),
                                  static_cast<long long>(cfg.model.num_params()),
                                  cfg.zero.stage, world, gib(model_state_bytes(cfg)).c_str()));
  }
  zero::Engine& engine = *engine_storage;

  // Checkpoints: ckpt.resume / ckpt.init_from now; saves on the cadence, at the end and
  // on preemption (checkpoints.hpp).
  LoopCheckpoints checkpoints(cfg, comm, nodes.mpi, engine);
  int64_t tokens_seen = 0;
  const int64_t first_step = checkpoints.start(tokens_seen);

  TrainResult result;
  result.first_step = first_step;
  result.params = cfg.model.num_params();
  result.engine = engine.describe();
  if (cfg.peak_tflops > 0) {
    result.peak_flops_per_rank = cfg.peak_tflops * 1e12;
  } else {
    double peak = measure_cpu_peak_flops();
    comm.all_reduce(&peak, &peak, 1, DType::kF64, comm::ReduceOp::kAvg);
    result.peak_flops_per_rank = peak;
  }
  const double flops_per_token = cfg.model.flops_per_token(cfg.seq_len);

  const Schedule schedule{cfg.lr, cfg.min_lr, cfg.warmup, cfg.steps};
  Batch batch{std::vector<int32_t>(B * T), std::vector<int32_t>(B * T)};

  // Mean held-out loss over eval.batches global batches of fixed windows of the tail.
  const auto evaluate = [&]() {
    double sum = 0.0;
    int64_t count = 0;
    for (int64_t b = 0; b < cfg.eval_batches; ++b)
      for (int64_t micro = 0; micro < cfg.accum; ++micro) {
        for (size_t i = 0; i < B; ++i) {
          const size_t e = static_cast<size_t>(b * cfg.global_batch) +
                           data::batch_index(static_cast<int>(micro), rank, world, B, i);
          fill_row(batch, i, T, data.tokens, eval_windows->start(e));
        }
        sum += engine.eval_loss(batch.tokens, batch.targets, cfg.micro_batch, cfg.seq_len);
        ++count;
      }
    double mean = sum / static_cast<double>(count);
    comm.all_reduce(&mean, &mean, 1, DType::kF64, comm::ReduceOp::kAvg);
    return mean;
  };

  int64_t bad_in_row = 0;  // consecutive skipped (non-finite) steps
  for (int64_t step = first_step; step < cfg.steps; ++step) {
    const auto t0 = Clock::now();
    const double lr = lr_at(schedule, step);

    // Forward/backward over this rank's micro-batches: gradients accumulate (and are
    // reduced as the stage prescribes); then the optimizer step. The step's bytes are
    // counted from here (StepStats::traffic would include an evaluation in between).
    const zero::Traffic traffic_before = engine.traffic();
    for (int64_t micro = 0; micro < cfg.accum; ++micro) {
      for (size_t i = 0; i < B; ++i)
        fill_row(batch, i, T, data.tokens,
                 sampler.start(static_cast<uint64_t>(step), static_cast<int>(micro), rank, world, B, i));
      try {
        engine.micro_step(batch.tokens, batch.targets, cfg.micro_batch, cfg.seq_len,
                          cfg.recompute, 1.0 / static_cast<double>(cfg.accum));
      } catch (const std::bad_alloc&) {
        throw out_of_memory(cfg, strf("the activations of step %lld (train.micro_batch %lld x "
                                      "train.seq_len %lld tokens, recompute %s)",
                                      static_cast<long long>(step + 1),
                                      static_cast<long long>(cfg.micro_batch),
                                      static_cast<long long>(cfg.seq_len),
                                      cfg.recompute ? "on" : "off"));
      }
    }
    zero::StepStats stats = engine.step(lr);
    stats.traffic = engine.traffic().minus(traffic_before);
    // A non-finite step was skipped by the engine (same verdict on every rank): warn;
    // too many in a row end the job before anything (a checkpoint) is saved.
    bad_in_row = stats.skipped ? bad_in_row + 1 : 0;
    if (stats.skipped) {
      if (rank == 0)
        log::warn(strf("step %lld: loss %g, gradient norm %g: NaN/Inf in the gradient of %s; "
                       "update skipped (%lld in a row, train.max_bad_steps = %lld)",
                       static_cast<long long>(step + 1), stats.loss, stats.grad_norm,
                       stats.bad_units.c_str(), static_cast<long long>(bad_in_row),
                       static_cast<long long>(cfg.max_bad_steps)));
      if (bad_in_row >= cfg.max_bad_steps)
        throw Error(strf("%lld steps in a row had a NaN/Inf loss or gradient (steps %lld-%lld; "
                         "last in %s); stopping without saving",
                         static_cast<long long>(bad_in_row),
                         static_cast<long long>(step + 2 - bad_in_row),
                         static_cast<long long>(step + 1), stats.bad_units.c_str()),
                    "training diverged or the data is bad: lower train.lr, raise train.warmup, "
                    "keep train.grad_clip on, or resume from the last checkpoint; "
                    "train.max_bad_steps sets how many bad steps in a row are tolerated");
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();

    StepRecord rec;
    rec.step = step + 1;
    rec.loss = stats.loss;
    rec.lr = lr;
    rec.grad_norm = stats.grad_norm;
    rec.clip_coef = stats.clip_coef;
    rec.skipped = stats.skipped;
    rec.step_time_s = seconds;
    rec.tokens_per_s = static_cast<double>(cfg.tokens_per_step()) / seconds;
    rec.mfu = mfu(rec.tokens_per_s, flops_per_token, world, result.peak_flops_per_rank);
    tokens_seen += cfg.tokens_per_step();
    rec.tokens_seen = tokens_seen;
    reduce_max_over_ranks(comm, process_memory(), stats, rec);
    const bool last = step + 1 == cfg.steps;
    if (eval_windows && (last || (cfg.eval_every > 0 && (step + 1) % cfg.eval_every == 0)))
      rec.eval_loss = evaluate();
    if (hooks.on_step) hooks.on_step(rec);
    result.steps.push_back(rec);
    if (checkpoints.after_step(step + 1, tokens_seen, !stats.skipped)) break;  // preempted: saved, stop
  }
  result.stopped = checkpoints.stopped();
  result.stop_signal = checkpoints.signal();
  if (result.stopped) {
    result.checkpoint = checkpoints.last_path();
    return result;  // no final evaluation or sample: the job is being ended
  }
  checkpoints.finish(cfg.steps, tokens_seen);
  result.checkpoint = checkpoints.last_path();

  if (cfg.sample_tokens > 0 && rank == 0 && data.tokenizer != "bytes")
    log::warn("no sample: the dataset's tokenizer is \"" + data.tokenizer +
              "\" and zt decodes only \"bytes\"");
  if (cfg.sample_tokens > 0 && data.tokenizer == "bytes") {
    std::vector<int32_t> prompt;
    for (const char ch : cfg.sample_prompt)
      prompt.push_back(static_cast<int32_t>(static_cast<unsigned char>(ch)));
    for (const int32_t id : prompt)
      if (id >= cfg.model.vocab)
        throw InputError("sample.prompt holds a byte outside the model vocabulary",
                         "the prompt is byte-tokenized; use a byte-level model (vocab 256)");
    // logits_last is collective (stage 3 gathers the units): every rank runs the sampler.
    // Rank 0's logits are broadcast so every rank draws the same token even if the
    // ranks' arithmetic differed in the last bit.
    const LogitsFn logits = [&](std::span<const int32_t> window, std::span<float> out) {
      engine.logits_last(window, static_cast<int64_t>(window.size()), out);
      comm.broadcast(out.data(), out.size(), DType::kF32, 0);
    };
    std::vector<int32_t> tokens =
        generate(logits, cfg.model.vocab, cfg.model.context, prompt,
                 SampleOptions{cfg.sample_tokens, cfg.sample_temperature, cfg.sample_seed, cfg.seq_len});
    if (rank == 0) result.sample = std::move(tokens);
  }
  return result;
}

}  // namespace zt::train
