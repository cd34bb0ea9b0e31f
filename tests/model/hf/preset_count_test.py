#!/usr/bin/env python3
"""The Qwen3.5 / Qwen3.6 presets' parameter counts against transformers' models.

  preset_count_test.py ZT

For each preset, the published text_config of its checkpoint (written out below, not read
from zt) builds transformers' own text model (Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM)
on the meta device; its parameter count (shared tensors once) must equal the count
`zt estimate --json --set model.preset=NAME` reports, exactly. For the MoE preset, the
active count too: the total less (E - k) experts of every layer, counted from the same
meta model's expert tensors. Skipped (77) without torch/transformers.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "ckpt", "hf"))
from hf_common import Checker, torch_peers  # noqa: E402

# The fields every Qwen3.5 text model shares (the published config.json files' text_config).
COMMON = {"vocab_size": 248320, "head_dim": 256, "linear_num_key_heads": 16,
          "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
          "full_attention_interval": 4, "max_position_embeddings": 262144, "rms_norm_eps": 1e-6}
MOE = {"num_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 512,
       "shared_expert_intermediate_size": 512}


def text(hidden, layers, heads, kv, inter, value_heads, tied, moe=False):
    d = dict(COMMON, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
             num_key_value_heads=kv, linear_num_value_heads=value_heads, tie_word_embeddings=tied)
    if moe:
        d.update(MOE)
    else:
        d["intermediate_size"] = inter
    return d


# Qwen/Qwen3.5-0.8B, -4B, -9B, -27B, -35B-A3B (Qwen/Qwen3.6-35B-A3B: the same text model).
PRESETS = {
    "qwen3.5-0.8b": text(1024, 24, 8, 2, 3584, 16, True),
    "qwen3.5-4b": text(2560, 32, 16, 4, 9216, 32, True),
    "qwen3.5-9b": text(4096, 32, 16, 4, 12288, 32, False),
    "qwen3.5-27b": text(5120, 64, 24, 4, 17408, 48, False),
    "qwen3.5-35b-a3b": text(2048, 40, 16, 2, 0, 32, False, moe=True),
    "qwen3.6-35b-a3b": text(2048, 40, 16, 2, 0, 32, False, moe=True),
}


def zt_counts(c, zt, name):
    p = subprocess.run([zt, "estimate", "--json", "--set", f"model.preset={name}"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    c.check(p.returncode == 0, f"zt estimate --set model.preset={name}: exit {p.returncode} {p.stderr[-300:]}")
    if p.returncode != 0:
        return None, None
    j = json.loads(p.stdout)
    return j["params"], j["active_params"]


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    zt = sys.argv[1]
    torch, transformers = torch_peers()
    c = Checker()
    for name, d in PRESETS.items():
        moe = "num_experts" in d
        cfg = (transformers.Qwen3_5MoeTextConfig if moe else transformers.Qwen3_5TextConfig)(**d)
        with torch.device("meta"):
            m = (transformers.Qwen3_5MoeForCausalLM if moe else transformers.Qwen3_5ForCausalLM)(cfg)
        total = sum(p.numel() for p in m.parameters())
        experts = sum(p.numel() for n, p in m.named_parameters() if ".mlp.experts." in n)
        active = total - experts * (d["num_experts"] - d["num_experts_per_tok"]) // d["num_experts"] if moe else total
        params, active_zt = zt_counts(c, zt, name)
        if params is None:
            continue
        c.check(params == total, f"{name}: zt {params} parameters, transformers {total}")
        c.check(active_zt == active, f"{name}: zt {active_zt} active, transformers' model {active}")
    c.finish()


if __name__ == "__main__":
    main()
