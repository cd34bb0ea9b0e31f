// Qwen3.5's Gated DeltaNet layers in model::Config (config.hpp): their sizes' checks and
// their parameter count.
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/model/config.hpp"
#include "zt/model/family.hpp"

namespace zt::model {

void Config::validate_linear() const {
  if (!linear_layers()) return;
  if (!model::family(family).hybrid)
    throw InputError("model.layer_types holds 'l' (linear_attention) with model.family = " +
                         this->family,
                     "Gated DeltaNet layers are Qwen3.5's: set model.family = qwen3_5_text (or "
                     "qwen3_5_moe_text), or "
                     "make every layer f or s.");
  const auto positive = [](int64_t v, const char* field, int64_t max) {
    if (v < 1 || v > max)
      throw InputError(strf("model.%s = %lld: must be 1 .. %lld", field, static_cast<long long>(v),
                            static_cast<long long>(max)),
                       "Qwen3.5-9B: linear_key_heads 16, linear_value_heads 32, head dims 128, "
                       "linear_conv_kernel 4.");
  };
  positive(linear_key_heads, "linear_key_heads", kMaxHeads);
  positive(linear_value_heads, "linear_value_heads", kMaxHeads);
  positive(linear_key_dim, "linear_key_dim", kMaxHidden);
  positive(linear_value_dim, "linear_value_dim", kMaxHidden);
  positive(linear_conv_kernel, "linear_conv_kernel", 1024);
  if (linear_value_heads % linear_key_heads != 0)
    throw InputError(strf("model.linear_key_heads = %lld does not divide model.linear_value_heads "
                          "= %lld",
                          static_cast<long long>(linear_key_heads),
                          static_cast<long long>(linear_value_heads)),
                     "each key head serves linear_value_heads / linear_key_heads value heads "
                     "(Qwen3.5: 16 and 32).");
}

int64_t Config::num_linear_mixer_params() const {
  const int64_t Cc = linear_conv_dim(), Hv = linear_value_heads;
  const int64_t VD = Hv * linear_value_dim;
  return Cc * hidden /*in_proj_qkv*/ + VD * hidden /*z*/ + 2 * Hv * hidden /*b, a*/ +
         Cc * linear_conv_kernel /*conv1d*/ + 2 * Hv /*A_log, dt_bias*/ +
         linear_value_dim /*norm*/ + hidden * VD /*out_proj*/;
}

}  // namespace zt::model
