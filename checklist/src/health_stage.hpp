#pragma once
// Node health as a stage of run_checklist (health_stage.cpp).
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "zt/check/health.hpp"
#include "zt/check/report.hpp"
#include "zt/comm/comm.hpp"

namespace zt::check {

// Constructed on every rank before the other stages: the node's leader loads NVML,
// checks every GPU's state, registers for Xid events and snapshots the NIC counters.
// finish() (collective over `control`, after the sweep) adds the Xid events, kernel Xid
// lines and counter growth and returns every node's checks on every rank.
class HealthStage {
 public:
  HealthStage(const HealthOptions& options, const std::vector<RankInfo>& ranks, int me);
  ~HealthStage();
  std::vector<HealthCheck> finish(comm::Comm& control);

 private:
  HealthOptions options_;
  bool leader_ = false;
  int node_ = 0;
  std::string host_;
  std::unique_ptr<GpuHealth> gpu_;
  std::vector<HealthCheck> mine_;
  std::vector<NicPort> nic_before_;
};

nlohmann::json health_json(const std::vector<HealthCheck>& checks);
std::string health_text(const std::vector<HealthCheck>& checks);
std::string health_markdown(const std::vector<HealthCheck>& checks);

// FAIL checks add a failure line, UNKNOWN ones an `unknown` line, and every check that
// did not pass a reason to its node's verdict line (WARN for WARN and UNKNOWN).
void evaluate_health(Report& report);

}  // namespace zt::check
