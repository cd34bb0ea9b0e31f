// GPU stress as a stage of `zt check` (stress_stage.hpp): every rank stresses its own GPU
// at once, then the samples travel to every rank as JSON (the same keys as report.json's
// "stress").
#include "stress_stage.hpp"

#include <chrono>

#include "zt/check/stages.hpp"
#include "zt/core/escape.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"

// The JSON of a sample: its fields by name (a missing key is an error when read back).
namespace zt::kernels::cuda {
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(GemmBurn, n, calls, seconds, tflops, slowest_window_tflops, checked, wrong)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(HbmBandwidth, bytes, passes, seconds, gbs, wrong)
}  // namespace zt::kernels::cuda

namespace zt::check {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StressSample, rank, node, host, device, device_name, expected_gpus, skipped, off,
                                   gemm_error, hbm_error, gemm, hbm)

using nlohmann::json;

std::vector<int> stress_devices(const std::vector<RankInfo>& ranks, int me) {
  const RankInfo& info = ranks[static_cast<size_t>(me)];
  if (info.device < 0) return {};
  int on_node = 0;
  for (const RankInfo& r : ranks) on_node += r.node == info.node ? 1 : 0;
  if (on_node > 1 || info.visible_gpus <= 1) return {info.device};
  std::vector<int> all;
  for (int d = 0; d < info.visible_gpus; ++d) all.push_back(d);
  return all;
}

std::vector<StressSample> run_stress(comm::Comm& control, const std::vector<RankInfo>& ranks, int me,
                                     double seconds, int expected_gpus) {
  const RankInfo& info = ranks[static_cast<size_t>(me)];
  const std::vector<int> devices = stress_devices(ranks, me);
  std::vector<StressSample> mine;
  if (seconds > 0.0 && !devices.empty()) {
    mine = measure_stress(devices, seconds);
  } else {
    StressSample s;
    s.device = info.device;
    s.device_name = info.device_name;
    s.off = seconds <= 0.0;
    s.skipped = s.off ? "stress off (--burn-seconds 0)" : "no GPU bound to this rank";
    mine.push_back(s);
  }
  for (StressSample& s : mine) {
    s.rank = me;
    s.node = info.node;
    s.host = info.host;
    s.expected_gpus = expected_gpus;
  }
  // The gather waits for the slowest rank's stress (a rank without a GPU arrives at once):
  // the control comm's timeout is raised by the stress's own length meanwhile (the burn,
  // its warm-up, the HBM test, a minute of set-up), so --timeout keeps meaning one collective.
  struct Restore {
    comm::Comm& comm;
    std::chrono::milliseconds saved;
    ~Restore() { comm.set_timeout(saved); }
  } restore{control, control.timeout()};
  control.set_timeout(restore.saved + std::chrono::milliseconds(static_cast<int64_t>(
                                          (seconds * 1.2 + 2.0 + 60.0) * 1000.0)));
  std::vector<StressSample> all;
  for (const std::string& text : gather_strings(control, json_dump(stress_json(mine))))
    for (StressSample& s : stress_from_json(json::parse(text))) all.push_back(std::move(s));
  return all;
}

json stress_json(const std::vector<StressSample>& samples) { return samples; }

std::vector<StressSample> stress_from_json(const json& j) { return j.get<std::vector<StressSample>>(); }

std::string stress_text(const std::vector<StressSample>& samples, double seconds) {
  std::string s = strf("#\n# GPU stress (bf16 GEMM burn through cuBLASLt for %.1f s, then the HBM copy), each "
                       "GPU alone; verdicts (gpu.gemm, gpu.hbm) with the node health\n",
                       seconds);
  for (const StressSample& x : samples) {
    s += strf("#   rank %d on %s: ", x.rank, x.host.c_str());
    if (!x.skipped.empty()) {
      s += x.skipped + "\n";
      continue;
    }
    s += strf("CUDA device %d (%s): ", x.device, x.device_name.c_str());
    s += x.gemm_measured() ? strf("GEMM %.1f TFLOP/s (slowest window %.1f), %lld wrong", x.gemm.tflops,
                                  x.gemm.slowest_window_tflops, static_cast<long long>(x.gemm.wrong))
                           : "GEMM failed: " + x.gemm_error;
    s += x.hbm_measured() ? strf("; HBM %.0f GB/s, %lld wrong\n", x.hbm.gbs, static_cast<long long>(x.hbm.wrong))
                          : "; HBM failed: " + x.hbm_error + "\n";
  }
  return s;
}

std::string stress_markdown(const std::vector<StressSample>& samples) {
  bool any = false;
  for (const StressSample& x : samples) any = any || x.skipped.empty();
  if (!any)
    return "## GPU stress\n\nNot run: " + (samples.empty() ? std::string("no ranks") : markdown_text(samples.front().skipped)) +
           ".\n\n";
  std::string s = "## GPU stress\n\nEach rank's GPU alone, all at once: a bf16 GEMM burn through cuBLASLt, then a "
                  "device-to-device copy (HBM bandwidth, read + write). Verdicts: the `gpu.gemm` and `gpu.hbm` rows "
                  "of Node health.\n\n| rank | node | GPU | GEMM TFLOP/s | slowest window | HBM GB/s | wrong | note |\n"
                  "|---|---|---|---|---|---|---|---|\n";
  for (const StressSample& x : samples) {
    const bool g = x.gemm_measured(), h = x.hbm_measured();
    std::string note = x.skipped;
    for (const std::string* e : {&x.gemm_error, &x.hbm_error})
      if (!e->empty()) note += (note.empty() ? "" : "; ") + *e;
    s += strf("| %d | %d (%s) | %s | %s | %s | %s | %s | %s |\n", x.rank, x.node, markdown_text(x.host).c_str(),
              x.device < 0 ? "-" : strf("%d (%s)", x.device, markdown_text(x.device_name).c_str()).c_str(),
              g ? strf("%.1f", x.gemm.tflops).c_str() : "-", g ? strf("%.1f", x.gemm.slowest_window_tflops).c_str() : "-",
              h ? strf("%.0f", x.hbm.gbs).c_str() : "-",
              g || h ? strf("%lld", static_cast<long long>((g ? x.gemm.wrong : 0) + (h ? x.hbm.wrong : 0))).c_str() : "-",
              markdown_text(note).c_str());
  }
  return s + "\n";
}

}  // namespace zt::check
