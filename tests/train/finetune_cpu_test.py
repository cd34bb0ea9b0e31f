#!/usr/bin/env python3
"""The CPU fine-tuning example, shortened (docs/finetune.md, "Fine-tune on the CPU").

  finetune_cpu_test.py EXAMPLE_SH ZT WORKDIR

Runs examples/finetune-cpu.sh with 40 pre-training and 20 fine-tuning steps (held-out
evaluation every 5) and checks, from its log.metrics file:
- every fine-tuning step trained on unmasked targets only: 0 < trained_tokens < the
  step's tokens (4 rows x 512), i.e. the prompts and padding were masked;
- the held-out masked loss falls: the last evaluation is below the first by more than
  0.2 nats (measured: see docs/finetune.md), and below the pre-trained model's loss on
  the first step's targets.
"""
import json
import os
import subprocess
import sys


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    script, zt, work = sys.argv[1:]
    env = dict(os.environ, ZT=zt, PRE_STEPS="40", FT_STEPS="20", EVAL_EVERY="5",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = subprocess.run(["sh", script, work], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, env=env, timeout=900)
    print("\n".join(l for l in p.stdout.splitlines() if l.startswith(("wrote", "eval", "done"))))
    if p.returncode != 0:
        print(p.stdout[-4000:])
        print(f"FAIL  examples/finetune-cpu.sh exited {p.returncode}")
        return 1
    steps = [r for r in map(json.loads, open(os.path.join(work, "finetune.jsonl"))) if "loss" in r]
    fails = 0

    def check(ok, what):
        nonlocal fails
        fails += 0 if ok else 1
        print(("ok    " if ok else "FAIL  ") + what, flush=True)

    check(len(steps) == 20, f"20 fine-tuning steps logged ({len(steps)})")
    trained = [s.get("trained_tokens", -1) for s in steps]
    check(all(0 < t < 4 * 512 for t in trained),
          f"trained_tokens in (0, {4 * 512}) every step: {min(trained)}..{max(trained)}")
    evals = [(s["step"], s["eval_loss"]) for s in steps if "eval_loss" in s]
    print("held-out masked loss: " + ", ".join(f"step {a}: {b:.4f}" for a, b in evals))
    check(len(evals) == 4, "4 evaluations (every 5 steps)")
    if evals:
        check(evals[-1][1] < evals[0][1] - 0.2,
              f"held-out loss falls: {evals[0][1]:.4f} -> {evals[-1][1]:.4f} (by > 0.2)")
        check(evals[-1][1] < steps[0]["loss"],
              f"below the first step's loss {steps[0]['loss']:.4f} (the pre-trained model)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
