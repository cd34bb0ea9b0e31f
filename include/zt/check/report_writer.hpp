#pragma once
// Rendering a Report: the nccl-tests-style table on stdout, report.json (nlohmann-json,
// nccl-tests' key names where one exists) and report.md. Schema: docs/checklist.md.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "zt/check/report.hpp"

namespace zt::check {

// Header lines of the table for one op (three lines, each starting with '#').
std::string table_header(CheckOp op);
// One line: size count type redop root | time algbw busbw #wrong (out-of-place, in-place) | slowest.
std::string table_row(const Row& row, DType dtype, comm::ReduceOp redop);
// "us per op" at sizes <= options.latency_max_bytes, one column per op.
std::string latency_table(const Report& report);
// Environment summary for stdout.
std::string environment_text(const Environment& env);
// Gates, failures and the verdict line.
std::string verdict_text(const Report& report);

// The stages beyond the sweep, for stdout (report_stages_text.cpp): fabric per node,
// copies and I/O per node, the pair matrix (slowest pair, slow nodes), stragglers, and
// the per-node verdict lines (inside verdict_text).
std::string fabric_text(const Report& report);
std::string node_text(const Report& report);
std::string pairs_text(const Report& report);
std::string stragglers_text(const Report& report);

nlohmann::json report_json(const Report& report);
std::string report_markdown(const Report& report);

// Creates `dir` (and parents) when missing; returns it. Throws zt::InputError (exit 2)
// when it cannot be created or is not a writable directory.
std::filesystem::path prepare_report_dir(const std::string& dir);

// Writes dir/report.json and dir/report.md. Each is written to a new temporary file in
// `dir` (O_EXCL|O_NOFOLLOW, relative to the directory's descriptor) and renamed over the
// final name, so a symlink planted at report.json is replaced, never followed.
// Throws zt::Error on I/O failure.
void write_report_files(const Report& report, const std::filesystem::path& dir);

// Plots (plots.cpp): writes the data files and a gnuplot script into `dir`, runs
// `gnuplot` on it, and records in report.plots the PNGs written (busbw.png: busbw
// against size, one line per op; pairs.png: the pair-bandwidth matrix) or in
// report.plot_note why there are none. A missing gnuplot is a note, never a failure.
void write_plots(Report& report, const std::filesystem::path& dir);

}  // namespace zt::check
