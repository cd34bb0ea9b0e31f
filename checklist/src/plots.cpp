// Plots of a report through the one gnuplot runner (core/gnuplot.hpp). busbw.png: busbw against
// size, one line per op (out-of-place; broadcast in-place), log2 size axis.
// pairs.png: the pair-bandwidth matrix, one coloured cell per pair with its value.
// stress.png: each GPU's GEMM TFLOP/s and HBM GB/s beside its row of data/gpus.csv.
// Without gnuplot the report says so; it never fails the check.
#include <algorithm>

#include "zt/check/report_writer.hpp"
#include "zt/check/stages.hpp"
#include "zt/core/error.hpp"
#include "zt/core/escape.hpp"
#include "zt/core/gnuplot.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"

namespace zt::check {
namespace {

// busbw.dat: one block per op (gnuplot `index`), "size busbw" per line.
std::string busbw_data(const Report& r) {
  std::string s;
  for (CheckOp op : r.options.ops) {
    s += "# " + std::string(check_op_name(op)) + ": size (B), busbw (GB/s)\n";
    for (const Row& row : r.rows) {
      if (row.op != op) continue;
      const Placement& p = row.out_of_place.ran ? row.out_of_place : row.in_place;
      s += strf("%llu %.6g\n", static_cast<unsigned long long>(row.size), p.bus_bw);
    }
    s += "\n\n";
  }
  return s;
}

std::string busbw_script(const Report& r) {
  std::string s = "set terminal pngcairo noenhanced size 720,420 font ',9'\n";
  s += "set output 'busbw.png'\n";
  s += "set title " + gnuplot_string(strf("zt check: busbw against size (%d ranks, %s)", r.nranks, r.backend.c_str())) + "\n";
  s += "set logscale x 2\nset format x '%.0b%BB'\nset xlabel 'size (bytes)'\n"
       "set ylabel 'busbw (GB/s)'\nset key top left\nset grid\n";
  s += "plot ";
  int index = 0;
  for (CheckOp op : r.options.ops) {
    if (index > 0) s += ", \\\n     ";
    s += strf("'busbw.dat' index %d using 1:2 with linespoints title '%s'", index, std::string(check_op_name(op)).c_str());
    ++index;
  }
  return s + "\n";
}

// Colour of a pair's cell: red (slowest) through white to blue (fastest), as #rrggbb.
std::string cell_colour(double value, double lo, double hi) {
  const double t = hi > lo ? (value - lo) / (hi - lo) : 1.0;  // 0 slowest .. 1 fastest
  auto mix = [](double a, double b, double f) { return static_cast<int>(a + (b - a) * f + 0.5); };
  int r, g, b;
  if (t < 0.5) {  // red (178,24,43) -> white
    r = mix(178, 247, 2 * t); g = mix(24, 247, 2 * t); b = mix(43, 247, 2 * t);
  } else {        // white -> blue (33,102,172)
    r = mix(247, 33, 2 * t - 1); g = mix(247, 102, 2 * t - 1); b = mix(247, 172, 2 * t - 1);
  }
  return strf("#%02x%02x%02x", r, g, b);
}

// The matrix as one rectangle and one label per cell (exact cell geometry; gnuplot's
// `matrix with image` cannot leave the diagonal empty).
std::string pairs_script(const Report& r) {
  const PairMatrix& m = r.pairs;
  const size_t n = m.gbs.size();
  const std::vector<int> leaders = node_leaders(r.environment.ranks);
  double lo = 0.0, hi = 0.0;
  bool first = true;
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b)
      if (a != b) {
        lo = first ? m.gbs[a][b] : std::min(lo, m.gbs[a][b]);
        hi = first ? m.gbs[a][b] : std::max(hi, m.gbs[a][b]);
        first = false;
      }
  std::string tics;
  for (size_t k = 0; k < n; ++k) {
    if (!tics.empty()) tics += ", ";
    tics += gnuplot_string(strf("%zu %s", k, r.environment.ranks[static_cast<size_t>(leaders[k])].host.c_str())) + strf(" %zu", k);
  }
  std::string s = "reset\nset terminal pngcairo noenhanced size 520,460 font ',9'\n";
  s += "set output 'pairs.png'\n";
  s += strf("set title \"pair bandwidth, GB/s per direction (%s exchanges)\\nred: slowest, blue: fastest; "
            "boxed: the slowest pair\"\n", format_size(m.bytes).c_str());
  s += "set xtics (" + tics + ") rotate by 30 right\nset ytics (" + tics + ")\n";
  s += strf("set xrange [-0.5:%zu.5]\nset yrange [%zu.5:-0.5]\n", n - 1, n - 1);
  s += "set xlabel 'node'\nset ylabel 'node'\nset size ratio -1\nunset key\n";
  int object = 1;
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = 0; b < n; ++b) {
      const double x = static_cast<double>(b), y = static_cast<double>(a);
      const bool slowest = (static_cast<int>(a) == m.slow_a && static_cast<int>(b) == m.slow_b) ||
                           (static_cast<int>(a) == m.slow_b && static_cast<int>(b) == m.slow_a);
      const std::string fill = a == b ? std::string("#dddddd") : cell_colour(m.gbs[a][b], lo, hi);
      s += strf("set object %d rect from %g,%g to %g,%g fc rgb '%s' fs solid 1.0 %s\n", object++, x - 0.5,
                y - 0.5, x + 0.5, y + 0.5, fill.c_str(), slowest ? "border lc rgb 'black' lw 3" : "noborder");
      s += strf("set label %d '%s' at %g,%g center front\n", object, a == b ? "-" : strf("%.2f", m.gbs[a][b]).c_str(),
                x, y);
    }
  }
  return s + "plot NaN notitle\n";
}

// stress.dat: "rR:dD tflops peak_tflops hbm_gbs table_gbs" per GPU that was stressed (rank R,
// CUDA device D; 0: none).
std::string stress_data(const Report& r) {
  std::string note;
  const std::vector<estimate::GpuSpec> table = stress_table(&note);
  std::string s = "# rank:device, GEMM TFLOP/s, bf16 peak (gpus.csv), HBM GB/s, memory bandwidth (gpus.csv)\n";
  for (const StressSample& x : r.stress) {
    if (!x.skipped.empty()) continue;
    const estimate::GpuSpec* row = estimate::gpu_for_device(table, x.device_name);
    s += strf("r%d:d%d %.6g %.6g %.6g %.6g\n", x.rank, x.device, x.gemm_measured() ? x.gemm.tflops : 0.0,
              row ? row->bf16_tflops : 0.0, x.hbm_measured() ? x.hbm.gbs : 0.0, row ? row->bandwidth_gb_s : 0.0);
  }
  return s;
}

std::string stress_script() {
  std::string s = "reset\nset terminal pngcairo noenhanced size 900,380 font ',9'\nset output 'stress.png'\n";
  s += "set multiplot layout 1,2 title 'zt check: GPU stress, each GPU alone (black: its row of data/gpus.csv)'\n";
  s += "set style fill solid 0.6 border -1\nset boxwidth 0.6\nset xlabel 'rank:CUDA device'\nset yrange [0:*]\n"
       "set grid ytics\nset key below horizontal\n";
  const auto plot = [](int measured, int table, const char* what) {
    return strf("plot 'stress.dat' using 0:%d:xtic(1) with boxes lc rgb '#2166ac' title 'measured', "
                "'' using 0:($%d > 0 ? $%d : NaN) with points pt 7 lc rgb 'black' title '%s'\n",
                measured, table, table, what);
  };
  s += "set title 'bf16 GEMM burn through cuBLASLt (TFLOP/s)'\n" + plot(2, 3, "bf16 peak");
  s += "set title 'HBM copy, read + write (GB/s)'\n" + plot(4, 5, "memory bandwidth");
  return s + "unset multiplot\n";
}

}  // namespace

void write_plots(Report& r, const std::filesystem::path& dir) {
  r.plots.clear();
  r.plot_note.clear();
  std::string script;
  std::vector<std::string> pngs;
  std::string data;
  if (!r.rows.empty()) {
    data = busbw_data(r);
    script += busbw_script(r);
    pngs.push_back("busbw.png");
  }
  if (r.pairs.ran) {
    script += pairs_script(r);
    pngs.push_back("pairs.png");
  }
  const bool stressed =
      std::any_of(r.stress.begin(), r.stress.end(), [](const StressSample& x) { return x.skipped.empty(); });
  const std::string stress = stressed ? stress_data(r) : std::string();
  if (!stress.empty()) {
    script += stress_script();
    pngs.push_back("stress.png");
  }
  if (script.empty()) {
    r.plot_note = "nothing to plot";
    return;
  }
  std::vector<std::pair<std::string, std::string>> inputs;
  if (!data.empty()) inputs.emplace_back("busbw.dat", data);
  if (!stress.empty()) inputs.emplace_back("stress.dat", stress);
  inputs.emplace_back("plots.gp", script);
  GnuplotResult drawn = run_gnuplot(dir, inputs, pngs);
  r.plot_note = drawn.note;
  if (drawn.note.empty()) r.plots = drawn.drawn;
}

}  // namespace zt::check
