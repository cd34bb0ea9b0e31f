// The report zt train keeps in ckpt.dir/report (see report.hpp, LiveReport).
#include <filesystem>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/train/report.hpp"

namespace zt::train {

LiveReport::LiveReport() = default;
LiveReport::~LiveReport() = default;

void LiveReport::off(const std::string& what, const std::exception& e) {
  on_ = false;
  file_.reset();
  const auto* err = dynamic_cast<const Error*>(&e);
  log::warn("log.report: " + what + " failed, the run goes on without its report: " +
            (err ? err->message() + " (" + err->hint() + ")" : std::string(e.what())));
}

void LiveReport::open(const std::string& dir, int64_t first_step, const std::string& run_record) {
  dir_ = dir;
  try {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw Error("cannot make the folder '" + dir + "': " + ec.message(), "check ckpt.dir");
    file_ = std::make_unique<MetricsFile>();
    file_->open((std::filesystem::path(dir) / "metrics.jsonl").string(), first_step, /*replace=*/true);
    on_ = true;
    file_->write_line(run_record);
    fresh_ = true;
  } catch (const std::exception& e) {
    off("opening " + dir + "/metrics.jsonl", e);
  }
}

void LiveReport::record(const std::string& json_line) {
  if (!on_) return;
  try {
    file_->write_line(json_line);
    fresh_ = true;
  } catch (const std::exception& e) {
    off("writing " + dir_ + "/metrics.jsonl", e);
  }
}

void LiveReport::write() {
  if (!on_ || !fresh_) return;
  fresh_ = false;
  try {
    const ReportWritten w =
        write_run_report(read_runs({(std::filesystem::path(dir_) / "metrics.jsonl").string()}), dir_);
    if (!w.note.empty() && w.note != note_) log::warn("log.report: " + w.note);
    note_ = w.note;
  } catch (const std::exception& e) {
    off("writing the report into " + dir_, e);
  }
}

}  // namespace zt::train
