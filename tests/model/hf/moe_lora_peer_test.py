#!/usr/bin/env python3
"""LoRA on the experts of a Mixtral against Hugging Face PEFT's target_parameters.

  moe_lora_peer_test.py ZT ZT_LORA_LOGITS WORKDIR

A tiny random Mixtral from transformers' MixtralConfig (vocab 256, hidden 64, 4 experts of
width 48, 2 per token, 2 layers), saved with save_pretrained and imported by
`zt convert hf-to-h5`. Adapters on the attention and the experts: PEFT's
LoraConfig(target_modules=[q_proj, v_proj], target_parameters=[experts.gate_up_proj,
experts.down_proj]) (its ParamWrapper: A [E*r, in], B [out, r*E] per stack), zt's
lora.targets = q,v,experts.gate_up,experts.down; rank 4, alpha 8. Then:
1. Counts: PEFT's get_nb_trainable_parameters() == zt's trainable_counts (trainable, all).
2. Every lora_A / lora_B set to N(0, STD) (so B A != 0), saved with save_pretrained and
   read by ZT_LORA_LOGITS (zt's Model + bind_lora on PEFT's adapter file):
   - zt's adapter tensors are PEFT's (the same names, "mlp.experts.base_layer" for
     gate_up, and shapes);
   - float64 on both sides (hf_common.f64_forwards, and the routers' softmax, which
     transformers takes in float32, in float64): logits of every position, the loss
     and d(loss)/d(every adapter tensor) within 1e-9 (max |diff| / max |PEFT| per tensor);
   - float32 on both sides: logits and loss within 1e-5 (relative to max |logit| / the
     loss), gradients within 1e-4 of PEFT's relative to each tensor's max;
   - sensitivity: the adapters move PEFT's logits by > 1e-2; every adapter tensor gets a
     gradient (max |g| > 1e-6).
3. `zt train` with those lora.* keys, 6 steps from the imported base on the shipped
   corpus: exit 0 and the loss falls; its checkpoint exported with `zt convert h5-to-hf
   --adapter` (adapter_config.json with target_parameters): PeftModel.from_pretrained
   loads it, holds exactly the checkpoint's tensors (h5py), and its float64 logits equal
   zt's on the export within 1e-9; the trained adapters move the logits (> 1e-3).
Exit 77 (CTest skip) without torch, transformers, peft or h5py (scripts/install-deps.sh
--hf-peers); ZT_REQUIRE_PEERS=1 fails instead.
"""
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "ckpt", "hf"))
from family_lora_peer_test import export_adapters, metrics_losses, peft_pass, rel, zt_pass  # noqa: E402
from hf_common import import_hf, peer_start, require, train_tiny  # noqa: E402

TOL64 = 1e-9
TOL32 = 1e-5
GTOL32 = 1e-4
STD = 0.1
T = 24
RANK, ALPHA = 4, 8.0
TARGETS = "q,v,experts.gate_up,experts.down"
E, K = 4, 2


def router_f64(self, hidden_states):
    """MixtralTopKRouter.forward with its softmax in the model's dtype (transformers takes it
    in float32 whatever the dtype): the float64 reference's routing weights."""
    import torch
    hidden_states = hidden_states.reshape(-1, self.hidden_dim)
    router_logits = torch.nn.functional.linear(hidden_states, self.weight)
    probs = torch.nn.functional.softmax(router_logits, dim=-1)
    top, idx = torch.topk(probs, self.top_k, dim=-1)
    top /= top.sum(dim=-1, keepdim=True)
    return router_logits, top, idx


def peft_run(torch, pm, ids, dtype, backward=True):
    """family_lora_peer_test.peft_pass, with the routers in float64 too for dtype f64."""
    routers = [m for m in pm.modules() if type(m).__name__ == "MixtralTopKRouter"]
    for m in routers:
        if dtype == "f64":
            m.forward = types.MethodType(router_f64, m)
    try:
        return peft_pass(torch, pm, ids, dtype, backward)
    finally:
        for m in routers:
            if "forward" in m.__dict__:
                del m.forward


def lora_config(peft):
    return peft.LoraConfig(r=RANK, lora_alpha=ALPHA, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
                           target_modules=["q_proj", "v_proj"],
                           target_parameters=["experts.gate_up_proj", "experts.down_proj"])


def peft_vs_zt(c, torch, peft, transformers, zt_lora_logits, folder, h5, tokens):
    ids = torch.tensor([tokens])
    model = transformers.MixtralForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="sdpa",
                                                             experts_implementation="eager")
    pm = peft.get_peft_model(model, lora_config(peft))
    trainable, total = pm.get_nb_trainable_parameters()
    torch.manual_seed(7)
    with torch.no_grad():
        for pname, prm in pm.named_parameters():
            if "lora_" in pname:
                prm.normal_(0.0, STD)
    adir = folder + "-peft"
    pm.save_pretrained(adir, save_embedding_layers=False)
    adapter = os.path.join(adir, "adapter_model.safetensors")
    hf = {d: peft_run(torch, pm, ids, d) for d in ("f64", "f32")}
    with pm.disable_adapter(), torch.no_grad():
        plain = pm(ids).logits[0].double()
    z = {d: zt_pass(c, zt_lora_logits, h5, adapter, TARGETS, RANK, ALPHA, tokens, d, "mixtral")
         for d in ("f64", "f32")}
    if z["f64"] is None or z["f32"] is None:
        return
    c.check((z["f64"]["trainable"], z["f64"]["all"]) == (trainable, total),
            f"counts: zt trainable {z['f64']['trainable']}, all {z['f64']['all']} == PEFT's "
            f"{trainable}, {total}")
    zg = {d: {k: torch.tensor(v, dtype=torch.float64) for k, v in z[d]["grads"].items()} for d in z}
    g64, g32 = hf["f64"][2], hf["f32"][2]
    experts = sorted(k for k in g64 if "experts" in k)
    print(f"      PEFT's expert adapters: {experts[:4]}")
    c.check(set(zg["f64"]) == set(g64) and len(experts) == 8,
            f"zt's adapters are PEFT's ({len(g64)} tensors, {len(experts)} on the experts)")
    if set(zg["f64"]) != set(g64):
        print(sorted(set(zg["f64"]) ^ set(g64))[:8])
        return
    for d in ("f64", "f32"):
        zl = torch.tensor(z[d]["logits"], dtype=torch.float64)
        hl = hf[d][0]
        dl = ((zl - hl).abs().max() / hl.abs().max()).item()
        dloss = abs(z[d]["loss"] - hf[d][1]) / abs(hf[d][1])
        dg = max(rel(torch, zg[d][k], (g64 if d == "f64" else g32)[k]) for k in g64)
        eg = max(rel(torch, zg[d][k], g64[k]) for k in experts)
        tol, gtol = (TOL64, TOL64) if d == "f64" else (TOL32, GTOL32)
        print(f"      {d}: loss {hf[d][1]:.6f}; logits max|zt-PEFT|/max|PEFT| {dl:.2e}; loss rel {dloss:.2e}; "
              f"gradients max rel {dg:.2e} (experts' {eg:.2e} vs PEFT f64)")
        c.check(dl <= tol, f"{d}: logits within {tol:.0e} ({dl:.2e})")
        c.check(dloss <= tol, f"{d}: loss within {tol:.0e} ({dloss:.2e})")
        c.check(dg <= gtol, f"{d}: adapter gradients within {gtol:.0e} ({dg:.2e})")
    moved = (hf["f64"][0] - plain).abs().max().item()
    smallest = min(g64[k].abs().max().item() for k in g64)
    c.check(moved > 1e-2, f"sensitivity: the adapters move PEFT's logits by {moved:.3e} > 1e-2")
    c.check(smallest > 1e-6, f"every adapter tensor gets a gradient (smallest max |g| {smallest:.2e})")


def train_and_export(c, torch, peft, transformers, h5py, zt, zt_lora_logits, work, folder, h5, cfg, tokens):
    """Part 3: zt trains the adapters; family_lora_peer_test.export_adapters checks the export."""
    keys = [f"model.family={cfg.model_type}", f"model.vocab={cfg.vocab_size}",
            f"model.hidden={cfg.hidden_size}", f"model.layers={cfg.num_hidden_layers}",
            f"model.heads={cfg.num_attention_heads}", f"model.kv_heads={cfg.num_key_value_heads}",
            f"model.intermediate={cfg.intermediate_size}", f"model.experts={E}",
            f"model.experts_per_token={K}", "model.router_aux_loss=false",
            f"model.context={cfg.max_position_embeddings}", f"model.norm_eps={cfg.rms_norm_eps}",
            "model.tied_embeddings=false", f"model.rope_theta={cfg.rope_parameters['rope_theta']}"]
    ck = os.path.join(work, "mixtral-lora")
    metrics = ck + ".jsonl"
    rc, out = train_tiny(zt, work, ck, 6, keys + [
        f"ckpt.init_from={h5}", f"log.metrics={metrics}", "train.lr=3e-2", "finetune.method=lora",
        f"lora.targets={TARGETS}", f"lora.rank={RANK}", f"lora.alpha={ALPHA}"])
    c.check(rc == 0, f"zt train lora on the experts, 6 steps (exit {rc})")
    if rc != 0:
        print(out[-3000:])
        return
    losses = metrics_losses(metrics)
    c.check(len(losses) == 6 and losses[-1] < losses[0],
            f"zt train: the loss falls ({' '.join(f'{x:.3f}' for x in losses)})")
    export_adapters(c, torch, peft, h5py, zt, zt_lora_logits, "mixtral", folder, h5,
                    transformers.MixtralForCausalLM, ck, TARGETS, RANK, ALPHA, tokens,
                    load_kw={"experts_implementation": "eager"}, run=peft_run)


def main():
    zt, zt_lora_logits, work, torch, c = peer_start(__doc__)
    transformers, peft, h5py = require("transformers", "peft", "h5py")
    print(f"transformers {transformers.__version__}, peft {peft.__version__}", flush=True)
    tokens = torch.randint(0, 256, (T,), generator=torch.Generator().manual_seed(0)).tolist()
    cfg = transformers.MixtralConfig(vocab_size=256, hidden_size=64, intermediate_size=48, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                     rms_norm_eps=1e-5, num_local_experts=E, num_experts_per_tok=K,
                                     output_router_logits=False, tie_word_embeddings=False,
                                     initializer_range=0.3, bos_token_id=1, eos_token_id=None)
    torch.manual_seed(1)
    model = transformers.MixtralForCausalLM(cfg).to(torch.float32)
    folder = os.path.join(work, "mixtral")
    model.save_pretrained(folder, safe_serialization=True)
    h5 = folder + ".h5"
    if import_hf(c, zt, "mixtral", folder, h5):
        peft_vs_zt(c, torch, peft, transformers, zt_lora_logits, folder, h5, tokens)
        train_and_export(c, torch, peft, transformers, h5py, zt, zt_lora_logits, work, folder, h5,
                         model.config, tokens)
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
