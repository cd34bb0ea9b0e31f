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
   corpus (family_lora_peer_test.training): exit 0 and the loss falls; its checkpoint
   exported with `zt convert h5-to-hf --adapter` (adapter_config.json with
   target_parameters): PeftModel.from_pretrained loads it, holds exactly the checkpoint's
   16 tensors (h5py); PEFT's save_pretrained of it holds the same tensors bit for bit and
   the same config (target_parameters too), and zt reading that re-saved file gives
   PEFT's float64 logits within 1e-9 (the round trip zt -> PEFT -> zt,
   family_lora_peer_test.export_adapters); the trained adapters move the logits (> 1e-3).
4. AdamW against PEFT + torch.optim.AdamW: a token file of exactly one global batch (2 x 24
   + 1 byte tokens: every step's batch is both windows); zt trains LoRA 1 step at lr 0 (its
   initial adapters: A from its init, B = 0), exported and loaded by PEFT (is_trainable);
   then zt trains 2 steps (lr 1e-2 constant, betas 0.9/0.95, eps 0.1 (EPS), weight decay
   0.1, no clipping), a checkpoint after each, exported; PEFT takes the same 2 steps with
   torch's AdamW on the mean cross-entropy of the batch:
   - each step's loss and adapter gradient norm equal zt's within 1e-5 relative (step 2's
     loss is the loss after step 1);
   - after each step every adapter tensor equals zt's exported one within 1e-4 of its max,
     and the step (after - before) equals zt's within 1e-3 of its max (step 1: B's first
     step and A's weight decay alone, B = 0; step 2: A's first gradient); every expert
     tensor moves (> 5e-4 of its max) and the loss moves, so the checks can fail;
   - PEFT's adapters after step 2, saved by PEFT and read by zt (ZT_LORA_LOGITS, float32):
     the loss of the first window equals PEFT's within 1e-5 relative.
Exit 77 (CTest skip) without torch, transformers, peft or h5py (scripts/install-deps.sh
--hf-peers); ZT_REQUIRE_PEERS=1 fails instead.
"""
import json
import os
import random
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "ckpt", "hf"))
from family_lora_peer_test import (export_adapters, peft_pass, rel, train_keys, training,  # noqa: E402
                                   zt_pass)
from hf_common import import_hf, peer_start, require, run_zt, train_tiny  # noqa: E402

TOL64 = 1e-9
TOL32 = 1e-5
GTOL32 = 1e-4
STD = 0.1
T = 24
RANK, ALPHA = 4, 8.0
TARGETS = "q,v,experts.gate_up,experts.down"
E, K = 4, 2
# Part 4's optimizer: AdamW, constant lr, decoupled weight decay. Adam's first step is
# lr g / (|g| + eps), whose slope in g is up to lr / eps: two fp32 gradients that agree to
# ~1e-5 of their max (part 2) give steps that agree to ~1e-5 max|g| / eps of lr. eps 0.1
# keeps that at fp32 rounding (measured: eps 1e-8 gives 6e-3 after step 2, 1e-3 6e-4,
# 1e-1 2e-5 of the adapters' max) and the step still Adam's (|g| up to ~eps and more).
SEQ, BATCH = 24, 2
LR, BETAS, EPS, WD = 1e-2, (0.9, 0.95), 0.1, 0.1
UTOL = 1e-3  # zt's update against torch's, relative to the update's max


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
    """Part 3: zt trains the adapters (family_lora_peer_test.training, LoRA only);
    family_lora_peer_test.export_adapters checks the export and its round trip."""
    ck = training(c, zt, work, "mixtral", h5, train_keys(cfg), TARGETS, RANK, ALPHA, methods=("lora",))
    if ck:
        export_adapters(c, torch, peft, h5py, zt, zt_lora_logits, "mixtral", folder, h5,
                        transformers.MixtralForCausalLM, ck, TARGETS, RANK, ALPHA, tokens,
                        load_kw={"experts_implementation": "eager"}, run=peft_run)


def one_batch(c, h5py, zt, work):
    """A token file of exactly one global batch, BATCH x SEQ + 1 byte tokens: the sampler's
    windows are the whole file (no slack, no shift), so every step's batch is all of them.
    Returns (path, the windows as a list of BATCH lists of SEQ + 1 tokens) or None."""
    r = random.Random(3)
    text = os.path.join(work, "batch.txt")
    with open(text, "w") as f:
        f.write("".join(chr(r.randrange(32, 127)) for _ in range(BATCH * SEQ + 1)))
    path = os.path.join(work, "batch.h5")
    rc, out = run_zt(zt, "convert", "text-to-tokens", "--force", text, path)
    toks = []
    if rc == 0:
        with h5py.File(path, "r") as f:
            toks = f["tokens"][()].tolist()
    c.check(len(toks) == BATCH * SEQ + 1, f"text-to-tokens: one batch of {len(toks)} tokens (exit {rc})")
    if len(toks) != BATCH * SEQ + 1:
        print(out[-2000:])
        return None
    return path, [toks[j * SEQ:j * SEQ + SEQ + 1] for j in range(BATCH)]


def zt_steps(c, zt, work, name, keys, lr, steps):
    """`zt train` (keys: the model, the base, the batch, LoRA) for `steps` steps at `lr` with
    the optimizer above (BETAS, EPS, WD, constant lr, no clipping); a checkpoint after every
    step, each exported with `h5-to-hf --adapter` to NAME-step-K. Returns the metrics' step
    rows, or None."""
    ck = os.path.join(work, name)
    rc, out = train_tiny(zt, work, ck, steps, keys + [
        f"train.seq_len={SEQ}", f"train.global_batch={BATCH}", f"train.micro_batch={BATCH}",
        f"train.lr={lr}", f"train.min_lr={lr}", f"train.weight_decay={WD}", f"train.beta1={BETAS[0]}",
        f"train.beta2={BETAS[1]}", f"train.eps={EPS}", "train.grad_clip=0", "data.eval_fraction=0",
        "ckpt.every=1", f"log.metrics={ck}.jsonl"])
    rows = [r for r in map(json.loads, open(ck + ".jsonl")) if "loss" in r and "step" in r] if rc == 0 else []
    c.check(rc == 0 and len(rows) == steps, f"{name}: zt train LoRA, {steps} step(s) at lr {lr} (exit {rc})")
    for k in range(1, steps + 1 if rc == 0 else 0):
        rc, out = run_zt(zt, "convert", "h5-to-hf", os.path.join(ck, f"step-{k}.h5"), f"{ck}-step-{k}", "--adapter")
        c.check(rc == 0, f"{name}: step {k}'s adapters exported (exit {rc})")
    if rc != 0 or len(rows) != steps:
        print(out[-3000:])
        return None
    return rows


def adamw_steps(c, torch, peft, transformers, h5py, zt, zt_lora_logits, work, folder, h5, cfg):
    """Part 4: zt's AdamW steps on the expert adapters against PEFT + torch.optim.AdamW."""
    from safetensors.torch import load_file
    batch = one_batch(c, h5py, zt, work)
    if batch is None:
        return
    keys = train_keys(cfg) + [f"ckpt.init_from={h5}", f"data.path={batch[0]}", "finetune.method=lora",
                              f"lora.targets={TARGETS}", f"lora.rank={RANK}", f"lora.alpha={ALPHA}"]
    if zt_steps(c, zt, work, "step0", keys, 0.0, 1) is None:
        return
    rows = zt_steps(c, zt, work, "steps", keys, LR, 2)
    if rows is None:
        return
    base = transformers.MixtralForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="sdpa",
                                                            experts_implementation="eager")
    pm = peft.PeftModel.from_pretrained(base, os.path.join(work, "step0-step-1"), is_trainable=True)
    pm.train()
    named = {n.replace("base_model.model.", "", 1).replace(".default", ""): p
             for n, p in pm.named_parameters() if p.requires_grad}
    opt = torch.optim.AdamW(list(named.values()), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    w = torch.tensor(batch[1])
    x, y = w[:, :-1], w[:, 1:]
    before = {k: p.detach().clone() for k, p in named.items()}
    losses = []
    for k, z in enumerate(rows, 1):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(pm(x).logits.reshape(-1, cfg.vocab_size), y.reshape(-1))
        loss.backward()
        norm = float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in named.values())))
        losses.append(loss.item())
        dl, dn = abs(z["loss"] - losses[-1]) / losses[-1], abs(z["grad_norm"] - norm) / norm
        c.check(dl <= TOL32 and dn <= TOL32,
                f"step {k}: zt loss {z['loss']:.9f}, gradient norm {z['grad_norm']:.9f} vs PEFT {losses[-1]:.9f}, "
                f"{norm:.9f}: rel {dl:.2e}, {dn:.2e} (<= {TOL32:.0e})")
        opt.step()
        zt_after = load_file(os.path.join(work, f"steps-step-{k}", "adapter_model.safetensors"))
        zt_after = {n.replace("base_model.model.", "", 1): t for n, t in zt_after.items()}
        if set(zt_after) != set(named):
            c.check(False, f"step {k}: zt's adapters are PEFT's: {sorted(set(zt_after) ^ set(named))[:4]}")
            return
        worst = max(rel(torch, zt_after[n], p.detach()) for n, p in named.items())
        upd = {n: max(rel(torch, zt_after[n] - before[n], p.detach() - before[n]), 0.0) for n, p in named.items()}
        ex = max(v for n, v in upd.items() if "experts" in n)
        moved = min((p.detach() - before[n]).abs().max().item() / p.detach().abs().max().item()
                    for n, p in named.items() if "experts" in n)
        print(f"      step {k}: adapters max |zt - PEFT| / max |PEFT| {worst:.2e}; updates max |dzt - dPEFT| / "
              f"max |dPEFT| {max(upd.values()):.2e} (experts' {ex:.2e}); smallest expert update {moved:.2e} of its max")
        c.check(worst <= GTOL32, f"step {k}: every adapter after the step equals PEFT's + AdamW's within "
                                 f"{GTOL32:.0e} of its max ({worst:.2e})")
        c.check(max(upd.values()) <= UTOL, f"step {k}: every update equals torch AdamW's within {UTOL:.0e} of its "
                                           f"max ({max(upd.values()):.2e})")
        c.check(moved > 5e-4, f"step {k}: every expert adapter moved (by {moved:.2e} of its max > 5e-4)")
        before = {n: p.detach().clone() for n, p in named.items()}
    c.check(abs(losses[1] - losses[0]) > 100 * TOL32 * losses[0],
            f"the step moves the loss ({losses[0]:.6f} -> {losses[1]:.6f}), so the loss check after it can fail")
    # PEFT's adapters after step 2 (save_pretrained) read back by zt: its loss on window 0.
    pm.eval()
    with torch.no_grad():
        l0 = torch.nn.functional.cross_entropy(pm(x[:1]).logits[0], y[0]).item()
    out = os.path.join(work, "peft-step-2")
    pm.save_pretrained(out)
    z = zt_pass(c, zt_lora_logits, h5, os.path.join(out, "adapter_model.safetensors"), TARGETS, RANK, ALPHA,
                batch[1][0], "f32", "PEFT's step 2")
    if z is not None:
        d = abs(z["loss"] - l0) / l0
        c.check(d <= TOL32, f"PEFT's adapters after 2 AdamW steps, read by zt: loss {z['loss']:.7f} vs PEFT "
                            f"{l0:.7f} (rel {d:.2e} <= {TOL32:.0e})")


def main():
    zt, zt_lora_logits, work, torch, c = peer_start(__doc__, "h5py", "safetensors", "peft")
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
        adamw_steps(c, torch, peft, transformers, h5py, zt, zt_lora_logits, work, folder, h5, model.config)
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
