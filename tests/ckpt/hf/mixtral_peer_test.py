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
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_common import CausalLMPeer, import_hf, run_zt, tensor_names, with_config  # noqa: E402

T = 16


def main():
    p = CausalLMPeer(__doc__, t=T, new=12, peers=("safetensors",))
    from transformers import AutoModelForCausalLM, MixtralConfig, MixtralForCausalLM
    torch, c, zt, work = p.torch, p.c, p.zt, p.work

    # (name, experts, per token, tied, kv heads, sliding_window, output_router_logits, coef)
    cases = [("e4k2-aux", 4, 2, False, 2, None, True, 0.3),
             ("e8k2-tied", 8, 2, True, 4, None, False, 0.02),
             ("e3k1-window", 3, 1, False, 1, 5, True, 0.02)]
    for name, E, k, tied, kv, window, aux_on, coef in cases:
        cfg = MixtralConfig(vocab_size=96, hidden_size=64, intermediate_size=48,
                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=kv,
                            max_position_embeddings=64, rms_norm_eps=1e-5,
                            num_local_experts=E, num_experts_per_tok=k,
                            output_router_logits=aux_on, router_aux_loss_coef=coef,
                            sliding_window=window, tie_word_embeddings=tied,
                            initializer_range=0.3, bos_token_id=1, eos_token_id=None)
        got = p.imported(name, MixtralForCausalLM, cfg,
                         dict(model_type="mixtral", num_local_experts=E))
        if got is None:
            continue
        folder, h5, hf, z, tol = got
        hl = hf[0]
        # The load-balancing loss itself (whatever the config's flag).
        m = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        with torch.no_grad():
            haux = float(m(p.ids, output_router_logits=True).aux_loss)
        print(f"      {name}: aux loss zt {z['aux']:.8f} hf {haux:.8f}; tokens per expert "
              f"(zt, both layers) {z['tokens_per_expert']}")
        c.check(abs(z["aux"] - haux) <= p.tol, f"{name}: |aux loss zt - transformers| <= {p.tol}")
        c.check(sum(z["tokens_per_expert"]) == 2 * T * k,
                f"{name}: zt routed every row of both layers to {k} experts")
        # Sensitivity: the routing matters.
        other = k - 1 if k > 1 else k + 1
        ol, _, _ = p.hf_run(with_config(folder, f"{folder}-k{other}", num_experts_per_tok=other))
        d = (ol - hl).abs().max().item()
        c.check(d > 10 * tol, f"{name}: sensitivity: {other} experts per token move the logits "
                              f"by {d:.3e} > 10 x tol")
        exported = p.exported(name, folder, h5, hf, z, "MixtralForCausalLM",
                              ("num_local_experts", "num_experts_per_tok", "router_aux_loss_coef",
                               "output_router_logits", "sliding_window", "tie_word_embeddings",
                               "num_key_value_heads", "intermediate_size"))
        if exported is None:
            continue
        names_hf, names_zt = tensor_names(folder), tensor_names(exported)
        c.check(names_hf == names_zt, f"{name}: the export's tensor names are transformers' "
                                      f"({len(names_zt)} tensors; differ: "
                                      f"{sorted(names_hf ^ names_zt)[:4]})")
    # transformers 5's run-time names (fused experts) are read as well.
    folder = os.path.join(work, "e4k2-aux")
    fused = os.path.join(work, "fused")
    m = MixtralForCausalLM.from_pretrained(folder, dtype=torch.float32)
    os.makedirs(fused)
    from safetensors.torch import save_file
    save_file({n: t.contiguous() for n, t in m.state_dict().items()},
              os.path.join(fused, "model.safetensors"), metadata={"format": "pt"})
    shutil.copy(os.path.join(folder, "config.json"), fused)
    c.check(any(n.endswith("experts.gate_up_proj") for n in tensor_names(fused)),
            "fused: the state dict holds transformers 5's gate_up_proj")
    if import_hf(c, zt, "fused", fused, fused + ".h5"):
        zf, z0 = p.zt_run(fused + ".h5"), p.zt_run(os.path.join(work, "e4k2-aux.h5"))
        c.check(zf["logits"] == z0["logits"], "fused: the same logits as the per-expert files")
    # A router with jitter noise is refused (zt has none), naming the key.
    jit = with_config(folder, os.path.join(work, "jitter"), router_jitter_noise=0.1)
    rc, out = run_zt(zt, "convert", "hf-to-h5", jit, jit + ".h5")
    c.check(rc == 2 and "router_jitter_noise" in out, f"router_jitter_noise 0.1 refused (exit {rc})")
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
