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
At 2 ranks (aux_two_ranks): a step of `zt train` (mpirun, one row per rank, the aux loss
with coefficient 1) equals transformers' MixtralForCausalLM run once per rank's row with
the gradients averaged (DDP's semantics: each rank's aux over its own rows): the aux
(mean), loss and gradient norm, and every weight after one AdamW step (router and all).
Exit 77 (CTest skip) without torch/transformers (scripts/install-deps.sh --hf-peers).
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_common import CausalLMPeer, export_f32, import_hf, run_zt, tensor_names, with_config  # noqa: E402

T = 16
HERE = os.path.dirname(os.path.abspath(__file__))
# The weights after the step (|w| < 1.5 in fp32, an ulp up to 1.2e-7 - 2.4e-7) moved by up to
# 8e-3; zt and the reference differ by about an ulp (measured 2.1e-7), 1e-3 of the largest
# change (8e-6) allows a few; a wrong aux factor moves the router by far more.
AUX_TOL = 1e-3


# The load-balancing loss at 2 ranks (issue 53). transformers under DDP: each rank's
# MixtralForCausalLM adds router_aux_loss_coef x load_balancing_loss_func over the router
# logits of its own forward (its own rows only), and DDP averages the gradients over the
# ranks; the aux loss of the global batch is never formed. zt does the same (each rank's
# aux over its micro-batch's rows, the gradients averaged; metrics router.aux_loss is the
# mean), which differs from the aux of both rows together (sensitivity below). The
# reference: transformers run once per rank's row, the gradients averaged, then torch's
# AdamW; against zt's 2-rank step (mpirun) exported. Which row lands on which rank does not
# matter (a mean of the two). lr 1e-2 with eps 1 (zt's largest): AdamW's first step moves
# w by lr g / (|g| + eps), a function of g itself, not of its sign (the router's |g| is
# about 1); the coefficient 1.0 so the aux's part of the router's gradient is large.
AUX_COEF, AUX_LR, AUX_EPS = 1.0, 1e-2, 1.0
ROWS = [{"prompt": "Q: which way is north?\nA: ", "response": "Up the map, mostly."},  # 26 + 19 bytes
        {"prompt": "Q: name two metals now\nA: ", "response": "Iron and tin, both."}]  # a row: 45 + EOS + one EOS of padding


def aux_two_ranks(c, torch, zt, work):
    from safetensors.torch import load_file
    from transformers import MixtralConfig, MixtralForCausalLM
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "model", "hf"))
    from family_lora_peer_test import train_keys
    import h5py
    cfg = MixtralConfig(vocab_size=257, hidden_size=64, intermediate_size=48, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                        rms_norm_eps=1e-5, num_local_experts=4, num_experts_per_tok=2,
                        output_router_logits=True, router_aux_loss_coef=AUX_COEF,
                        initializer_range=0.3, bos_token_id=1, eos_token_id=None)
    torch.manual_seed(2)
    folder = os.path.join(work, "aux2")
    MixtralForCausalLM(cfg).to(torch.float32).save_pretrained(folder, safe_serialization=True)
    if not import_hf(c, zt, "aux2", folder, folder + ".h5"):
        return
    tokenizer = os.path.join(HERE, "..", "..", "..", "examples", "tokenizer-bytes")
    with open(os.path.join(work, "aux2-rows.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in ROWS)
    rc, out = run_zt(zt, "convert", "sft-to-tokens", "--tokenizer", tokenizer, "--format", "prompt-response",
                     "--no-pack", "--seq-len", "46", os.path.join(work, "aux2-rows.jsonl"), os.path.join(work, "aux2-sft.h5"))
    c.check(rc == 0, f"aux2: sft-to-tokens, one row per example (exit {rc}: {out.strip()[-160:]})")
    with h5py.File(os.path.join(work, "aux2-sft.h5"), "r") as f:
        ids = torch.tensor(f["tokens"][:].astype("int64")).reshape(2, 47)
        mask = torch.tensor(f["loss_mask"][:].astype("bool")).reshape(2, 47)
    # Equal target counts: zt's loss (mean over the global batch's targets) and DDP's (mean
    # of the ranks' means) are then the same, so only the aux loss can tell them apart.
    c.check(int(mask[0].sum()) == int(mask[1].sum()) > 0, f"aux2: both rows have {int(mask[0].sum())} targets")
    keys = train_keys(cfg) + [f"model.router_aux_loss_coef={AUX_COEF}"]
    for kv in ["data.path=aux2-sft.h5", "train.seq_len=46", "train.global_batch=2", "train.micro_batch=1",
               "train.steps=1", f"train.lr={AUX_LR}", f"train.min_lr={AUX_LR}", "train.warmup=0",
               "train.weight_decay=0", "train.grad_clip=0", "train.beta1=0.9", "train.beta2=0.95",
               f"train.eps={AUX_EPS}", "data.eval_fraction=0", "eval.every=0", "sample.tokens=0",
               "train.threads=1", f"ckpt.init_from={folder}.h5", "ckpt.dir=aux2-run", "ckpt.every=1",
               "log.metrics=aux2.jsonl"]:
        keys.append(kv)
    cmd = ["mpirun", "-np", "2", "--oversubscribe", zt, "train"] + [a for kv in keys for a in ("--set", kv)]
    p = subprocess.run(cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300,
                       env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
    c.check(p.returncode == 0, f"aux2: zt train at 2 ranks, 1 step (exit {p.returncode})")
    if p.returncode != 0:
        print(p.stdout[-3000:])
        return
    m = [r for r in map(json.loads, open(os.path.join(work, "aux2.jsonl"))) if "loss" in r][-1]
    if not export_f32(c, zt, "aux2", os.path.join(work, "aux2-run", "step-1.h5"), folder + "-step1"):
        return
    model = MixtralForCausalLM.from_pretrained(folder, dtype=torch.float32)
    # A row of 47 tokens is 46 inputs and their next tokens: the last token is only a
    # target, so it is routed by neither (transformers given all 47 would route it too).
    inputs, targets = ids[:, :-1], ids[:, 1:].masked_fill(~mask[:, 1:], -100)
    grads, auxes, losses = {}, [], []
    for r in range(2):  # one rank's row: its own loss and aux, as MixtralForCausalLM under DDP
        model.zero_grad()
        out = model(input_ids=inputs[r:r + 1], output_router_logits=True)
        loss = torch.nn.functional.cross_entropy(out.logits[0], targets[r]) + AUX_COEF * out.aux_loss
        loss.backward()
        auxes.append(float(out.aux_loss.detach()))
        losses.append(float(loss.detach()))
        for n, q in model.named_parameters():
            grads[n] = grads.get(n, 0) + q.grad.detach().double() / 2
    with torch.no_grad():  # the aux of both rows at once: what zt must not do
        both = float(model(input_ids=inputs, output_router_logits=True).aux_loss)
    norm = float(torch.sqrt(sum((g ** 2).sum() for g in grads.values())))
    aux, loss = sum(auxes) / 2, sum(losses) / 2
    zaux = m["router"]["aux_loss"]
    print(f"      aux2: aux per rank {auxes}, mean {aux:.8f}, of both rows {both:.8f}; zt {zaux:.8f}")
    c.check(abs(zaux - aux) <= 1e-5 and abs(both - aux) > 10 * 1e-5,
            f"aux2: zt's aux (mean over ranks) {zaux:.8f} = transformers' per-rank mean {aux:.8f} "
            f"(1e-5), not the aux of both rows {both:.8f}")
    # The loss is one fp32 sum per side (1e-5 relative). The gradient norm adds the fp32
    # rounding of every parameter's backward on both sides (sums over 46 rows x 4 experts,
    # the routing softmax): 8e-6 relative was seen on one CPU, so the bound is 1e-4; the
    # weights after the step below are the tight check of the gradient itself.
    c.check(abs(m["loss"] - loss) <= 1e-5 * loss and abs(m["grad_norm"] - norm) <= 1e-4 * norm,
            f"aux2: zt loss {m['loss']:.8f}, grad norm {m['grad_norm']:.8f} vs DDP's mean {loss:.8f}, "
            f"{norm:.8f} (1e-5, 1e-4 relative)")
    before = {n: q.detach().clone() for n, q in model.named_parameters()}
    opt = torch.optim.AdamW(model.parameters(), lr=AUX_LR, betas=(0.9, 0.95), eps=AUX_EPS, weight_decay=0.0)
    for n, q in model.named_parameters():
        q.grad = grads[n].float()
    opt.step()
    got = MixtralForCausalLM.from_pretrained(folder + "-step1", dtype=torch.float32)
    zs = dict(got.named_parameters())
    for part, pick in (("router", lambda n: ".gate.weight" in n and "experts" not in n), ("all", lambda n: True)):
        worst, scale = 0.0, 0.0
        for n, q in model.named_parameters():
            if pick(n):
                scale = max(scale, (q - before[n]).abs().max().item())
                worst = max(worst, (zs[n] - q).abs().max().item())
        c.check(worst <= AUX_TOL * scale, f"aux2: {part} weights after the step: max |zt - DDP reference| "
                f"{worst:.3e} <= {AUX_TOL} x the largest change {scale:.3e}")


def main():
    p = CausalLMPeer(__doc__, t=T, new=12, peers=("safetensors", "h5py"))
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
    aux_two_ranks(c, torch, zt, work)
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
