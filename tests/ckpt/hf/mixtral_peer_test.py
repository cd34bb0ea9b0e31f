#!/usr/bin/env python3
"""Mixtral (mixture of experts) against transformers: tiny random MixtralForCausalLM
models imported by zt.

  mixtral_peer_test.py ZT ZT_LOGITS WORKDIR

For each case, transformers' own MixtralConfig + MixtralForCausalLM (random weights,
float32) is saved with save_pretrained (transformers 5 writes Mixtral's per-expert
block_sparse_moe.experts.E.w1/w2/w3 tensors). Then:
  - `zt convert hf-to-h5` imports the folder; ZT_LOGITS (tests/ckpt/hf/zt_logits.cpp)
    prints zt's logits of every prefix, its KV-cache logits, loss, aux loss and greedy
    continuation
  - logits (and KV-cache logits): max |zt - transformers| <= 1e-5 x max(1, max |logit|)
  - loss: |zt - transformers| <= 1e-5 (with output_router_logits the loss includes
    router_aux_loss_coef x the load-balancing loss, as MixtralForCausalLM adds it)
  - the load-balancing loss (transformers' aux_loss with output_router_logits=True):
    |zt - transformers| <= 1e-5
  - greedy continuation equal token for token (zt's sampler, and `zt generate
    --temperature 0` on the HF folder itself)
  - `zt convert h5-to-hf` exports it again: model_type "mixtral", MixtralForCausalLM, the
    same experts, experts per token, router_aux_loss_coef, output_router_logits and
    sliding_window read by AutoConfig, the same tensor names as transformers' save, and
    transformers' logits on the export equal the original's (the same fp32 weights:
    exactly); zt re-imports the export with the same logits
  - sensitivity: the same weights with one expert per token fewer (or more) give logits
    more than 10 x the tolerance away (so the test sees the routing)
Exit 77 (CTest skip) without torch/transformers (scripts/install-deps.sh --hf-peers).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_common import (check_export, check_fused, check_aux_loss, hf_llama_run,  # noqa: E402
                       import_and_check, peer_start, run_zt, with_config, zt_logits_json)

TOL = 1e-5
NEW = 12
T = 16


def main():
    zt, zt_logits, work, torch, c = peer_start(__doc__)
    from transformers import MixtralConfig, MixtralForCausalLM
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 96, (T,), generator=gen).tolist()
    ids = torch.tensor([tokens])
    zt_run = lambda ckpt: zt_logits_json(c, zt_logits, ckpt, tokens, NEW)  # noqa: E731
    hf_run = lambda folder: hf_llama_run(torch, folder, ids, NEW)  # noqa: E731

    # (name, experts, per token, tied, kv heads, sliding_window, output_router_logits, coef)
    cases = [("e4k2-aux", 4, 2, False, 2, None, True, 0.3),
             ("e8k2-tied", 8, 2, True, 4, None, False, 0.02),
             ("e3k1-window", 3, 1, False, 1, 5, True, 0.02)]
    for name, E, k, tied, kv, window, aux_on, coef in cases:
        torch.manual_seed(1)
        cfg = MixtralConfig(vocab_size=96, hidden_size=64, intermediate_size=48,
                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=kv,
                            max_position_embeddings=64, rms_norm_eps=1e-5,
                            num_local_experts=E, num_experts_per_tok=k,
                            output_router_logits=aux_on, router_aux_loss_coef=coef,
                            sliding_window=window, tie_word_embeddings=tied,
                            initializer_range=0.3, bos_token_id=1, eos_token_id=None)
        model = MixtralForCausalLM(cfg).to(torch.float32)
        folder = os.path.join(work, name)
        model.save_pretrained(folder, safe_serialization=True)
        saved = json.load(open(os.path.join(folder, "config.json")))
        c.check(saved.get("model_type") == "mixtral" and saved.get("num_local_experts") == E,
                f"{name}: transformers saved model_type mixtral, num_local_experts {E}")
        got = import_and_check(c, torch, zt, name, folder, tokens, NEW, zt_run, hf_run, TOL)
        if not got:
            continue
        h5, hf, z, tol = got
        hl = hf[0]
        check_aux_loss(c, torch, name, folder, ids, z, 2, k, TOL)
        # Sensitivity: the routing matters.
        other = k - 1 if k > 1 else k + 1
        ol, _, _ = hf_run(with_config(folder, f"{folder}-k{other}", num_experts_per_tok=other))
        d = (ol - hl).abs().max().item()
        c.check(d > 10 * tol, f"{name}: sensitivity: {other} experts per token move the logits "
                              f"by {d:.3e} > 10 x tol")
        check_export(c, torch, zt, name, folder, h5, hf, z, zt_run, hf_run, "MixtralForCausalLM",
                     ("num_local_experts", "num_experts_per_tok", "router_aux_loss_coef",
                      "output_router_logits", "sliding_window", "tie_word_embeddings",
                      "num_key_value_heads", "intermediate_size"))
    # transformers 5's run-time names (fused experts) are read as well.
    folder = os.path.join(work, "e4k2-aux")
    check_fused(c, torch, zt, MixtralForCausalLM, folder, os.path.join(work, "fused"), zt_run)
    # A router with jitter noise is refused (zt has none), naming the key.
    jit = with_config(folder, os.path.join(work, "jitter"), router_jitter_noise=0.1)
    rc, out = run_zt(zt, "convert", "hf-to-h5", jit, jit + ".h5")
    c.check(rc == 2 and "router_jitter_noise" in out, f"router_jitter_noise 0.1 refused (exit {rc})")
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
