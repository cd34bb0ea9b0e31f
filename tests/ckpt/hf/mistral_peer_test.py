#!/usr/bin/env python3
"""Mistral (sliding-window attention) against transformers: tiny random MistralForCausalLM
models with a sliding window shorter than the sequence, imported by zt.

  mistral_peer_test.py ZT ZT_LOGITS WORKDIR

For each case, transformers' own MistralConfig + MistralForCausalLM (random weights,
float32) is saved with save_pretrained. Then:
  - `zt convert hf-to-h5` imports the folder; ZT_LOGITS (tests/ckpt/hf/zt_logits.cpp)
    prints zt's logits of every prefix, its KV-cache logits, loss and greedy continuation
  - logits (and KV-cache logits): max |zt - transformers| <= 1e-5 x max(1, max |logit|)
  - loss: |zt - transformers| <= 1e-5
  - greedy continuation equal token for token (zt's sampler, and `zt generate
    --temperature 0` on the HF folder itself), continued past the window
  - `zt convert h5-to-hf` exports it again: model_type "mistral", MistralForCausalLM,
    the same sliding_window read by AutoConfig, and transformers' logits on the export
    equal the original's (the same fp32 weights: exactly)
  - sensitivity: the same weights with sliding_window null (full causal attention) give
    logits that differ by more than 10 x the tolerance (so the test sees the window), and
    a window one longer or shorter than the case's also differs (transformers' convention
    kv > q - window, off by one would be seen)
Exit 77 (CTest skip) without torch/transformers (scripts/install-deps.sh --hf-peers).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_common import (check_export, hf_llama_run, import_and_check, peer_start,  # noqa: E402
                       with_config, zt_logits_json)

TOL = 1e-5
NEW = 12
T = 16


def main():
    zt, zt_logits, work, torch, c = peer_start(__doc__)
    from transformers import MistralConfig, MistralForCausalLM
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 96, (T,), generator=gen).tolist()
    ids = torch.tensor([tokens])
    zt_run = lambda ckpt: zt_logits_json(c, zt_logits, ckpt, tokens, NEW)  # noqa: E731
    hf_run = lambda folder: hf_llama_run(torch, folder, ids, NEW)  # noqa: E731

    # (name, sliding_window, tied, kv heads)
    # (no window of 1: transformers 5.24's cached generate then differs from its own full
    # forward; eos_token_id None: generate's min_new_tokens would forbid that token on the
    # original folder but not on the export, which carries no eos)
    cases = [("w5-untied", 5, False, 2), ("w2-tied-mha", 2, True, 4), ("w7-gqa", 7, False, 1)]
    for name, window, tied, kv in cases:
        torch.manual_seed(1)
        cfg = MistralConfig(vocab_size=96, hidden_size=64, intermediate_size=128,
                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=kv,
                            max_position_embeddings=64, rms_norm_eps=1e-5,
                            sliding_window=window, tie_word_embeddings=tied,
                            initializer_range=0.3, bos_token_id=1, eos_token_id=None)
        model = MistralForCausalLM(cfg).to(torch.float32)
        folder = os.path.join(work, name)
        model.save_pretrained(folder, safe_serialization=True)
        saved = json.load(open(os.path.join(folder, "config.json")))
        c.check(saved.get("model_type") == "mistral" and saved.get("sliding_window") == window,
                f"{name}: transformers saved model_type mistral, sliding_window {window}")
        got = import_and_check(c, torch, zt, name, folder, tokens, NEW, zt_run, hf_run, TOL)
        if not got:
            continue
        h5, hf, z, tol = got
        hl = hf[0]
        # Sensitivity: full causal attention, and the window off by one either way.
        for other in (None, window + 1, window - 1):
            if other == 0:
                continue
            ol, _, _ = hf_run(with_config(folder, f"{folder}-w{other}", sliding_window=other))
            d = (ol - hl).abs().max().item()
            c.check(d > 10 * tol, f"{name}: sensitivity: sliding_window {other} moves the "
                                  f"logits by {d:.3e} > 10 x tol")
        check_export(c, torch, zt, name, folder, h5, hf, z, zt_run, hf_run, "MistralForCausalLM",
                     ("sliding_window", "tie_word_embeddings"))
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
