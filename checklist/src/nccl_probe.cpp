// The NCCL network probe: one small NCCL all_reduce with NCCL_DEBUG=INFO written to a
// file, then NCCL's own lines about the network it chose are parsed (nccl_log.hpp).
// NCCL reads NCCL_DEBUG* once, at its first initialisation in the process, so this runs
// before the benchmark's NCCL comm exists (src: command.cpp). In a build without CUDA,
// or on ranks without a GPU, it reports why it was skipped.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "buffer.hpp"
#include "zt/check/stages.hpp"
#include "zt/comm/nccl_comm.hpp"
#include "zt/core/log.hpp"

namespace zt::check {

NcclProbe probe_nccl_network(MPI_Comm world, comm::Comm& control, int device,
                             const std::string& log_dir) {
  NcclProbe p;
  if (!comm::nccl_available()) {
    p.note = "skipped: no GPU (not built with CUDA/NCCL)";
    return p;
  }
  const int mine = device >= 0 ? 1 : 0;
  int every = 0;
  control.all_reduce(&mine, &every, 1, DType::kI32, comm::ReduceOp::kMin);
  if (every == 0) {
    p.note = device < 0 ? "skipped: no GPU" : "skipped: some rank has no GPU";
    return p;
  }
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown");
  p.log_file = strf("%s/nccl-probe.%s.%ld.log", log_dir.c_str(), host, static_cast<long>(::getpid()));
  // Process environment, read by NCCL at its first init; nothing else in zt reads these.
  ::setenv("NCCL_DEBUG", "INFO", 1);
  ::setenv("NCCL_DEBUG_SUBSYS", "INIT,NET", 1);
  ::setenv("NCCL_DEBUG_FILE", p.log_file.c_str(), 1);
  {
    std::unique_ptr<comm::Comm> nccl = comm::make_nccl_comm(world);
    // 4 MiB: large enough that NCCL connects its ring channels (and logs them).
    constexpr size_t kCount = size_t{1} << 20;
    std::unique_ptr<Buffer> buf = make_device_buffer(kCount * sizeof(float));  // [kCount] f32
    buf->zero(kCount * sizeof(float));
    nccl->all_reduce(buf->data(), buf->data(), kCount, DType::kF32, comm::ReduceOp::kSum);
    nccl->synchronize();
  }
  std::ifstream in(p.log_file);
  if (!in) {
    p.note = "NCCL wrote no log at " + p.log_file;
    p.probed = true;  // judged: no "Using network" line
    return p;
  }
  std::ostringstream text;
  text << in.rdbuf();
  p.info = parse_nccl_log(text.str());
  p.probed = true;
  return p;
}

}  // namespace zt::check
