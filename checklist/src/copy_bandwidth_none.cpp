// CPU-only build: there is no device to copy to.
#include "zt/check/stages.hpp"

namespace zt::check {

CopyBandwidth measure_copy_bandwidth(int, uint64_t, int) {
  CopyBandwidth c;
  c.note = "skipped: no GPU (not built with CUDA)";
  return c;
}

}  // namespace zt::check
