// Reading NCCL's INFO lines about the network it chose, and judging them against the
// fabric the node offers (include/zt/check/nccl_log.hpp).
#include "zt/check/nccl_log.hpp"

#include <algorithm>
#include <cctype>

#include "zt/core/log.hpp"

namespace zt::check {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// The text after `marker` in `line`, or nullopt-like empty view with found = false.
bool after(std::string_view line, std::string_view marker, std::string_view* rest) {
  const size_t at = line.find(marker);
  if (at == std::string_view::npos) return false;
  *rest = line.substr(at + marker.size());
  return true;
}

void read_message(std::string_view m, NcclNetworkInfo& info) {
  std::string_view rest;
  const std::string lowered = lower(m);  // same length and offsets as m
  const size_t provider_at = lowered.find("selected provider is ");
  if (starts_with(m, "Using network ")) {
    info.network = std::string(trim(m.substr(14)));
    info.kind = classify_network(info.network);
  } else if (after(m, "Loaded net plugin ", &rest)) {
    // "AWS Libfabric (v7)": the name stops before " (v".
    const size_t version = rest.find(" (v");
    info.plugin = std::string(trim(rest.substr(0, version)));
  } else if (provider_at != std::string::npos) {
    // "NET/OFI Selected provider is efa, fabric is efa (found 4 nics)"; older plugins
    // write "Provider". Found in the lower-cased copy, taken from the original text.
    std::string_view provider = m.substr(provider_at + 21);
    provider = provider.substr(0, std::min(provider.find(','), provider.find(" (")));
    info.ofi_provider = std::string(trim(provider));
  } else if (starts_with(m, "NET/IB : Using") || starts_with(m, "NET/Socket : Using")) {
    info.devices = std::string(trim(m.substr(m.find("Using") + 5)));
  } else if (contains(m, "GPU Direct RDMA Enabled for HCA")) {
    ++info.gdr_enabled_hcas;
  } else if (contains(m, "GPU Direct RDMA Disabled for HCA")) {
    ++info.gdr_disabled_hcas;
  } else if (starts_with(m, "Channel ") && contains(m, " via NET/")) {
    ++info.net_channels;
    if (contains(m, "/GDRDMA")) ++info.gdr_channels;
  }
}

bool any_provider(const FabricFacts& f, std::string_view name) {
  return std::any_of(f.providers.begin(), f.providers.end(),
                     [&](const std::string& p) { return contains(lower(p), name); });
}

}  // namespace

std::string_view net_kind_name(NetKind k) {
  switch (k) {
    case NetKind::kUnknown: return "unknown";
    case NetKind::kSocket: return "socket";
    case NetKind::kIB: return "ib";
    case NetKind::kLibfabric: return "libfabric";
    case NetKind::kOther: return "other";
  }
  return "?";
}

NetKind classify_network(std::string_view name) {
  const std::string n = lower(trim(name));
  if (n.empty()) return NetKind::kUnknown;
  if (n == "socket") return NetKind::kSocket;
  if (n == "ib") return NetKind::kIB;
  if (contains(n, "libfabric") || contains(n, "ofi")) return NetKind::kLibfabric;
  return NetKind::kOther;
}

NcclNetworkInfo parse_nccl_log(std::string_view text) {
  NcclNetworkInfo info;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    std::string_view message;
    if (after(line, "NCCL INFO ", &message)) read_message(trim(message), info);
    else if (after(line, "NCCL WARN ", &message)) info.warnings.emplace_back(trim(message));
  }
  return info;
}

std::string expected_network(const FabricFacts& facts) {
  if (any_provider(facts, "efa")) return "efa";
  if (any_provider(facts, "verbs") || facts.infiniband_sysfs) return "ib";
  return "any";
}

FabricJudgement judge_fabric(const FabricFacts& facts, const NcclNetworkInfo& info) {
  const std::string expected = expected_network(facts);
  std::string offers = expected == "efa" ? "EFA (libfabric provider efa)"
                       : expected == "ib" ? "InfiniBand/RDMA (verbs or /sys/class/infiniband)"
                                          : "no RDMA fabric";
  FabricJudgement j;
  if (info.network.empty()) {
    j.status = expected == "any" ? FabricStatus::kWarn : FabricStatus::kFail;
    j.message = "NCCL's log has no 'Using network' line; the node offers " + offers +
                " (HINT: is NCCL_DEBUG_FILE writable? did NCCL initialise?)";
    return j;
  }
  std::string used = "NCCL uses network '" + info.network + "'";
  if (!info.plugin.empty()) used += " (plugin " + info.plugin + ")";
  if (!info.ofi_provider.empty()) used += " with libfabric provider " + info.ofi_provider;
  const std::string provider = lower(info.ofi_provider);
  bool ok = true;
  std::string why;
  if (expected == "efa") {
    ok = info.kind == NetKind::kLibfabric && (provider.empty() || contains(provider, "efa"));
    why = info.kind == NetKind::kSocket ? "fell back to TCP sockets"
                                        : "EFA present but not used";
    why += " (HINT: install aws-ofi-nccl and put it on LD_LIBRARY_PATH; set FI_PROVIDER=efa)";
  } else if (expected == "ib") {
    ok = info.kind == NetKind::kIB ||
         (info.kind == NetKind::kLibfabric && contains(provider, "verbs"));
    why = info.kind == NetKind::kSocket ? "fell back to TCP sockets"
                                        : "InfiniBand present but not used";
    why += " (HINT: check NCCL_IB_DISABLE, NCCL_NET, rdma-core/libibverbs in the container, "
           "and NCCL_IB_HCA)";
  }
  if (!ok) {
    j.status = FabricStatus::kFail;
    j.message = used + "; the node offers " + offers + ": " + why;
    return j;
  }
  j.message = used + "; the node offers " + offers;
  if (expected != "any" && info.net_channels > 0) {
    j.message += strf("; %d of %d network connections use GPU Direct RDMA", info.gdr_channels,
                      info.net_channels);
    if (info.gdr_channels == 0) {
      j.status = FabricStatus::kWarn;
      j.message += " (HINT: load nvidia-peermem, check ACS/IOMMU settings)";
    }
  }
  return j;
}

}  // namespace zt::check
