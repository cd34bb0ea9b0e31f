#!/usr/bin/env python3
"""`zt train --set moe.expert_parallel=N` end to end (issue 41 item 3).

  expert_parallel_cli_test.py ZT WORKDIR MPIEXEC...   (MPIEXEC ends in the rank count 2)

A small Mixtral (4 experts, 2 per token) on the shipped text corpus, global batch 4:
1. 6 steps at 2 ranks with expert_parallel = 2 (stage 1, checkpoint at step 3) and with
   expert_parallel = 1: every step's loss and gradient norm within 1e-6 relative.
2. The EP = 2 step-3 checkpoint resumed at 1 rank (EP 1, stage 0) and at 4 ranks (EP 4,
   stage 3): steps 4-6 within 1e-6 of the EP = 2 run's.
3. `zt convert h5-to-hf` of the EP = 2 and EP = 1 runs' final checkpoints: the same
   config.json, tensor names, shapes and dtypes, values within 1e-5 (L2, relative).
4. Refusals, exit 2 naming the numbers: expert_parallel = 3 at 2 ranks (the world), 2
   with 3 experts (the experts), 0 (the key's range).

With --gpu (label gpu; exit 77, SKIPPED:, with fewer than 2 GPUs visible): the GPU model
(train.device = cuda, fp32), expert_parallel = 2 vs 1 at 2 ranks, every step's loss and
gradient norm within 1e-5 relative (the experts' GEMMs see other row groupings): over
NCCL at stages 1 and 3, and over MPI (the device space's staged collectives; the expert
exchanges staged through pinned buffers) at stage 1; and the same model as gpt_oss (router
bias, softmax over the top 2, experts with biases, SwiGLU clamped at 0.1, which clamps
values at this init) over NCCL and MPI at stage 1.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ckpt", "hf"))
from hf_common import require  # noqa: E402  (a missing peer: skip, or fail in CI)

TOL = 1e-6
GPU_TOL = 1e-5  # the GPU model: the experts' GEMMs over other row groupings
# The base model as gpt_oss (its block's pieces; alternating sliding and full layers).
GPT_OSS = ["--set", "model.family=gpt_oss", "--set", "model.attention_bias=true", "--set",
           "model.layer_types=sf", "--set", "model.sliding_window=8", "--set", "model.swiglu_limit=0.1"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpu", action="store_true", help="the GPU model (see above)")
    parser.add_argument("zt")
    parser.add_argument("work")
    parser.add_argument("mpiexec", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    zt, work, mpiexec = args.zt, args.work, args.mpiexec
    np, st = require("numpy", "safetensors.numpy")  # step 3 compares the exports' values
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    results = []  # (ok, what) of every check

    def check(ok, what):
        results.append(bool(ok))
        print(("ok    " if ok else "FAIL  ") + what, flush=True)

    def run(cmd):
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMP_NUM_THREADS="1")
        done = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=600, env=env)
        return done.returncode, done.stdout + done.stderr

    def np_(n):  # MPIEXEC_NUMPROC_FLAG 2 -> n (ZT_MPIEXEC_FLAGS oversubscribe)
        at = mpiexec.index("2")
        return mpiexec[:at] + [str(n)] + mpiexec[at + 1:]

    base = ["train", "--set", "model.family=mixtral", "--set", "model.experts=4", "--set",
            "model.experts_per_token=2", "--set", "model.hidden=64", "--set", "model.layers=2", "--set",
            "model.intermediate=96", "--set", "model.heads=4", "--set", "model.kv_heads=2", "--set",
            "model.context=32", "--set", "train.seq_len=32", "--set", "train.global_batch=4", "--set",
            "train.micro_batch=1", "--set", "train.steps=6", "--set", "sample.tokens=0", "--set", "eval.every=0",
            "--set", "train.peak_tflops=1", "--set", "train.threads=1"]

    def train(name, ranks, extra):
        rc, out = run(np_(ranks) + [zt] + base + ["--set", f"log.metrics={name}.jsonl", "--set",
                                                  f"ckpt.dir={name}"] + extra)
        check(rc == 0, f"{name}: {ranks} ranks {' '.join(extra)} (exit {rc})")
        if rc != 0:
            print(out[-3000:])
            return {}
        steps = {}
        with open(os.path.join(work, f"{name}.jsonl")) as f:
            for line in f:
                r = json.loads(line)
                if "step" in r and "loss" in r:
                    steps[r["step"]] = (r["loss"], r["grad_norm"])
        return steps

    def compare(got, ref, what, first=1, tol=TOL):
        worst = 0.0
        for s in range(first, 7):
            if s not in got or s not in ref:
                check(False, f"{what}: step {s} missing")
                return
            for a, b in zip(got[s], ref[s]):
                worst = max(worst, abs(a - b) / abs(b))
        check(worst < tol, f"{what}: steps {first}-6 losses and gradient norms within {worst:.1e} relative")

    if args.gpu:
        return gpu_runs(train, compare, results)
    ep2 = train("ep2", 2, ["--set", "moe.expert_parallel=2", "--set", "zero.stage=1", "--set", "ckpt.every=3"])
    ep1 = train("ep1", 2, ["--set", "moe.expert_parallel=1", "--set", "zero.stage=1"])
    compare(ep2, ep1, "EP 2 vs EP 1 at 2 ranks")
    r1 = train("r1", 1, ["--set", "zero.stage=0", "--set", "ckpt.resume=ep2/step-3.h5"])
    compare(r1, ep2, "EP 2's step-3 file resumed at 1 rank, EP 1", first=4)
    r4 = train("r4", 4, ["--set", "moe.expert_parallel=4", "--set", "zero.stage=3", "--set",
                         "ckpt.resume=ep2/step-3.h5"])
    compare(r4, ep2, "EP 2's step-3 file resumed at 4 ranks, EP 4", first=4)

    for name in ("ep2", "ep1"):
        rc, out = run([zt, "convert", "h5-to-hf", f"{name}/step-6.h5", f"hf-{name}"])
        check(rc == 0, f"h5-to-hf {name}/step-6.h5 (exit {rc})")
    a = st.load_file(os.path.join(work, "hf-ep2", "model.safetensors"))
    b = st.load_file(os.path.join(work, "hf-ep1", "model.safetensors"))
    same = a.keys() == b.keys() and all(a[k].shape == b[k].shape and a[k].dtype == b[k].dtype for k in a)
    check(same, f"HF exports: the same {len(a)} tensor names, shapes and dtypes")
    if same:
        worst = max(float(np.linalg.norm(a[k].astype(np.float64) - b[k]) / np.linalg.norm(b[k].astype(np.float64)))
                    for k in a)
        check(worst < 1e-5, f"HF exports: every tensor within {worst:.1e} (L2, relative)")
    with open(os.path.join(work, "hf-ep2", "config.json")) as f, open(os.path.join(work, "hf-ep1", "config.json")) as g:
        check(json.load(f) == json.load(g), "HF exports: the same config.json")

    for extra, want in ((["--set", "moe.expert_parallel=3"], "moe.expert_parallel = 3 does not divide the world of 2 ranks"),
                        (["--set", "moe.expert_parallel=2", "--set", "model.experts=3"],
                         "moe.expert_parallel = 2 does not divide the model's 3 experts"),
                        (["--set", "moe.expert_parallel=0"], "moe.expert_parallel")):
        rc, out = run(np_(2) + [zt] + base + ["--set", "ckpt.dir=refused"] + extra)
        check(rc == 2 and want in out, f"refused, exit {rc}: {want}")
    fails = results.count(False)
    print("PASS" if fails == 0 else f"FAIL ({fails})")
    return 0 if fails == 0 else 1


def gpus():
    """GPUs visible (nvidia-smi -L), 0 without nvidia-smi."""
    try:
        done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in done.stdout.splitlines() if line.startswith("GPU "))


def gpu_runs(train, compare, results):
    n = gpus()
    if n < 2:
        print(f"SKIPPED: {n} GPU(s) visible; the GPU expert-parallel runs need 2 (one per rank)")
        return 77
    cuda = ["--set", "train.device=cuda", "--set", "train.precision=fp32"]
    for family, model, backend, stage in (("mixtral", [], "nccl", 1), ("mixtral", [], "nccl", 3),
                                          ("mixtral", [], "mpi", 1), ("gpt_oss", GPT_OSS, "nccl", 1),
                                          ("gpt_oss", GPT_OSS, "mpi", 1)):
        at = cuda + model + ["--set", f"comm.backend={backend}", "--set", f"zero.stage={stage}"]
        name = f"gpu-{family}-{backend}-s{stage}"
        ep2 = train(f"{name}-ep2", 2, at + ["--set", "moe.expert_parallel=2"])
        ep1 = train(f"{name}-ep1", 2, at + ["--set", "moe.expert_parallel=1"])
        compare(ep2, ep1, f"GPU {family}, {backend}, stage {stage}: EP 2 vs EP 1 at 2 ranks", tol=GPU_TOL)
    fails = results.count(False)
    print("PASS" if fails == 0 else f"FAIL ({fails})")
    return 0 if fails == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
