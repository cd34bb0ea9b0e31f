#!/usr/bin/env python3
"""Preference training with careless and hostile input (docs/reliability.md).

  dpo_trust_test.py ZT TOKENIZER WORKDIR

1. Data for the wrong objective (one table, finetune.objective): sft on a pair file, dpo
   and orpo on text, orpo on instruction data: exit 2 naming finetune.objective.
2. What may change at resume (one table): a DPO checkpoint resumed as orpo, an SFT one as
   dpo: exit 2 naming finetune.objective and ckpt.init_from.
3. SIGTERM during the DPO reference pass: it stops between batches (its log says after how
   many rows, fewer than all), exit 0 with a checkpoint at step 0, nothing stored.
4. The stored reference is trusted only with its checksum and identity: halved values
   (h5py) beside a step-0 checkpoint are recomputed with a warning; the untouched file
   there is reused (the log says so); halved values past step 0 are refused (exit 2,
   the file named); a reference of other weights (another train.seed) is recomputed.
5. SIGTERM during an evaluation (20,000 held-out batches, about 20 s here): it stops between
   global batches, records no eval loss for that step, and the run saves the step and ends
   as preempted (the same stop function as the DPO evaluation's, src/train/trainer.cpp).
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ckpt", "hf"))
from hf_common import require  # noqa: E402  (a missing peer: skip, or fail in CI)

h5py, = require("h5py")

SMALL = ["model.hidden=64", "model.layers=2", "model.intermediate=160", "model.context=64",
         "model.vocab=257", "train.seq_len=63", "train.micro_batch=2", "train.global_batch=4",
         "eval.every=0", "data.eval_fraction=0", "sample.tokens=0", "train.peak_tflops=1",
         "log.every=1"]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
fails = 0


def check(ok, what):
    global fails
    fails += 0 if ok else 1
    print(("ok    " if ok else "FAIL  ") + what, flush=True)


def train_cmd(zt, keys):
    out = [zt, "train", "--set", "ckpt.resume=auto"]
    for k in SMALL + keys:
        out += ["--set", k]
    return out


def run(cmd, cwd):
    p = subprocess.run(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=600, env=ENV)
    return p.returncode, p.stdout


def latest_step(d):
    with open(os.path.join(d, "latest")) as f:
        name = f.read().strip()
    return int(re.search(r"step-(\d+)\.h5$", name).group(1))


def halve(path):
    with h5py.File(path, "r+") as f:
        f["logp"][...] = f["logp"][...] / 2


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    zt, tok, work = (os.path.abspath(a) for a in sys.argv[1:])
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    with open(os.path.join(work, "pairs.jsonl"), "w") as f:
        for i in range(1500):
            f.write('{"prompt": "question %d: what is %d + %d?", "chosen": "it is %d, surely.", '
                    '"rejected": "no idea at all, sorry"}\n' % (i, i, 2 * i, 3 * i))
    with open(os.path.join(work, "sft.jsonl"), "w") as f:
        for i in range(50):
            f.write('{"prompt": "what is %d?", "response": "it is %d"}\n' % (i, i))
    with open(os.path.join(work, "text.txt"), "w") as f:
        f.write("some text to train on. " * 400)
    for cmd in (["text-to-tokens", "text.txt", "text.h5"],
                ["pairs-to-tokens", "--tokenizer", tok, "--seq-len", "63", "pairs.jsonl", "pairs.h5"],
                ["sft-to-tokens", "--format", "prompt-response", "--tokenizer", tok, "--seq-len", "63", "sft.jsonl", "sft.h5"]):
        rc, out = run([zt, "convert"] + cmd, work)
        if rc != 0:
            print(out)
            return 1

    # 1. Data for the wrong objective.
    for obj, data, holds in (("sft", "pairs.h5", "preference pairs"), ("dpo", "text.h5", "text"),
                             ("orpo", "text.h5", "text"), ("orpo", "sft.h5", "instruction data")):
        rc, out = run(train_cmd(zt, ["train.steps=1", "data.path=" + data, "finetune.objective=" + obj]), work)
        check(rc == 2 and f"finetune.objective = {obj} does not train on {holds}" in out,
              f"{obj} on {data} refused (exit {rc})")

    dpo = ["data.path=pairs.h5", "finetune.objective=dpo"]
    # 3. SIGTERM during the reference pass.
    d1 = os.path.join(work, "d1")
    p = subprocess.Popen(train_cmd(zt, dpo + ["train.steps=2", "ckpt.dir=" + d1]), cwd=work, env=ENV,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    log = []
    for line in p.stdout:
        log.append(line)
        if "DPO reference: computing" in line:
            p.send_signal(signal.SIGTERM)
    rc = p.wait()
    out = "".join(log)
    stopped = [l for l in log if "DPO reference: stop requested after" in l]
    print(out[-1500:])
    check(rc == 0 and len(stopped) == 1 and "of 3000 rows" in stopped[0] and
          "after 3000 of" not in stopped[0], f"SIGTERM stops the reference pass between batches (exit {rc})")
    check(latest_step(d1) == 0 and not os.path.exists(os.path.join(d1, "dpo-reference.h5")),
          "a checkpoint at step 0, no partial reference stored: %s" % sorted(os.listdir(d1)))

    # A complete reference of the same weights (same train.seed) from a fresh run.
    d2 = os.path.join(work, "d2")
    rc, out = run(train_cmd(zt, dpo + ["train.steps=2", "ckpt.every=1", "ckpt.dir=" + d2]), work)
    check(rc == 0 and "DPO reference: stored in" in out, f"a fresh run stores its reference (exit {rc})")
    ref = os.path.join(d2, "dpo-reference.h5")

    # 4. Trusted only with its checksum and identity.
    d1b = d1 + "-clean"
    shutil.copytree(d1, d1b)
    shutil.copy(ref, d1b)
    rc, out = run(train_cmd(zt, dpo + ["train.steps=1", "ckpt.dir=" + d1b]), work)
    check(rc == 0 and "reused from" in out and "DPO reference: computing" not in out,
          f"resumed at step 0: the stored reference of the same weights is reused (exit {rc})")
    shutil.copy(ref, d1)
    halve(os.path.join(d1, "dpo-reference.h5"))
    rc, out = run(train_cmd(zt, dpo + ["train.steps=1", "ckpt.dir=" + d1]), work)
    check(rc == 0 and "recomputing it" in out and "fails its checksum" in out and "DPO reference: computing" in out,
          f"resumed at step 0: halved values are recomputed with a warning (exit {rc})")
    d3 = os.path.join(work, "d3")
    shutil.copytree(d2, d3)
    halve(os.path.join(d3, "dpo-reference.h5"))
    rc, out = run(train_cmd(zt, dpo + ["train.steps=3", "ckpt.dir=" + d3]), work)
    check(rc == 2 and "dpo-reference.h5" in out and "fails its checksum" in out,
          f"resumed at step 2: halved values refused (exit {rc})")
    d4 = os.path.join(work, "d4")
    os.makedirs(d4)
    shutil.copy(ref, d4)
    rc, out = run(train_cmd(zt, dpo + ["train.steps=1", "train.seed=7", "ckpt.dir=" + d4,
                                       "ckpt.overwrite=true"]), work)
    check(rc == 0 and "recomputing it" in out and "other weights" in out,
          f"a reference of other weights (train.seed) is recomputed (exit {rc})")

    # 2. What may change at resume.
    rc, out = run(train_cmd(zt, ["data.path=pairs.h5", "finetune.objective=orpo", "train.steps=3",
                                 "ckpt.dir=" + d2]), work)
    check(rc == 2 and "finetune.objective = orpo, but checkpoint" in out and "trained with dpo" in out and
          "ckpt.init_from" in out, f"a DPO checkpoint resumed as orpo refused (exit {rc})")
    d5 = os.path.join(work, "d5")
    rc, out = run(train_cmd(zt, ["data.path=sft.h5", "train.steps=1", "ckpt.dir=" + d5]), work)
    check(rc == 0, f"an SFT run (exit {rc})")
    rc, out = run(train_cmd(zt, dpo + ["train.steps=2", "ckpt.dir=" + d5]), work)
    check(rc == 2 and "finetune.objective = dpo, but checkpoint" in out and "trained with sft" in out and
          "ckpt.init_from" in out and "missing" not in out, f"an SFT checkpoint resumed as dpo refused (exit {rc})")
    # 5. SIGTERM during an evaluation.
    d6 = os.path.join(work, "d6")
    metrics = os.path.join(work, "d6.metrics")
    p = subprocess.Popen(train_cmd(zt, ["data.path=text.h5", "data.eval_fraction=0.5", "eval.every=1",
                                        "eval.batches=20000", "train.steps=3", "ckpt.dir=" + d6,
                                        "log.metrics=" + metrics]),
                         cwd=work, env=ENV, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    log = []
    for line in p.stdout:
        log.append(line)
        if "train start-up done" in line:
            time.sleep(2)  # step 1 takes milliseconds; its evaluation about 20 s
            p.send_signal(signal.SIGTERM)
    rc = p.wait()
    steps = [json.loads(l) for l in open(metrics) if '"loss"' in l]
    print("".join(log)[-800:])
    check(rc == 0 and "preempted" in "".join(log) and latest_step(d6) == 1 and len(steps) == 1 and
          "eval_loss" not in steps[0], f"SIGTERM during the evaluation: step 1 saved without an eval "
          f"loss, ended (exit {rc}, records {steps})")
    print("PASS" if fails == 0 else f"FAIL: {fails} check(s)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
