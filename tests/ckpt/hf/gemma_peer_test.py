#!/usr/bin/env python3
"""Gemma 3 (gemma3_text) against transformers: tiny random Gemma3ForCausalLM models made by
transformers' own classes, imported by zt.

  gemma_peer_test.py ZT ZT_LOGITS WORKDIR

Each case: 6 layers (the 5 sliding : 1 full pattern, or a pattern of its own), a sliding
window of 4 under a 16-token prompt and a 60-token continuation, a RoPE per layer type
(sliding 10000 unscaled, full 1e6 with linear scaling), query_pre_attn_scalar unlike
head_dim, every norm weight drawn N(1, 0.5) (transformers zero-initialises Gemma's (1 + w)
norms, which would hide them; near 0 the tied model's continuation repeats one token). Then (CausalLMPeer, as mistral_peer_test.py):
  - logits and KV-cache logits within max(1e-5 x max|logit|, 2 x transformers' own fp32
    error against float64), loss, greedy continuation past the window, `zt generate`
  - the export (`zt convert h5-to-hf`) reloads in transformers with the same logits,
    loss and continuation exactly, the same tensor names, and zt re-imports it
  - transformers 4's config form of the same model (rope_theta, rope_local_base_freq,
    rope_scaling, sliding_window_pattern; no layer_types) imports to the same logits
  - sensitivity: the window +-1, the sliding layers' theta, the full layers' theta,
    query_pre_attn_scalar, the final soft-cap and the norm offset (every norm weight + 1)
    each move transformers' logits by more than 10 x the tolerance
  - bad input: a layer_types of the wrong length, an unknown layer type, linear_attention,
    attn_logit_softcapping set, a scaled sliding-layer RoPE: exit 2 naming config.json,
    the field and what is wrong, nothing written
Exit 77 (CTest skip) without torch/transformers (scripts/install-deps.sh --hf-peers).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_common import CausalLMPeer, run_zt, with_config  # noqa: E402


def main():
    p = CausalLMPeer(__doc__, t=16, new=60)
    from transformers import Gemma3TextConfig, Gemma3ForCausalLM
    c, torch = p.c, p.torch

    def norms(model, shift=None):
        with torch.no_grad():
            for n, w in model.named_parameters():
                if "norm" in n:
                    if shift is None:
                        w.normal_(1.0, 0.5)
                    else:
                        w.add_(shift)

    # (name, layer_types or None (the 5:1 default), final soft-cap, tied)
    cases = [("g6-5to1-tied", None, None, True),
             ("g6-mixed-softcap", ["full_attention", "sliding_attention", "sliding_attention",
                                   "full_attention", "sliding_attention", "sliding_attention"],
              8.0, False)]
    for name, types, cap, tied in cases:
        cfg = Gemma3TextConfig(vocab_size=96, hidden_size=64, intermediate_size=96,
                               num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
                               head_dim=16, max_position_embeddings=128, sliding_window=4,
                               query_pre_attn_scalar=24, layer_types=types,
                               final_logit_softcapping=cap, tie_word_embeddings=tied,
                               rope_scaling={"rope_type": "linear", "factor": 2.0},
                               initializer_range=0.3, bos_token_id=2, eos_token_id=None,
                               pad_token_id=0)
        got = p.imported(name, Gemma3ForCausalLM, cfg,
                         dict(model_type="gemma3_text", sliding_window=4,
                              final_logit_softcapping=cap), prepare=norms)
        if got is None:
            continue
        folder, h5, hf, z, tol = got
        hl = hf[0]

        def moved(tag, dst):
            ol, _, _ = p.hf_run(dst)
            d = (ol - hl).abs().max().item()
            c.check(d > 10 * tol, f"{name}: sensitivity: {tag} moves the logits by {d:.3e} > "
                                  f"10 x tol")
        cj = json.load(open(os.path.join(folder, "config.json")))
        rp = cj["rope_parameters"]
        for w in (3, 5):
            moved(f"sliding_window {w}", with_config(folder, f"{folder}-w{w}", sliding_window=w))
        for kind, theta in (("sliding_attention", 500.0), ("full_attention", 10000.0)):
            r = json.loads(json.dumps(rp))
            r[kind]["rope_theta"] = theta
            moved(f"{kind} rope_theta {theta}",
                  with_config(folder, f"{folder}-{kind}", rope_parameters=r))
        moved("query_pre_attn_scalar 16",
              with_config(folder, f"{folder}-q16", query_pre_attn_scalar=16))
        moved("final_logit_softcapping " + ("null" if cap else "2.0"),
              with_config(folder, f"{folder}-cap", final_logit_softcapping=None if cap else 2.0))
        m = Gemma3ForCausalLM.from_pretrained(folder, dtype=torch.float32)
        norms(m, shift=1.0)
        m.save_pretrained(f"{folder}-norm+1")
        moved("every norm weight + 1", f"{folder}-norm+1")
        # transformers 4's form of the same model: the same logits in zt.
        v4 = {k: v for k, v in cj.items() if k not in ("rope_parameters", "layer_types")}
        v4.update(rope_theta=rp["full_attention"]["rope_theta"],
                  rope_local_base_freq=rp["sliding_attention"]["rope_theta"],
                  rope_scaling={"rope_type": "linear", "factor": 2.0})
        if types is None:
            v4["sliding_window_pattern"] = 6
        else:
            v4["layer_types"] = types
        old = with_config(folder, f"{folder}-v4")
        json.dump(v4, open(os.path.join(old, "config.json"), "w"), indent=2)
        rc, out = run_zt(p.zt, "convert", "hf-to-h5", old, old + ".h5")
        c.check(rc == 0 and p.zt_run(old + ".h5")["logits"] == z["logits"],
                f"{name}: transformers 4's config form imports to the same logits (exit {rc})")
        p.exported(name, folder, h5, hf, z, "Gemma3ForCausalLM",
                   ("sliding_window", "layer_types", "rope_parameters", "query_pre_attn_scalar",
                    "final_logit_softcapping", "tie_word_embeddings"))
    # Bad input: exit 2 naming the file and the field.
    folder = os.path.join(p.work, cases[0][0])
    short, sliding = ["sliding_attention"] * 5, "sliding_attention"
    for tag, change, field, says in (
            ("short", dict(layer_types=short), "layer_types", "num_hidden_layers (6)"),
            ("unknown", dict(layer_types=short + ["chunked_attention"]), "layer_types",
             '"chunked_attention"'),
            ("linear", dict(layer_types=short + ["linear_attention"]), "layer_types",
             "Qwen3.5's linear attention"),
            ("attn-softcap", dict(attn_logit_softcapping=50.0), "attn_logit_softcapping",
             "does not soft-cap"),
            ("sliding-scaled", dict(rope_parameters={
                "full_attention": {"rope_type": "default", "rope_theta": 1e6},
                sliding: {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}}),
             "rope_parameters.sliding_attention.rope_type", "without scaling")):
        bad = with_config(folder, f"{folder}-bad-{tag}", **change)
        rc, out = run_zt(p.zt, "convert", "hf-to-h5", bad, bad + ".h5")
        c.check(rc == 2 and "config.json" in out and f"'{field}'" in out and says in out
                and not os.path.exists(bad + ".h5"),
                f"bad input ({tag}): exit {rc} naming config.json, {field} and {says}; nothing "
                f"written")
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
