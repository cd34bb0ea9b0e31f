// `zt report METRICS.jsonl [METRICS2.jsonl ...] [--out DIR]`: the run report of log.metrics
// files (train/report.hpp): report.md, report.json, report.csv and the PNG plots. A
// resumed run's pieces are joined, other files drawn side by side. No MPI.
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "zt/core/outputs.hpp"
#include "zt/core/files.hpp"
#include "zt/core/log.hpp"
#include "zt/train/report.hpp"

namespace zt::apps {
namespace {

struct ReportArgs {
  std::vector<std::string> files;
  std::string out = "report";
};

int run_report(const ReportArgs& args) {
  // Before the files are read: the output folder, and no input among its files.
  require_output_dir(args.out, "--out", "name a folder you can write (it is created when missing)");
  std::vector<PathUse> uses{{"--out", args.out, true, R"(report\..*|.*\.png|plots\..*)"}};
  for (const std::string& f : args.files) uses.push_back({"the input", f, false});
  refuse_collisions(uses);
  remove_staging_on_signals();  // SIGTERM: gnuplot killed, the staging folder removed
  const std::vector<train::RunSeries> runs = train::read_runs(args.files);
  const train::ReportWritten w = train::write_run_report(runs, args.out);
  for (const train::RunSeries& s : runs) {
    log::info(strf("%s: %zu steps%s", s.label.c_str(), s.steps.size(),
                   s.resumed_at.empty() ? "" : strf(", resumed %zu time%s", s.resumed_at.size(),
                                                    s.resumed_at.size() == 1 ? "" : "s").c_str()));
    for (const std::string& n : s.notes) log::warn(n);
  }
  if (!w.note.empty()) log::warn(w.note);
  log::info(strf("report: %s/report.md (%zu plots, report.json, report.csv)", args.out.c_str(),
                 w.plots.size()));
  return 0;
}

}  // namespace

Run add_report_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "report",
      "The run report of zt train's log.metrics files: report.md with the run's facts, a "
      "summary table and plots (gnuplot), report.json, report.csv. Several files: a resumed "
      "run's pieces are joined, other runs drawn side by side.");
  auto args = std::make_shared<ReportArgs>();
  sub->add_option("files", args->files, "log.metrics files (JSON lines), in order")
      ->required();
  sub->add_option("--out", args->out, "folder of the report (created when missing)")
      ->capture_default_str();
  return [args]() { return run_report(*args); };
}

}  // namespace zt::apps
