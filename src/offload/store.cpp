// The offload store (see store.hpp): host-memory and NVMe homes of the optimizer state,
// the pipelined update pass, and the NVMe home of stage-3 parameter shards.
#include "zt/offload/store.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"
#include "zt/offload/host_buffer.hpp"
#include "zt/offload/nvme_file.hpp"
#include "zt/offload/preflight.hpp"

namespace zt::offload {
namespace {

uint64_t record_bytes(int64_t count) { return round_up(static_cast<size_t>(count) * 12u); }

#ifdef ZT_HAVE_CUDA
constexpr bool kPin = true;
#else
constexpr bool kPin = false;
#endif

}  // namespace

int64_t subgroup_elements(const Options& o) {
  const int64_t e = static_cast<int64_t>(o.subgroup_bytes / 12u) / 1024 * 1024;
  return std::max<int64_t>(e, 1024);
}

uint64_t nvme_host_bytes(const Options& o, int64_t largest_state_count, int64_t largest_param_shard) {
  uint64_t b = 0;
  if (o.optimizer == Home::kNvme)
    b += static_cast<uint64_t>(o.buffers) *
         record_bytes(std::min(subgroup_elements(o), std::max<int64_t>(largest_state_count, 1)));
  if (o.params == Home::kNvme) b += round_up(static_cast<size_t>(largest_param_shard) * 4u);
  return b;
}

uint64_t nvme_file_bytes(const Options& o, const std::vector<int64_t>& state_counts,
                         const std::vector<int64_t>& param_counts) {
  uint64_t b = 0;
  if (o.optimizer == Home::kNvme) {
    const int64_t e = subgroup_elements(o);
    for (int64_t c : state_counts)
      for (int64_t first = 0; first < c; first += e) b += record_bytes(std::min(e, c - first));
  }
  if (o.params == Home::kNvme)
    for (int64_t c : param_counts) b += round_up(static_cast<size_t>(c) * 4u);
  return b;
}

uint64_t store_host_bytes(const Options& o, const std::vector<int64_t>& state_counts,
                          const std::vector<int64_t>& param_counts) {
  int64_t largest_param = 0, largest_state = 0;
  for (int64_t c : param_counts) largest_param = std::max(largest_param, c);
  for (int64_t c : state_counts) largest_state = std::max(largest_state, c);
  uint64_t host = nvme_host_bytes(o, largest_state, o.params == Home::kNvme ? largest_param : 0);
  if (o.optimizer == Home::kCpu)
    for (int64_t c : state_counts) host += round_up(static_cast<size_t>(c) * 12u);
  if (o.params == Home::kCpu)
    for (int64_t c : param_counts) host += round_up(static_cast<size_t>(c) * 4u);
  return host;
}

struct Store::Impl {
  Options opt;
  std::vector<int64_t> counts;        // per unit: optimizer state elements
  std::vector<int64_t> param_counts;  // per unit: parameter shard elements
  std::vector<SubGroup> groups;
  std::vector<size_t> unit_first_group;  // per unit: index of its first sub-group
  std::vector<uint64_t> param_offset;    // per unit: byte offset of its parameter shard
  // host home: per unit [master | m | v] (count each)
  std::vector<HostBuffer> resident;
  // NVMe home
  std::unique_ptr<NvmeFile> file;
  std::vector<HostBuffer> ring;  // the pipeline's sub-group buffers
  HostBuffer bounce;             // parameter shards
  // params home host (offload.params = cpu): per unit [shard]
  std::vector<HostBuffer> param_resident;
  bool pinned = false;

  StateView host_view(int u, int64_t first) {
    const size_t c = static_cast<size_t>(counts[static_cast<size_t>(u)]);
    float* base = resident[static_cast<size_t>(u)].floats();
    return {base + first, base + c + first, base + 2 * c + first};
  }
  static StateView record_view(const HostBuffer& b, int64_t count) {
    float* base = b.floats();
    const size_t c = static_cast<size_t>(count);
    return {base, base + c, base + 2 * c};
  }
  // Each sub-group of u through ring[0], blocking.
  template <class F>
  void for_unit_groups(int u, F&& f) {
    const size_t gs = unit_first_group[static_cast<size_t>(u)];
    for (size_t k = gs; k < groups.size() && groups[k].unit == u; ++k) f(groups[k]);
  }
};

Store::Store(const Options& options, std::vector<int64_t> state_counts,
             std::vector<int64_t> param_counts, int rank)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.opt = options;
  s.counts = std::move(state_counts);
  s.param_counts = std::move(param_counts);
  const Options& o = s.opt;
  const size_t units = s.counts.size();
  ZT_CHECK(o.params == Home::kNone || s.param_counts.size() == units,
           "offload::Store: one parameter count per unit", "a bug in the caller");

  // Sub-groups (also for the host home: the update pass walks them the same way).
  const int64_t e = subgroup_elements(o);
  uint64_t offset = 0;
  s.unit_first_group.assign(units, 0);
  if (o.optimizer != Home::kNone) {
    for (size_t u = 0; u < units; ++u) {
      s.unit_first_group[u] = s.groups.size();
      for (int64_t first = 0; first < s.counts[u]; first += e) {
        SubGroup g;
        g.unit = static_cast<int>(u);
        g.first = first;
        g.count = std::min(e, s.counts[u] - first);
        g.offset = offset;
        if (o.optimizer == Home::kNvme) offset += record_bytes(g.count);
        s.groups.push_back(g);
      }
    }
  }
  if (o.params == Home::kNvme) {
    s.param_offset.assign(units, 0);
    for (size_t u = 0; u < units; ++u) {
      s.param_offset[u] = offset;
      offset += round_up(static_cast<size_t>(s.param_counts[u]) * 4u);
    }
  }

  // Host budget.
  int64_t largest_param = 0, largest_state = 0;
  for (int64_t c : s.param_counts) largest_param = std::max(largest_param, c);
  for (int64_t c : s.counts) largest_state = std::max(largest_state, c);
  const int64_t ring_elems = std::min(e, std::max<int64_t>(largest_state, 1));
  const uint64_t host = store_host_bytes(o, s.counts, s.param_counts);
  if (o.max_host_bytes > 0 && host > o.max_host_bytes)
    throw InputError(
        strf("the offload store needs %s of host memory on this rank but offload.max_host_bytes "
             "= %s",
             format_size_approx(host).c_str(), format_size_approx(o.max_host_bytes).c_str()),
        o.optimizer == Home::kCpu
            ? "offload.optimizer = nvme keeps only offload.buffers sub-groups in host "
              "memory; or raise offload.max_host_bytes."
            : "lower offload.subgroup_bytes or offload.buffers (>= 3), or raise "
              "offload.max_host_bytes.");
  // Pinned (CUDA builds, an engine on a device): the NVMe pipeline's buffers only. The resident homes stay
  // pageable: a GPU engine copies through its own bounded pinned pool (pinned_pool.hpp),
  // so pinning the whole state (12 B per element) would only take page-locked memory.
  const uint64_t pinned_bytes =
      nvme_host_bytes(o, largest_state, o.params == Home::kNvme ? largest_param : 0);
  s.pinned = kPin && o.pin_buffers && pinned_bytes > 0 && preflight_memlock(pinned_bytes);

  if (o.optimizer == Home::kCpu) {
    s.resident.reserve(units);
    for (size_t u = 0; u < units; ++u)
      s.resident.emplace_back(static_cast<size_t>(s.counts[u]) * 12u, false);
  }
  if (o.params == Home::kCpu) {  // stage-3 shards in host memory (a device engine's)
    s.param_resident.reserve(units);
    for (size_t u = 0; u < units; ++u)
      s.param_resident.emplace_back(static_cast<size_t>(s.param_counts[u]) * 4u, false);
  }
  if (o.uses_nvme()) {
    const std::string path = nvme_file_path(o.nvme_path, rank);
    preflight_nvme(o.nvme_path, path, offset);
    NvmeFile::Settings fs;
    fs.queue_depth = o.queue_depth;
    fs.block_bytes = o.block_bytes;
    s.file = std::make_unique<NvmeFile>(path, offset, fs);
    if (o.optimizer == Home::kNvme)
      for (int b = 0; b < o.buffers; ++b) s.ring.emplace_back(record_bytes(ring_elems), s.pinned);
    if (o.params == Home::kNvme) s.bounce = HostBuffer(static_cast<size_t>(largest_param) * 4u, s.pinned);
  }
}

Store::~Store() = default;
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;

const Options& Store::options() const { return impl_->opt; }
Home Store::optimizer_home() const { return impl_->opt.optimizer; }
const std::vector<SubGroup>& Store::subgroups() const { return impl_->groups; }

void Store::init_unit(int u, const float* master) {
  Impl& s = *impl_;
  const size_t c = static_cast<size_t>(s.counts[static_cast<size_t>(u)]);
  if (s.opt.optimizer == Home::kCpu) {
    const StateView h = s.host_view(u, 0);
    std::copy_n(master, c, h.master);
    std::fill_n(h.m, c, 0.0f);
    std::fill_n(h.v, c, 0.0f);
    return;
  }
  ZT_CHECK(s.opt.optimizer == Home::kNvme, "Store::init_unit without an optimizer home", "a bug");
  s.for_unit_groups(u, [&](const SubGroup& g) {
    const StateView r = Impl::record_view(s.ring[0], g.count);
    std::copy_n(master + g.first, g.count, r.master);
    std::fill_n(r.m, g.count, 0.0f);
    std::fill_n(r.v, g.count, 0.0f);
    s.file->write(g.offset, s.ring[0].data(), record_bytes(g.count));
  });
}

void Store::read_unit(int u, float* master, float* m, float* v) {
  Impl& s = *impl_;
  const size_t c = static_cast<size_t>(s.counts[static_cast<size_t>(u)]);
  if (s.opt.optimizer == Home::kCpu) {
    const StateView h = s.host_view(u, 0);
    std::copy_n(h.master, c, master);
    std::copy_n(h.m, c, m);
    std::copy_n(h.v, c, v);
    return;
  }
  s.for_unit_groups(u, [&](const SubGroup& g) {
    s.file->read(g.offset, s.ring[0].data(), record_bytes(g.count));
    const StateView r = Impl::record_view(s.ring[0], g.count);
    std::copy_n(r.master, g.count, master + g.first);
    std::copy_n(r.m, g.count, m + g.first);
    std::copy_n(r.v, g.count, v + g.first);
  });
}

void Store::write_unit(int u, const float* master, const float* m, const float* v) {
  Impl& s = *impl_;
  const size_t c = static_cast<size_t>(s.counts[static_cast<size_t>(u)]);
  if (s.opt.optimizer == Home::kCpu) {
    const StateView h = s.host_view(u, 0);
    std::copy_n(master, c, h.master);
    std::copy_n(m, c, h.m);
    std::copy_n(v, c, h.v);
    return;
  }
  s.for_unit_groups(u, [&](const SubGroup& g) {
    const StateView r = Impl::record_view(s.ring[0], g.count);
    std::copy_n(master + g.first, g.count, r.master);
    std::copy_n(m + g.first, g.count, r.m);
    std::copy_n(v + g.first, g.count, r.v);
    s.file->write(g.offset, s.ring[0].data(), record_bytes(g.count));
  });
}

void Store::update(const std::function<void(const SubGroup&, const StateView&)>& fn) {
  Impl& s = *impl_;
  if (s.opt.optimizer == Home::kCpu) {
    for (const SubGroup& g : s.groups) fn(g, s.host_view(g.unit, g.first));
    return;
  }
  ZT_CHECK(s.opt.optimizer == Home::kNvme, "Store::update without an optimizer home", "a bug");
  // Buffer k % B holds sub-group k. Reads run up to B - 2 sub-groups ahead of the update;
  // a buffer is read into only after the write of its previous sub-group has landed.
  const size_t K = s.groups.size();
  const size_t B = s.ring.size();
  std::vector<NvmeFile::Ticket> reading(B, 0), writing(B, 0);
  size_t issued = 0;
  for (size_t k = 0; k < K; ++k) {
    while (issued < K && issued <= k + B - 2) {
      const size_t b = issued % B;
      if (writing[b]) s.file->wait(std::exchange(writing[b], 0));
      const SubGroup& g = s.groups[issued];
      reading[b] = s.file->submit_read(g.offset, s.ring[b].data(), record_bytes(g.count));
      ++issued;
    }
    const size_t b = k % B;
    const SubGroup& g = s.groups[k];
    s.file->wait(std::exchange(reading[b], 0));
    fn(g, Impl::record_view(s.ring[b], g.count));
    writing[b] = s.file->submit_write(g.offset, s.ring[b].data(), record_bytes(g.count));
  }
  for (NvmeFile::Ticket& t : writing)
    if (t) s.file->wait(std::exchange(t, 0));
}

void Store::read_params(int u, float* dst) {
  Impl& s = *impl_;
  ZT_CHECK(s.opt.params != Home::kNone, "Store::read_params without offload.params", "a bug");
  const size_t c = static_cast<size_t>(s.param_counts[static_cast<size_t>(u)]);
  if (s.opt.params == Home::kCpu) {
    std::copy_n(s.param_resident[static_cast<size_t>(u)].floats(), c, dst);
    return;
  }
  s.file->read(s.param_offset[static_cast<size_t>(u)], s.bounce.data(), round_up(c * 4u));
  std::copy_n(s.bounce.floats(), c, dst);
}

void Store::write_params(int u, const float* src) {
  Impl& s = *impl_;
  ZT_CHECK(s.opt.params != Home::kNone, "Store::write_params without offload.params", "a bug");
  const size_t c = static_cast<size_t>(s.param_counts[static_cast<size_t>(u)]);
  if (s.opt.params == Home::kCpu) {
    std::copy_n(src, c, s.param_resident[static_cast<size_t>(u)].floats());
    return;
  }
  std::copy_n(src, c, s.bounce.floats());
  s.file->write(s.param_offset[static_cast<size_t>(u)], s.bounce.data(), round_up(c * 4u));
}

uint64_t Store::host_bytes() const {
  const Impl& s = *impl_;
  uint64_t b = s.bounce.size();
  for (const HostBuffer& h : s.resident) b += h.size();
  for (const HostBuffer& h : s.param_resident) b += h.size();
  for (const HostBuffer& h : s.ring) b += h.size();
  return b;
}

uint64_t Store::nvme_bytes() const { return impl_->file ? impl_->file->size() : 0; }

std::string Store::describe() const {
  const Impl& s = *impl_;
  std::string d = strf("offload: optimizer %s, params %s", std::string(home_name(s.opt.optimizer)).c_str(),
                       std::string(home_name(s.opt.params)).c_str());
  d += strf(", %zu sub-groups, host %s%s", s.groups.size(), format_size_approx(host_bytes()).c_str(),
            s.pinned ? " (NVMe buffers pinned)" : "");
  if (s.file)
    d += strf(", file %s (%s, %s, %s, queue depth %d, %d buffers)", s.file->path().c_str(),
              format_size_approx(s.file->size()).c_str(), s.file->direct() ? "O_DIRECT" : "buffered",
              s.file->uring() ? "io_uring" : "pread/pwrite", s.opt.queue_depth, s.opt.buffers);
  return d;
}

}  // namespace zt::offload
