// The run report's plots (see report.hpp): one data file per series (run<i>.dat: the
// step, then every numeric key of report.csv, NaN where a step has none) and one gnuplot
// script drawing, each 800 x 400 pixels:
//   loss.png        train loss (lines) and eval loss (points) against the step
//   lr.png          the learning rate
//   grad_norm.png   the gradient norm before clipping; clipped steps marked (circles)
//   throughput.png  tok/s (left axis) and MFU % (right axis)
//   memory.png      the engine's memory by category (those not always 0) and the
//                   resident set (MiB)
//   comm.png        bytes sent per step by each communicator (MB)
//   family_<f>.png  every other numeric key, by family: the name before its first '.'
//                   or '/' (offload.*, rewards/*, logps/* of an objective); plain keys
//                   that are not drawn above: other.png
// Several series overlaid, each line titled "run N: ..." (report.md's headings).
#include <cctype>
#include <cmath>
#include <regex>
#include <set>

#include "zt/core/escape.hpp"
#include "zt/core/gnuplot.hpp"
#include "zt/core/log.hpp"
#include "zt/train/report.hpp"

namespace zt::train {
namespace {

constexpr const char* kTerminal = "set terminal pngcairo noenhanced size 800,400 font ',9'\n";

// Keys drawn by the fixed plots, or not drawn (the step, the clip factor, counters).
const std::set<std::string> kFixed = {"step",         "loss",          "eval_loss",
                                      "lr",           "grad_norm",     "clip_coef",
                                      "tokens_per_s", "mfu",           "rss_bytes",
                                      "peak_rss_bytes", "comm_intra_node_bytes",
                                      "comm_inter_node_bytes", "tokens", "step_time_s",
                                      "trained_tokens"};

std::string family_of(const std::string& key) {
  const size_t cut = key.find_first_of("./");
  return cut == std::string::npos ? "other" : key.substr(0, cut);
}

std::string file_name(std::string family) {
  for (char& c : family)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  return "family_" + family + ".png";
}

struct Plotter {
  const std::vector<RunSeries>& runs;
  std::map<std::string, int> column;  // key -> its column in every run<i>.dat
  std::string script;
  std::vector<std::string> pngs;

  // One plot: for every series, every line that `lines(i, series)` yields.
  struct Line {
    std::string using_expr, style, title, axes;
  };
  size_t families = 0, left_out = 0;  // family plots drawn; lines left out by the caps
  void plot(const std::string& png, const std::string& title, const std::string& settings,
            std::vector<Line> per_series_lines, bool family = false) {
    if (per_series_lines.empty()) return;
    if (family && families++ >= kMaxPlots) {
      left_out += per_series_lines.size();
      return;
    }
    if (per_series_lines.size() > kMaxLines) {
      left_out += per_series_lines.size() - kMaxLines;
      per_series_lines.resize(kMaxLines);
    }
    script += std::string("reset\n") + kTerminal + "set output " + gnuplot_string(png) + "\n";
    script += "set title " + gnuplot_string(title) + "\nset grid\nset key outside right top font ',8' samplen 2\n"
              "set datafile missing 'NaN'\nset xlabel 'step'\n" + settings;
    std::string cmd = "plot ";
    bool first = true;
    for (size_t i = 0; i < runs.size(); ++i)
      for (const Line& l : per_series_lines) {
        if (!first) cmd += ", \\\n     ";
        first = false;
        // Several series: "run N" as report.md's headings name them (labels may be long).
        const std::string label = runs.size() > 1 ? strf("run %zu: ", i + 1) + l.title : l.title;
        cmd += strf("'run%zu.dat' using %s %s%s title %s", i, l.using_expr.c_str(), l.style.c_str(),
                    l.axes.empty() ? "" : (" axes " + l.axes).c_str(), gnuplot_string(label).c_str());
      }
    script += cmd + "\n";
    pngs.push_back(png);
  }
  bool has(const std::string& key) const { return column.count(key) > 0; }
  std::string col(const std::string& key) const { return strf("column(%d)", column.at(key)); }
  // "1:N" for a key: plain columns keep lines unbroken across a missing value.
  std::string plain(const std::string& key) const { return strf("1:%d", column.at(key)); }
  std::string scaled(const std::string& key, double by) const {
    return strf("1:(%s/%g)", col(key).c_str(), by);
  }
};

}  // namespace

bool is_report_plot_file(const std::string& name) {
  static const std::regex kNames(
      R"((run[0-9]+\.dat|plots\.gp|plots\.log|(loss|lr|grad_norm|throughput|memory|comm)\.png|family_[A-Za-z0-9_-]+\.png))");
  return std::regex_match(name, kNames);
}

ReportWritten draw_run_plots(const std::vector<RunSeries>& runs, const std::string& work) {
  ReportWritten out;
  const StepTable table = step_table(runs);
  const std::set<std::string>& keys = table.keys;
  const auto& rows = table.rows;
  if (keys.empty()) {
    out.note = "No step was recorded yet: nothing to plot.";
    return out;
  }
  Plotter p{runs, {}, {}, {}};
  int next = 2;
  for (const std::string& k : keys) p.column[k] = next++;
  std::vector<std::pair<std::string, std::string>> inputs;
  for (size_t i = 0; i < runs.size(); ++i) {
    std::string data = "# " + visible_text(runs[i].label) + "\n# step";
    for (const std::string& k : keys) data.append(" ").append(visible_text(k));
    data += "\n";
    for (const auto& v : rows[i]) {
      data += strf("%lld", static_cast<long long>(v.at("step")));
      for (const std::string& k : keys) {
        auto it = v.find(k);
        data += it == v.end() || !std::isfinite(it->second) ? " NaN" : strf(" %.9g", it->second);
      }
      data += "\n";
    }
    inputs.emplace_back(strf("run%zu.dat", i), data);
  }
  using Line = Plotter::Line;
  if (p.has("loss")) {
    std::vector<Line> l = {{p.plain("loss"), "with lines", "train loss", ""}};
    if (p.has("eval_loss")) l.push_back({p.plain("eval_loss"), "with linespoints pt 7", "eval loss", ""});
    p.plot("loss.png", "loss (nats)", "set ylabel 'loss'\n", l);
  }
  if (p.has("lr")) p.plot("lr.png", "learning rate", "set ylabel 'lr'\nset format y '%.1e'\n",
                          {{p.plain("lr"), "with lines", "lr", ""}});
  if (p.has("grad_norm")) {
    std::vector<Line> l = {{p.plain("grad_norm"), "with lines", "grad norm", ""}};
    if (p.has("clip_coef"))
      l.push_back({strf("1:(%s < 1 ? %s : 1/0)", p.col("clip_coef").c_str(), p.col("grad_norm").c_str()),
                   "with points pt 6 ps 1.2", "clipped", ""});
    p.plot("grad_norm.png", "gradient norm (before clipping)", "set ylabel 'norm'\n", l);
  }
  if (p.has("tokens_per_s")) {
    std::vector<Line> l = {{p.plain("tokens_per_s"), "with lines", "tok/s", ""}};
    if (p.has("mfu")) l.push_back({p.scaled("mfu", 0.01), "with lines dt 2", "MFU %", "x1y2"});
    p.plot("throughput.png", "throughput", "set ylabel 'tokens/s'\nset y2label 'MFU (%)'\nset ytics nomirror\nset y2tics\n", l);
  }
  std::set<std::string> nonzero;  // keys with a value other than 0 in some step
  for (const auto& series : rows)
    for (const auto& v : series)
      for (const auto& [k, x] : v)
        if (x != 0 && !std::isnan(x)) nonzero.insert(k);
  std::vector<Line> memory, comm;
  std::map<std::string, std::vector<Line>> families;
  for (const std::string& k : keys) {
    if (k.rfind("memory.", 0) == 0 && !nonzero.count(k)) continue;  // a category never used
    if (k.rfind("memory.", 0) == 0 || k == "rss_bytes")
      memory.push_back({p.scaled(k, 1048576.0), "with lines", k, ""});
    else if (k.rfind("comm_bytes.", 0) == 0)
      comm.push_back({p.scaled(k, 1e6), "with lines", k.substr(11), ""});
    else if (!kFixed.count(k))
      families[family_of(k)].push_back({p.plain(k), "with lines", k, ""});
  }
  p.plot("memory.png", "memory by category (max over ranks)", "set ylabel 'MiB'\n", memory);
  p.plot("comm.png", "bytes sent per step, by communicator (max over ranks)", "set ylabel 'MB'\n", comm);
  for (const auto& [family, lines] : families)
    p.plot(file_name(family), family, "set ylabel " + gnuplot_string(family) + "\n", lines, true);
  inputs.emplace_back("plots.gp", p.script);
  const GnuplotResult drawn = draw_in(work, inputs, p.pngs);
  out.plots = drawn.drawn;
  out.note = drawn.note;
  if (p.left_out > 0)
    out.note += strf("%s%zu keys not drawn: at most %zu family plots of %zu lines each are drawn; "
                     "report.csv holds every key",
                     out.note.empty() ? "" : "; ", p.left_out, kMaxPlots, kMaxLines);
  if (!drawn.note.empty() && drawn.drawn.empty())
    out.note += "; report.csv holds every step's numbers";
  return out;
}

}  // namespace zt::train
