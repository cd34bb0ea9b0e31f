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
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_common import CausalLMPeer, with_config  # noqa: E402


def main():
    p = CausalLMPeer(__doc__, t=16, new=12)
    from transformers import MistralConfig, MistralForCausalLM
    c = p.c

    # (name, sliding_window, tied, kv heads)
    # (no window of 1: transformers 5.24's cached generate then differs from its own full
    # forward; eos_token_id None: generate's min_new_tokens would forbid that token on the
    # original folder but not on the export, which carries no eos)
    cases = [("w5-untied", 5, False, 2), ("w2-tied-mha", 2, True, 4), ("w7-gqa", 7, False, 1)]
    for name, window, tied, kv in cases:
        cfg = MistralConfig(vocab_size=96, hidden_size=64, intermediate_size=128,
                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=kv,
                            max_position_embeddings=64, rms_norm_eps=1e-5,
                            sliding_window=window, tie_word_embeddings=tied,
                            initializer_range=0.3, bos_token_id=1, eos_token_id=None)
        got = p.imported(name, MistralForCausalLM, cfg,
                         dict(model_type="mistral", sliding_window=window,
                              tie_word_embeddings=tied))
        if got is None:
            continue
        folder, h5, hf, z, tol = got
        hl = hf[0]
        # Sensitivity: full causal attention, and the window off by one either way.
        for other in (None, window + 1, window - 1):
            if other == 0:
                continue
            ol, _, _ = p.hf_run(with_config(folder, f"{folder}-w{other}", sliding_window=other))
            d = (ol - hl).abs().max().item()
            c.check(d > 10 * tol, f"{name}: sensitivity: sliding_window {other} moves the "
                                  f"logits by {d:.3e} > 10 x tol")
        # The export: sliding_window and tie_word_embeddings as saved (and so as the case's).
        p.exported(name, folder, h5, hf, z, "MistralForCausalLM",
                   ("sliding_window", "tie_word_embeddings", "num_key_value_heads"))
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
