// CPU-only build: there is no GPU to stress (include/zt/check/stress.hpp).
#include "zt/check/stress.hpp"

namespace zt::check {

StressSample measure_stress(int device, double seconds) {
  StressSample s;
  s.device = device;
  s.off = seconds <= 0.0;
  s.skipped = s.off ? "stress off (--burn-seconds 0)" : "no GPU stress: zt was built without CUDA";
  return s;
}

}  // namespace zt::check
