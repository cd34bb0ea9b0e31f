#!/usr/bin/env python3
"""Qwen2-MoE and Qwen3-MoE against transformers: tiny random Qwen2MoeForCausalLM and
Qwen3MoeForCausalLM models imported by zt.

  qwen_moe_peer_test.py ZT ZT_LOGITS WORKDIR

For each case, transformers' own Qwen2MoeConfig / Qwen3MoeConfig + model (random weights,
float32, q/k/v biases and norms perturbed so they count) is saved with save_pretrained.
The cases cover what the two families add to Mixtral's experts: norm_topk_prob false and
true, moe_intermediate_size != intermediate_size, dense layers among MoE ones
(mlp_only_layers, decoder_sparse_step), Qwen2-MoE's shared expert and its sigmoid gate,
q/k/v biases, Qwen3's q/k norms and head_dim, a sliding window, tied embeddings. Then:
  - the checks of hf_common.check_against_hf: logits (and KV-cache logits) within 1e-5 x
    max(1, max |logit|) of transformers' fp32 ones and no farther from its float64 answer
    (RoPE, RMSNorm and the router's softmax in float64) than transformers' own fp32 ones,
    loss within 1e-5, greedy continuation equal, `zt generate` on the HF folder equal
  - the load-balancing loss (transformers' aux_loss with output_router_logits=True) within
    1e-5, and every routed row of the MoE layers counted
  - sensitivity: the same weights with norm_topk_prob flipped move the logits > 10 x tol
  - `zt convert h5-to-hf`: model_type and architecture, every MoE key read back by
    AutoConfig equal, the same tensor names as transformers' save, transformers' logits
    on the export equal the original's (exactly: the same fp32 weights), zt re-imports it
    with the same logits
  - transformers 5's fused run-time names read with the same logits; refusals by name: a
    rope_type zt does not implement, mlp_only_layers out of range, Qwen2-MoE's default
    alternating sliding layers
Exit 77 (CTest skip) without torch/transformers (scripts/install-deps.sh --hf-peers).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_common import (check_export, check_fused, check_aux_loss, hf_llama_run,  # noqa: E402
                       import_and_check, peer_start, perturb_biases_and_norms, run_zt,
                       with_config, zt_logits_json)

TOL = 1e-5
NEW = 12
T = 16

# (name, model_type, config overrides)
CASES = [
    ("q3-e8k2-norm-dense1", "qwen3_moe",
     dict(num_experts=8, num_experts_per_tok=2, norm_topk_prob=True, num_hidden_layers=3,
          mlp_only_layers=[1], head_dim=32, num_key_value_heads=2, output_router_logits=True,
          router_aux_loss_coef=0.3)),
    ("q3-e6k3-raw-step2-window", "qwen3_moe",
     dict(num_experts=6, num_experts_per_tok=3, norm_topk_prob=False, num_hidden_layers=4,
          decoder_sparse_step=2, num_key_value_heads=4, attention_bias=True,
          use_sliding_window=True, sliding_window=5, tie_word_embeddings=True)),
    ("q2-e4k2-shared-dense0", "qwen2_moe",
     dict(num_experts=4, num_experts_per_tok=2, norm_topk_prob=False, num_hidden_layers=3,
          mlp_only_layers=[0], shared_expert_intermediate_size=40, num_key_value_heads=2,
          output_router_logits=True, router_aux_loss_coef=0.05)),
    ("q2-e8k2-norm-nobias-tied", "qwen2_moe",
     dict(num_experts=8, num_experts_per_tok=2, norm_topk_prob=True, num_hidden_layers=2,
          shared_expert_intermediate_size=56, qkv_bias=False, num_key_value_heads=1,
          tie_word_embeddings=True)),
]
MOE_KEYS = ("num_experts", "num_experts_per_tok", "moe_intermediate_size", "norm_topk_prob",
            "decoder_sparse_step", "mlp_only_layers", "router_aux_loss_coef",
            "output_router_logits", "intermediate_size", "tie_word_embeddings",
            "num_key_value_heads", "sliding_window")


def moe_layers(cfg):
    return [l for l in range(cfg.num_hidden_layers)
            if l not in cfg.mlp_only_layers and (l + 1) % cfg.decoder_sparse_step == 0]


def main():
    zt, zt_logits, work, torch, c = peer_start(__doc__, "safetensors")
    from transformers import (Qwen2MoeConfig, Qwen2MoeForCausalLM, Qwen3MoeConfig,
                              Qwen3MoeForCausalLM)
    classes = {"qwen2_moe": (Qwen2MoeConfig, Qwen2MoeForCausalLM, "Qwen2MoeForCausalLM",
                             ("shared_expert_intermediate_size", "qkv_bias")),
               "qwen3_moe": (Qwen3MoeConfig, Qwen3MoeForCausalLM, "Qwen3MoeForCausalLM",
                             ("attention_bias", "head_dim", "use_sliding_window"))}
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 96, (T,), generator=gen).tolist()
    ids = torch.tensor([tokens])
    zt_run = lambda ckpt: zt_logits_json(c, zt_logits, ckpt, tokens, NEW)  # noqa: E731
    hf_run = lambda folder: hf_llama_run(torch, folder, ids, NEW)  # noqa: E731

    for name, mt, over in CASES:
        Config, Model, arch, extra_keys = classes[mt]
        torch.manual_seed(1)
        kw = dict(vocab_size=96, hidden_size=64, intermediate_size=48, moe_intermediate_size=24,
                  num_attention_heads=4, max_position_embeddings=64, rms_norm_eps=1e-5,
                  initializer_range=0.3, bos_token_id=1, eos_token_id=None)
        kw.update(over)
        cfg = Config(**kw)
        model = Model(cfg).to(torch.float32)
        perturb_biases_and_norms(torch, model)
        folder = os.path.join(work, name)
        model.save_pretrained(folder, safe_serialization=True)
        saved = json.load(open(os.path.join(folder, "config.json")))
        c.check(saved.get("model_type") == mt, f"{name}: transformers saved model_type {mt}")
        got = import_and_check(c, torch, zt, name, folder, tokens, NEW, zt_run, hf_run, TOL)
        if not got:
            continue
        h5, hf, z, tol = got
        hl = hf[0]
        print(f"      {name}: MoE layers {moe_layers(cfg)}")
        check_aux_loss(c, torch, name, folder, ids, z, len(moe_layers(cfg)),
                       cfg.num_experts_per_tok, TOL)
        flip = not cfg.norm_topk_prob
        fl, _, _ = hf_run(with_config(folder, f"{folder}-norm{int(flip)}", norm_topk_prob=flip))
        d = (fl - hl).abs().max().item()
        c.check(d > 10 * tol, f"{name}: sensitivity: norm_topk_prob {flip} moves the logits by "
                              f"{d:.3e} > 10 x tol")
        check_export(c, torch, zt, name, folder, h5, hf, z, zt_run, hf_run, arch,
                     MOE_KEYS + extra_keys)
    # transformers 5's run-time names (fused experts) are read as well.
    src = os.path.join(work, CASES[2][0])
    check_fused(c, torch, zt, Qwen2MoeForCausalLM, src, os.path.join(work, "fused"), zt_run)
    # Refusals, each naming the key.
    q3 = os.path.join(work, CASES[0][0])
    refusals = [
        ("yarn", q3, dict(rope_parameters={"rope_type": "yarn", "factor": 4.0,
                                           "rope_theta": 10000.0}),
         "rope_parameters.original_max_position_embeddings"),
        ("mlp-only-out-of-range", q3, dict(mlp_only_layers=[7]), "mlp_only_layers"),
        ("alternating-window", src, dict(use_sliding_window=True, sliding_window=4,
                                         layer_types=None, max_window_layers=3), "layer_types"),
    ]
    for tag, base, change, key in refusals:
        bad = with_config(base, os.path.join(work, "refuse-" + tag), **change)
        rc, out = run_zt(zt, "convert", "hf-to-h5", bad, bad + ".h5")
        c.check(rc == 2 and key in out, f"refused: {tag} (exit {rc}, names {key})")
        if rc != 2:
            print(out[-1500:])
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
