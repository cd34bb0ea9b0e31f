#!/usr/bin/env python3
"""Writes a random Hugging Face Llama folder (config.json + model.safetensors) of a given
shape, for timing `zt convert hf-to-h5 / h5-to-hf` on realistic sizes.

Usage: make_random_model.py OUTDIR [--shape tinyllama|tiny] [--dtype bf16|f32]

Needs numpy, safetensors and (for bf16) torch. Values are N(0, 0.02), norms near 1.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_common import hf_config, llama_shapes  # noqa: E402

SHAPES = {
    # TinyLlama-1.1B (the tinyllama-1.1b preset)
    "tinyllama": dict(vocab=32000, hidden=2048, inter=5632, layers=22, heads=32, kv=4, ctx=2048),
    "tiny": dict(vocab=256, hidden=128, inter=512, layers=4, heads=4, kv=2, ctx=256),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--shape", default="tinyllama", choices=sorted(SHAPES))
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
    a = ap.parse_args()
    import numpy as np
    cfg = hf_config(torch_dtype={"bf16": "bfloat16", "f32": "float32"}[a.dtype], **SHAPES[a.shape])
    cfg["rms_norm_eps"] = 1e-5
    rng = np.random.default_rng(0)
    tensors = {}
    for name, shape in llama_shapes(cfg).items():
        t = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
        if len(shape) == 1:
            t += np.float32(1.0)
        tensors[name] = t
    os.makedirs(a.outdir, exist_ok=True)
    path = os.path.join(a.outdir, "model.safetensors")
    if a.dtype == "bf16":
        import torch
        from safetensors.torch import save_file
        save_file({k: torch.from_numpy(v).to(torch.bfloat16) for k, v in tensors.items()}, path,
                  metadata={"format": "pt"})
    else:
        from safetensors.numpy import save_file
        save_file(tensors, path, metadata={"format": "np"})
    with open(os.path.join(a.outdir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    n = sum(int(np.prod(s)) for s in llama_shapes(cfg).values())
    print(f"wrote {path}: {len(tensors)} tensors, {n} parameters, {a.dtype}")


if __name__ == "__main__":
    main()
