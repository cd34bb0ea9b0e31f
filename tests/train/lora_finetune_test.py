#!/usr/bin/env python3
"""LoRA and QLoRA fine-tunes of a pre-trained `tiny` (docs/finetune.md, "LoRA and QLoRA").

  lora_finetune_test.py EXAMPLE_SH ZT WORKDIR

Runs examples/finetune-cpu.sh with 40 pre-training steps, then 20 fine-tuning steps with
FT_METHOD=lora, then the same with FT_METHOD=qlora from the same pre-trained checkpoint
(PRETRAIN), and checks from their log.metrics files:
- each banner prints PEFT's trainable line (rank 16 on the 7 block projections of tiny
  with vocab 257: 180,224 of 1,230,208);
- the held-out masked loss falls under LoRA and under QLoRA: the last evaluation is
  below the first by more than 0.3 nats (measured 0.55 for both) and below the first
  step's loss;
- QLoRA tracks LoRA: every step's loss within 2% relative of LoRA's (measured 0.59% at
  most) and every evaluation within 1% (measured 0.20%): the NF4 base differs from the
  fp32 one by its quantisation error only (docs/finetune.md).
"""
import json
import os
import subprocess
import sys


def run(script, work, env):
    p = subprocess.run(["sh", script, work], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, env=env, timeout=1200)
    print("\n".join(l for l in p.stdout.splitlines()
                    if l.startswith(("eval", "done", "  trainable", "  finetune"))))
    if p.returncode != 0:
        print(p.stdout[-4000:])
    return p.returncode, p.stdout


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    script, zt, work = sys.argv[1:]
    base = dict(os.environ, ZT=zt, PRE_STEPS="40", FT_STEPS="20", EVAL_EVERY="5",
                OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    fails = 0

    def check(ok, what):
        nonlocal fails
        fails += 0 if ok else 1
        print(("ok    " if ok else "FAIL  ") + what, flush=True)

    rc, out = run(script, work, dict(base, FT_METHOD="lora"))
    if rc != 0:
        print(f"FAIL  examples/finetune-cpu.sh (lora) exited {rc}")
        return 1
    pre = os.path.join("pretrain", open(os.path.join(work, "pretrain", "latest")).read().strip())
    rc, qout = run(script, work, dict(base, FT_METHOD="qlora", PRETRAIN=pre))
    if rc != 0:
        print(f"FAIL  examples/finetune-cpu.sh (qlora) exited {rc}")
        return 1
    line = "trainable params: 180,224 || all params: 1,230,208 || trainable%: 14.6499"
    check(line in out and line in qout, "PEFT's trainable line in both banners")
    runs = {}
    for m in ("lora", "qlora"):
        steps = [r for r in map(json.loads, open(os.path.join(work, f"finetune-{m}.jsonl"))) if "loss" in r]
        runs[m] = steps
        check(len(steps) == 20, f"{m}: 20 fine-tuning steps logged ({len(steps)})")
        evals = [s["eval_loss"] for s in steps if "eval_loss" in s]
        print(f"{m} held-out masked loss: " + ", ".join(f"{e:.4f}" for e in evals))
        check(len(evals) == 4, f"{m}: 4 evaluations")
        if evals:
            check(evals[-1] < evals[0] - 0.3, f"{m}: held-out loss falls {evals[0]:.4f} -> {evals[-1]:.4f} (by > 0.3)")
            check(evals[-1] < steps[0]["loss"], f"{m}: below the first step's loss {steps[0]['loss']:.4f}")
    a, b = runs["lora"], runs["qlora"]
    step_diff = max(abs(x["loss"] - y["loss"]) / x["loss"] for x, y in zip(a, b))
    ev = [(x["eval_loss"], y["eval_loss"]) for x, y in zip(a, b) if "eval_loss" in x]
    eval_diff = max(abs(x - y) / x for x, y in ev) if ev else 1.0
    check(step_diff < 0.02, f"QLoRA step losses within 2% of LoRA's: max {100 * step_diff:.2f}%")
    check(eval_diff < 0.01, f"QLoRA held-out losses within 1% of LoRA's: max {100 * eval_diff:.2f}%")
    check(step_diff > 0, "QLoRA differs from LoRA at all (its base is NF4)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
