#!/usr/bin/env python3
"""gpt-oss (gpt_oss) against transformers: tiny random GptOssForCausalLM models made by
transformers' own class, imported by zt.

  gptoss_peer_test.py ZT ZT_LOGITS WORKDIR

Each case: 4 layers alternating sliding (window 4) and full attention, 4 experts (2 per
token) with biases and the clamped SwiGLU (swiglu_limit 1.5, so that the clamps act on
these small weights), yarn RoPE (factor 4 over an original context of 8) under a 16-token
prompt and a 60-token continuation (longer than the window and the original context),
attention biases and sinks, every bias and sink drawn N(0, 0.3) and norm weights
1 + N(0, 0.1). Then (CausalLMPeer, as gemma_peer_test.py):
  - logits and KV-cache logits within max(1e-5 x max|logit|, 2 x transformers' own fp32
    error against float64), loss, greedy continuation, `zt generate`
  - the export (`zt convert h5-to-hf --dtype f32`) reloads in transformers with the same
    logits, loss and continuation exactly, and zt re-imports it
  - sensitivity: a sink set to -inf, the yarn factor, the router bias, swiglu_limit each
    move transformers' logits by more than 10 x the tolerance
  - bad input: yarn without original_max_position_embeddings, a sink tensor of the wrong
    shape: exit 2 naming the file and the field or tensor, nothing written
  - MXFP4: the experts as *_blocks / *_scales (every one of the 256 byte values, random
    scales) import; the export (f32 and bf16) equals transformers'
    convert_moe_packed_tensors bit for bit; scales that do not match the blocks: exit 2
Exit 77 (CTest skip) without torch/transformers (scripts/install-deps.sh --hf-peers).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_common import CausalLMPeer, perturb_biases_and_norms, run_zt, with_config  # noqa: E402


def main():
    p = CausalLMPeer(__doc__, t=16, new=60, peers=("safetensors",))
    from transformers import GptOssConfig, GptOssForCausalLM
    c, torch = p.c, p.torch

    def prepare(model):
        perturb_biases_and_norms(torch, model)
        with torch.no_grad():
            for n, w in model.named_parameters():
                if n.endswith("sinks") or n.endswith("_bias"):
                    w.normal_(0.0, 0.3)

    yarn = {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0,
            "truncate": False, "original_max_position_embeddings": 8, "rope_theta": 150000.0}
    name = "oss4"
    cfg = GptOssConfig(vocab_size=96, hidden_size=64, intermediate_size=64, num_hidden_layers=4,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                       max_position_embeddings=128, sliding_window=4, num_local_experts=4,
                       num_experts_per_tok=2, swiglu_limit=1.5, rope_parameters=yarn,
                       initializer_range=0.3, tie_word_embeddings=False, bos_token_id=2,
                       eos_token_id=None, pad_token_id=0)
    cfg._experts_implementation = "eager"
    got = p.imported(name, GptOssForCausalLM, cfg, dict(model_type="gpt_oss", sliding_window=4),
                     prepare=prepare)
    if got is not None:
        folder, h5, hf, z, tol = got
        hl = hf[0]

        def moved(tag, dst):
            ol, _, _ = p.hf_run(dst)
            d = (ol - hl).abs().max().item()
            c.check(d > 10 * tol, f"{name}: sensitivity: {tag} moves the logits by {d:.3e} > "
                                  f"10 x tol")

        def edited(tag, edit):
            m = GptOssForCausalLM.from_pretrained(folder, dtype=torch.float32)
            with torch.no_grad():
                edit(m)
            dst = f"{folder}-{tag}"
            m.save_pretrained(dst)
            return dst
        moved("a sink of layer 1 set to -inf",
              edited("sink", lambda m: m.model.layers[1].self_attn.sinks.__setitem__(0, float("-inf"))))
        moved("the router bias of layer 0 + 1 on expert 0",
              edited("rbias", lambda m: m.model.layers[0].mlp.router.bias.__setitem__(0, m.model.layers[0].mlp.router.bias[0] + 1.0)))
        y2 = dict(yarn, factor=8.0)
        moved("yarn factor 8", with_config(folder, f"{folder}-yarn8", rope_parameters=y2))
        moved("swiglu_limit 7", with_config(folder, f"{folder}-lim7", swiglu_limit=7.0))
        p.exported(name, folder, h5, hf, z, "GptOssForCausalLM",
                   ("sliding_window", "layer_types", "rope_parameters", "swiglu_limit",
                    "num_local_experts", "num_experts_per_tok"))
        # Bad input: exit 2 naming the file and the field.
        no_orig = {k: v for k, v in yarn.items() if k != "original_max_position_embeddings"}
        bad = with_config(folder, f"{folder}-bad-yarn", rope_parameters=no_orig)
        rc, out = run_zt(p.zt, "convert", "hf-to-h5", bad, bad + ".h5")
        c.check(rc == 2 and "config.json" in out and "original_max_position_embeddings" in out
                and not os.path.exists(bad + ".h5"),
                f"bad input (yarn without its original context): exit {rc} naming config.json "
                f"and original_max_position_embeddings; nothing written")
        m = GptOssForCausalLM.from_pretrained(folder, dtype=torch.float32)
        sd = {k: v.clone() for k, v in m.state_dict().items()}
        sd["model.layers.0.self_attn.sinks"] = torch.zeros(5)
        bad = f"{folder}-bad-sink"
        os.makedirs(bad, exist_ok=True)
        from safetensors.torch import save_file
        save_file(sd, os.path.join(bad, "model.safetensors"), metadata={"format": "pt"})
        import shutil
        shutil.copy(os.path.join(folder, "config.json"), bad)
        rc, out = run_zt(p.zt, "convert", "hf-to-h5", bad, bad + ".h5")
        c.check(rc == 2 and "config.json" in out and "self_attn.sinks" in out
                and not os.path.exists(bad + ".h5"),
                f"bad input (a sink tensor of shape [5] for 4 heads): exit {rc} naming the "
                f"tensor and config.json; nothing written")
        check_mxfp4(p, folder)
    c.finish()


def check_mxfp4(p, folder):
    """The model's experts replaced by synthetic MXFP4 blocks and scales."""
    import json
    import shutil
    from safetensors.torch import load_file, save_file
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors
    c, torch = p.c, p.torch
    sd = load_file(os.path.join(folder, "model.safetensors"))
    gen = torch.Generator().manual_seed(5)
    packed, q = {}, {}
    for name in [n for n in sd if n.endswith(("gate_up_proj", "down_proj"))]:
        E, K, R = sd.pop(name).shape
        n = E * R * (K // 32) * 16
        codes = torch.cat([torch.arange(256), torch.randint(0, 256, (n - 256,), generator=gen)])
        blocks = codes[torch.randperm(n, generator=gen)].to(torch.uint8).reshape(E, R, K // 32, 16)
        scales = torch.randint(118, 128, (E, R, K // 32), generator=gen).to(torch.uint8)
        packed[name + "_blocks"], packed[name + "_scales"] = blocks, scales
        q[name] = (blocks, scales)
    mx = folder + "-mxfp4"
    os.makedirs(mx, exist_ok=True)
    save_file({**sd, **packed}, os.path.join(mx, "model.safetensors"), metadata={"format": "pt"})
    cfg = json.load(open(os.path.join(folder, "config.json")))
    cfg["quantization_config"] = {"quant_method": "mxfp4",
                                  "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    json.dump(cfg, open(os.path.join(mx, "config.json"), "w"), indent=2)
    rc, out = run_zt(p.zt, "convert", "hf-to-h5", mx, mx + ".h5")
    c.check(rc == 0, f"mxfp4: zt imports the MXFP4 folder (exit {rc})")
    if rc != 0:
        print(out)
        return
    for dtype, flag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        dst = f"{mx}-export-{flag}"
        rc, out = run_zt(p.zt, "convert", "h5-to-hf", mx + ".h5", dst, "--dtype", flag)
        got = load_file(os.path.join(dst, "model.safetensors")) if rc == 0 else {}
        same = rc == 0 and all(
            torch.equal(got[n], convert_moe_packed_tensors(b, s, dtype=dtype))
            for n, (b, s) in q.items())
        c.check(same, f"mxfp4: the {flag} export equals transformers' convert_moe_packed_tensors "
                      f"bit for bit ({len(q)} tensors, every code; exit {rc})")
    bad = mx + "-bad-scales"
    shutil.copytree(mx, bad, dirs_exist_ok=True)
    name = next(iter(q)) + "_scales"
    packed_bad = dict(packed)
    packed_bad[name] = packed[name][:, :-1].contiguous()
    save_file({**sd, **packed_bad}, os.path.join(bad, "model.safetensors"), metadata={"format": "pt"})
    rc, out = run_zt(p.zt, "convert", "hf-to-h5", bad, bad + ".h5")
    c.check(rc == 2 and "config.json" in out and name in out and "model.safetensors" in out
            and not os.path.exists(bad + ".h5"),
            f"bad input (MXFP4 scales that do not match the blocks): exit {rc} naming the file, "
            f"{name} and config.json; nothing written")


if __name__ == "__main__":
    sys.exit(main())
