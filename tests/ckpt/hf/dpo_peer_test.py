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
Exit 77 (CTest skip) without torch / transformers / trl (scripts/install-deps.sh
--hf-peers); ZT_REQUIRE_PEERS=1 fails instead.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_common import peer_start, require, run_zt, train_tiny  # noqa: E402

TOL = 1e-5
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


def zt_step(zt, work, name, ckpt, extra, ranks=1, data="pairs.h5", seq=63):
    """One DPO step of zt; returns its metrics JSON line (dict) or None."""
    args = ["train", "--set", "model.preset=tiny", "--set", "model.vocab=257", "--set",
            f"ckpt.init_from={ckpt}", "--set", f"data.path={data}", "--set", f"train.seq_len={seq}",
            "--set", "train.global_batch=8", "--set", "train.steps=1", "--set", "data.eval_fraction=0",
            "--set", "eval.every=0", "--set", "sample.tokens=0", "--set", "train.threads=1",
            "--set", "dpo.beta=0.1",
            "--set", f"log.metrics={name}.jsonl", "--set", f"ckpt.dir={name}", "--set", "ckpt.every=0"]
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
        return None
    with open(os.path.join(work, f"{name}.jsonl")) as f:
        steps = [r for r in map(json.loads, f.readlines()) if "loss" in r]  # not run/checkpoint records
        return steps[-1] if steps else None


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


def main():
    zt, _, work, torch, c = peer_start(__doc__, "h5py", "datasets", "trl")
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
        m = zt_step(zt, work, name, ckpt, extra, ranks, **where)
        if m is None:
            c.check(False, f"zt step ({name})")
            continue
        dl = abs(m["loss"] - ref[0]) / abs(ref[0])
        dn = abs(m["grad_norm"] - ref[1]) / ref[1]
        c.check(dl <= TOL and dn <= TOL,
                f"{name}: zt loss {m['loss']:.9f}, grad norm {m['grad_norm']:.9f} vs TRL: "
                f"rel {dl:.2e}, {dn:.2e} (<= {TOL})")
        c.check("rewards/accuracies" in m and "logps/chosen" in m, f"{name}: TRL's metric names in the JSON")
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
