#!/usr/bin/env python3
"""Qwen3.5 (qwen3_5_text) against transformers: tiny random Qwen3_5ForCausalLM models made
by transformers' own classes, imported by zt.

  qwen35_peer_test.py ZT ZT_LOGITS WORKDIR

Each case: 3 layers, every one full_attention (the Gated DeltaNet layers are refused by
name until zt runs them), head_dim 16, the output gate (q_proj emits each head's query and
gate), q/k norms and every norm in the (1 + w) form (weights drawn N(0, 0.5): transformers
zero-initialises them), partial RoPE (0.5 of the head: 8 of 16 dims), and the multimodal
RoPE's sections (mrope_section, mrope_interleaved) as the published checkpoints set them.
Then (CausalLMPeer, as gemma_peer_test.py):
  - logits and KV-cache logits within max(1e-5 x max|logit|, 2 x transformers' own fp32
    error against float64), loss, greedy continuation of 40 tokens, `zt generate`
  - text positions through transformers' multimodal RoPE equal zt's plain partial RoPE
    (the case with mrope_section: transformers' own rotary module, its three position rows)
  - the export (`zt convert h5-to-hf`) reloads in transformers with the same logits, loss
    and continuation exactly, and zt re-imports it
  - sensitivity: the output gate removed (sigmoid(gate) -> 1), partial RoPE at 1.0, every
    norm weight + 1, the q/k norms' weights + 1: each moves transformers' logits by more
    than 10 x the tolerance
  - bad input: a linear_attention layer, layer_types absent (full_attention_interval 4:
    linear layers), a partial_rotary_factor giving an odd rotated size, an mrope_section of
    2 values: exit 2 naming config.json and the field, nothing written
Exit 77 (CTest skip) without torch/transformers (scripts/install-deps.sh --hf-peers).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_common import CausalLMPeer, run_zt, with_config  # noqa: E402

ARCH = "Qwen3_5ForCausalLM"


def norms(model, shift=0.0):
    """Every (1 + w) norm weight drawn N(shift, 0.5)."""
    import torch
    with torch.no_grad():
        for name, w in model.named_parameters():
            if "norm" in name:
                w.copy_(shift + 0.5 * torch.randn_like(w))


class NoGate:
    """transformers' Qwen3.5 attention with sigmoid(gate) -> 1 (the output gate removed):
    its module's torch.sigmoid answers ones while the context is open."""

    def __init__(self, torch):
        from transformers.models.qwen3_5 import modeling_qwen3_5 as mod
        self.mod, self.torch = mod, torch

    def __getattr__(self, name):
        if name == "sigmoid":
            return self.torch.ones_like
        return getattr(self.torch, name)

    def __enter__(self):
        self.mod.torch = self
        return self

    def __exit__(self, *exc):
        self.mod.torch = self.torch


def main():
    p = CausalLMPeer(__doc__, 24, 40)
    c, torch = p.c, p.torch
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
    full = ["full_attention"] * 3
    base = dict(vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                max_position_embeddings=64, rms_norm_eps=1e-6, initializer_range=0.3,
                layer_types=full)
    mrope = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
             "mrope_section": [2, 1, 1], "mrope_interleaved": True}
    cases = [
        ("qwen35-untied", dict(tie_word_embeddings=False,
                               rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                "partial_rotary_factor": 0.5})),
        ("qwen35-mrope-tied", dict(tie_word_embeddings=True, rope_parameters=mrope)),
    ]
    for name, extra in cases:
        cfg = Qwen3_5TextConfig(**base, **extra)
        got = p.imported(name, Qwen3_5ForCausalLM, cfg, {"model_type": "qwen3_5_text"}, norms)
        if got is None:
            continue
        folder, h5, hf, z, tol = got
        hl = hf[0]

        def moved(tag, logits):
            d = (logits - hl).abs().max().item()
            c.check(d > 10 * tol, f"{name}: sensitivity: {tag} moves the logits by {d:.3e} > "
                                  f"10 x tol {tol:.3e}")
        with NoGate(torch):
            moved("the output gate removed", p.hf_run(folder)[0])
        rp = dict(extra["rope_parameters"], partial_rotary_factor=1.0)
        moved("partial_rotary_factor 1.0",
              p.hf_run(with_config(folder, f"{folder}-rope1", rope_parameters=rp))[0])
        for tag, only in (("every norm weight + 1", "norm"), ("the q/k norms + 1", "_norm")):
            m = Qwen3_5ForCausalLM.from_pretrained(folder, dtype=torch.float32)
            with torch.no_grad():
                for pname, w in m.named_parameters():
                    if only in pname:
                        w.add_(1.0)
            m.save_pretrained(f"{folder}-{only}+1")
            moved(tag, p.hf_run(f"{folder}-{only}+1")[0])
        p.exported(name, folder, h5, hf, z, ARCH,
                   ("layer_types", "rope_parameters", "head_dim", "tie_word_embeddings"))
    # Bad input: exit 2 naming the file and the field.
    folder = os.path.join(p.work, cases[0][0])
    for tag, change, field, says in (
            ("linear", dict(layer_types=full[:2] + ["linear_attention"]), "layer_types",
             "linear_attention"),
            ("interval", dict(layer_types=None), "full_attention_interval", "linear_attention"),
            ("odd-rotary", dict(rope_parameters={"rope_type": "default", "rope_theta": 1e4,
                                                 "partial_rotary_factor": 0.3125}),
             "partial_rotary_factor", "even"),
            ("mrope-2", dict(rope_parameters=dict(mrope, mrope_section=[2, 2])),
             "rope_parameters.mrope_section", "3 counts")):
        bad = with_config(folder, f"{folder}-bad-{tag}", **change)
        rc, out = run_zt(p.zt, "convert", "hf-to-h5", bad, bad + ".h5")
        c.check(rc == 2 and "config.json" in out and field in out and says in out
                and not os.path.exists(bad + ".h5"),
                f"bad input ({tag}): exit {rc} naming config.json, {field} and {says}; nothing "
                f"written")
        if rc != 2:
            print(out[-1500:])
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
