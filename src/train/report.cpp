// The run report: reading metrics files, the summary figures, report.md / .json / .csv
// (see report.hpp; the plots: report_plots.cpp).
#include "zt/train/report.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include "zt/core/error.hpp"
#include "zt/core/escape.hpp"
#include "zt/core/files.hpp"
#include "zt/core/outputs.hpp"
#include "zt/core/gnuplot.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"

namespace zt::train {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void flatten_into(const nlohmann::json& j, const std::string& prefix, std::map<std::string, double>& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it->is_object()) flatten_into(*it, key, out);
    else if (it->is_number()) out[key] = it->get<double>();
    else if (it->is_null()) out[key] = kNaN;  // NaN and Inf are written as null
  }
}

// One file's records: the run records, steps and checkpoints in file order.
struct FileRecords {
  std::vector<nlohmann::json> runs, checkpoints;
  std::map<int64_t, nlohmann::json> steps;
  std::vector<std::string> notes;
};

FileRecords read_file(const std::string& path) {
  const char* hint = "give zt report the log.metrics files of zt train (JSON lines)";
  const std::string text = read_regular_file(path, "metrics file", hint, /*allow_empty=*/false);
  FileRecords f;
  size_t start = 0;
  int64_t number = 0;
  std::string cut;  // a line that did not parse: only the last may be so
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    const bool last = end == std::string::npos || end + 1 == text.size();
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    ++number;
    if (line.empty()) continue;
    if (!cut.empty())
      throw InputError(strf("metrics file '%s': line %lld is not a metrics record (a JSON object "
                            "with an integer \"step\")",
                            path.c_str(), static_cast<long long>(number - 1)),
                       hint);
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer() ||
        (j.contains("run") && !j["run"].is_object()) ||
        (j.contains("checkpoint") && !j["checkpoint"].is_object())) {
      cut = line;
      if (last) f.notes.push_back(strf("%s: its last line (%lld) is cut short (a kill?): left out",
                                       path.c_str(), static_cast<long long>(number)));
      continue;
    }
    const int64_t step = j["step"].get<int64_t>();
    if (j.contains("run")) f.runs.push_back(j);
    else if (j.contains("checkpoint")) f.checkpoints.push_back(j);
    else f.steps[step] = j;
  }
  if (f.runs.empty() && f.steps.empty() && f.checkpoints.empty())
    throw InputError("metrics file '" + path + "' holds no metrics record", hint);
  return f;
}

double median(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }), v.end());
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

nlohmann::json number_or_null(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); }

std::string name_of(const std::string& path) { return std::filesystem::path(path).filename().string(); }

}  // namespace

std::map<std::string, double> flatten_numbers(const nlohmann::json& record) {
  std::map<std::string, double> out;
  flatten_into(record, "", out);
  return out;
}

StepTable step_table(const std::vector<RunSeries>& runs) {
  StepTable t;
  t.rows.resize(runs.size());
  for (size_t i = 0; i < runs.size(); ++i)
    for (const auto& [step, rec] : runs[i].steps) {
      t.rows[i].push_back(flatten_numbers(rec));
      for (const auto& [k, x] : t.rows[i].back()) t.keys.insert(k);
    }
  t.keys.erase("step");
  return t;
}

namespace {

// The run record's facts a resume keeps: pieces that differ in one are other runs.
const char* const kRunIdentity[] = {"model", "parameters", "layers", "hidden", "vocab", "data",
                                    "data_tokens", "tokenizer", "optimizer", "finetune"};

// Why the file `f`, whose steps follow those of `prev` (its first step `first`), is not a
// piece of that run; "" when it is: both have run records that agree on kRunIdentity, and
// it resumed from the run's last checkpoint (no checkpoint of the run after the step it
// resumed at: else it is another continuation of the same parent).
std::string join_refusal(const RunSeries& prev, const FileRecords& f, int64_t first) {
  if (prev.run.is_null() || f.runs.empty()) return "no run record in both files to show it continues the run";
  const nlohmann::json& run = f.runs.front()["run"];  // objects both (read_file)
  for (const char* key : kRunIdentity) {
    const nlohmann::json a = prev.run.value(key, nlohmann::json()), b = run.value(key, nlohmann::json());
    if (a != b) return strf("its run record says %s = %s, the run's %s", key, json_dump(b).c_str(), json_dump(a).c_str());
  }
  for (const nlohmann::json& c : prev.checkpoints)
    if (c["step"].get<int64_t>() >= first)
      return strf("it resumed at step %lld, but the run saved a checkpoint at step %lld: another "
                  "continuation of the same run", static_cast<long long>(first - 1),
                  static_cast<long long>(c["step"].get<int64_t>()));
  return {};
}

}  // namespace

std::vector<RunSeries> read_runs(const std::vector<std::string>& files) {
  if (files.empty()) throw InputError("no metrics file given", "name one or more log.metrics files");
  std::vector<RunSeries> runs;
  for (const std::string& path : files) {
    FileRecords f = read_file(path);
    const int64_t first = f.steps.empty() ? -1 : f.steps.begin()->first;
    RunSeries* prev = runs.empty() ? nullptr : &runs.back();
    const bool follows = prev != nullptr && first >= 0 && !prev->steps.empty() &&
                         first > prev->steps.begin()->first && first <= prev->steps.rbegin()->first + 1;
    const std::string refusal = follows ? join_refusal(*prev, f, first) : std::string();
    const bool joins = follows && refusal.empty();
    if (follows && !joins)
      prev->notes.push_back(name_of(path) + " is not joined to " + prev->label + ": " + refusal +
                            "; drawn as a run of its own");
    if (prev != nullptr && first >= 0 && !prev->steps.empty() && !joins &&
        first > prev->steps.rbegin()->first + 1)
      prev->notes.push_back(strf("%s starts at step %lld, after a gap (the series before ends at "
                                 "step %lld): drawn as a run of its own",
                                 name_of(path).c_str(), static_cast<long long>(first),
                                 static_cast<long long>(prev->steps.rbegin()->first)));
    if (!joins) {
      runs.emplace_back();
      RunSeries& s = runs.back();
      s.label = name_of(path);
    } else {
      prev->label += " + " + name_of(path);
      prev->resumed_at.push_back(first - 1);  // the steps done when the piece started
      prev->steps.erase(prev->steps.lower_bound(first), prev->steps.end());
      std::erase_if(prev->checkpoints, [&](const nlohmann::json& c) { return c["step"].get<int64_t>() >= first; });
    }
    RunSeries& s = runs.back();
    s.files.push_back(path);
    for (const nlohmann::json& r : f.runs) {
      const int64_t at = r["step"].get<int64_t>();
      if (s.run.is_null()) s.run = r["run"];
      else if (at > 0 && std::find(s.resumed_at.begin(), s.resumed_at.end(), at) == s.resumed_at.end())
        s.resumed_at.push_back(at);
    }
    for (nlohmann::json& c : f.checkpoints) {
      nlohmann::json rec = c["checkpoint"];
      rec["step"] = c["step"];
      s.checkpoints.push_back(std::move(rec));
    }
    for (auto& [step, rec] : f.steps) s.steps[step] = std::move(rec);
    for (std::string& n : f.notes) s.notes.push_back(std::move(n));
  }
  return runs;
}

nlohmann::json run_summary(const RunSeries& s) {
  nlohmann::json j;
  std::vector<double> tps, mfu;
  double final_loss = kNaN, final_eval = kNaN, best_eval = kNaN, wall = 0;
  int64_t best_eval_step = -1, skipped = 0, clipped = 0, tokens = 0;
  std::map<std::string, double> peak, comm_sum;
  for (const auto& [step, rec] : s.steps) {
    const std::map<std::string, double> v = flatten_numbers(rec);
    const auto get = [&](const char* k) { auto it = v.find(k); return it == v.end() ? kNaN : it->second; };
    const double loss = get("loss"), grad = get("grad_norm");
    if (!std::isfinite(loss) || !std::isfinite(grad)) ++skipped;
    else final_loss = loss;
    if (get("clip_coef") < 1.0) ++clipped;
    tps.push_back(get("tokens_per_s"));
    mfu.push_back(get("mfu"));
    if (std::isfinite(get("step_time_s"))) wall += get("step_time_s");
    if (std::isfinite(get("tokens"))) tokens = static_cast<int64_t>(get("tokens"));
    if (const double e = get("eval_loss"); std::isfinite(e)) {
      final_eval = e;
      if (!std::isfinite(best_eval) || e < best_eval) best_eval = e, best_eval_step = step;
    }
    for (const auto& [k, x] : v) {
      if (!std::isfinite(x)) continue;
      if (k.rfind("memory.", 0) == 0 || k == "peak_rss_bytes") peak[k] = std::max(peak[k], x);
      if (k.rfind("comm_bytes.", 0) == 0 || k == "comm_intra_node_bytes" || k == "comm_inter_node_bytes")
        comm_sum[k] += x;
    }
  }
  const double n = static_cast<double>(s.steps.size());
  j["steps"] = s.steps.size();
  j["last_step"] = s.steps.empty() ? 0 : s.steps.rbegin()->first;
  j["tokens"] = tokens;
  j["final_loss"] = number_or_null(final_loss);
  j["final_eval_loss"] = number_or_null(final_eval);
  j["best_eval_loss"] = number_or_null(best_eval);
  j["best_eval_step"] = best_eval_step;
  j["median_tokens_per_s"] = number_or_null(median(tps));
  j["median_mfu"] = number_or_null(median(mfu));
  j["step_time_s_total"] = wall;
  j["skipped_steps"] = skipped;
  j["clipped_steps"] = clipped;
  j["peak_memory_bytes"] = nlohmann::json::object();
  for (const auto& [k, x] : peak) j["peak_memory_bytes"][k] = x;
  j["comm_bytes_per_step"] = nlohmann::json::object();
  for (const auto& [k, x] : comm_sum) j["comm_bytes_per_step"][k] = x / n;
  double ckpt_total = 0, ckpt_max = 0;
  for (const nlohmann::json& c : s.checkpoints) {
    const double t = c.value("seconds", 0.0);
    ckpt_total += t;
    ckpt_max = std::max(ckpt_max, t);
  }
  j["checkpoints"] = s.checkpoints.size();
  j["checkpoint_seconds_total"] = ckpt_total;
  j["checkpoint_seconds_max"] = ckpt_max;
  return j;
}

namespace {

// A figure for the table: "-" where there is none.
std::string figure(const nlohmann::json& x, const char* format) {
  if (x.is_null()) return "-";
  return strf(format, x.get<double>());
}

std::string markdown(const std::vector<RunSeries>& runs, const std::vector<nlohmann::json>& sums,
                     const ReportWritten& plots) {
  std::string md = "# zt train: run report\n\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunSeries& s = runs[i];
    md += (runs.size() > 1 ? strf("## run %zu: ", i + 1) : std::string("## ")) + markdown_text(s.label) + "\n\n";
    if (s.run.is_null()) md += "No run record in the file (written by a zt before the report).\n";
    for (const auto& [k, x] : s.run.items())
      md += "- " + markdown_text(k) + ": " + markdown_text(x.is_string() ? x.get<std::string>() : json_dump(x)) + "\n";
    for (const int64_t at : s.resumed_at) md += strf("- resumed from the checkpoint of step %lld\n", static_cast<long long>(at));
    for (const std::string& n : s.notes) md += "- note: " + markdown_text(n) + "\n";
    md += "\n";
  }
  std::string head = "| figure |", rule = "|---|";
  for (const RunSeries& s : runs) head.append(" ").append(markdown_text(s.label)).append(" |"), rule += "---:|";
  md += "## Summary\n\n" + head + "\n" + rule + "\n";
  const auto row = [&](const std::string& name, const auto& cell) {
    md += "| " + markdown_text(name) + " |";
    for (const nlohmann::json& j : sums) md.append(" ").append(cell(j)).append(" |");
    md += "\n";
  };
  const auto num = [&](const char* key, const char* format) {
    return [=](const nlohmann::json& j) { return figure(j[key], format); };
  };
  const auto integer = [&](const char* key) {
    return [=](const nlohmann::json& j) { return std::to_string(j[key].get<int64_t>()); };
  };
  row("steps", integer("steps"));
  row("last step", integer("last_step"));
  row("tokens", integer("tokens"));
  row("final train loss", num("final_loss", "%.4f"));
  row("final eval loss", num("final_eval_loss", "%.4f"));
  row("best eval loss", [&](const nlohmann::json& j) {
    return figure(j["best_eval_loss"], "%.4f") +
           (j["best_eval_step"].get<int64_t>() >= 0 ? strf(" (step %lld)", static_cast<long long>(j["best_eval_step"].get<int64_t>())) : "");
  });
  row("median tok/s", num("median_tokens_per_s", "%.1f"));
  row("median MFU", [&](const nlohmann::json& j) {
    return j["median_mfu"].is_null() ? std::string("-") : strf("%.2f%%", 100 * j["median_mfu"].get<double>());
  });
  row("step time, total (s)", num("step_time_s_total", "%.2f"));
  row("skipped steps (NaN/Inf, no target)", integer("skipped_steps"));
  row("clipped steps", integer("clipped_steps"));
  std::set<std::string> mem, comm;
  for (const nlohmann::json& j : sums) {
    for (const auto& [k, x] : j["peak_memory_bytes"].items()) mem.insert(k);
    for (const auto& [k, x] : j["comm_bytes_per_step"].items()) comm.insert(k);
  }
  const auto bytes_of = [](const char* field, std::string k, bool binary) {
    return [=](const nlohmann::json& j) {
      if (!j[field].contains(k)) return std::string("-");
      const uint64_t b = static_cast<uint64_t>(j[field][k].get<double>());
      return binary ? format_binary(b, BinaryUnit::kMiB, 1) : format_si(b);
    };
  };
  for (const std::string& k : mem) row("peak " + k, bytes_of("peak_memory_bytes", k, true));
  for (const std::string& k : comm) row("sent per step: " + k, bytes_of("comm_bytes_per_step", k, false));
  row("checkpoints", integer("checkpoints"));
  row("checkpoint time, total / max (s)", [&](const nlohmann::json& j) {
    return strf("%.2f / %.2f", j["checkpoint_seconds_total"].get<double>(), j["checkpoint_seconds_max"].get<double>());
  });
  md += "\nFigures: docs/training.md (\"Run report\"); report.json holds them unrounded, "
        "report.csv every step's numbers.\n\n## Plots\n\n";
  if (!plots.note.empty()) md += markdown_text(plots.note) + "\n\n";
  for (const std::string& png : plots.plots) md += "![" + png.substr(0, png.find('.')) + "](" + png + ")\n\n";
  return md;
}

// report.csv: one row per step of each series, every numeric key a column ("" where a
// step has none; NaN where the JSON held null).
std::string csv(const std::vector<RunSeries>& runs) {
  const StepTable table = step_table(runs);
  const std::set<std::string>& keys = table.keys;
  const auto& rows = table.rows;
  std::string s = "series,step";
  for (const std::string& k : keys) s.append(",").append(csv_field(k));
  s += "\n";
  for (size_t i = 0; i < runs.size(); ++i)
    for (const auto& v : rows[i]) {
      s += csv_field(runs[i].label) + strf(",%lld", static_cast<long long>(v.at("step")));
      for (const std::string& k : keys) {
        auto it = v.find(k);
        s += it == v.end() ? "," : std::isfinite(it->second) ? strf(",%.17g", it->second) : ",NaN";
      }
      s += "\n";
    }
  return s;
}

}  // namespace

ReportWritten write_run_report(const std::vector<RunSeries>& runs, const std::string& dir) {
  require_output_dir(dir, "the report folder", "name a folder you can write (it is created when missing)");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir, ec))
    throw InputError(strf("cannot make the report folder '%s': %s", dir.c_str(),
                          ec ? ec.message().c_str() : "it exists and is not a folder"),
                     "name a folder you can write (it is created when missing)");
  // One writer at a time (zt report, zt train's log.report), and the report published
  // whole: every file is written and checked in a staging folder first, then moved in.
  const FolderLock lock(dir, "the report folder",
                        "wait for the other zt report (or zt train) writing it, or give another --out");
  const StagingFolder stage(dir);
  std::vector<nlohmann::json> sums;
  nlohmann::json j = {{"runs", nlohmann::json::array()}};
  for (const RunSeries& s : runs) {
    sums.push_back(run_summary(s));
    j["runs"].push_back({{"label", s.label}, {"files", s.files}, {"run", s.run},
                         {"resumed_at", s.resumed_at}, {"checkpoints", s.checkpoints},
                         {"notes", s.notes}, {"summary", sums.back()}});
  }
  const std::filesystem::path out = stage.path();
  write_file_safely((out / "report.csv").string(), csv(runs), "report.csv");
  ReportWritten written = draw_run_plots(runs, out.string());
  j["plots"] = written.plots;
  j["plot_note"] = written.note;
  write_file_safely((out / "report.json").string(), json_dump(j, 2) + "\n", "report.json");
  write_file_safely((out / "report.md").string(), markdown(runs, sums, written), "report.md");
  const std::vector<std::string> published = stage.publish_all();
  // Plots and data of an earlier report that this one does not have: removed.
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (is_report_plot_file(name) && std::find(published.begin(), published.end(), name) == published.end() &&
        e.is_regular_file(ec))
      std::filesystem::remove(e.path(), ec);
  }
  return written;
}

}  // namespace zt::train
