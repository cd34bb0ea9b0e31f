#pragma once
// GPU stress as a stage of run_checklist (stress_stage.cpp; the rules in stress_judge.cpp).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "zt/check/report.hpp"
#include "zt/check/stress.hpp"
#include "zt/comm/comm.hpp"

namespace zt::check {

// The devices rank `me` stresses: its bound device; every device it sees (0 ..
// visible_gpus - 1) when it is the only rank of its node (a Slurm prolog runs one process
// per node); none without a GPU.
std::vector<int> stress_devices(const std::vector<RankInfo>& ranks, int me);

// Every rank's samples, on every rank (collective over `control`): each rank measures its
// devices (measure_stress) at the same time as the others; a rank with none (or with
// seconds == 0) gives one skipped sample saying why.
std::vector<StressSample> run_stress(comm::Comm& control, const std::vector<RankInfo>& ranks, int me,
                                     double seconds, int expected_gpus);

nlohmann::json stress_json(const std::vector<StressSample>& samples);
std::vector<StressSample> stress_from_json(const nlohmann::json& j);
// "# GPU stress ..." and one line per rank (what it measured, or why not), for stdout; the
// verdicts print with the node health.
std::string stress_text(const std::vector<StressSample>& samples, double seconds);
// report.md's "GPU stress" section: one row per rank.
std::string stress_markdown(const std::vector<StressSample>& samples);

}  // namespace zt::check
