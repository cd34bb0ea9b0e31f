#pragma once
// The run report (issue 42): report.md (the run's facts, a table of summary figures, the
// plots), report.json (the same figures), report.csv (every step's numeric keys) and PNG
// plots through the one gnuplot runner (core/gnuplot.hpp), from log.metrics files.
// `zt report FILE...` writes it, and `zt train` writes it into ckpt.dir/report/ at each
// checkpoint and at the end (log.report). Format and figures: docs/training.md, "Run report".
//
// A metrics file holds three kinds of records, one JSON object a line, each with "step":
//   {"step": S, "run": {...}}          the run's facts, written when a run (or a resumed
//                                      piece of it) starts at step S (the banner's facts)
//   {"step": S, "checkpoint": {...}}   a checkpoint saved after step S (seconds, stall_s, ...)
//   {"step": S, "loss": ..., ...}      a step (step_json, metrics.hpp)
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "zt/train/metrics.hpp"

namespace zt::train {

// One run: the files of a run read in order and joined (a resumed run's pieces), steps
// in order without a duplicate.
struct RunSeries {
  std::string label;                        // the files' names joined by " + "
  std::vector<std::string> files;
  nlohmann::json run;                       // the first run record's facts (null: none)
  std::vector<int64_t> resumed_at;          // steps done when a later piece started (resumed)
  std::map<int64_t, nlohmann::json> steps;  // step records by step
  std::vector<nlohmann::json> checkpoints;  // checkpoint records ("step" added), in order
  std::vector<std::string> notes;           // lines dropped, files not joined, ...
};

// Reads the files in order. A file whose first step follows the previous series' steps
// (it starts after that series' first step and at most one past its last) continues it:
// its steps replace the previous series' from its first step on (a resumed run's pieces,
// joined without a gap or a duplicate); any other file starts a series of its own (two
// runs side by side). The last line of a file may be cut short (a kill): dropped, noted.
// Throws zt::InputError (exit 2) naming the file and line for anything else.
std::vector<RunSeries> read_runs(const std::vector<std::string>& files);

// The summary figures of one series (report.json's "summary"; docs/training.md).
nlohmann::json run_summary(const RunSeries& s);

struct ReportWritten {
  std::vector<std::string> plots;  // PNG files written next to report.md
  std::string note;                // why plots are missing ("" when all were drawn)
};

// Writes dir/report.md, report.json, report.csv and the plots (creating dir), under the
// folder's lock (another writer: InputError), staged and published whole: a failure
// (a full disk) leaves the earlier report as it was. Throws zt::Error (or InputError)
// when dir cannot be written; a missing gnuplot is the note.
ReportWritten write_run_report(const std::vector<RunSeries>& runs, const std::string& dir);

// The plots (report_plots.cpp): their data and gnuplot script, drawn into the folder
// `work` (the report's staging folder). At most kMaxPlots family plots of kMaxLines lines
// each are drawn (the rest is named in the note; report.csv keeps every key).
constexpr size_t kMaxPlots = 24, kMaxLines = 16;
ReportWritten draw_run_plots(const std::vector<RunSeries>& runs, const std::string& work);
// True for the names of the plots' files (PNGs, run<i>.dat, plots.gp, plots.log): an
// earlier report's that the new one lacks are removed when it is published.
bool is_report_plot_file(const std::string& name);

// A step record's numeric leaves by dotted path ("loss", "memory.params",
// "comm_bytes.world", "rewards/chosen"); null (NaN in JSON) and non-finite: NaN.
std::map<std::string, double> flatten_numbers(const nlohmann::json& record);

// Every series' steps flattened (rows[series][i]), and the union of their keys but "step"
// (report.csv's columns and the plots' data files).
struct StepTable {
  std::set<std::string> keys;
  std::vector<std::vector<std::map<std::string, double>>> rows;
};
StepTable step_table(const std::vector<RunSeries>& runs);

// The report zt train keeps in ckpt.dir/report (rank 0, log.report): its own copy of the
// run's records (metrics.jsonl there, continued on a resume like log.metrics, replaced
// by a run that starts fresh), the report rewritten from it at each checkpoint and at the
// end. A failure is one warning line and turns it off: it never fails the run.
class LiveReport {
 public:
  LiveReport();
  ~LiveReport();
  void open(const std::string& dir, int64_t first_step, const std::string& run_record);
  void record(const std::string& json_line);  // a record for metrics.jsonl
  void write();  // the report, from metrics.jsonl (nothing new since the last: a no-op)
  bool on() const { return on_; }

 private:
  void off(const std::string& what, const std::exception& e);
  std::string dir_;
  std::unique_ptr<MetricsFile> file_;
  std::string note_;  // the last plot note warned (each is warned once)
  bool on_ = false;
  bool fresh_ = false;  // records written since the last report
};

}  // namespace zt::train
