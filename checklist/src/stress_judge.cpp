// The verdicts of the GPU stress (include/zt/check/stress.hpp): each GPU against its row of
// data/gpus.csv and against the median of its node's GPUs. The rules and their reasons are
// docs/checklist.md's "GPU stress".
#include <algorithm>
#include <map>

#include "gpu_checks.hpp"
#include "zt/check/stress.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"

namespace zt::check {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// What was measured, in words and numbers (the verdict is added by the caller).
std::string describe_gemm(const StressSample& s, HealthCheck& c) {
  const kernels::cuda::GemmBurn& g = s.gemm;
  add_number(c, "tflops", g.tflops);
  add_number(c, "slowest_window_tflops", g.slowest_window_tflops);
  add_number(c, "seconds", g.seconds);
  add_number(c, "products", static_cast<double>(g.calls));
  add_number(c, "n", static_cast<double>(g.n));
  add_number(c, "checked", static_cast<double>(g.checked));
  add_number(c, "wrong", static_cast<double>(g.wrong));
  return strf("%.1f TFLOP/s bf16 (%lld products of %lld^3 in %.1f s; slowest window %.1f)", g.tflops,
              static_cast<long long>(g.calls), static_cast<long long>(g.n), g.seconds, g.slowest_window_tflops);
}

std::string describe_hbm(const StressSample& s, HealthCheck& c) {
  const kernels::cuda::HbmBandwidth& h = s.hbm;
  add_number(c, "gbs", h.gbs);
  add_number(c, "bytes", static_cast<double>(h.bytes));
  add_number(c, "passes", static_cast<double>(h.passes));
  add_number(c, "seconds", h.seconds);
  add_number(c, "checked", static_cast<double>(h.bytes / 16));
  add_number(c, "wrong", static_cast<double>(h.wrong));
  return strf("%.0f GB/s read+write (%lld copies of %s in %.2f s)", h.gbs, static_cast<long long>(h.passes),
              format_size_approx(h.bytes).c_str(), h.seconds);
}

// One of the two tests (GEMM burn, HBM copy), as the judge sees it.
struct Kind {
  const char* name;       // gpu.gemm
  const char* unit;       // TFLOP/s
  const char* reference;  // "bf16 peak"
  double warn_of_reference, fail_of_reference;
  bool (StressSample::*measured)() const;
  std::string StressSample::*error;
  double (*value)(const StressSample&);
  double (*table_value)(const estimate::GpuSpec&);
  std::string (*describe)(const StressSample&, HealthCheck&);
  int64_t (*wrong)(const StressSample&);
  int64_t (*checked)(const StressSample&);
};

HealthCheck make(const Kind& k, const StressSample& s, const std::string& subject) {
  HealthCheck c;
  c.name = k.name;
  c.node = s.node;
  c.host = s.host;
  c.subject = subject;
  return c;
}

std::string subject_of(const StressSample& s) {
  return strf("rank %d, CUDA device %d (%s)", s.rank, s.device, s.device_name.c_str());
}

void judge_one(const Kind& k, const StressSample& s, const std::vector<estimate::GpuSpec>& table,
               const std::string& table_note, double node_median, size_t node_measured, const StressRules& rules,
               std::vector<HealthCheck>& out) {
  HealthCheck c = make(k, s, subject_of(s));
  std::string msg = k.describe(s, c);
  const double v = k.value(s);
  const int64_t wrong = k.wrong(s), checked = k.checked(s);
  std::string why;
  if (wrong > 0) {
    raise(c, HealthStatus::kFail, HealthAction::kDrain);
    why += strf("; %lld of %lld results WRONG: the GPU computes or stores wrong values, replace it",
                static_cast<long long>(wrong), static_cast<long long>(checked));
  }
  const estimate::GpuSpec* row = estimate::gpu_for_device(table, s.device_name);
  const double ref = row != nullptr ? k.table_value(*row) : 0.0;
  if (ref > 0.0) {
    const double of = v / ref;
    add_number(c, "table", ref);
    add_number(c, "of_table", of);
    msg += strf(", %.2f of the %s %.0f %s (%s, data/gpus.csv)", of, k.reference, ref, k.unit, row->name.c_str());
    if (of < k.fail_of_reference) {
      raise(c, HealthStatus::kFail, HealthAction::kDrain);
      why += strf("; below %.2f of the %s", k.fail_of_reference, k.reference);
    } else if (of < k.warn_of_reference) {
      raise(c, HealthStatus::kWarn, HealthAction::kMonitor);
      why += strf("; below %.2f of the %s", k.warn_of_reference, k.reference);
    }
  } else {
    msg += row == nullptr ? strf(", no %s to compare with (%s)", k.reference,
                                 table_note.empty() ? "no row of data/gpus.csv for this GPU" : table_note.c_str())
                          : strf(", no %s in data/gpus.csv's row %s", k.reference, row->name.c_str());
  }
  if (node_measured >= 2 && node_median > 0.0) {
    const double of = v / node_median;
    add_number(c, "node_median", node_median);
    add_number(c, "of_node_median", of);
    msg += strf(", %.2f of the node's median %.1f over %zu GPUs", of, node_median, node_measured);
    if (of < rules.fail_of_median) {
      raise(c, HealthStatus::kFail, HealthAction::kDrain);
      why += strf("; below %.2f of its node's median: the slow GPU of the node", rules.fail_of_median);
    } else if (of < rules.warn_of_median) {
      raise(c, HealthStatus::kWarn, HealthAction::kMonitor);
      why += strf("; below %.2f of its node's median", rules.warn_of_median);
    }
  }
  msg += strf("; %lld results checked, %lld wrong", static_cast<long long>(checked), static_cast<long long>(wrong));
  c.message = msg + why;
  out.push_back(std::move(c));
}

}  // namespace

std::vector<estimate::GpuSpec> stress_table(std::string* why_not) {
  try {
    return estimate::load_shipped_gpus();
  } catch (const Error& e) {
    if (why_not != nullptr) *why_not = e.message();
    return {};
  }
}

std::vector<HealthCheck> judge_stress(const std::vector<StressSample>& samples,
                                      const std::vector<estimate::GpuSpec>& table,
                                      const std::string& table_note, const StressRules& rules) {
  const Kind kinds[] = {
      {"gpu.gemm", "TFLOP/s", "bf16 peak", rules.gemm_warn_of_peak, rules.gemm_fail_of_peak,
       &StressSample::gemm_measured, &StressSample::gemm_error,
       [](const StressSample& s) { return s.gemm.tflops; }, [](const estimate::GpuSpec& g) { return g.bf16_tflops; },
       describe_gemm, [](const StressSample& s) { return s.gemm.wrong; },
       [](const StressSample& s) { return s.gemm.checked; }},
      {"gpu.hbm", "GB/s", "memory bandwidth", rules.hbm_warn_of_table, rules.hbm_fail_of_table,
       &StressSample::hbm_measured, &StressSample::hbm_error, [](const StressSample& s) { return s.hbm.gbs; },
       [](const estimate::GpuSpec& g) { return g.bandwidth_gb_s; }, describe_hbm,
       [](const StressSample& s) { return s.hbm.wrong; },
       [](const StressSample& s) { return static_cast<int64_t>(s.hbm.bytes / 16); }}};
  std::map<int, std::vector<const StressSample*>> nodes;  // node -> its ranks' samples, in rank order
  for (const StressSample& s : samples) nodes[s.node].push_back(&s);
  std::vector<HealthCheck> out;
  for (const Kind& k : kinds) {
    for (const auto& [node, mine] : nodes) {
      std::vector<double> values;
      bool any_error = false;
      for (const StressSample* s : mine) {
        if ((s->*k.measured)()) values.push_back(k.value(*s));
        any_error = any_error || !(s->*k.error).empty();
      }
      if (values.empty() && !any_error) {
        // Nothing measured on this node: one check for the node, SKIP or UNKNOWN.
        const StressSample& first = *mine.front();
        HealthCheck c = make(k, first, "node");
        const bool expected = first.expected_gpus > 0 && !first.off;
        c.status = expected ? HealthStatus::kUnknown : HealthStatus::kSkip;
        c.message = expected ? strf("%s, but %d GPUs are expected here: the stress could not run",
                                    first.skipped.c_str(), first.expected_gpus)
                             : first.skipped;
        out.push_back(std::move(c));
        continue;
      }
      const double node_median = values.empty() ? 0.0 : median(values);
      for (const StressSample* s : mine) {
        if (!(s->*k.error).empty()) {
          HealthCheck c = make(k, *s, subject_of(*s));
          raise(c, HealthStatus::kFail, HealthAction::kResetGpu);
          c.message = "failed under stress: " + s->*k.error;
          out.push_back(std::move(c));
        } else if ((s->*k.measured)()) {
          judge_one(k, *s, table, table_note, node_median, values.size(), rules, out);
        }
      }
    }
  }
  return out;
}

}  // namespace zt::check
