// libFuzzer target: the `finetune` attribute of an adapter checkpoint
// (zt::ckpt::parse_finetune_json, JSON text -> model::LoraConfig) on arbitrary bytes, for
// the `tiny` model. Anything it rejects must be a zt::InputError; a configuration it
// accepts must be one the lora.* keys could give: lora or qlora, 1 <= rank <= the smaller
// side of every targeted W, alpha finite and > 0, dropout in [0, 1), a target at least.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "zt/ckpt/adapter_export.hpp"
#include "zt/core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const zt::model::Config tiny = zt::model::Config::preset("tiny");
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const zt::model::LoraConfig l = zt::ckpt::parse_finetune_json(text, tiny, "fuzz.h5");
    if (!l.enabled() || l.targets == 0 || l.rank < 1) std::abort();
    if (!(l.alpha > 0) || !std::isfinite(l.alpha) || !(l.dropout >= 0 && l.dropout < 1)) std::abort();
    for (int t = 0; t < zt::model::kNumLoraTargets; ++t) {
      const auto target = static_cast<zt::model::LoraTarget>(t);
      if (!l.has_target(target)) continue;
      int64_t in = 0, out = 0;
      zt::model::lora_target_dims(tiny, target, in, out);
      if (l.rank > in || l.rank > out) std::abort();
    }
  } catch (const zt::InputError&) {
  }
  return 0;
}
