#!/usr/bin/env python3
"""Qwen3.5 (qwen3_5_text) against transformers: tiny random Qwen3_5ForCausalLM models made
by transformers' own classes, imported by zt.

  qwen35_peer_test.py ZT ZT_LOGITS WORKDIR

Each case: 3 layers, every one full_attention, head_dim 16, the output gate (q_proj emits
each head's query and gate), q/k norms and every norm in the (1 + w) form (weights drawn N(0, 0.5): transformers
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
  - bad input: a partial_rotary_factor giving an odd rotated size, an mrope_section of 2
    values, model_type qwen3_5 without a text_config, and on the hybrid: value heads the key heads do not divide, a conv kernel of 0,
    an unknown layer type, a missing A_log: exit 2 naming config.json and the field (or
    the tensor), nothing written
Then the hybrid (Gated DeltaNet layers 0, 2, 3 and a full layer 1; 2 key heads, 4 value
heads, conv kernel 4) on 150 tokens (over two chunks of 64, not a multiple): logits of
every prefix and loss within the same rule (the float64 reference runs transformers'
float32 casts as float64), the export, and sensitivity to the conv kernel shifted by one,
A_log + 0.1, the output gate removed and partial RoPE at 1.0; the cache's logits (the
recurrent rule from the first token) within the same rule; the greedy continuation of 60
tokens equal to transformers' generate (with its own cache) three ways: zt recomputing each
step, zt's cache (the prompt prefilled by the chunked rule, then the recurrent one) and
`zt generate`.
Then the same on a hybrid qwen3_5_moe (Qwen3_5MoeForCausalLM, model_type qwen3_5_moe_text;
layers l, f, l, f; 4 experts, top 2 renormalised, the shared expert and its sigmoid gate;
per-expert tensors as transformers saves them), with one more sensitivity:
the shared expert's gate removed (sigmoid -> 1).
Then a Qwen3_5ForConditionalGeneration folder of the hybrid and a
Qwen3_5MoeForConditionalGeneration folder of the qwen3_5_moe one (qwen35_multimodal.py).
Exit 77 (CTest skip) without torch/transformers (scripts/install-deps.sh --hf-peers).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_common import (CausalLMPeer, f64_forwards, hf_llama_run, run_zt,  # noqa: E402
                       with_config, zt_logits_json)
from qwen35_multimodal import multimodal  # noqa: E402

ARCH = "Qwen3_5ForCausalLM"


def norms(model, shift=0.0):
    """Every (1 + w) norm weight drawn N(shift, 0.5)."""
    import torch
    with torch.no_grad():
        for name, w in model.named_parameters():
            if "norm" in name:
                w.copy_(shift + 0.5 * torch.randn_like(w))


class ModuleTorch:
    """transformers' Qwen3.5 module sees `torch` with some names replaced while the context
    is open: NoGate's sigmoid -> ones (the output gate removed), Torch64's float32 ->
    float64 (the casts inside its Gated DeltaNet functions and gated norm, for the float64
    reference)."""

    def __init__(self, torch, mod=None, attr="torch", **names):
        from transformers.models.qwen3_5 import modeling_qwen3_5
        self.mod, self.torch, self.names = mod or modeling_qwen3_5, torch, names
        self.attr = attr  # the module's name for `torch` (F: torch.nn.functional)

    def __getattr__(self, name):
        if name in self.names:
            return self.names[name]
        return getattr(self.torch, name)

    def __enter__(self):
        setattr(self.mod, self.attr, self)
        return self

    def __exit__(self, *exc):
        setattr(self.mod, self.attr, self.torch)


def fp32_logits(torch, folder, ids):
    """transformers' float32 logits [T, V] (float64 tensor) of the folder's model."""
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        return model(ids).logits[0].double()


def f64_logits(p, folder, ids, mod=None, cls=None):
    """transformers' logits in float64: the model (cls, else the folder's causal LM class)
    in float64, RoPE and RMSNorm in float64 (hf_common.f64_forwards), the float32 casts of
    its Gated DeltaNet functions and gated norm as float64 (ModuleTorch over mod, else
    Qwen3.5's module); the decay's `.float()` stays float32."""
    import types
    from transformers import AutoModelForCausalLM
    torch = p.torch
    # MoE experts: the default grouped_mm takes no float64; the eager loop does.
    eager = {"experts_implementation": "eager"} if mod else {}
    model = (cls or AutoModelForCausalLM).from_pretrained(folder, dtype=torch.float64, **eager)
    model.eval()
    for m, fwd in f64_forwards(model):
        m.forward = types.MethodType(fwd, m)
    with torch.no_grad(), ModuleTorch(torch, mod, float32=torch.float64):
        return model(input_ids=ids).logits[0].double()


def hybrid_text(base):
    """The hybrid's text config: Gated DeltaNet layers 0, 2, 3 and a full layer 1."""
    types = ["linear_attention", "full_attention", "linear_attention", "linear_attention"]
    return dict(base, num_hidden_layers=4, layer_types=types, max_position_embeddings=256,
                linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
                linear_value_head_dim=12, linear_conv_kernel_dim=4, initializer_range=0.2,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                 "partial_rotary_factor": 0.5})


def moe_text(text):
    """qwen3_5_moe_text's config of the hybrid's text model: layers l, f, l, f; 4 experts,
    top 2, the shared expert."""
    text = dict(text, layer_types=text["layer_types"][:3] + ["full_attention"],
                num_experts=4, num_experts_per_tok=2, moe_intermediate_size=48,
                shared_expert_intermediate_size=40)
    text.pop("intermediate_size", None)  # not in its config
    return text


def hybrid(p, base, moe=False):
    """Gated DeltaNet layers among full ones, 150 tokens (over two chunks of 64, not a
    multiple): logits of every prefix, cached logits, loss and greedy continuation (also
    through zt's cache and `zt generate`) against transformers; sensitivity of
    transformers' logits to the conv kernel shifted by one, A_log perturbed, the output gate
    and partial RoPE; the export. moe: the
    qwen3_5_moe model (layers l, f, l, f; 4 experts, top 2, the shared expert), and the
    shared expert's gate removed as one more sensitivity."""
    from safetensors.torch import load_file, save_file
    import transformers
    from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe
    c, torch = p.c, p.torch
    mod = modeling_qwen3_5_moe if moe else None
    Model = transformers.Qwen3_5MoeForCausalLM if moe else transformers.Qwen3_5ForCausalLM
    Config = transformers.Qwen3_5MoeTextConfig if moe else transformers.Qwen3_5TextConfig
    gen = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, 96, (150,), generator=gen).tolist()
    ids = torch.tensor([tokens])
    text = moe_text(hybrid_text(base)) if moe else hybrid_text(base)
    cfg = Config(**text)
    torch.manual_seed(3)
    model = Model(cfg).to(torch.float32)
    norms(model)
    with torch.no_grad():
        for name, w in model.named_parameters():
            if name.endswith(("A_log", "dt_bias")):
                w.normal_(0.0, 0.5)
            elif name.endswith("linear_attn.norm.weight"):  # the gated norm: w, not 1 + w
                w.copy_(1.0 + 0.3 * torch.randn_like(w))
    name = "qwen35moe-hybrid" if moe else "qwen35-hybrid"
    folder = os.path.join(p.work, name)
    model.save_pretrained(folder)
    h5 = folder + ".h5"
    rc, out = run_zt(p.zt, "convert", "hf-to-h5", folder, h5)
    c.check(rc == 0, f"{name}: zt convert hf-to-h5 (exit {rc})")
    if rc != 0:
        print(out[-2000:])
        return None
    new = 60
    hl, hloss, hgen = hf_llama_run(torch, folder, ids, new)  # its generate, with its own cache
    z = zt_logits_json(c, p.zt_logits, h5, tokens, new)
    zl = torch.tensor(z["logits"], dtype=torch.float64)
    tol = p.tol * max(1.0, zl.abs().max().item())
    d = (zl - hl).abs().max().item()
    exact = f64_logits(p, folder, ids, mod)
    d64, h64 = (zl - exact).abs().max().item(), (hl - exact).abs().max().item()
    print(f"      {name}: max |zt - hf| {d:.3e} (max |logit| {zl.abs().max().item():.2f}); "
          f"against float64: zt {d64:.3e}, transformers fp32 {h64:.3e}; loss zt "
          f"{z['loss']:.8f} hf {hloss:.8f}")
    bound = max(tol, 2 * h64)  # the issue's rule: 1e-5 x max |logit|, or 2 x transformers' own error
    c.check(d <= bound, f"{name}: max |logit zt - transformers| over 150 positions = {d:.3e} <= "
                        f"max({tol:.3e}, 2 x {h64:.3e})")
    c.check(d64 <= bound, f"{name}: zt's fp32 logits as close to float64 as transformers' fp32: "
                          f"{d64:.3e} <= max({tol:.3e}, 2 x {h64:.3e})")
    c.check(abs(z["loss"] - hloss) <= p.tol, f"{name}: |loss zt - transformers| <= {p.tol}")
    c.check(z["greedy"] == hgen and len(set(hgen)) >= 3,
            f"{name}: greedy continuation of {new} tokens equal (zt recomputes each step)")
    # The cache: one token at a time from the first (the recurrent rule, the conv's past),
    # and the 150-token prompt prefilled (the chunked rule into the state), then decoded.
    kl = torch.tensor(z["kv_logits"], dtype=torch.float64)
    dkv = (kl - hl).abs().max().item() if kl.shape == hl.shape else float("inf")
    c.check(dkv <= bound, f"{name}: cached (recurrent) logits over 150 positions: max |zt - "
                          f"transformers| = {dkv:.3e} <= {bound:.3e}")
    c.check(z["kv_greedy"] == hgen,
            f"{name}: greedy {new} tokens through zt's cache (prefill, then recurrent) == "
            f"transformers' generate")

    def moved(tag, logits):
        dm = (logits - hl).abs().max().item()
        c.check(dm > 10 * tol, f"{name}: sensitivity: {tag} moves the logits by {dm:.3e} > 10 x tol")
    w = load_file(os.path.join(folder, "model.safetensors"))
    for tag, key, change in (
            ("the conv kernel shifted by one", "conv1d.weight",
             lambda t: torch.roll(t, 1, dims=-1)),
            ("A_log + 0.1", "A_log", lambda t: t + 0.1)):
        alt = {k: (change(v) if k.endswith(key) else v) for k, v in w.items()}
        other = with_config(folder, f"{folder}-{key}")
        save_file(alt, os.path.join(other, "model.safetensors"), metadata={"format": "pt"})
        moved(tag, fp32_logits(torch, other, ids))
    with ModuleTorch(torch, mod, sigmoid=torch.ones_like):
        moved("the output gate removed", fp32_logits(torch, folder, ids))
    if moe:
        with ModuleTorch(torch.nn.functional, mod, "F", sigmoid=torch.ones_like):
            moved("the shared expert's gate removed", fp32_logits(torch, folder, ids))
    rp = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0}
    moved("partial_rotary_factor 1.0",
          fp32_logits(torch, with_config(folder, f"{folder}-rope1", rope_parameters=rp), ids))
    # The export reloads in transformers with the same logits (24 tokens, 40 new) and
    # re-imports.
    moe_keys = ("num_experts", "num_experts_per_tok", "moe_intermediate_size",
                "shared_expert_intermediate_size") if moe else ()
    p.exported(name, folder, h5, p.hf_run(folder), p.zt_run(h5), Model.__name__, moe_keys + (
               "layer_types", "linear_num_key_heads", "linear_num_value_heads",
                "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim",
                "rope_parameters"))
    rc, out = run_zt(p.zt, "generate", "--weights", folder, "--prompt-ids",
                     ",".join(map(str, tokens)), "--temperature", "0", "--max-new-tokens",
                     str(new), "--json")
    lines = [line for line in out.splitlines() if line.startswith("{")]
    got = json.loads(lines[0])["ids"] if rc == 0 and lines else None
    c.check(got == hgen, f"{name}: `zt generate` of {new} greedy tokens after the 150-token "
                         f"prompt == transformers' generate (exit {rc})")
    if got != hgen:
        print(out[-2000:])
    return folder


def refused(p, bad, tag, where, field, says):
    """`zt convert hf-to-h5` of the folder `bad` exits 2 naming where, field and says, and
    writes nothing."""
    rc, out = run_zt(p.zt, "convert", "hf-to-h5", bad, bad + ".h5")
    p.c.check(rc == 2 and where in out and field in out and says in out
              and not os.path.exists(bad + ".h5"),
              f"bad input ({tag}): exit {rc} naming {where}, {field} and {says!r}; nothing written")
    if rc != 2:
        print(out[-1500:])


def main():
    p = CausalLMPeer(__doc__, 24, 40, peers=("peft",))
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
        with ModuleTorch(torch, sigmoid=torch.ones_like):
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
    hyb = hybrid(p, base)
    hybrid(p, base, moe=True)
    for moe in (False, True):
        multimodal(p, moe_text(hybrid_text(base)) if moe else hybrid_text(base),
                   lambda folder, cls, mod: f64_logits(p, folder, p.ids, mod, cls), moe)
    # Bad input: exit 2 naming the file and the field (or tensor), nothing written.
    folder = os.path.join(p.work, cases[0][0])
    odd = {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.3125}
    bad_configs = [
        (folder, "odd-rotary", dict(rope_parameters=odd), "partial_rotary_factor", "even"),
        (folder, "mrope-2", dict(rope_parameters=dict(mrope, mrope_section=[2, 2])),
         "rope_parameters.mrope_section", "3 counts"),
        (folder, "multimodal", dict(model_type="qwen3_5"), "'text_config'", "missing")]
    if hyb:
        kinds = ["linear_attention", "mamba", "full_attention", "linear_attention"]
        bad_configs += [
            (hyb, "heads", dict(linear_num_value_heads=3), "linear_num_value_heads", "divide"),
            (hyb, "conv-0", dict(linear_conv_kernel_dim=0), "linear_conv_kernel_dim", "0"),
            (hyb, "kind", dict(layer_types=kinds), "layer_types", '"mamba"')]
    for src, tag, change, field, says in bad_configs:
        refused(p, with_config(src, f"{src}-bad-{tag}", **change), tag, "config.json", field, says)
    if hyb:
        from safetensors.torch import load_file, save_file
        bad = with_config(hyb, f"{hyb}-bad-no-A_log")
        w = load_file(os.path.join(hyb, "model.safetensors"))
        gone = "model.layers.2.linear_attn.A_log"
        save_file({k: v for k, v in w.items() if k != gone},
                  os.path.join(bad, "model.safetensors"), metadata={"format": "pt"})
        refused(p, bad, "no A_log", gone, gone, "")
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
