// CPU-only build: there is no GPU to stress (include/zt/check/stress.hpp).
#include "zt/check/stress.hpp"

namespace zt::check {

std::vector<StressSample> measure_stress(const std::vector<int>& devices, double) {
  std::vector<StressSample> out;
  for (int d : devices) {
    StressSample s;
    s.device = d;
    s.skipped = "no GPU stress: zt was built without CUDA";
    out.push_back(s);
  }
  return out;
}

}  // namespace zt::check
