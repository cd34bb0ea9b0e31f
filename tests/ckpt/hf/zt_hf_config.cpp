// zt_hf_config: what zt reads from a Hugging Face config.json (zt::ckpt::read_hf_config),
// as JSON under transformers' attribute names, for tests/ckpt/hf/hf_defaults_test.py.
//
//   zt_hf_config CONFIG.json
//
// Prints {"num_key_value_heads": G, "rope_theta": x, ..., "layer_types": [...]} (exit 0),
// or zt's refusal on stderr (exit 2).
#include <cstdio>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>

#include "zt/ckpt/hf_config.hpp"
#include "zt/core/error.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: zt_hf_config CONFIG.json\n");
    return 2;
  }
  try {
    const zt::model::Config m = zt::ckpt::read_hf_config(argv[1]).model;
    nlohmann::json j = {{"vocab_size", m.vocab},
                        {"hidden_size", m.hidden},
                        {"num_hidden_layers", m.layers},
                        {"num_attention_heads", m.heads},
                        {"num_key_value_heads", m.kv_heads},
                        {"intermediate_size", m.intermediate},
                        {"max_position_embeddings", m.context},
                        {"rope_theta", m.rope_theta},
                        {"rope_type", m.rope_scaling.type},
                        {"rms_norm_eps", m.norm_eps},
                        {"tie_word_embeddings", m.tied_embeddings},
                        {"head_dim", m.head_dim()},
                        {"attention_bias", m.attention_bias},
                        {"sliding_window", m.sliding_window},
                        {"router_aux_loss_coef", m.router_aux_loss_coef},
                        {"output_router_logits", m.router_aux_loss},
                        {"partial_rotary_factor", m.partial_rotary_factor},
                        {"linear_num_key_heads", m.linear_key_heads},
                        {"linear_num_value_heads", m.linear_value_heads},
                        {"linear_key_head_dim", m.linear_key_dim},
                        {"linear_value_head_dim", m.linear_value_dim},
                        {"linear_conv_kernel_dim", m.linear_conv_kernel},
                        {"query_pre_attn_scalar", m.query_pre_attn_scalar},
                        {"final_logit_softcapping", m.final_logit_softcap},
                        {"attn_logit_softcapping", m.attn_logit_softcap}};
    nlohmann::json types = nlohmann::json::array();
    for (int64_t i = 0; i < m.layers; ++i) {
      const bool linear = !m.layer_types.empty() && m.layer_types[static_cast<size_t>(i)] == 'l';
      types.push_back(linear ? "linear_attention" : m.window(i) > 0 ? "sliding_attention" : "full_attention");
    }
    j["layer_types"] = types;
    if (m.experts > 0) {
      j["num_experts"] = m.experts;
      j["num_experts_per_tok"] = m.experts_per_token;
      j["moe_intermediate_size"] = m.moe_intermediate;
      j["norm_topk_prob"] = m.norm_topk_prob;
      j["shared_expert_intermediate_size"] = m.shared_expert_intermediate;
      j["decoder_sparse_step"] = m.decoder_sparse_step;
      j["mlp_only_layers"] = m.mlp_only_layers;
    }
    std::printf("%s\n", j.dump().c_str());
    return 0;
  } catch (const zt::InputError& e) {
    std::fprintf(stderr, "%s\nhint: %s\n", e.message().c_str(), e.hint().c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zt_hf_config: %s\n", e.what());
    return 1;
  }
}
