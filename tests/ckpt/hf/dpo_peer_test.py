#!/usr/bin/env python3
"""zt's DPO against TRL's DPOTrainer (trl 1.16) on a tiny model and four pairs.

  dpo_peer_test.py ZT ZT_LOGITS WORKDIR

1. `zt train` trains the `tiny` preset (vocab 257: the byte tokenizer of examples/) briefly
   on the shipped corpus; `zt convert h5-to-hf --dtype f32` exports it, so both sides hold
   the same fp32 weights.
2. `zt convert pairs-to-tokens` on four original pairs: each row's ids and completion mask
   equal TRL's tokenize_fn + collator (prompt_ids + chosen_ids / rejected_ids, keep_start
   truncation at max_length = seq_len + 1 = 64; one pair is cut).
3. One full-weights DPO step (beta 0.1, the whole global batch of 4 pairs): zt's step-1
   loss and gradient norm (before clipping; log.metrics) equal TRL's compute_loss and the
   norm of its backward's gradient (the reference is the policy before the step on both
   sides) within 1e-5 relative; the same at train.accum 2 and at 2 ranks (mpirun).
4. ORPO (lambda 0.1) against TRL's ORPOTrainer itself, with no adjustment: on a pair file
   of seq_len 127 (no pair cut; the rows equal ORPOTrainer's tokenize_row + collator),
   zt's step-1 loss and gradient norm (orpo.nll = sequence, the default: the NLL over the
   chosen row's prompt and completion, as TRL) equal ORPOTrainer.compute_loss and its
   backward's, at np 1, accum 2 and 2 ranks at stage 2; orpo.nll = completion equals TRL's
   odds_ratio_loss + the NLL of the chosen completion tokens (np 1).
5. Two full-weight AdamW steps (two_steps) for DPO (sigmoid), IPO and cDPO (label
   smoothing 0.2) against TRL's DPOTrainer with its own frozen reference model: both
   steps' loss and gradient norm within 1e-5 relative, and every weight after step 2.
   The same for DPO on a tiny random gemma3_text (gemma_two_steps).
Exit 77 (CTest skip) without torch / transformers / trl (scripts/install-deps.sh
--hf-peers); ZT_REQUIRE_PEERS=1 fails instead.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_common import (h5_model_keys, import_hf, peer_start, perturb_biases_and_norms, require, run_zt,  # noqa: E402
                       train_tiny)

TOL = 1e-5  # losses and gradient norms: fp32 sums in either order (measured up to 6e-7)
# The weights after 2 steps: |w| up to about 1 in fp32 (an ulp: 1.2e-7) moved by up to
# 2e-3 (lr 1e-3, 2 steps); zt and TRL differ by about 1 ulp (measured 1.2e-7 to 2e-7), so
# 1e-3 of the largest change (2e-6) allows a few ulps, while a wrong sign or factor moves
# them by the change itself (measured 1.3e-3 to 4e-3).
TOL2 = 1e-3
HERE = os.path.dirname(os.path.abspath(__file__))
TOKENIZER = os.path.normpath(os.path.join(HERE, "..", "..", "..", "examples", "tokenizer-bytes"))
PAIRS = [  # original text
    {"prompt": "Q: what is 2 plus 5?\nA: ", "chosen": "2 plus 5 is 7.", "rejected": "2 plus 5 is 9."},
    {"prompt": "Q: could you shut the door?\nA: ", "chosen": "Yes, I will shut it now.",
     "rejected": "No."},
    {"prompt": "Q: name a colour of grass.\nA: ", "chosen": "Green.", "rejected": "Loud, very loud."},
    {"prompt": "Q: tell me about the moon and the tides, at length please.\nA: ",
     "chosen": "The moon pulls the sea, and the sea rises and falls twice a day.",
     "rejected": "It is cheese."},
]


def orpo_completion_reference(torch, model, batch, lam):
    """orpo.nll = completion on TRL's DPO-collated batch: TRL's ORPOTrainer.odds_ratio_loss
    on the average completion log-probs, + the NLL of the chosen completion tokens (TRL's
    ORPO takes the NLL over prompt and completion: orpo_trl). Returns (loss, gradient norm)."""
    from types import SimpleNamespace
    from trl.experimental.orpo.orpo_trainer import ORPOTrainer
    model.zero_grad()
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1]
    labels = batch["input_ids"][:, 1:]
    m = batch["completion_mask"][:, 1:].float()
    lp = torch.log_softmax(logits.float(), -1).gather(-1, labels.unsqueeze(-1)).squeeze(-1) * m
    P = lp.shape[0] // 2
    avg = lp.sum(1) / m.sum(1)
    nll = -lp[:P].sum() / m[:P].sum()
    me = SimpleNamespace(beta=lam, accelerator=SimpleNamespace(device="cpu"))
    losses = ORPOTrainer.odds_ratio_loss(me, avg[:P], avg[P:])[0]
    loss = nll - losses.mean()
    loss.backward()
    return float(loss.detach()), grad_norm(torch, model)


def grad_norm(torch, model):
    return float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in model.parameters() if p.grad is not None)))


def orpo_trl(c, torch, hf, tok, work, lam, row):
    """TRL's ORPOTrainer on PAIRS (max_length = row, nothing cut): its tokenized rows
    against zt's pairs-row.h5 (ids; completion labels = zt's mask), then compute_loss and
    its backward. Returns (loss, gradient norm)."""
    import h5py
    from datasets import Dataset
    from transformers import LlamaForCausalLM
    from trl.experimental.orpo import ORPOConfig, ORPOTrainer
    model = LlamaForCausalLM.from_pretrained(hf, dtype=torch.float32)
    args = ORPOConfig(output_dir=os.path.join(work, "trl-orpo"), beta=lam, max_length=row,
                      report_to="none", use_cpu=True, bf16=False, fp16=False,
                      per_device_train_batch_size=len(PAIRS), dataloader_num_workers=0)
    trainer = ORPOTrainer(model=model, args=args, train_dataset=Dataset.from_list(PAIRS), processing_class=tok)
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(len(PAIRS))])
    with h5py.File(os.path.join(work, f"pairs{row}.h5"), "r") as f:
        ids, mask = f["tokens"][:].reshape(-1, row), f["loss_mask"][:].reshape(-1, row)
    same = True
    for k in range(2 * len(PAIRS)):
        side = "chosen" if k % 2 == 0 else "rejected"
        n = int(batch[f"{side}_attention_mask"][k // 2].sum())
        labels = batch[f"{side}_labels"][k // 2][:n].tolist()
        same &= list(ids[k][:n]) == batch[f"{side}_input_ids"][k // 2][:n].tolist()
        same &= [int(x != -100) for x in labels[1:]] == list(mask[k][1:n]) and not mask[k][n:].any()
    c.check(same, f"the 8 rows of seq_len {row - 1} equal ORPOTrainer's tokenize_row + collator "
                  "(ids; completion = its labels)")
    model.train()
    model.zero_grad()
    loss = trainer.compute_loss(model, batch)
    loss.backward()
    return float(loss.detach()), grad_norm(torch, model)


TINY = ("model.preset=tiny", "model.vocab=257")


def zt_step(zt, work, name, ckpt, extra, ranks=1, data="pairs.h5", seq=63, steps=1, model=TINY):
    """`steps` DPO steps of zt (with steps > 1 a checkpoint after the last) on the model of
    the `model` keys; returns every step's metrics JSON line (dicts; [] when zt failed)."""
    args = [a for kv in model for a in ("--set", kv)]
    args = ["train"] + args + ["--set",
            f"ckpt.init_from={ckpt}", "--set", f"data.path={data}", "--set", f"train.seq_len={seq}",
            "--set", "train.global_batch=8", "--set", f"train.steps={steps}", "--set", "data.eval_fraction=0",
            "--set", "eval.every=0", "--set", "sample.tokens=0", "--set", "train.threads=1",
            "--set", "dpo.beta=0.1",
            "--set", f"log.metrics={name}.jsonl", "--set", f"ckpt.dir={name}", "--set", f"ckpt.every={steps if steps > 1 else 0}"]
    for kv in extra:
        args += ["--set", kv]
    cmd = [zt, *args]
    if ranks > 1:
        cmd = ["mpirun", "-np", str(ranks), "--oversubscribe", *cmd]
    p = subprocess.run(cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=600, env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                                             OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
    if p.returncode != 0:
        print(p.stdout[-3000:])
        return []
    with open(os.path.join(work, f"{name}.jsonl")) as f:
        return [r for r in map(json.loads, f.readlines()) if "loss" in r]  # not run/checkpoint records


def setup(c, zt, work):
    """The base (the `tiny` preset trained 3 steps by zt; step-3.h5 and its fp32 export hf/)
    and PAIRS as pairs.h5 (seq_len 63: one pair cut) and pairs128.h5 (seq_len 127: none).
    Returns (checkpoint, HF folder); ends the test when a step fails."""
    rc, out = train_tiny(zt, work, "base", 3, ("model.vocab=257",))
    c.check(rc == 0, "zt train of the base (3 steps)")
    if rc != 0:
        print(out[-3000:])
        c.finish()
    ckpt = os.path.join(work, "base", "step-3.h5")
    hf = os.path.join(work, "hf")
    rc, out = run_zt(zt, "convert", "h5-to-hf", "--dtype", "f32", ckpt, hf)
    c.check(rc == 0, "h5-to-hf --dtype f32")
    with open(os.path.join(work, "pairs.jsonl"), "w") as f:
        for p in PAIRS:
            f.write(json.dumps(p) + "\n")
    for seq, name, cut in ((63, "pairs.h5", 1), (127, "pairs128.h5", 0)):
        rc, out = run_zt(zt, "convert", "pairs-to-tokens", "--tokenizer", TOKENIZER, "--seq-len", str(seq),
                         os.path.join(work, "pairs.jsonl"), os.path.join(work, name))
        c.check(rc == 0 and f"{cut} truncated" in out,
                f"pairs-to-tokens --seq-len {seq} ({out.strip().splitlines()[-1][:90]}...)")
        if rc != 0:
            print(out)
            c.finish()
    return ckpt, hf


# Two full-weight AdamW steps against TRL (issue 53). Step 1 cannot see a sign or a factor
# of the loss (the policy is the reference: DPO's loss is ln 2, IPO's 1 / (2 beta)^2 on
# both sides); step 2's loss and the weights after it can. TRL's DPOTrainer keeps its own
# frozen reference (a second model loaded from the same folder), zt the reference's
# log-probs of step 0 (dpo-reference.h5). lr 1e-3, betas 0.9/0.95, eps 1e-3 (not 1e-8: an
# element whose gradient is at fp32 rounding then moves by about lr g / eps on both sides,
# not by lr sign(g); dpo_lora_peer_test.py says the same), no weight decay or clipping.
LR2, EPS2, LS = 1e-3, 1e-3, 0.2
ADAMW = [f"train.lr={LR2}", f"train.min_lr={LR2}", "train.warmup=0", "train.weight_decay=0", "train.grad_clip=0",
         "train.beta1=0.9", "train.beta2=0.95", f"train.eps={EPS2}", "train.micro_batch=8"]
# (name, zt's keys, TRL's DPOConfig). TRL 1.16's `sigmoid` ignores label_smoothing; its
# `robust` is R = ((1 - ls) S(d) - ls S(-d)) / (1 - 2 ls) with S(d) = -log sigmoid(beta d),
# so cDPO's (1 - ls) S(d) + ls S(-d) (docs/finetune.md) is TRL's own 2 (1 - ls) S - (1 - 2 ls) R:
# loss_type [sigmoid, robust] with those loss_weights.
VARIANTS = (("sigmoid", [], dict(loss_type=["sigmoid"])),
            ("ipo", ["dpo.loss=ipo"], dict(loss_type=["ipo"])),
            ("cdpo", [f"dpo.label_smoothing={LS}"],
             dict(loss_type=["sigmoid", "robust"], loss_weights=[2 * (1 - LS), -(1 - 2 * LS)], label_smoothing=LS)))


def adamw_steps(torch, trainer, model, lr, eps, rows=len(PAIRS), metrics=()):
    """2 steps of torch's AdamW (betas 0.9/0.95, no weight decay) on the trainable weights,
    each on TRL's whole collated batch of the first `rows` examples (PAIRS) through
    trainer.compute_loss. Returns [(loss, gradient norm)] per step, with `metrics` (names TRL
    logs): [(loss, gradient norm, {name: the step's value})]."""
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(rows)])
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, betas=(0.9, 0.95),
                            eps=eps, weight_decay=0.0)
    model.train()
    steps = []
    for _ in range(2):
        opt.zero_grad()
        if metrics:
            trainer._metrics["train"].clear()
        loss = trainer.compute_loss(model, batch)
        loss.backward()
        step = (float(loss.detach()), grad_norm(torch, model))
        steps.append(step + ({k: trainer._metrics["train"][k][-1] for k in metrics},) if metrics else step)
        opt.step()
    return steps


def trl_two_steps(torch, hf, tok, work, name, loss):
    """TRL's DPOTrainer (its own frozen reference) and torch's AdamW, 2 steps on the whole
    batch of PAIRS. Returns ([(loss, grad norm)] per step, {name: tensor} after step 2)."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import DPOConfig, DPOTrainer
    model = AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32)
    args = DPOConfig(output_dir=os.path.join(work, f"trl-{name}"), beta=0.1, max_length=64, report_to="none",
                     use_cpu=True, per_device_train_batch_size=len(PAIRS), bf16=False, fp16=False,
                     dataloader_num_workers=0, **loss)
    trainer = DPOTrainer(model=model, args=args, train_dataset=Dataset.from_list(PAIRS), processing_class=tok)
    assert trainer.ref_model is not None and trainer.ref_model is not model
    steps = adamw_steps(torch, trainer, model, LR2, EPS2)
    return steps, {n: p.detach().clone() for n, p in model.named_parameters()}


def check_weights(c, name, exported, before, after):
    """Every weight of zt's export `exported` (safetensors) against TRL's `after`: within
    TOL2 of the largest change from `before`."""
    from safetensors.torch import load_file
    got = load_file(exported)
    worst, scale = 0.0, 0.0
    for n, t in after.items():
        scale = max(scale, (t - before[n]).abs().max().item())
        worst = max(worst, (got[n] - t).abs().max().item()) if n in got else float("inf")
    c.check(worst <= TOL2 * scale, f"{name}: every weight after step 2: max |zt - TRL| {worst:.3e} "
            f"<= {TOL2} x the largest change {scale:.3e}")


def two_steps(c, torch, zt, work, ckpt, hf, tok, variants=VARIANTS, model=TINY, tag=""):
    """Each of `variants` (VARIANTS' rows): zt's 2 full-weight steps on the model of the
    `model` keys (step-2.h5 exported fp32) against trl_two_steps: both steps' loss and
    gradient norm within TOL relative, and every weight's change after step 2 within TOL2 of
    the largest change."""
    from transformers import AutoModelForCausalLM
    before = {n: p.detach().clone() for n, p in AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32).named_parameters()}
    for name, keys, loss in variants:
        name = tag + name
        rows = zt_step(zt, work, f"two-{name}", ckpt, ["finetune.objective=dpo"] + ADAMW + keys, steps=2, model=model)
        out = os.path.join(work, f"two-{name}-hf")
        rc, text = run_zt(zt, "convert", "h5-to-hf", "--dtype", "f32",
                          os.path.join(work, f"two-{name}", "step-2.h5"), out) if len(rows) == 2 else (1, "")
        c.check(len(rows) == 2 and rc == 0, f"{name}: zt, 2 AdamW steps, step 2 exported (exit {rc})")
        if rc != 0:
            print(text[-2000:])
            continue
        ref, after = trl_two_steps(torch, hf, tok, work, name, loss)
        for k, ((rl, rn), z) in enumerate(zip(ref, rows), 1):
            dl, dn = abs(z["loss"] - rl) / abs(rl), abs(z["grad_norm"] - rn) / rn
            c.check(dl <= TOL and dn <= TOL, f"{name} step {k}: zt loss {z['loss']:.9f}, grad norm "
                    f"{z['grad_norm']:.9f} vs TRL {rl:.9f}, {rn:.9f}: rel {dl:.2e}, {dn:.2e} (<= {TOL})")
        moved = abs(ref[1][0] - ref[0][0]) / abs(ref[0][0])
        c.check(moved > 100 * TOL, f"{name}: step 2's loss moved {moved:.2e} (relative) from step 1's")
        check_weights(c, name, os.path.join(out, "model.safetensors"), before, after)


def gemma_two_steps(c, torch, zt, work, tok):
    """DPO (sigmoid) on gemma3_text: a tiny random Gemma3ForCausalLM (vocab 257, the byte
    tokenizer; a window of 4 under the 64-token rows, sliding and full layers, the final
    soft-cap, tied), imported by zt, then two_steps against TRL on it."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig
    cfg = Gemma3TextConfig(vocab_size=257, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=128,
                           sliding_window=4, query_pre_attn_scalar=24, final_logit_softcapping=8.0,
                           layer_types=["sliding_attention", "full_attention"], initializer_range=0.3,
                           bos_token_id=1, eos_token_id=None, pad_token_id=0)
    torch.manual_seed(1)
    model = Gemma3ForCausalLM(cfg).to(torch.float32)
    perturb_biases_and_norms(torch, model)
    hf = os.path.join(work, "gemma")
    model.save_pretrained(hf, safe_serialization=True)
    if import_hf(c, zt, "gemma", hf, hf + ".h5"):
        two_steps(c, torch, zt, work, hf + ".h5", hf, tok, VARIANTS[:1], h5_model_keys(hf + ".h5"), "gemma3_text-")


def main():
    zt, _, work, torch, c = peer_start(__doc__, "h5py", "safetensors", "datasets", "trl")
    import trl
    from datasets import Dataset
    print(f"trl {trl.__version__}", flush=True)
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast
    from trl import DPOConfig, DPOTrainer
    ckpt, hf = setup(c, zt, work)

    # TRL's side: tokenize + collate exactly as its trainer does.
    tok = PreTrainedTokenizerFast.from_pretrained(TOKENIZER)
    model = LlamaForCausalLM.from_pretrained(hf, dtype=torch.float32)
    args = DPOConfig(output_dir=os.path.join(work, "trl"), beta=0.1, max_length=64, report_to="none",
                     use_cpu=True, per_device_train_batch_size=4, bf16=False, fp16=False,
                     dataloader_num_workers=0)
    trainer = DPOTrainer(model=model, args=args, train_dataset=Dataset.from_list(PAIRS), processing_class=tok)
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(len(PAIRS))])

    import h5py
    with h5py.File(os.path.join(work, "pairs.h5"), "r") as f:
        ids, mask = f["tokens"][:].reshape(-1, 64), f["loss_mask"][:].reshape(-1, 64)
    P = len(PAIRS)
    same = True
    for k in range(2 * P):  # zt: pair p in rows 2p, 2p+1; TRL: [chosen..., rejected...]
        t = (k % 2) * P + k // 2
        n = int(batch["attention_mask"][t].sum())
        same &= list(ids[k][:n]) == batch["input_ids"][t][:n].tolist()
        cm = batch["completion_mask"][t][:n].tolist()
        cm[0] = 0  # a row's first token is never a target (TRL's shift drops it too)
        same &= list(mask[k][:n]) == cm and not mask[k][n:].any()
    c.check(same, "the 8 rows' ids and completion masks equal TRL's tokenize_fn + collator")

    model.train()
    model.zero_grad()
    loss = trainer.compute_loss(model, batch)
    loss.backward()
    dpo_ref = (float(loss.detach()), grad_norm(torch, model))
    print(f"TRL DPOTrainer: loss {dpo_ref[0]:.9f}, gradient norm {dpo_ref[1]:.9f}", flush=True)

    model.eval()  # (no dropout in either: the same as train mode here)
    orpo_completion = orpo_completion_reference(torch, model, batch, 0.1)
    print(f"ORPO, NLL of the completion (TRL's odds_ratio_loss + completion NLL): loss "
          f"{orpo_completion[0]:.9f}, gradient norm {orpo_completion[1]:.9f}", flush=True)
    tok.pad_token = tok.eos_token  # ORPOTrainer pads with it (masked out)
    orpo_ref = orpo_trl(c, torch, hf, tok, work, 0.1, 128)
    print(f"TRL ORPOTrainer: loss {orpo_ref[0]:.9f}, gradient norm {orpo_ref[1]:.9f}", flush=True)
    dpo, orpo = ["finetune.objective=dpo"], ["finetune.objective=orpo", "orpo.lambda=0.1"]
    o128 = {"data": "pairs128.h5", "seq": 127}
    for name, extra, ranks, ref, where in (
            ("np1", dpo + ["train.micro_batch=8"], 1, dpo_ref, {}),
            ("accum2", dpo + ["train.micro_batch=4"], 1, dpo_ref, {}),
            ("np2", dpo + ["train.micro_batch=4"], 2, dpo_ref, {}),
            ("np2_stage3", dpo + ["train.micro_batch=4", "zero.stage=3"], 2, dpo_ref, {}),
            ("orpo_np1", orpo + ["train.micro_batch=8"], 1, orpo_ref, o128),
            ("orpo_accum2", orpo + ["train.micro_batch=4"], 1, orpo_ref, o128),
            ("orpo_np2_stage2", orpo + ["train.micro_batch=4", "zero.stage=2"], 2, orpo_ref, o128),
            ("orpo_completion_np1", orpo + ["orpo.nll=completion", "train.micro_batch=8"], 1,
             orpo_completion, {})):
        rows = zt_step(zt, work, name, ckpt, extra, ranks, **where)
        if not rows:
            c.check(False, f"zt step ({name})")
            continue
        m = rows[-1]
        dl = abs(m["loss"] - ref[0]) / abs(ref[0])
        dn = abs(m["grad_norm"] - ref[1]) / ref[1]
        c.check(dl <= TOL and dn <= TOL,
                f"{name}: zt loss {m['loss']:.9f}, grad norm {m['grad_norm']:.9f} vs TRL: "
                f"rel {dl:.2e}, {dn:.2e} (<= {TOL})")
        c.check("rewards/accuracies" in m and "logps/chosen" in m, f"{name}: TRL's metric names in the JSON")
    two_steps(c, torch, zt, work, ckpt, hf, tok)
    gemma_two_steps(c, torch, zt, work, tok)
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
