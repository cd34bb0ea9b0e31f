#pragma once
// report.md sections for the stages beyond the sweep (report_md_stages.cpp).
#include <string>

#include "zt/check/report.hpp"

namespace zt::check {

std::string node_verdicts_md(const Report& report);  // "## Per node": one verdict line each
std::string stages_md(const Report& report);         // fabric ... stragglers, plots

}  // namespace zt::check
