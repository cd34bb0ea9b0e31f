// Serial checkpoint helpers (see serial.hpp): the collective writer and reader with
// MPI_COMM_NULL, whole units as the shards.
#include "zt/ckpt/serial.hpp"

#include <unistd.h>

#include "zt/ckpt/adapters.hpp"
#include "zt/ckpt/io.hpp"
#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/log.hpp"
#include "zt/model/layout.hpp"

namespace zt::ckpt {

void write_weights_only(const std::string& path, const model::Config& cfg,
                        std::span<const std::vector<float>> units, const WeightsOptions& options) {
  const model::ParamLayout layout(cfg);
  if (units.size() != static_cast<size_t>(layout.num_units()))
    throw Error(strf("write_weights_only: %zu units given, the model has %d", units.size(),
                     layout.num_units()),
                "pass every unit of model::ParamLayout(cfg)");
  WriteContents c;
  c.header.config = cfg;
  c.header.contents = kContentsWeights;
  c.header.source_dtype = options.source_dtype;
  for (int u = 0; u < layout.num_units(); ++u) {
    const std::vector<float>& v = units[static_cast<size_t>(u)];
    if (static_cast<int64_t>(v.size()) != layout.unit(u).numel)
      throw Error(strf("write_weights_only: unit %d (%s) holds %zu elements, the layout %lld", u,
                       layout.unit(u).name.c_str(), v.size(),
                       static_cast<long long>(layout.unit(u).numel)),
                  "fill each unit in ParamLayout order");
    c.units.push_back(UnitShard{0, layout.unit(u).numel, v, {}, {}});
  }
  SafeFile out(path, "weights file");  // HDF5 writes the (existing, empty) temporary by name
  write_file(MPI_COMM_NULL, out.temp_path(), c);
  if (options.also_write) options.also_write(out.temp_path());
  out.commit();
}

void write_weights_only(const std::string& path, const model::Config& cfg,
                        const model::Parameters<float>& params, const WeightsOptions& options) {
  std::vector<std::vector<float>> units;
  for (int u = 0; u < params.num_units(); ++u) {
    const std::span<const float> p = params.params(u);
    units.emplace_back(p.begin(), p.end());
  }
  write_weights_only(path, cfg, units, options);
}

FullCheckpoint read_full(const std::string& path, bool params_only) {
  FullCheckpoint f;
  f.header = read_header(MPI_COMM_NULL, path);
  const model::ParamLayout layout = file_layout(f.header);  // an adapters file: the adapters only
  const bool training = f.header.contents != kContentsWeights && !params_only;
  const size_t n = static_cast<size_t>(layout.num_units());
  f.params.resize(n);
  if (training) {
    f.exp_avg.resize(n);
    f.exp_avg_sq.resize(n);
  }
  std::vector<UnitTarget> targets;
  for (size_t u = 0; u < n; ++u) {
    const int64_t numel = layout.unit(static_cast<int>(u)).numel;
    UnitTarget t{0, numel, {}, {}, {}};
    f.params[u].resize(static_cast<size_t>(numel));
    t.params = f.params[u];
    if (training) {
      f.exp_avg[u].resize(static_cast<size_t>(numel));
      f.exp_avg_sq[u].resize(static_cast<size_t>(numel));
      t.exp_avg = f.exp_avg[u];
      t.exp_avg_sq = f.exp_avg_sq[u];
    }
    targets.push_back(t);
  }
  f.state = read_file(MPI_COMM_NULL, path, f.header.config, targets,
                      training ? ReadWhat::kTraining : ReadWhat::kParams);
  return f;
}

Header read_header(const std::string& path) { return read_header(MPI_COMM_NULL, path); }

}  // namespace zt::ckpt
