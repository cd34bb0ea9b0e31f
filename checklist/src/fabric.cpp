// The fabric of each node: libfabric providers and /sys/class/infiniband, NCCL's chosen
// network judged against them (nccl_log.hpp), and GPU-NIC NUMA affinity from hwloc
// (include/zt/check/stages.hpp).
#include <hwloc.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "join.hpp"
#include "zt/check/environment.hpp"
#include "zt/check/stages.hpp"
#include "zt/core/log.hpp"

namespace zt::check {
namespace {

// The NUMA node of an object: the first NUMA node of its first non-I/O ancestor; -1
// when the machine has no NUMA information.
int numa_of(hwloc_topology_t topo, hwloc_obj_t obj) {
  hwloc_obj_t host = hwloc_get_non_io_ancestor_obj(topo, obj);
  if (host == nullptr || host->nodeset == nullptr || hwloc_bitmap_iszero(host->nodeset)) return -1;
  return hwloc_bitmap_first(host->nodeset);
}

// Owns a loaded hwloc topology with I/O devices.
struct Topology {
  hwloc_topology_t topo = nullptr;
  bool ok = false;
  Topology() {
    if (hwloc_topology_init(&topo) != 0) return;
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    ok = hwloc_topology_load(topo) == 0;
  }
  ~Topology() {
    if (topo != nullptr) hwloc_topology_destroy(topo);
  }
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;
};

// "NVIDIA H100 80GB HBM3 [0000:1B:00.0]" -> "0000:1B:00.0" ("" when there is none).
std::string bus_id_of(const std::string& device_name) {
  const size_t open = device_name.rfind('[');
  const size_t close = device_name.rfind(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return {};
  return device_name.substr(open + 1, close - open - 1);
}

std::string joined(const std::vector<std::string>& v) { return join(v, ", "); }

}  // namespace

FabricFacts local_fabric_facts() {
  FabricFacts f;
  std::vector<std::string> ignored;  // fi_getinfo failures are reported by the environment
  f.providers = libfabric_providers(&ignored);
  std::error_code ec;
  f.infiniband_sysfs = std::filesystem::is_directory("/sys/class/infiniband", ec) &&
                       !std::filesystem::is_empty("/sys/class/infiniband", ec);
  return f;
}

void hwloc_affinity(const std::vector<std::string>& gpu_bus_ids, NodeFabric& fabric) {
  fabric.nics.clear();
  Topology t;
  if (!t.ok) {
    fabric.affinity_status = -1;
    fabric.affinity = "skipped: hwloc could not load the topology";
    return;
  }
  std::set<int> rdma_numa;  // NUMA nodes with an RDMA NIC (InfiniBand, RoCE, EFA)
  std::vector<std::string> rdma_nics;
  for (hwloc_obj_t o = hwloc_get_next_osdev(t.topo, nullptr); o != nullptr;
       o = hwloc_get_next_osdev(t.topo, o)) {
    const auto type = o->attr->osdev.type;
    if (type != HWLOC_OBJ_OSDEV_NETWORK && type != HWLOC_OBJ_OSDEV_OPENFABRICS) continue;
    const int numa = numa_of(t.topo, o);
    const std::string name = o->name != nullptr ? o->name : "?";
    const std::string entry = strf("%s (%s, NUMA %d)", name.c_str(),
                                   type == HWLOC_OBJ_OSDEV_OPENFABRICS ? "rdma" : "net", numa);
    fabric.nics.push_back(entry);
    if (type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
      rdma_numa.insert(numa);
      rdma_nics.push_back(entry);
    }
  }
  if (gpu_bus_ids.empty()) {
    fabric.affinity_status = -1;
    fabric.affinity = "skipped: no GPU; NICs: " + (fabric.nics.empty() ? std::string("none") : joined(fabric.nics));
    return;
  }
  std::vector<std::string> far;   // GPUs without an RDMA NIC on their NUMA node
  std::vector<std::string> gpus;
  for (const std::string& bus : gpu_bus_ids) {
    hwloc_obj_t pci = hwloc_get_pcidev_by_busidstring(t.topo, bus.c_str());
    const int numa = pci != nullptr ? numa_of(t.topo, pci) : -1;
    gpus.push_back(strf("GPU %s (NUMA %d)", bus.c_str(), numa));
    if (!rdma_numa.empty() && rdma_numa.count(numa) == 0) far.push_back(gpus.back());
  }
  fabric.affinity_status = far.empty() ? 0 : 1;
  fabric.affinity = joined(gpus) + "; RDMA NICs: " + (rdma_nics.empty() ? std::string("none") : joined(rdma_nics));
  if (!far.empty())
    fabric.affinity += "; no RDMA NIC on the NUMA node of " + joined(far) +
                       " (HINT: traffic crosses the CPU interconnect; check the PCIe topology "
                       "and NCCL_IB_HCA / the GPU-NIC mapping)";
}

std::vector<std::string> gather_strings(comm::Comm& control, const std::string& mine) {
  const int n = control.size();
  const int64_t length = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lengths(static_cast<size_t>(n));  // [n]
  control.all_gather(&length, lengths.data(), 1, DType::kI64);
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::vector<uint8_t> padded(static_cast<size_t>(longest), 0);  // [longest]
  std::copy(mine.begin(), mine.end(), padded.begin());
  std::vector<uint8_t> all(static_cast<size_t>(longest) * static_cast<size_t>(n));  // [n][longest]
  if (longest > 0) control.all_gather(padded.data(), all.data(), static_cast<size_t>(longest), DType::kU8);
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) {
    const char* begin = reinterpret_cast<const char*>(all.data()) + static_cast<size_t>(r) * static_cast<size_t>(longest);
    out.emplace_back(begin, static_cast<size_t>(lengths[static_cast<size_t>(r)]));
  }
  return out;
}

std::vector<NodeFabric> collect_fabric(comm::Comm& control, const std::vector<RankInfo>& ranks,
                                       const NcclProbe& probe) {
  const std::vector<int> leaders = node_leaders(ranks);
  const int me = control.rank();
  const int my_node = ranks[static_cast<size_t>(me)].node;
  // Wire format per rank (leaders fill it, others send ""): fields separated by '\x1f',
  // list items by '\x1e'.
  std::string wire;
  if (leaders[static_cast<size_t>(my_node)] == me) {
    NodeFabric f;
    const FabricFacts facts = local_fabric_facts();
    f.providers = facts.providers;
    f.infiniband_sysfs = facts.infiniband_sysfs;
    f.expected = expected_network(facts);
    f.nccl_probed = probe.probed;
    if (probe.probed) {
      const FabricJudgement j = judge_fabric(facts, probe.info);
      f.fabric_status = static_cast<int>(j.status);
      f.fabric_message = j.message;
      f.nccl_note = "network " + (probe.info.network.empty() ? std::string("?") : probe.info.network) +
                    (probe.info.plugin.empty() ? std::string() : ", plugin " + probe.info.plugin) +
                    strf(", %d/%d net connections with GDRDMA; log %s", probe.info.gdr_channels,
                         probe.info.net_channels, probe.log_file.c_str());
    } else {
      f.nccl_note = probe.note;
    }
    std::vector<std::string> buses;
    for (const RankInfo& r : ranks) {
      const std::string bus = r.node == my_node ? bus_id_of(r.device_name) : "";
      if (!bus.empty()) buses.push_back(bus);
    }
    hwloc_affinity(buses, f);
    auto list = [](const std::vector<std::string>& v) { return join(v, "\x1e"); };
    wire = list(f.providers) + "\x1f" + (f.infiniband_sysfs ? "1" : "0") + "\x1f" + f.expected +
           "\x1f" + (f.nccl_probed ? "1" : "0") + "\x1f" + f.nccl_note + "\x1f" +
           std::to_string(f.fabric_status) + "\x1f" + f.fabric_message + "\x1f" + list(f.nics) +
           "\x1f" + std::to_string(f.affinity_status) + "\x1f" + f.affinity;
  }
  const std::vector<std::string> all = gather_strings(control, wire);
  auto split = [](const std::string& s, char sep) {
    std::vector<std::string> parts;
    size_t start = 0;
    while (true) {
      const size_t end = s.find(sep, start);
      parts.push_back(s.substr(start, end - start));
      if (end == std::string::npos) break;
      start = end + 1;
    }
    return parts;
  };
  std::vector<NodeFabric> nodes;
  for (int leader : leaders) {
    const std::vector<std::string> f = split(all[static_cast<size_t>(leader)], '\x1f');
    NodeFabric n;
    if (f.size() == 10) {
      if (!f[0].empty()) n.providers = split(f[0], '\x1e');
      n.infiniband_sysfs = f[1] == "1";
      n.expected = f[2];
      n.nccl_probed = f[3] == "1";
      n.nccl_note = f[4];
      n.fabric_status = std::stoi(f[5]);
      n.fabric_message = f[6];
      if (!f[7].empty()) n.nics = split(f[7], '\x1e');
      n.affinity_status = std::stoi(f[8]);
      n.affinity = f[9];
    }
    nodes.push_back(n);
  }
  return nodes;
}

}  // namespace zt::check
