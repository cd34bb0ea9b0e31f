// NIC health from sysfs, the kernel's Xid lines, and the names of statuses and actions
// (include/zt/check/health.hpp).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

#include "gpu_checks.hpp"
#include "join.hpp"
#include "node_files.hpp"
#include "zt/check/health.hpp"
#include "zt/core/log.hpp"

namespace zt::check {
namespace fs = std::filesystem;

std::string_view health_status_name(HealthStatus s) {
  switch (s) {
    case HealthStatus::kPass: return "PASS";
    case HealthStatus::kWarn: return "WARN";
    case HealthStatus::kFail: return "FAIL";
    case HealthStatus::kSkip: return "SKIP";
    case HealthStatus::kUnknown: return "UNKNOWN";
  }
  return "?";
}

std::string_view health_action_name(HealthAction a) {
  switch (a) {
    case HealthAction::kNone: return "";
    case HealthAction::kMonitor: return "MONITOR";
    case HealthAction::kCheckCable: return "CHECK_CABLE";
    case HealthAction::kResetGpu: return "RESET_GPU";
    case HealthAction::kReboot: return "REBOOT";
    case HealthAction::kDrain: return "DRAIN";
  }
  return "?";
}

std::string health_line(const HealthCheck& c) {
  const std::string action(health_action_name(c.action));
  return strf("%s %s on %s: %s%s — %s", c.name.c_str(), c.subject.c_str(), c.host.c_str(),
              std::string(health_status_name(c.status)).c_str(),
              action.empty() ? "" : (" [" + action + "]").c_str(), c.message.c_str());
}

namespace {

// The counters a bad cable or port shows (InfiniBand's PortCounters).
constexpr const char* kNicCounters[] = {"symbol_error", "link_downed", "link_error_recovery",
                                        "port_rcv_errors", "port_xmit_discards",
                                        "port_rcv_remote_physical_errors", "local_link_integrity_errors",
                                        "excessive_buffer_overrun_errors"};

// "400 Gb/sec (4X NDR)" -> 400, "2.5 Gb/sec (1X SDR)" -> 2.5; nullopt unless the text
// starts with a whole number (and a fraction) and " Gb/sec".
std::optional<double> rate_gbps(const std::string& rate) {
  const size_t unit = rate.find(" Gb/sec");
  if (unit == std::string::npos) return std::nullopt;
  const std::string number = rate.substr(0, unit);
  const size_t point = number.find('.');
  const auto whole = parse_whole_number(std::string_view(number).substr(0, point));
  if (!whole) return std::nullopt;
  if (point == std::string::npos) return static_cast<double>(*whole);
  const std::string fraction = number.substr(point + 1);
  const auto digits = parse_whole_number(fraction);
  if (!digits || fraction.size() > 9) return std::nullopt;
  return static_cast<double>(*whole) + static_cast<double>(*digits) / std::pow(10.0, static_cast<double>(fraction.size()));
}

// One kernel file of a port into `into`; what cannot be read is added to `unreadable`.
void read_fact(const fs::path& file, std::string* into, std::vector<std::string>* unreadable) {
  std::string why;
  if (const auto line = read_kernel_line(file.string(), &why)) *into = *line;
  else unreadable->push_back(why);
}

// The entries of a folder, sorted; an entry "" with *why_not when it is not a folder.
std::vector<fs::path> entries(const fs::path& dir, std::string* why_not) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    *why_not = strf("folder '%s' %s", dir.c_str(), fs::exists(dir, ec) ? "is not a folder" : "not found");
    return out;
  }
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) out.push_back(it->path());
  if (ec) *why_not = strf("listing folder '%s' failed: %s", dir.c_str(), ec.message().c_str());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<NicPort> read_nic_ports(const std::string& root) {
  std::vector<NicPort> ports;
  const fs::path base = fs::path(root) / "sys/class/infiniband";
  std::error_code ec;
  if (!fs::exists(base, ec)) return ports;  // no InfiniBand/RoCE here: nic.port SKIP
  std::string why;
  for (const fs::path& dev : entries(base, &why)) {
    std::string why_ports;
    const std::vector<fs::path> port_dirs = entries(dev / "ports", &why_ports);
    if (!why_ports.empty()) {
      NicPort broken;
      broken.device = dev.filename().string();
      broken.port = "?";
      broken.unreadable_facts.push_back(why_ports);
      ports.push_back(std::move(broken));
    }
    for (const fs::path& p : port_dirs) {
      NicPort port;
      port.device = dev.filename().string();
      port.port = p.filename().string();
      read_fact(p / "state", &port.state, &port.unreadable_facts);
      read_fact(p / "phys_state", &port.phys_state, &port.unreadable_facts);
      read_fact(p / "rate", &port.rate, &port.unreadable_facts);
      read_fact(p / "link_layer", &port.link_layer, &port.unreadable_facts);
      if (!port.rate.empty() && !rate_gbps(port.rate))
        port.unreadable_facts.push_back(strf("'%s' holds '%.40s', not 'N Gb/sec'", (p / "rate").c_str(), port.rate.c_str()));
      std::string why_counters;
      entries(p / "counters", &why_counters);
      if (!why_counters.empty()) {
        port.unreadable_counters.push_back(why_counters);
      } else {
        for (const char* name : kNicCounters) {
          std::string why_counter;
          if (const auto v = read_kernel_counter((p / "counters" / name).string(), &why_counter))
            port.counters.emplace_back(name, *v);
          else
            port.unreadable_counters.push_back(why_counter);
        }
      }
      ports.push_back(std::move(port));
    }
  }
  if (!why.empty()) {
    NicPort broken;
    broken.device = base.string();
    broken.port = "?";
    broken.unreadable_facts.push_back(why);
    ports.push_back(std::move(broken));
  }
  return ports;
}

std::vector<HealthCheck> nic_health(const std::vector<NicPort>& before, const std::vector<NicPort>& after,
                                    int node, const std::string& host) {
  std::vector<HealthCheck> out;
  double best = 0.0;
  for (const NicPort& p : after)
    if (p.state.find("ACTIVE") != std::string::npos) best = std::max(best, rate_gbps(p.rate).value_or(0.0));
  for (const NicPort& p : after) {
    HealthCheck c;
    c.name = "nic.port";
    c.node = node;
    c.host = host;
    c.subject = p.device + " port " + p.port;
    const double rate = rate_gbps(p.rate).value_or(0.0);
    add_number(c, "rate_gbps", rate);
    c.message = strf("%s, %s, %s%s", p.state.c_str(), p.phys_state.c_str(), p.rate.c_str(),
                     p.link_layer.empty() ? "" : (", " + p.link_layer).c_str());
    if (!p.unreadable_facts.empty()) {
      raise(c, HealthStatus::kUnknown, HealthAction::kNone);
      c.message = "cannot read the port: " + join(p.unreadable_facts, "; ");
    } else if (p.state.find("ACTIVE") == std::string::npos || p.phys_state.find("LinkUp") == std::string::npos) {
      raise(c, HealthStatus::kFail, HealthAction::kCheckCable);
      c.message += ": the port is not up";
    } else if (rate < best) {
      raise(c, HealthStatus::kWarn, HealthAction::kCheckCable);
      c.message += strf(": slower than the node's best port (%.0f Gb/s)", best);
    }
    out.push_back(c);

    HealthCheck e = c;
    e.name = "nic.errors";
    e.status = HealthStatus::kPass;
    e.action = HealthAction::kNone;
    e.numbers.clear();
    const NicPort* old = nullptr;
    for (const NicPort& b : before)
      if (b.device == p.device && b.port == p.port) old = &b;
    std::string grew, total;
    for (const auto& [name, value] : p.counters) {
      uint64_t start = value;
      if (old)
        for (const auto& [n0, v0] : old->counters)
          if (n0 == name) start = v0;
      const uint64_t growth = value >= start ? value - start : 0;
      add_number(e, name.c_str(), static_cast<double>(value));
      add_number(e, (name + "_growth").c_str(), static_cast<double>(growth));
      if (value > 0) total += strf("%s%s %llu", total.empty() ? "" : ", ", name.c_str(), static_cast<unsigned long long>(value));
      if (growth > 0) grew += strf("%s%s +%llu", grew.empty() ? "" : ", ", name.c_str(), static_cast<unsigned long long>(growth));
    }
    if (!grew.empty()) {
      raise(e, HealthStatus::kFail, HealthAction::kCheckCable);
      e.message = "error counters grew during the check: " + grew;
      if (!p.unreadable_counters.empty()) e.message += "; cannot read: " + join(p.unreadable_counters, "; ");
    } else if (!p.unreadable_counters.empty()) {
      raise(e, HealthStatus::kUnknown, HealthAction::kNone);
      e.message = "cannot read the error counters: " + join(p.unreadable_counters, "; ");
    } else if (!total.empty()) {
      raise(e, HealthStatus::kWarn, HealthAction::kMonitor);
      e.message = "no growth during the check; since the counters were cleared: " + total;
    } else {
      e.message = strf("%zu error counters, all 0", p.counters.size());
    }
    out.push_back(e);
  }
  if (after.empty()) {
    HealthCheck c;
    c.name = "nic.port";
    c.node = node;
    c.host = host;
    c.subject = "node";
    c.status = HealthStatus::kSkip;
    c.message = "no InfiniBand/RoCE port in sys/class/infiniband";
    out.push_back(c);
  }
  return out;
}

std::vector<std::string> kernel_xid_lines(const std::string& root, std::string* why_not) {
  const std::string path = (fs::path(root) / "dev/kmsg").string();
  std::vector<std::string> lines;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    *why_not = strf("kernel log %s not readable: %s (run as root to see the kernel's Xid lines)",
                    path.c_str(), std::strerror(errno));
    return lines;
  }
  // /dev/kmsg answers one record per read and EAGAIN at the end; a plain file (tests)
  // answers chunks and 0 at the end. Either way: lines. At most 16 MiB are read.
  std::string text;
  char buffer[8192];
  while (text.size() < (size_t{16} << 20)) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got > 0) {
      text.append(buffer, static_cast<size_t>(got));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && errno == EPIPE) continue;  // records overwritten while reading: skip on
    if (got < 0 && errno != EAGAIN) *why_not = strf("reading %s: %s", path.c_str(), std::strerror(errno));
    break;
  }
  ::close(fd);
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    const size_t at = line.find("NVRM: Xid");
    if (at != std::string::npos) lines.push_back(line.substr(at));
    start = end + 1;
  }
  return lines;
}

}  // namespace zt::check
