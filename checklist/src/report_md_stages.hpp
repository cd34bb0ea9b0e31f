#pragma once
// report.md sections for the stages beyond the sweep (report_md_stages.cpp).
#include <string>

#include "zt/check/report.hpp"

namespace zt::check {

std::string node_verdicts_md(const Report& report);  // "## Per node": one verdict line each
std::string stages_md(const Report& report);         // fabric ... stragglers, plots

// Shared by the markdown and the plain-text renderings of the stages:
// the host of node `node` (its leader's), "?" when out of range;
std::string host_of_node(const Report& report, int node);
// "PASS: text" / "WARN: text" / "FAIL: text" for status 0 / 1 / 2; a skipped check
// (status < 0) is its text alone, which already says "skipped: why".
std::string status_line(int status, const std::string& text);

}  // namespace zt::check
