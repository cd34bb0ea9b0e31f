// Node health as a stage of `zt check`: each node's leader checks its GPUs (NVML) and
// NIC ports (sysfs) before the stress and sweep, and again after them (Xid events,
// counter growth); every rank gets every node's checks (include/zt/check/health.hpp).
#include "health_stage.hpp"

#include <nlohmann/json.hpp>

#include "zt/check/stages.hpp"
#include "zt/core/error.hpp"
#include "zt/core/escape.hpp"
#include "zt/core/log.hpp"

namespace zt::check {
namespace {

using nlohmann::json;

json check_json(const HealthCheck& c) {
  json numbers = json::object();
  for (const auto& [k, v] : c.numbers) numbers[k] = v;
  return json{{"name", c.name},
              {"node", c.node},
              {"host", c.host},
              {"subject", c.subject},
              {"status", health_status_name(c.status)},
              {"action", c.action == HealthAction::kNone ? json(nullptr) : json(health_action_name(c.action))},
              {"message", c.message},
              {"numbers", numbers}};
}

HealthStatus status_named(const std::string& s) {
  for (HealthStatus h : {HealthStatus::kPass, HealthStatus::kWarn, HealthStatus::kFail, HealthStatus::kSkip,
                         HealthStatus::kUnknown})
    if (health_status_name(h) == s) return h;
  throw Error("health check with unknown status '" + s + "' from another rank", "a zt bug: report it");
}

HealthAction action_named(const json& j) {
  if (j.is_null()) return HealthAction::kNone;
  for (HealthAction a : {HealthAction::kMonitor, HealthAction::kCheckCable, HealthAction::kResetGpu,
                         HealthAction::kReboot, HealthAction::kDrain})
    if (health_action_name(a) == j.get<std::string>()) return a;
  throw Error("health check with unknown action from another rank", "a zt bug: report it");
}

HealthCheck check_from_json(const json& j) {
  HealthCheck c;
  c.name = j.at("name").get<std::string>();
  c.node = j.at("node").get<int>();
  c.host = j.at("host").get<std::string>();
  c.subject = j.at("subject").get<std::string>();
  c.status = status_named(j.at("status").get<std::string>());
  c.action = action_named(j.at("action"));
  c.message = j.at("message").get<std::string>();
  for (const auto& [k, v] : j.at("numbers").items()) c.numbers.emplace_back(k, v.get<double>());
  return c;
}

}  // namespace

HealthStage::HealthStage(const HealthOptions& options, const std::vector<RankInfo>& ranks, int me)
    : options_(options) {
  const RankInfo& info = ranks[static_cast<size_t>(me)];
  leader_ = node_leaders(ranks)[static_cast<size_t>(info.node)] == me;
  node_ = info.node;
  host_ = info.host;
  if (!leader_) return;
  gpu_ = std::make_unique<GpuHealth>(options, me, node_, host_);
  mine_ = gpu_->begin();
  nic_before_ = read_nic_ports(options.sysfs_root);
}

HealthStage::~HealthStage() = default;

std::vector<HealthCheck> HealthStage::finish(comm::Comm& control) {
  if (leader_) {
    for (HealthCheck& c : gpu_->finish()) mine_.push_back(std::move(c));
    gpu_.reset();  // nvmlShutdown
    for (HealthCheck& c : nic_health(nic_before_, read_nic_ports(options_.sysfs_root), node_, host_))
      mine_.push_back(std::move(c));
  }
  json wire = json::array();
  for (const HealthCheck& c : mine_) wire.push_back(check_json(c));
  std::vector<HealthCheck> all;
  for (const std::string& text : gather_strings(control, json_dump(wire)))
    for (const json& j : json::parse(text)) all.push_back(check_from_json(j));
  return all;
}

nlohmann::json health_json(const std::vector<HealthCheck>& checks) {
  json out = json::array();
  for (const HealthCheck& c : checks) out.push_back(check_json(c));
  return out;
}

std::string health_text(const std::vector<HealthCheck>& checks) {
  std::string s = "#\n# node health (GPU through NVML, NIC ports from sysfs, GPU stress)\n";
  for (const HealthCheck& c : checks) s += "#   " + health_line(c) + "\n";
  return s;
}

std::string health_markdown(const std::vector<HealthCheck>& checks) {
  std::string s = "## Node health\n\n| check | node | subject | status | action | finding |\n|---|---|---|---|---|---|\n";
  for (const HealthCheck& c : checks)
    s += strf("| %s | %d (%s) | %s | %s | %s | %s |\n", markdown_text(c.name).c_str(), c.node, markdown_text(c.host).c_str(), markdown_text(c.subject).c_str(),
              std::string(health_status_name(c.status)).c_str(), std::string(health_action_name(c.action)).c_str(),
              markdown_text(c.message).c_str());
  return s + "\n";
}

void evaluate_health(Report& report) {
  for (const HealthCheck& c : report.health) {
    Verdict v = Verdict::kPass;
    if (c.status == HealthStatus::kFail) {
      report.failures.push_back("health " + health_line(c));
      v = Verdict::kFail;
    } else if (c.status == HealthStatus::kUnknown) {
      report.unknown.push_back(health_line(c));
      v = Verdict::kWarn;
    } else if (c.status == HealthStatus::kWarn) {
      v = Verdict::kWarn;
    }
    if (v == Verdict::kPass || c.node < 0 || c.node >= static_cast<int>(report.node_verdicts.size())) continue;
    NodeVerdict& n = report.node_verdicts[static_cast<size_t>(c.node)];
    n.verdict = std::max(n.verdict, v);
    const std::string action(health_action_name(c.action));
    n.reasons.push_back(strf("%s %s: %s%s", c.name.c_str(), c.subject.c_str(), c.message.c_str(),
                             action.empty() ? "" : (" [" + action + "]").c_str()));
  }
}

}  // namespace zt::check
