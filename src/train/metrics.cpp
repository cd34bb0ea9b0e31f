// Memory from /proc, a measured CPU GEMM peak, MFU (see metrics.hpp).
#include "zt/train/metrics.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <chrono>
#include <fstream>
#include <string>
#include <nlohmann/json.hpp>
#include <vector>

#include "zt/core/error.hpp"
#include "zt/core/escape.hpp"
#include "zt/core/files.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"
#include "zt/kernels/linear.hpp"

namespace zt::train {

Memory process_memory() {
  Memory m;
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    size_t kib = 0;
    if (key == "VmRSS:" && in >> kib) m.rss_bytes = kib * 1024;
    else if (key == "VmHWM:" && in >> kib) m.peak_rss_bytes = kib * 1024;
    in.ignore(4096, '\n');
  }
  return m;
}

double measure_cpu_peak_flops() {
  constexpr int64_t N = 256, in = 512, out = 512;
  // y [N, out] = x [N, in] W^T, W [out, in]
  std::vector<float> x(N * in), W(out * in), y(N * out);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 13) * 0.01f;
  for (size_t i = 0; i < W.size(); ++i) W[i] = static_cast<float>(i % 7) * 0.01f;
  const double flops_per_call = 2.0 * N * in * out;  // ~134 MFLOP, a few ms
  kernels::cpu::linear_forward(y.data(), x.data(), W.data(), N, in, out);  // warm-up
  // The fastest single call: on a shared machine some calls run without being
  // preempted, so the best one approaches the uncontended rate even under load.
  double best = 0.0;
  const auto start = std::chrono::steady_clock::now();
  for (int calls = 0; calls < 20 || std::chrono::duration<double>(
                                        std::chrono::steady_clock::now() - start).count() < 0.3;
       ++calls) {
    const auto t0 = std::chrono::steady_clock::now();
    kernels::cpu::linear_forward(y.data(), x.data(), W.data(), N, in, out);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, flops_per_call / s);
  }
  return best;
}

double peak_flops_per_rank(double peak_tflops, comm::Comm& comm) {
  if (peak_tflops > 0) return peak_tflops * 1e12;
  double peak = measure_cpu_peak_flops();
  comm.all_reduce(&peak, &peak, 1, DType::kF64, comm::ReduceOp::kAvg);
  return peak;
}

double mfu(double tokens_per_s, double flops_per_token, int ranks, double peak_flops_per_rank) {
  if (peak_flops_per_rank <= 0.0 || ranks <= 0) return 0.0;
  return tokens_per_s * flops_per_token / (static_cast<double>(ranks) * peak_flops_per_rank);
}

namespace {
// " | offload d2h 0.012 adam 0.210 h2d 0.011 stall 0.004 s" (nothing without offload).
std::string offload_phases(const zero::OffloadTimes& o) {
  if (!o.active) return {};
  return strf(" | offload d2h %.3f adam %.3f h2d %.3f stall %.3f s", o.d2h_s, o.adam_s, o.h2d_s,
              o.stall_s);
}
}  // namespace

namespace {
// TRL's names and means of the pair metrics (prefix "" or "eval_").
void add_pairs(nlohmann::json& j, const PairMetrics& p, const std::string& prefix) {
  if (p.unpaired) {  // KTO: each label's means where it has rows, as TRL logs them
    if (p.chosen > 0) {
      j[prefix + "rewards/chosen"] = p.rewards_chosen / p.chosen;
      j[prefix + "logps/chosen"] = p.logps_chosen / p.chosen;
    }
    if (p.rejected > 0) {
      j[prefix + "rewards/rejected"] = p.rewards_rejected / p.rejected;
      j[prefix + "logps/rejected"] = p.logps_rejected / p.rejected;
    }
    if (p.chosen > 0 && p.rejected > 0)
      j[prefix + "rewards/margins"] = p.rewards_chosen / p.chosen - p.rewards_rejected / p.rejected;
    j[prefix + "kl"] = p.kl / (p.pairs > 0 ? p.pairs : 1);
    return;
  }
  const double n = p.pairs > 0 ? p.pairs : 1;
  j[prefix + "rewards/chosen"] = p.rewards_chosen / n;
  j[prefix + "rewards/rejected"] = p.rewards_rejected / n;
  j[prefix + "rewards/accuracies"] = p.accuracies / n;
  j[prefix + "rewards/margins"] = p.margins / n;
  j[prefix + "logps/chosen"] = p.logps_chosen / n;
  j[prefix + "logps/rejected"] = p.logps_rejected / n;
}
std::string pairs_text(const PairMetrics& p, const char* prefix) {
  if (p.unpaired)
    return strf(" | %skl %.4f | %srewards/chosen %.4f rejected %.4f | %slogps/chosen %.3f rejected %.3f", prefix,
                p.kl / std::max(p.pairs, 1.0), prefix, p.rewards_chosen / std::max(p.chosen, 1.0),
                p.rewards_rejected / std::max(p.rejected, 1.0), prefix, p.logps_chosen / std::max(p.chosen, 1.0),
                p.logps_rejected / std::max(p.rejected, 1.0));
  const double n = p.pairs > 0 ? p.pairs : 1;
  return strf(" | %srewards/chosen %.4f rejected %.4f accuracies %.3f margins %.4f | %slogps/chosen "
              "%.3f rejected %.3f",
              prefix, p.rewards_chosen / n, p.rewards_rejected / n, p.accuracies / n, p.margins / n,
              prefix, p.logps_chosen / n, p.logps_rejected / n);
}
}  // namespace

namespace {
// Mixture of experts: " | aux 1.0312 imbalance 1.42" (verbose: and the tokens per expert).
std::string router_text(const StepRecord& r, bool verbose = false) {
  if (!r.router) return {};
  std::string s = strf(" | aux %.4f imbalance %.2f", r.router->aux, r.router->imbalance);
  if (verbose) {
    s += " | tokens/expert";
    for (const double t : r.router->tokens) s += strf(" %.0f", t);
  }
  return s;
}
}  // namespace

std::string step_line(const StepRecord& r, int64_t steps, bool verbose) {
  if (!verbose) {
    std::string line =
        strf("step %5lld/%lld | loss %.4f | lr %.2e | gnorm %6.3f%s | %7.0f tok/s | MFU %4.1f%% | %.3f s",
             static_cast<long long>(r.step), static_cast<long long>(steps), r.loss, r.lr,
             r.grad_norm, r.skipped ? " skip" : r.clip_coef < 1.0 ? " clip" : "",
             r.tokens_per_s, 100.0 * r.mfu, r.step_time_s);
    if (r.pairs && r.pairs->unpaired) {  // KTO: the KL estimate and the rewards' margin
      const PairMetrics& p = *r.pairs;
      line += strf(" | kl %.4f margin %.4f", p.kl / std::max(p.pairs, 1.0),
                   p.rewards_chosen / std::max(p.chosen, 1.0) - p.rewards_rejected / std::max(p.rejected, 1.0));
    } else if (r.pairs) {  // the preference objectives' two essentials (TRL's names in the JSON)
      const double n = r.pairs->pairs > 0 ? r.pairs->pairs : 1;
      line += strf(" | acc %.3f margin %.4f", r.pairs->accuracies / n, r.pairs->margins / n);
    }
    return line + router_text(r);
  }
  const zero::MemoryStats& m = r.zero_memory;
  const auto mib = [](size_t bytes) { return format_binary(bytes, BinaryUnit::kMiB, 1); };
  const std::string trained =
      r.trained_tokens ? strf(" | %lld trained", static_cast<long long>(*r.trained_tokens)) : "";
  return strf("step %5lld/%lld | loss %.4f | lr %.2e | grad norm %6.3f%s | %8.0f tok/s%s | MFU %5.1f%% "
              "| mem %s (peak %s) | comm intra %s inter %s | states %s + work %s (peak %s) | %.3f s",
              static_cast<long long>(r.step), static_cast<long long>(steps), r.loss, r.lr,
              r.grad_norm, r.clip_coef < 1.0 ? " (clipped)" : "", r.tokens_per_s, trained.c_str(),
              100.0 * r.mfu,
              mib(r.rss_bytes).c_str(), mib(r.peak_rss_bytes).c_str(),
              format_si(r.intra_node_bytes).c_str(), format_si(r.inter_node_bytes).c_str(),
              mib(m.model_states()).c_str(), mib(m.total() - m.model_states()).c_str(),
              mib(m.peak_total).c_str(), r.step_time_s) + offload_phases(r.offload) +
         (r.pairs ? pairs_text(*r.pairs, "") : "") + (r.eval_pairs ? pairs_text(*r.eval_pairs, "eval_") : "") +
         router_text(r, verbose);
}

std::string step_json(const StepRecord& r) {
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
  nlohmann::json memory;
  for (const zero::MemoryField& f : zero::kMemoryFields) memory[f.key] = m.*f.bytes;
  memory["model_states"] = m.model_states();
  memory["total"] = m.total();
  memory["peak_total"] = m.peak_total;
  j["memory"] = memory;
  if (r.offload.active)
    j["offload"] = {{"d2h_s", r.offload.d2h_s},         {"adam_s", r.offload.adam_s},
                    {"h2d_s", r.offload.h2d_s},         {"stall_s", r.offload.stall_s},
                    {"d2h_bytes", r.offload.d2h_bytes}, {"h2d_bytes", r.offload.h2d_bytes}};
  if (r.eval_loss) j["eval_loss"] = *r.eval_loss;
  if (r.pairs) add_pairs(j, *r.pairs, "");
  if (r.eval_pairs) add_pairs(j, *r.eval_pairs, "eval_");
  if (r.trained_tokens) j["trained_tokens"] = *r.trained_tokens;
  if (r.router)
    j["router"] = {{"tokens_per_expert", r.router->tokens},
                   {"imbalance", r.router->imbalance},
                   {"aux_loss", r.router->aux}};
  return json_dump(j);
}

std::string checkpoint_json(const CheckpointRecord& c) {
  return json_dump(nlohmann::json{{"step", c.step},
                                  {"checkpoint",
                                   {{"path", c.path},
                                    {"bytes", c.bytes},
                                    {"seconds", c.seconds},
                                    {"stall_s", c.stall_s},
                                    {"background", c.background}}}});
}

MetricsFile::~MetricsFile() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsFile::open(const std::string& path, int64_t first_step, bool replace) {
  path_ = path;
  const std::string name = "log.metrics = '" + path + "'";
  const char* hint = "name a new file for log.metrics (or leave it empty)";
  require_output_folder(path, "log.metrics file");
  struct stat st{};
  const bool exists = ::lstat(path.c_str(), &st) == 0;
  if (!exists && errno != ENOENT)
    throw InputError(strf("%s: %s (errno %d)", name.c_str(), std::strerror(errno), errno), hint);
  if (exists && S_ISLNK(st.st_mode))
    throw InputError(name + " is a symbolic link; zt never writes through one", hint);
  if (exists && !S_ISREG(st.st_mode))
    throw InputError(name + " is not a regular file", hint);
  if (exists && st.st_size > 0) {
    if (first_step == 0 && !replace)
      throw InputError(name + " already holds another run's lines, and this run starts fresh",
                       "resume that run (ckpt.resume=auto) to continue the file, name another "
                       "file, or set ckpt.overwrite = true to replace it");
    // Keep the lines up to the checkpoint's step; a fresh run with `replace` keeps none.
    std::ifstream in(path, std::ios::binary);
    std::string line, kept;
    int64_t number = 0;
    bool cut = false;  // the previous line did not parse: only the last may be so
    while (std::getline(in, line)) {
      ++number;
      if (cut)
        throw InputError(strf("%s: line %lld is not a metrics record (JSON with \"step\"): not "
                              "a file zt wrote, so it is left as it is",
                              name.c_str(), static_cast<long long>(number - 1)),
                         hint);
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) {
        cut = true;  // a line cut short by a kill, if it is the last
        continue;
      }
      if (first_step > 0 && j["step"].get<int64_t>() <= first_step) kept += line + "\n";
    }
    if (in.bad())
      throw InputError(strf("%s: reading it failed: %s", name.c_str(), std::strerror(errno)), hint);
    if (cut && number == 1)
      throw InputError(name + ": its only line is not a metrics record: not a file zt wrote", hint);
    write_file_safely(path, kept, "log.metrics file");
    fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
  } else {
    if (exists) unlink_if_there(path, "log.metrics file");  // empty: nothing to lose
    fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  }
  if (fd_ < 0)
    throw InputError(strf("cannot write %s: %s (errno %d)", name.c_str(), std::strerror(errno), errno),
                     "check that its folder exists and is writable");
}

void MetricsFile::write(const StepRecord& r) { write_line(step_json(r)); }

void MetricsFile::write_line(const std::string& json) {
  const std::string line = json + "\n";
  write_all(fd_, line.data(), line.size(), path_, "log.metrics file");
}

}  // namespace zt::train
