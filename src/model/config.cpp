// Model configuration: presets, validation, parameter and FLOP counts.
#include "zt/model/config.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "zt/core/checked.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/model/family.hpp"

namespace zt::model {

namespace {

Config make(const char* name, int64_t vocab, int64_t hidden, int64_t layers, int64_t heads,
            int64_t kv_heads, int64_t intermediate, int64_t context, double norm_eps) {
  Config c;
  c.name = name;
  c.vocab = vocab;
  c.hidden = hidden;
  c.layers = layers;
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.intermediate = intermediate;
  c.context = context;
  c.tied_embeddings = false;
  c.rope_theta = 10000.0;
  c.norm_eps = norm_eps;
  return c;
}

void require_positive(int64_t value, const char* field) {
  if (value <= 0) {
    throw InputError(strf("model.%s = %lld: must be > 0", field, static_cast<long long>(value)),
                     "every size of the model (vocab, hidden, layers, heads, kv_heads, "
                     "intermediate, context) must be a positive integer.");
  }
}

}  // namespace

std::vector<std::string> Config::preset_names() {
  return {"tiny",         "tinyllama-1.1b", "open-llama-3b", "llama-7b",
          "llama-13b",    "llama-3.1-8b",   "llama-3.1-70b", "llama-3.2-1b",
          "llama-3.2-3b", "mistral-7b",     "qwen2.5-7b",     "qwen3-8b",
          "mixtral-8x7b", "qwen3-30b-a3b",  "qwen1.5-moe-a2.7b", "gemma-3-1b",
          "gemma-3-4b",   "gemma-3-12b",    "gemma-3-27b",    "gemma-2-2b",
          "gpt-oss-20b",  "gpt-oss-120b",   "qwen3.5-0.8b",   "qwen3.5-4b",
          "qwen3.5-9b",   "qwen3.5-27b",    "qwen3.5-35b-a3b", "qwen3.6-35b-a3b"};
}

namespace {

// The family's row; an unknown family is refused by validate() naming it.
const Family& row_of(const Config& c) {
  const Family* f = find_family(c.family);
  if (!f) c.validate();  // throws naming the family
  return *f;
}

}  // namespace

std::vector<std::string> Config::family_names() { return model::family_names(); }

bool Config::qkv_bias() const {
  const Family::Bias b = row_of(*this).bias;
  return b == Family::kQkvOnly || (b != Family::kNone && attention_bias);
}
bool Config::o_bias() const { return row_of(*this).bias == Family::kFromFlag && attention_bias; }
bool Config::qk_norm() const { return row_of(*this).qk_norm; }
bool Config::output_gate() const { return row_of(*this).output_gate; }
double Config::norm_offset() const { return row_of(*this).norm_offset; }
bool Config::sandwich_norms() const { return row_of(*this).sandwich; }
bool Config::gelu_mlp() const { return row_of(*this).gelu_mlp; }
bool Config::embed_scale() const { return row_of(*this).embed_scale; }
bool Config::attention_sinks() const { return row_of(*this).sinks; }
bool Config::router_bias() const { return row_of(*this).router_bias; }
bool Config::topk_softmax() const { return row_of(*this).topk_softmax; }
bool Config::expert_bias() const { return row_of(*this).expert_bias; }
double Config::query_scale() const {
  return query_pre_attn_scalar > 0
             ? std::sqrt(static_cast<double>(head_dim()) / query_pre_attn_scalar)
             : 1.0;
}

bool Config::moe_layer(int64_t l) const {
  if (!moe() || (l + 1) % std::max<int64_t>(decoder_sparse_step, 1) != 0) return false;
  return std::find(mlp_only_layers.begin(), mlp_only_layers.end(), l) == mlp_only_layers.end();
}

int64_t Config::moe_layer_count() const {
  int64_t n = 0;
  for (int64_t l = 0; l < layers; ++l) n += moe_layer(l) ? 1 : 0;
  return n;
}

Config Config::preset(std::string_view name) {
  //            name              vocab   hidden layers heads kv  inter  ctx   eps
  if (name == "tiny") return make("tiny", 256, 128, 4, 4, 2, 512, 256, 1e-5);
  if (name == "tinyllama-1.1b")
    return make("tinyllama-1.1b", 32000, 2048, 22, 32, 4, 5632, 2048, 1e-5);
  if (name == "open-llama-3b")
    return make("open-llama-3b", 32000, 3200, 26, 32, 32, 8640, 2048, 1e-6);
  if (name == "llama-7b") return make("llama-7b", 32000, 4096, 32, 32, 32, 11008, 2048, 1e-6);
  if (name == "llama-13b") return make("llama-13b", 32000, 5120, 40, 40, 40, 13824, 2048, 1e-6);
  // Llama 3.1 / 3.2 (config.json of meta-llama/Llama-3.1-8B, -70B, Llama-3.2-1B, -3B):
  // rope_theta 500000 and rope_scaling llama3 (factor 8 for 3.1, 32 for 3.2; low 1, high 4,
  // original_max_position_embeddings 8192); 3.2 ties the embeddings.
  const auto llama3 = [](Config c, double factor, bool tied) {
    c.rope_theta = 500000.0;
    c.rope_scaling = {"llama3", factor, 1.0, 4.0, 8192};
    c.tied_embeddings = tied;
    return c;
  };
  if (name == "llama-3.1-8b")
    return llama3(make("llama-3.1-8b", 128256, 4096, 32, 32, 8, 14336, 131072, 1e-5), 8.0, false);
  if (name == "llama-3.1-70b")
    return llama3(make("llama-3.1-70b", 128256, 8192, 80, 64, 8, 28672, 131072, 1e-5), 8.0, false);
  if (name == "llama-3.2-1b")
    return llama3(make("llama-3.2-1b", 128256, 2048, 16, 32, 8, 8192, 131072, 1e-5), 32.0, true);
  if (name == "llama-3.2-3b")
    return llama3(make("llama-3.2-3b", 128256, 3072, 28, 24, 8, 8192, 131072, 1e-5), 32.0, true);
  // mistralai/Mistral-7B-v0.1's config.json: rope_theta 10000, sliding_window 4096.
  if (name == "mistral-7b") {
    Config c = make("mistral-7b", 32000, 4096, 32, 32, 8, 14336, 32768, 1e-5);
    c.family = "mistral";
    c.sliding_window = 4096;
    return c;
  }
  // Qwen2.5 / Qwen3 (config.json of Qwen/Qwen2.5-7B and Qwen/Qwen3-8B): rope_theta 1e6,
  // untied; Qwen2.5 has q/k/v biases, Qwen3 q/k norms and head_dim 128.
  if (name == "qwen2.5-7b") {
    Config c = make("qwen2.5-7b", 152064, 3584, 28, 28, 4, 18944, 131072, 1e-6);
    c.family = "qwen2";
    c.rope_theta = 1000000.0;
    return c;
  }
  if (name == "qwen3-8b") {
    Config c = make("qwen3-8b", 151936, 4096, 36, 32, 8, 12288, 40960, 1e-6);
    c.family = "qwen3";
    c.head_dim_ = 128;
    c.rope_theta = 1000000.0;
    return c;
  }
  // A mixture-of-experts preset: E experts of width `width` (0: intermediate), k per token.
  const auto moe = [](Config c, const char* family, int64_t E, int64_t k, int64_t width) {
    c.family = family;
    c.rope_theta = 1000000.0;
    c.experts = E;
    c.experts_per_token = k;
    c.moe_intermediate = width;
    return c;
  };
  // mistralai/Mixtral-8x7B-v0.1's config.json: 8 experts, 2 per token, rope_theta 1e6, no
  // sliding window, router_aux_loss_coef 0.02 (output_router_logits false).
  if (name == "mixtral-8x7b") {
    Config c = moe(make("mixtral-8x7b", 32000, 4096, 32, 32, 8, 14336, 32768, 1e-5), "mixtral",
                   8, 2, 0);
    c.router_aux_loss_coef = 0.02;
    return c;
  }
  // Qwen/Qwen3-30B-A3B's config.json: 128 experts of width 768, 8 per token, renormalised,
  // every layer MoE, q/k norms, head_dim 128, rope_theta 1e6.
  if (name == "qwen3-30b-a3b") {
    Config c = moe(make("qwen3-30b-a3b", 151936, 2048, 48, 32, 4, 6144, 40960, 1e-6),
                   "qwen3_moe", 128, 8, 768);
    c.head_dim_ = 128;
    return c;  // norm_topk_prob true
  }
  // Qwen/Qwen1.5-MoE-A2.7B's config.json (model_type qwen2_moe): 60 experts of width 1408,
  // 4 per token, not renormalised, the shared expert 5632 wide, q/k/v biases.
  if (name == "qwen1.5-moe-a2.7b") {
    Config c = moe(make("qwen1.5-moe-a2.7b", 151936, 2048, 24, 16, 16, 5632, 8192, 1e-6),
                   "qwen2_moe", 60, 4, 1408);
    c.attention_bias = true;  // HF's qkv_bias
    c.shared_expert_intermediate = 5632;
    c.norm_topk_prob = false;
    return c;
  }
  // google/gemma-3-1b-pt's config.json (gemma3_text) and gemma-3-{4b,12b,27b}-pt's
  // text_config (the text model of the multimodal gemma3 folders): 5 sliding layers (RoPE
  // base 1e4) to 1 full (1e6; 4b-27b scale it linearly by 8), tied; 1b's window is 512 and
  // its vocabulary 262144, the others' 1024 and 262208.
  struct Gemma3 {
    const char* name;
    int64_t vocab, hidden, layers, heads, kv_heads, inter, context, window, head_dim, scalar;
  };
  static constexpr Gemma3 kGemma3[] = {
      {"gemma-3-1b", 262144, 1152, 26, 4, 1, 6912, 32768, 512, 256, 256},
      {"gemma-3-4b", 262208, 2560, 34, 8, 4, 10240, 131072, 1024, 256, 256},
      {"gemma-3-12b", 262208, 3840, 48, 16, 8, 15360, 131072, 1024, 256, 256},
      {"gemma-3-27b", 262208, 5376, 62, 32, 16, 21504, 131072, 1024, 128, 168}};
  for (const Gemma3& g : kGemma3) {
    if (name != g.name) continue;
    Config c = make(g.name, g.vocab, g.hidden, g.layers, g.heads, g.kv_heads, g.inter, g.context,
                    1e-6);
    c.family = "gemma3_text";
    c.head_dim_ = g.head_dim;
    c.tied_embeddings = true;
    c.rope_theta = 1e6;
    if (g.context > 32768) c.rope_scaling = {.type = "linear", .factor = 8.0};
    c.rope_local_theta = 1e4;
    c.sliding_window = g.window;
    for (int64_t l = 0; l < c.layers; ++l) c.layer_types += (l + 1) % 6 != 0 ? 's' : 'f';
    c.query_pre_attn_scalar = g.scalar;
    return c;
  }
  // google/gemma-2-2b's config.json (gemma2): head_dim 256, tied, sliding (4096) and full
  // layers alternating from a sliding one, one RoPE (10000), both soft-caps.
  if (name == "gemma-2-2b") {
    Config c = make("gemma-2-2b", 256000, 2304, 26, 8, 4, 9216, 8192, 1e-6);
    c.family = "gemma2";
    c.head_dim_ = 256;
    c.tied_embeddings = true;
    c.sliding_window = 4096;
    for (int64_t l = 0; l < c.layers; ++l) c.layer_types += l % 2 == 0 ? 's' : 'f';
    c.query_pre_attn_scalar = 256;
    c.attn_logit_softcap = 50.0;
    c.final_logit_softcap = 30.0;
    return c;
  }
  // openai/gpt-oss-20b and -120b's config.json (gpt_oss): head_dim 64, sliding (128) and
  // full layers alternating, yarn (factor 32 over 4096, beta 32 / 1, truncate false),
  // rope_theta 150000, experts of width 2880 with biases, 4 per token, swiglu_limit 7.
  if (name == "gpt-oss-20b" || name == "gpt-oss-120b") {
    const bool big = name == "gpt-oss-120b";
    Config c = moe(make(big ? "gpt-oss-120b" : "gpt-oss-20b", 201088, 2880, big ? 36 : 24, 64, 8,
                        2880, 131072, 1e-5),
                   "gpt_oss", big ? 128 : 32, 4, 0);
    c.head_dim_ = 64;
    c.attention_bias = true;
    c.rope_theta = 150000.0;
    c.rope_scaling = {.type = "yarn", .factor = 32.0, .original_context = 4096, .truncate = false};
    c.sliding_window = 128;
    for (int64_t l = 0; l < c.layers; ++l) c.layer_types += l % 2 == 0 ? 's' : 'f';
    c.swiglu_limit = 7.0;
    return c;
  }
  // Qwen/Qwen3.5-*'s text_config (qwen3_5_text; 35b-a3b qwen3_5_moe_text, as Qwen3.6-35B-A3B;
  // sources in config.hpp): 3 Gated DeltaNet layers to 1 full, head_dim 256, 16 key heads
  // of 128, value heads of 128, conv 4, RoPE 1e7 on a quarter of each head (mrope 11, 11,
  // 10 interleaved), vocab 248320, context 262144; experts: 256 of 512, 8 per token, shared 512.
  struct Qwen35 {
    const char* name;
    int64_t hidden, layers, heads, kv_heads, inter, value_heads;
    bool tied, moe;
  };
  static constexpr Qwen35 kQwen35[] = {
      {"qwen3.5-0.8b", 1024, 24, 8, 2, 3584, 16, true, false},
      {"qwen3.5-4b", 2560, 32, 16, 4, 9216, 32, true, false},
      {"qwen3.5-9b", 4096, 32, 16, 4, 12288, 32, false, false},
      {"qwen3.5-27b", 5120, 64, 24, 4, 17408, 48, false, false},
      {"qwen3.5-35b-a3b", 2048, 40, 16, 2, 512, 32, false, true},
      {"qwen3.6-35b-a3b", 2048, 40, 16, 2, 512, 32, false, true}};
  for (const Qwen35& q : kQwen35) {
    if (name != q.name) continue;
    Config c = make(q.name, 248320, q.hidden, q.layers, q.heads, q.kv_heads, q.inter, 262144, 1e-6);
    c.family = "qwen3_5_text";
    if (q.moe) c = moe(c, "qwen3_5_moe_text", 256, 8, 512);
    if (q.moe) c.shared_expert_intermediate = 512;
    c.head_dim_ = 256;
    c.tied_embeddings = q.tied;
    c.rope_theta = 1e7;
    c.partial_rotary_factor = 0.25;
    c.mrope_section = {11, 11, 10};
    c.mrope_interleaved = true;
    for (int64_t l = 0; l < c.layers; ++l) c.layer_types += (l + 1) % 4 != 0 ? 'l' : 'f';
    c.linear_key_heads = 16;
    c.linear_value_heads = q.value_heads;
    c.linear_key_dim = c.linear_value_dim = 128;
    c.linear_conv_kernel = 4;
    return c;
  }
  std::string known;
  for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
  throw InputError(strf("unknown model preset '%.*s'", static_cast<int>(name.size()), name.data()),
                   "known presets: " + known + ".");
}

void Config::validate() const {
  require_positive(vocab, "vocab");
  require_positive(hidden, "hidden");
  require_positive(layers, "layers");
  require_positive(heads, "heads");
  require_positive(kv_heads, "kv_heads");
  require_positive(intermediate, "intermediate");
  require_positive(context, "context");
  const Family& row = model::family(family);  // throws naming an unknown one
  if (attention_bias && (row.bias == Family::kQkvOnly || row.bias == Family::kNone))
    throw InputError("model.attention_bias = true with model.family = " + family, row.no_bias_flag);
  validate_experts();
  if (head_dim_ < 0)
    throw InputError(strf("model.head_dim = %lld: must be >= 0", static_cast<long long>(head_dim_)),
                     "0 means hidden / heads; Qwen3 uses 128.");
  const auto at_most = [](int64_t value, int64_t max, const char* field) {
    if (value > max)
      throw InputError(strf("model.%s = %lld: above zt's limit %lld", field,
                            static_cast<long long>(value), static_cast<long long>(max)),
                       "no Llama-architecture model comes near this size; check the value.");
  };
  at_most(hidden, kMaxHidden, "hidden");
  at_most(layers, kMaxLayers, "layers");
  at_most(heads, kMaxHeads, "heads");
  at_most(kv_heads, kMaxHeads, "kv_heads");
  at_most(intermediate, kMaxIntermediate, "intermediate");
  at_most(context, kMaxContext, "context");
  if (vocab > std::numeric_limits<int32_t>::max()) {
    throw InputError(strf("model.vocab = %lld: token ids are int32", static_cast<long long>(vocab)),
                     "use a vocabulary below 2^31.");
  }
  at_most(head_dim_, kMaxHidden, "head_dim");
  if (head_dim_ == 0 && hidden % heads != 0) {
    throw InputError(strf("model.heads = %lld does not divide model.hidden = %lld",
                          static_cast<long long>(heads), static_cast<long long>(hidden)),
                     "head_dim = hidden / heads must be a whole number; e.g. hidden 2048 "
                     "with 32 heads (or set model.head_dim).");
  }
  if (heads % kv_heads != 0) {
    throw InputError(strf("model.kv_heads = %lld does not divide model.heads = %lld",
                          static_cast<long long>(kv_heads), static_cast<long long>(heads)),
                     "grouped-query attention shares each KV head among heads / kv_heads "
                     "query heads; use kv_heads = heads for plain multi-head attention.");
  }
  if (head_dim() % 2 != 0) {
    throw InputError(strf("model.heads = %lld gives an odd head_dim %lld",
                          static_cast<long long>(heads), static_cast<long long>(head_dim())),
                     "RoPE rotates pairs of dimensions, so head_dim (hidden / heads unless "
                     "model.head_dim is set) must be even.");
  }
  if (!(rope_theta > 0) || !std::isfinite(rope_theta)) {
    throw InputError(strf("model.rope_theta = %g: must be a finite number > 0", rope_theta),
                     "Llama uses 10000.");
  }
  validate_rope_scaling();
  if (!(norm_eps > 0) || !std::isfinite(norm_eps)) {
    throw InputError(strf("model.norm_eps = %g: must be a finite number > 0", norm_eps),
                     "Llama uses 1e-5 or 1e-6.");
  }
  if (sliding_window < 0 || sliding_window > kMaxContext) {
    throw InputError(strf("model.sliding_window = %lld: must be 0 (full causal attention) or "
                          "1 .. %lld",
                          static_cast<long long>(sliding_window),
                          static_cast<long long>(kMaxContext)),
                     "Mistral 7B v0.1 uses 4096; 0 attends every earlier position.");
  }
  if (first_sliding_layer < 0 || first_sliding_layer > layers) {
    throw InputError(strf("model.first_sliding_layer = %lld: must be 0 .. model.layers (%lld)",
                          static_cast<long long>(first_sliding_layer),
                          static_cast<long long>(layers)),
                     "layers from it on use model.sliding_window; 0 makes every layer slide.");
  }
  validate_schedule();
  // The parameter count and the 16 bytes of fp32 model states per parameter must fit in
  // 64 bits (num_params() and every size derived from it compute unchecked).
  const char* hint = "lower model.hidden, model.intermediate, model.layers or model.vocab; "
                     "`zt estimate` tells what fits";
  const std::string what = "the parameter count of model " + name;
  const auto mul = [&](int64_t a, int64_t b) { return mul_checked(a, b, what, hint); };
  const auto add = [&](int64_t a, int64_t b) { return add_checked(a, b, what, hint); };
  mul(2, mul(heads, head_dim()));  // q_proj_dim()
  const int64_t kv = mul(kv_heads, head_dim());
  const int64_t width = std::max(intermediate, moe_intermediate);
  const int64_t mlp = add(mul(std::max<int64_t>(experts, 1), add(mul(3, mul(hidden, width)), hidden)),
                          mul(3, mul(hidden, add(shared_expert_intermediate, 1))));
  const int64_t block = add(
      add(add(mul(3, mul(hidden, q_dim())), mul(2, mul(hidden, kv))), add(mlp, mul(4, hidden))),
      add(mul(3, add(q_dim(), kv)), mul(2, head_dim())));  // a bound on biases and q/k norms
  const int64_t embedding = mul(vocab, hidden);
  const int64_t total =
      add(add(embedding, mul(layers, block)), add(hidden, tied_embeddings ? 0 : embedding));
  mul_checked(total, 16, "the fp32 model-state bytes (16 per parameter) of model " + name, hint);
  // Activations: a context of T tokens keeps T x T attention scores per head.
  mul_checked(mul_checked(context, context, "model.context squared", "lower model.context"),
              heads, "the attention scores of one sequence (context^2 x heads)",
              "lower model.context or model.heads");
}

void Config::validate_experts() const {
  const Family& row = model::family(family);
  const bool family_moe = row.moe != Family::kDense;
  const bool qwen_moe = row.moe == Family::kQwen;
  if (family_moe && experts <= 0)
    throw InputError(strf("model.experts = %lld with model.family = %s: must be >= 1",
                          static_cast<long long>(experts), family.c_str()),
                     "a mixture-of-experts block routes each token to model.experts_per_token "
                     "of model.experts experts (Mixtral 8x7B: 8 and 2; Qwen3-30B-A3B: 128 and 8).");
  if (!family_moe && experts != 0)
    throw InputError(strf("model.experts = %lld with model.family = %s", static_cast<long long>(experts),
                          family.c_str()),
                     "mixture-of-experts blocks are the mixtral, qwen2_moe and qwen3_moe "
                     "families': set one of them (or model.experts = 0 for the dense MLP).");
  const auto refuse_unless = [&](bool ok, const std::string& field, const char* families) {
    if (!ok)
      throw InputError(field + " with model.family = " + family,
                       std::string("only the ") + families + " family has it; leave it at its "
                       "default (docs/model.md, \"Mixture of experts\").");
  };
  refuse_unless(qwen_moe || moe_intermediate == 0,
                strf("model.moe_intermediate = %lld", static_cast<long long>(moe_intermediate)),
                "qwen2_moe and qwen3_moe");
  refuse_unless(qwen_moe || norm_topk_prob, "model.norm_topk_prob = false",
                "qwen2_moe and qwen3_moe");
  refuse_unless(qwen_moe || decoder_sparse_step == 1,
                strf("model.decoder_sparse_step = %lld", static_cast<long long>(decoder_sparse_step)),
                "qwen2_moe and qwen3_moe");
  refuse_unless(qwen_moe || mlp_only_layers.empty(), "model.mlp_only_layers (not empty)",
                "qwen2_moe and qwen3_moe");
  if (row.moe_every_layer && (!norm_topk_prob || decoder_sparse_step != 1 ||
                              !mlp_only_layers.empty() || expert_width() != intermediate))
    throw InputError(strf("model.family = %s routes every layer and renormalises the top-k "
                          "weights: model.norm_topk_prob = %s, decoder_sparse_step = %lld, "
                          "mlp_only_layers (%zu layers), intermediate = %lld vs the experts' %lld",
                          family.c_str(), norm_topk_prob ? "true" : "false",
                          static_cast<long long>(decoder_sparse_step), mlp_only_layers.size(),
                          static_cast<long long>(intermediate),
                          static_cast<long long>(expert_width())),
                     "its block (Qwen3-Next's) has no dense layers: leave norm_topk_prob true, "
                     "decoder_sparse_step 1, mlp_only_layers empty and model.intermediate equal "
                     "to model.moe_intermediate (or moe_intermediate 0).");
  if (row.shared_expert && shared_expert_intermediate <= 0)
    throw InputError(strf("model.shared_expert_intermediate = %lld with model.family = %s: must "
                          "be >= 1",
                          static_cast<long long>(shared_expert_intermediate), family.c_str()),
                     "every Qwen2-MoE block has the shared expert: set "
                     "model.shared_expert_intermediate (Qwen1.5-MoE-A2.7B: 5632).");
  refuse_unless(row.shared_expert || shared_expert_intermediate == 0,
                strf("model.shared_expert_intermediate = %lld",
                     static_cast<long long>(shared_expert_intermediate)),
                "qwen2_moe");
  refuse_unless(row.expert_bias || swiglu_limit == 0, strf("model.swiglu_limit = %g", swiglu_limit),
                "gpt_oss");
  if (!(swiglu_limit >= 0) || !std::isfinite(swiglu_limit) || !(swiglu_alpha > 0) ||
      !std::isfinite(swiglu_alpha))
    throw InputError(strf("model.swiglu_limit = %g, model.swiglu_alpha = %g: must be finite, "
                          "limit >= 0 and alpha > 0", swiglu_limit, swiglu_alpha),
                     "gpt-oss: limit 7, alpha 1.702 (limit 0: the plain SwiGLU).");
  if (!family_moe) return;
  if (experts > kMaxExperts)
    throw InputError(strf("model.experts = %lld: above zt's limit %lld", static_cast<long long>(experts),
                          static_cast<long long>(kMaxExperts)),
                     "Mixtral has 8 experts, Qwen3-30B-A3B 128; check the value.");
  if (experts_per_token < 1 || experts_per_token > experts)
    throw InputError(strf("model.experts_per_token = %lld: must be 1 .. model.experts (%lld)",
                          static_cast<long long>(experts_per_token),
                          static_cast<long long>(experts)),
                     "each token goes to k of the E experts (Mixtral 8x7B: 2 of 8).");
  if (!(router_aux_loss_coef >= 0) || !std::isfinite(router_aux_loss_coef))
    throw InputError(strf("model.router_aux_loss_coef = %g: must be a finite number >= 0",
                          router_aux_loss_coef),
                     "transformers' default is 0.001, Mixtral 8x7B's config.json says 0.02.");
  const auto size = [&](int64_t v, const char* field, int64_t lo) {
    if (v < lo || v > kMaxIntermediate)
      throw InputError(strf("model.%s = %lld: must be %lld .. %lld", field, static_cast<long long>(v),
                            static_cast<long long>(lo), static_cast<long long>(kMaxIntermediate)),
                       "Qwen3-30B-A3B's experts are 768 wide; Qwen1.5-MoE-A2.7B's shared expert 5632.");
  };
  size(moe_intermediate, "moe_intermediate", 0);
  size(shared_expert_intermediate, "shared_expert_intermediate", 0);
  if (decoder_sparse_step < 1 || decoder_sparse_step > layers)
    throw InputError(strf("model.decoder_sparse_step = %lld: must be 1 .. model.layers (%lld)",
                          static_cast<long long>(decoder_sparse_step), static_cast<long long>(layers)),
                     "layer l has the experts when (l + 1) % decoder_sparse_step == 0 (1: every layer).");
  for (int64_t l : mlp_only_layers)
    if (l < 0 || l >= layers)
      throw InputError(strf("model.mlp_only_layers holds %lld: layers are 0 .. %lld",
                            static_cast<long long>(l), static_cast<long long>(layers - 1)),
                       "list the indices of the layers with the dense MLP.");
  if (moe_layer_count() == 0)
    throw InputError("no layer of model " + name + " has the experts (decoder_sparse_step and "
                     "mlp_only_layers leave every layer dense)",
                     "use a dense family (qwen2, qwen3) for a model without experts.");
}


std::string Config::device_model_gap() const {
  // Every family's block runs on the GPU model (Gemma's and gpt-oss's included, Qwen3.5's
  // full-attention layers with their output gate and partial RoPE and its Gated DeltaNet
  // layers); zt's CUDA attention takes head dims up to kMaxDeviceHeadDim
  // (kernels::cuda::attention_head_dims), its Gated DeltaNet kernels the sizes below.
  if (linear_layers() &&
      std::max(linear_key_dim, linear_value_dim) > kMaxDeviceDeltaDim)
    return strf("a Gated DeltaNet kernel for key/value head dims %lld/%lld (zt's CUDA kernels "
                "take up to %lld)",
                static_cast<long long>(linear_key_dim), static_cast<long long>(linear_value_dim),
                static_cast<long long>(kMaxDeviceDeltaDim));
  if (linear_layers() && linear_conv_kernel > kMaxDeviceConvKernel)
    return strf("a Gated DeltaNet conv1d kernel of %lld (zt's CUDA kernels take up to %lld)",
                static_cast<long long>(linear_conv_kernel),
                static_cast<long long>(kMaxDeviceConvKernel));
  if (head_dim() > kMaxDeviceHeadDim)
    return strf("an attention kernel for head dim %lld (zt's CUDA attention takes head dims up "
                "to %lld)",
                static_cast<long long>(head_dim()), static_cast<long long>(kMaxDeviceHeadDim));
  return "";
}

void Config::validate_for_device(bool check_block) const {
  if (const std::string gap = check_block ? device_model_gap() : ""; !gap.empty())
    throw InputError("model family '" + family + "' on the GPU: the GPU model does not have " +
                         gap + " yet",
                     "train or generate it on the CPU (train.device = cpu).");
  if (experts > kMaxDeviceExperts)
    throw InputError(strf("model.experts = %lld with model family '%s' on the GPU: its router "
                          "takes at most %lld experts",
                          static_cast<long long>(experts), family.c_str(),
                          static_cast<long long>(kMaxDeviceExperts)),
                     "train or generate it on the CPU (train.device = cpu), whose model takes up "
                     "to " + std::to_string(kMaxExperts) + " experts.");
}


int64_t Config::num_embedding_params() const { return vocab * hidden; }

int64_t Config::num_block_params(int64_t l) const {
  const bool lin = linear(l);  // a Gated DeltaNet mixer instead of the attention
  const int64_t attn = lin ? num_linear_mixer_params()
                           : hidden * q_proj_dim() /*q (and its gate)*/ +
                                 2 * hidden * kv_dim() /*k, v*/ + q_dim() * hidden /*o*/;
  const int64_t bias =
      lin ? 0 : (qkv_bias() ? q_proj_dim() + 2 * kv_dim() : 0) + (o_bias() ? hidden : 0);
  const int64_t norms = (sandwich_norms() ? 4 : 2) * hidden +
                        (qk_norm() && !lin ? 2 * head_dim() : 0) +  // + q/k norms
                        (attention_sinks() ? heads : 0);    // + the sinks [H]
  if (!moe_layer(l)) return attn + bias + 3 * hidden * intermediate /*gate, up, down*/ + norms;
  const int64_t shared = shared_expert() ? 3 * hidden * shared_expert_intermediate + hidden : 0;
  const int64_t moe_bias = (router_bias() ? experts : 0) + experts * expert_bias_width();
  return attn + bias + experts * (3 * hidden * expert_width() + hidden) /*experts, router [E, C]*/ +
         shared /*shared expert and its gate [1, C]*/ + moe_bias + norms;
}

int64_t Config::num_active_params() const {
  return num_params() - moe_layer_count() * (experts - experts_per_token) *
                            (3 * hidden * expert_width() + expert_bias_width());
}

int64_t Config::num_params() const {
  const int64_t head = hidden /*final norm*/ + (tied_embeddings ? 0 : vocab * hidden);
  int64_t blocks = 0;
  for (int64_t l = 0; l < layers; ++l) blocks += num_block_params(l);
  return num_embedding_params() + blocks + head;
}

int64_t Config::num_matmul_params() const {
  return tied_embeddings ? num_active_params() : num_active_params() - num_embedding_params();
}

// 6 N for the weights (forward 2 N, backward 4 N), then per layer three times (forward and
// backward) its mixing: a full or sliding layer 4 H D T (QK^T and AV over T keys); a Gated
// DeltaNet layer per value head 2 c (2 Dk + Dv) inside a chunk of c = 64 (K K^T, Q K^T, the
// attention times V) and 6 Dk Dv against the state (read by q and by k, updated by k v^T),
// plus 2 K of the conv per conv channel: linear in T.
double Config::flops_per_token(int64_t seq) const {
  const double N = static_cast<double>(num_matmul_params());
  const double full = 4.0 * static_cast<double>(heads * head_dim()) * static_cast<double>(seq);
  const double dk = static_cast<double>(linear_key_dim), dv = static_cast<double>(linear_value_dim);
  const double lin = static_cast<double>(linear_value_heads) * (2.0 * 64.0 * (2.0 * dk + dv) + 6.0 * dk * dv) +
                     2.0 * static_cast<double>(linear_conv_kernel * linear_conv_dim());
  double mix = 0;
  for (int64_t l = 0; l < layers; ++l) mix += linear(l) ? lin : full;
  return 6.0 * N + 3.0 * mix;
}

}  // namespace zt::model
