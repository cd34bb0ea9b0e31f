#!/usr/bin/env python3
"""Full-weights DPO (or KTO) everywhere the engine goes (issues 40, 60), at 2 ranks.

  dpo_engine_test.py [--objective kto] ZT WORKDIR MPIEXEC...

With --objective kto the pairs are unpaired as TRL's unpair_preference_dataset (each pair
two examples: prompt + chosen labelled true, prompt + rejected false; `zt convert
kto-to-tokens --kl-batch 8`), trained with finetune.objective = kto (its KL estimate over
each step's global batch, one more forward pass); the rest is the same.

The first 48 pairs of the shipped data/preferences-small.jsonl (byte tokenizer, seq_len 63;
each run first computes the reference log-probs of every row of its file), the tiny preset,
global batch 8 pairs (micro-batch 2 pairs: accumulation 2 at 2 ranks):
1. Two steps at stage 0 (the reference), then at stages 1, 2 and 3, at stage 3 with hpZ (4 ranks, 2 per node,
   zero.hpz_partition_size 2), stage 3 with the parameters and the optimizer offloaded to
   the CPU, and stage 2 with the optimizer on NVMe: each step's loss and gradient norm
   equal stage 0's within fp32 rounding (1e-5 relative; step 1's loss is ln 2 on every
   side, policy = reference: step 2's is the update's). The same for LoRA (rank 4 on q, v,
   gate; the reference is the base with the adapters off) at stages 1, 2 and 3 against its
   stage 0.
2. Resume: a 4-step run checkpointed at step 2 (`ckpt.every=2`, the reference log-probs in
   ckpt.dir/dpo-reference.h5); a run stopped after step 2 (`ckpt.stop_after=2`) and resumed
   (`ckpt.resume=auto`); and the straight run's step-2 checkpoint resumed into another
   ckpt.dir (which then holds the reference too): steps 3 and 4 have the straight run's
   losses and gradient norms (bit for bit: the same ranks, the same order of operations).
3. Refusals, exit 2 naming the file: the resume with dpo-reference.h5 removed, and with
   data.path another pair file.
"""
import json
import os
import shutil
import subprocess
import sys

TOL = 1e-5
PAIRS = 48


def main():
    argv = sys.argv[1:]
    objective = "dpo"
    if argv[:1] == ["--objective"]:
        objective, argv = argv[1], argv[2:]
    if len(argv) < 3 or objective not in ("dpo", "kto"):
        print(__doc__)
        return 2
    zt, work, mpiexec = argv[0], argv[1], argv[2:]
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.normpath(os.path.join(here, "..", ".."))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    fails = 0

    def check(ok, what):
        nonlocal fails
        fails += 0 if ok else 1
        print(("ok    " if ok else "FAIL  ") + what, flush=True)

    def run(cmd):
        p = subprocess.run(cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=600, env=env)
        return p.returncode, p.stdout

    def np_(n, extra=()):
        cmd = list(mpiexec)
        i = cmd.index("2") if "2" in cmd else None  # MPIEXEC_NUMPROC_FLAG 2
        if i is not None:
            cmd[i] = str(n)
        return cmd + list(extra)

    tok = os.path.join(root, "examples", "tokenizer-bytes")
    # The first PAIRS pairs: every run computes the reference log-probs of the whole file
    # before its first step, and the longest run (4 steps of 8 pairs) reads 32.
    with open(os.path.join(root, "data", "preferences-small.jsonl")) as f:
        lines = f.readlines()[:PAIRS]
    with open(os.path.join(work, "prefs.jsonl"), "w") as f:
        f.writelines(lines)
    with open(os.path.join(work, "other.jsonl"), "w") as f:
        f.writelines(lines[::-1])  # the same pairs in another order: other rows

    def convert(name):
        """pairs-to-tokens NAME.jsonl, or (kto) its pairs unpaired and kto-to-tokens; (exit, output)."""
        if objective == "dpo":
            return run([zt, "convert", "pairs-to-tokens", "--tokenizer", tok, "--seq-len", "63", f"{name}.jsonl",
                        f"{name}.h5"])
        with open(os.path.join(work, f"{name}.jsonl")) as f, open(os.path.join(work, f"{name}-kto.jsonl"), "w") as o:
            for p in map(json.loads, f):
                for side, label in (("chosen", True), ("rejected", False)):
                    o.write(json.dumps({"prompt": p["prompt"], "completion": p[side], "label": label}) + "\n")
        return run([zt, "convert", "kto-to-tokens", "--tokenizer", tok, "--seq-len", "63", "--kl-batch", "8",
                    f"{name}-kto.jsonl", f"{name}.h5"])

    rc, out = convert("prefs")
    want = f"{PAIRS} of {PAIRS} pairs" if objective == "dpo" else f"{2 * PAIRS} of {2 * PAIRS} examples"
    check(rc == 0 and want in out, f"{objective}: prefs converted (exit {rc})")
    convert("other")

    base = ["train", "--set", "model.preset=tiny", "--set", "model.vocab=257", "--set", "data.path=prefs.h5",
            "--set", f"finetune.objective={objective}", "--set", "train.seq_len=63", "--set", "train.micro_batch=4",
            "--set", "train.global_batch=16", "--set", "data.eval_fraction=0", "--set", "eval.every=0",
            "--set", "sample.tokens=0", "--set", "train.lr=3e-3", "--set", "train.warmup=0",
            "--set", "train.peak_tflops=1", "--set", "train.threads=1"]

    def train(name, extra, ranks=2, steps=1, mpi_extra=()):
        cmd = np_(ranks, mpi_extra) + [zt] + base + ["--set", f"train.steps={steps}", "--set",
                                                     f"log.metrics={name}.jsonl"] + list(extra)
        if not any(e.startswith("ckpt.dir=") for e in extra):
            cmd += ["--set", f"ckpt.dir={name}", "--set", "ckpt.every=0", "--set", "ckpt.save_final=false"]
        rc, out = run(cmd)
        rows = []
        if os.path.exists(os.path.join(work, f"{name}.jsonl")):
            rows = [r for r in map(json.loads, open(os.path.join(work, f"{name}.jsonl"))) if "loss" in r]
        return rc, out, rows

    def losses(label, rows):
        print(f"{label}: losses " + ", ".join(f"{r['loss']:.9f}" for r in rows) + "; grad norms " +
              ", ".join(f"{r['grad_norm']:.9f}" for r in rows), flush=True)

    def against_stage0(label, ran, ref):
        """A run's (rc, out, rows) against its stage 0's rows: every step's loss and grad
        norm within TOL relative."""
        rc, out, rows = ran
        if rc != 0 or len(rows) != len(ref):
            check(False, f"{label} (exit {rc})")
            print(out[-3000:])
            return
        for r, z in zip(rows, ref):
            dl = abs(r["loss"] - z["loss"]) / abs(z["loss"])
            dn = abs(r["grad_norm"] - z["grad_norm"]) / z["grad_norm"]
            check(dl <= TOL and dn <= TOL, f"{label} step {r['step']}: loss {r['loss']:.9f}, grad norm "
                                           f"{r['grad_norm']:.9f}: rel {dl:.2e}, {dn:.2e} of stage 0 (<= {TOL})")

    # 1. hpZ and offload against stage 0.
    rc, out, ref = train("stage0", ["--set", "zero.stage=0"], steps=2)
    check(rc == 0 and len(ref) == 2, f"stage 0 (exit {rc})")
    if rc != 0 or not ref:
        print(out[-3000:])
        print(f"FAIL: {fails + 1} check(s)")
        return 1
    losses("stage 0", ref)
    nvme = os.path.join(work, "nvme")
    os.makedirs(nvme, exist_ok=True)
    for name, extra, ranks, mpi_extra in (
            ("stage1", ["--set", "zero.stage=1"], 2, ()),
            ("stage2", ["--set", "zero.stage=2"], 2, ()),
            ("stage3", ["--set", "zero.stage=3"], 2, ()),
            ("hpz", ["--set", "zero.stage=3", "--set", "zero.hpz_partition_size=2", "--set",
                     "train.micro_batch=2"], 4, ()),
            ("offload_cpu", ["--set", "zero.stage=3", "--set", "offload.params=cpu", "--set",
                             "offload.optimizer=cpu"], 2, ()),
            ("offload_nvme", ["--set", "zero.stage=2", "--set", "offload.optimizer=nvme", "--set",
                              f"offload.nvme_path={nvme}"], 2, ())):
        if name == "hpz":
            extra = extra + ["--set", "runtime.ranks_per_node=2"]
        ran = train(name, extra, ranks, 2, mpi_extra)
        if name.startswith("offload"):  # the host engine's buffers feed no device
            check("cudaHostAlloc" not in ran[1], f"{name}: nothing pinned on the host (no cudaHostAlloc)")
        against_stage0(name, ran, ref)

    # 1b. LoRA (the reference: the base with the adapters off) at every stage against its
    # stage 0.
    lora = ["--set", "finetune.method=lora", "--set", "lora.rank=4", "--set", "lora.alpha=8",
            "--set", "lora.targets=q,v,gate"]
    rc, out, lref = train("lora0", lora + ["--set", "zero.stage=0"], steps=2)
    check(rc == 0 and len(lref) == 2, f"LoRA stage 0 (exit {rc})")
    if rc != 0 or len(lref) != 2:
        print(out[-3000:])
    else:
        losses("LoRA stage 0", lref)
        check(lref[1]["loss"] != lref[0]["loss"], "LoRA: step 2's loss moved from step 1's (the adapters trained)")
        for stage in (1, 2, 3):
            against_stage0(f"LoRA stage {stage}",
                           train(f"lora{stage}", lora + ["--set", f"zero.stage={stage}"], steps=2), lref)

    # 2. Resume.
    ck = ["--set", "zero.stage=3", "--set", "ckpt.every=2"]
    rc, out, straight = train("straight", ck + ["--set", "ckpt.dir=straight"], steps=4)
    check(rc == 0 and len(straight) == 4 and os.path.exists(os.path.join(work, "straight", "dpo-reference.h5")),
          f"straight 4-step run (exit {rc}), dpo-reference.h5 beside its checkpoints")
    if rc != 0 or len(straight) != 4:
        print(out[-3000:])
        print(f"FAIL: {fails} check(s)")
        return 1
    want = [(r["loss"], r["grad_norm"]) for r in straight[2:]]
    print("straight: losses " + ", ".join(f"{r['loss']:.12f}" for r in straight) +
          "; grad norms " + ", ".join(f"{r['grad_norm']:.12f}" for r in straight), flush=True)
    rc, out, first = train("stopped", ck + ["--set", "ckpt.dir=stopped", "--set", "ckpt.stop_after=2"], steps=4)
    check(rc == 0 and len(first) == 2, f"stopped after step 2 (exit {rc})")
    rc, out, rest = train("stopped", ck + ["--set", "ckpt.dir=stopped", "--set", "ckpt.resume=auto"], steps=4)
    got = [(r["loss"], r["grad_norm"]) for r in rest if r["step"] > 2]
    check(rc == 0 and "read from" in out and got == want,
          f"stopped + resumed: steps 3-4 {got} == straight {want} (exit {rc})")
    if rc != 0:
        print(out[-3000:])
    step2 = os.path.join(work, "straight", "step-2.h5")
    rc, out, other = train("elsewhere", ck + ["--set", "ckpt.dir=elsewhere", "--set", f"ckpt.resume={step2}"],
                           steps=4)
    got = [(r["loss"], r["grad_norm"]) for r in other if r["step"] > 2]
    check(rc == 0 and got == want and os.path.exists(os.path.join(work, "elsewhere", "dpo-reference.h5")),
          f"straight's step 2 resumed into another ckpt.dir: steps 3-4 equal, the reference copied there (exit {rc})")
    if rc != 0:
        print(out[-3000:])

    # 3. Refusals.
    shutil.copytree(os.path.join(work, "straight"), os.path.join(work, "noref"))
    os.remove(os.path.join(work, "noref", "dpo-reference.h5"))
    rc, out, _ = train("noref", ck + ["--set", "ckpt.dir=noref2", "--set",
                                      f"ckpt.resume={os.path.join(work, 'noref', 'step-2.h5')}"], steps=4)
    check(rc == 2 and "dpo-reference.h5 are missing" in out, f"resume without dpo-reference.h5 refused (exit {rc})")
    rc, out, _ = train("otherdata", ck + ["--set", "ckpt.dir=otherdata", "--set", "data.path=other.h5",
                                          "--set", f"ckpt.resume={step2}"], steps=4)
    check(rc == 2 and "other data" in out, f"resume on another pair file refused (exit {rc})")
    if rc != 2:
        print(out[-3000:])
    print("PASS" if fails == 0 else f"FAIL: {fails} check(s)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
