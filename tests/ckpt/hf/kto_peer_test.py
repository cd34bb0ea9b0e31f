#!/usr/bin/env python3
"""zt's KTO against TRL's KTOTrainer (trl 1.16) on a tiny model and six labelled rows.

  kto_peer_test.py ZT ZT_LOGITS WORKDIR   (ZT_LOGITS unused: zt_hf_peer_test's arguments)

1. The base of dpo_peer_test.py (the `tiny` preset trained 3 steps by zt, exported fp32).
2. `zt convert kto-to-tokens --seq-len 63 --kl-batch 6` on six original rows (four
   desirable, two undesirable, one cut at max_length 64): each example's two rows (prompt + completion, prompt +
   the mismatched completion) equal TRL's tokenize_fn + KL rotation + collator (input_ids
   and KL_input_ids; completion masks).
3. Two full-weight AdamW steps (beta 0.1, desirable_weight 1.0, undesirable_weight 1.5,
   lr 1e-3, betas 0.9/0.95, eps 1e-3, no decay or clipping) against KTOTrainer with its own
   frozen reference, the whole batch of six rows a step: each step's loss, gradient norm,
   KL estimate, rewards/chosen, rewards/rejected, logps/chosen and logps/rejected within
   TOL relative (the rewards and KL relative to the log-probs they are differences of:
   compare_steps) (the KL of step 2 is above 0, so a KL term left out shows), and every
   weight after step 2 within 1e-3 of the largest change (dpo_peer_test.py's check_weights); the same steps at train.accum 2 and at 2 ranks at ZeRO stage 3 (zt's
   KL estimate is over the global batch: TRL's batch here).
4. LoRA (rank 4 on q, v, gate): zt's initial adapters (a step at lr 0) exported for PEFT,
   then 2 AdamW steps (lr 1e-2) on both sides (TRL's reference: a frozen copy of the
   initial adapters, B = 0: the base, as zt's adapters-off reference): losses, gradient
   norms, KL and rewards within TOL, every adapter element after step 2 within TOL of the
   largest.
Exit 77 (CTest skip) without torch / transformers / trl / peft (scripts/install-deps.sh
--hf-peers); ZT_REQUIRE_PEERS=1 fails instead.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dpo_lora_peer_test import check_adapters  # noqa: E402
from dpo_peer_test import TOKENIZER, adamw_steps, check_weights  # noqa: E402
from hf_common import peer_start, run_zt, train_tiny  # noqa: E402

TOL = 1e-6  # relative: losses, gradient norms, KL and the logged means (fp32 sums in either order)
ROWS = [  # original text
    {"prompt": "Q: what is 3 plus 4?\nA: ", "completion": "3 plus 4 is 7.", "label": True},
    {"prompt": "Q: what is 6 minus 2?\nA: ", "completion": "6 minus 2 is 9.", "label": False},
    {"prompt": "Q: is ice cold?\nA: ", "completion": "Yes, ice is cold.", "label": True},
    {"prompt": "Q: tell me about rivers and the sea, at length please.\nA: ",
     "completion": "Rivers run down to the sea and the sea sends rain back to the hills.", "label": True},
    {"prompt": "Q: name a fruit.\nA: ", "completion": "A pear.", "label": True},
    {"prompt": "Q: how many legs has a cat?\nA: ", "completion": "Eleven, or so.", "label": False},
]
N = len(ROWS)
BETA, WD, WU = 0.1, 1.0, 1.5
EPS = 1e-3
ADAMW = ["train.warmup=0", "train.weight_decay=0", "train.grad_clip=0", "train.beta1=0.9", "train.beta2=0.95",
         f"train.eps={EPS}"]
LORA = ["finetune.method=lora", "lora.rank=4", "lora.alpha=8", "lora.targets=q,v,gate"]
METRICS = ("kl", "rewards/chosen", "rewards/rejected", "logps/chosen", "logps/rejected")


def zt_train(zt, work, name, base, lr, steps, extra=(), ranks=1):
    """zt KTO training, a checkpoint after each step; returns (step records, exit, output)."""
    args = [zt, "train"]
    for kv in ["model.preset=tiny", "model.vocab=257", f"ckpt.init_from={base}", "data.path=kto.h5",
               "train.seq_len=63", f"train.global_batch={2 * N}", f"train.micro_batch={2 * N}", f"train.steps={steps}",
               f"train.lr={lr}", f"train.min_lr={lr}", "data.eval_fraction=0", "eval.every=0", "sample.tokens=0",
               "train.threads=1", "train.peak_tflops=1", "finetune.objective=kto", f"kto.beta={BETA}",
               f"kto.desirable_weight={WD}", f"kto.undesirable_weight={WU}", f"log.metrics={name}.jsonl",
               f"ckpt.dir={name}", "ckpt.every=1"] + ADAMW + list(extra):
        args += ["--set", kv]
    if ranks > 1:
        args = ["mpirun", "-np", str(ranks), "--oversubscribe"] + args
    p = subprocess.run(args, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600,
                       env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
    path = os.path.join(work, f"{name}.jsonl")
    rows = [r for r in map(json.loads, open(path)) if "loss" in r] if os.path.exists(path) else []
    if p.returncode != 0:
        print(p.stdout[-3000:])
    return rows, p.returncode


def trainer_of(torch, model, tok, work, name):
    from datasets import Dataset
    from trl import KTOConfig, KTOTrainer
    args = KTOConfig(output_dir=os.path.join(work, f"trl-{name}"), beta=BETA, desirable_weight=WD,
                     undesirable_weight=WU, max_length=64, report_to="none", use_cpu=True, bf16=False, fp16=False,
                     per_device_train_batch_size=N, dataloader_num_workers=0)
    return KTOTrainer(model=model, args=args, train_dataset=Dataset.from_list(ROWS), processing_class=tok)


def trl_steps(torch, trainer, model, lr):
    """dpo_peer_test.py's 2 AdamW steps on TRL's whole batch: [(loss, grad norm, {metric})]."""
    return adamw_steps(torch, trainer, model, lr, EPS, N, METRICS)


def compare_steps(c, tag, ref, got):
    """Each step's loss, gradient norm and logged means against TRL's, relative to their own
    magnitude; the rewards and the KL estimate, differences of two fp32 sums of log-probs
    (beta (logp - ref), logp - ref), relative to the magnitude of what they are differences of
    (beta |logps|, |logps|), the fp32 rounding of those sums being their floor."""
    for k, ((loss, norm, logged), z) in enumerate(zip(ref, got), 1):
        logps = max(abs(logged["logps/chosen"]), abs(logged["logps/rejected"]))
        scale = {"rewards/chosen": BETA * abs(logged["logps/chosen"]),
                 "rewards/rejected": BETA * abs(logged["logps/rejected"]), "kl": logps}
        pairs = [("loss", loss, z.get("loss")), ("grad_norm", norm, z.get("grad_norm"))]
        pairs += [(m, logged[m], z.get(m)) for m in METRICS]
        worst, what = 0.0, ""
        for m, r, v in pairs:
            d = abs(v - r) / max(abs(r), scale.get(m, 0), 1e-6) if v is not None else float("inf")
            if d > worst:
                worst, what = d, f"{m} zt {v} TRL {r}"
        c.check(worst <= TOL, f"{tag} step {k}: loss {z.get('loss'):.9f} vs TRL {loss:.9f}, kl {logged['kl']:.3e}; "
                f"worst of loss, grad norm, {', '.join(METRICS)}: rel {worst:.2e} (<= {TOL}) {what}")
    if len(ref) == 2:
        c.check(ref[1][2]["kl"] > 1e-4, f"{tag}: TRL's KL estimate of step 2 is {ref[1][2]['kl']:.3e} > 0 "
                "(a KL term left out shows)")


def check_tokens(c, trainer, work):
    import h5py
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(N)])
    with h5py.File(os.path.join(work, "kto.h5"), "r") as f:
        ids, mask, labels = f["tokens"][:].reshape(-1, 64), f["loss_mask"][:].reshape(-1, 64), f["labels"][:]
    same = list(labels) == [int(r["label"]) for r in ROWS]
    for k in range(2 * N):
        pre = "KL_" if k % 2 else ""
        n = int(batch[f"{pre}attention_mask"][k // 2].sum())
        same &= list(ids[k][:n]) == batch[f"{pre}input_ids"][k // 2][:n].tolist()
        cm = batch[f"{pre}completion_mask"][k // 2][:n].tolist()
        cm[0] = 0  # a row's first token is never a target (TRL's shift drops it too)
        same &= list(mask[k][:n]) == cm and not mask[k][n:].any()
    c.check(same, f"the {2 * N} rows' ids, completion masks and labels equal TRL's tokenize_fn + KL rotation + collator")


def full_weights(c, torch, zt, work, ckpt, hf, tok):
    from transformers import LlamaForCausalLM
    model = LlamaForCausalLM.from_pretrained(hf, dtype=torch.float32)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer = trainer_of(torch, model, tok, work, "full")
    assert trainer.ref_model is not None and trainer.ref_model is not model
    check_tokens(c, trainer, work)
    ref = trl_steps(torch, trainer, model, 1e-3)
    after = {n: p.detach().clone() for n, p in model.named_parameters()}
    for name, extra, ranks in (("full", [], 1), ("full-accum2", [f"train.micro_batch={N}"], 1),
                               ("full-np2-stage3", [f"train.micro_batch={N}", "zero.stage=3"], 2)):
        got, rc = zt_train(zt, work, name, ckpt, 1e-3, 2, extra, ranks)
        c.check(rc == 0 and len(got) == 2, f"{name}: zt, 2 AdamW steps (exit {rc})")
        if rc != 0 or len(got) != 2:
            continue
        compare_steps(c, name, ref, got)
        out = os.path.join(work, f"{name}-hf")
        rc, _ = run_zt(zt, "convert", "h5-to-hf", "--dtype", "f32", os.path.join(work, name, "step-2.h5"), out)
        if rc != 0:
            c.check(False, f"{name}: step 2 exported")
            continue
        check_weights(c, name, os.path.join(out, "model.safetensors"), before, after)


def lora(c, torch, zt, work, ckpt, hf, tok):
    from peft import PeftModel
    from transformers import LlamaForCausalLM
    init, rc = zt_train(zt, work, "lora-init", ckpt, 0.0, 1, LORA)
    c.check(rc == 0 and len(init) == 1, f"LoRA: zt, lr 0, 1 step (exit {rc})")
    init_dir = os.path.join(work, "lora-init-peft")
    rc, _ = run_zt(zt, "convert", "h5-to-hf", os.path.join(work, "lora-init", "step-1.h5"), init_dir, "--adapter")
    got, rc2 = zt_train(zt, work, "lora", ckpt, 1e-2, 2, LORA)
    c.check(rc == 0 and rc2 == 0 and len(got) == 2, f"LoRA: initial adapters exported, zt 2 AdamW steps (exit {rc2})")
    if rc != 0 or rc2 != 0 or len(got) != 2:
        return
    end_dir = os.path.join(work, "lora-step2-peft")
    rc, _ = run_zt(zt, "convert", "h5-to-hf", os.path.join(work, "lora", "step-2.h5"), end_dir, "--adapter")
    c.check(rc == 0, f"LoRA: zt's step-2 adapters exported (exit {rc})")
    base = LlamaForCausalLM.from_pretrained(hf, dtype=torch.float32)
    model = PeftModel.from_pretrained(base, init_dir, is_trainable=True)
    trainer = trainer_of(torch, model, tok, work, "lora")
    ref = trl_steps(torch, trainer, model, 1e-2)
    compare_steps(c, "LoRA", ref, got)
    after = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n and ".default." in n}
    check_adapters(c, torch, "LoRA", after, end_dir, init_dir, TOL)


def main():
    zt, _, work, torch, c = peer_start(__doc__, "h5py", "safetensors", "peft", "datasets", "trl")
    import trl
    print(f"trl {trl.__version__}", flush=True)
    from transformers import PreTrainedTokenizerFast
    rc, out = train_tiny(zt, work, "base", 3, ("model.vocab=257",))
    c.check(rc == 0, "zt train of the base (3 steps)")
    ckpt, hf = os.path.join(work, "base", "step-3.h5"), os.path.join(work, "hf")
    rc2, _ = run_zt(zt, "convert", "h5-to-hf", "--dtype", "f32", ckpt, hf) if rc == 0 else (1, "")
    with open(os.path.join(work, "kto.jsonl"), "w") as f:
        for r in ROWS:
            f.write(json.dumps(r) + "\n")
    rc3, out3 = run_zt(zt, "convert", "kto-to-tokens", "--tokenizer", TOKENIZER, "--seq-len", "63", "--kl-batch",
                       str(N), os.path.join(work, "kto.jsonl"), os.path.join(work, "kto.h5"))
    c.check(rc2 == 0 and rc3 == 0 and "1 truncated" in out3, f"base exported; kto-to-tokens ({out3.strip()[-160:]})")
    if rc2 != 0 or rc3 != 0:
        print(out[-2000:], out3)
        c.finish()
    tok = PreTrainedTokenizerFast.from_pretrained(TOKENIZER)
    tok.pad_token = tok.eos_token  # (the collator pads with it; masked out)
    full_weights(c, torch, zt, work, ckpt, hf, tok)
    lora(c, torch, zt, work, ckpt, hf, tok)
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
