#!/usr/bin/env python3
"""The training activations of Qwen3.5's Gated DeltaNet layers against the sequence length.

Trains a narrow qwen3_5_text on the CPU (one rank, one thread, micro batch 1, 2 steps, fp32)
at T = 1k, 4k and 16k tokens, with only linear layers (llllllll) and with the 3:1 schedule
(lllf, one full-attention layer of one head), and prints a markdown table: the model's own
activation accounting (the step's metrics, memory.activations), the estimate's
(`zt estimate --device cpu --json`, stage 0), the process's peak RSS, the peak RSS less a
run at T = 16 (what the sequence adds: activations and the kernels' transient scratch)
beside the estimate's activations less its own at T = 16, and the growth per 4x T.

    nice -n 15 python3 bench/model/qwen35_activation_memory.py build-ci/src/apps/zt [--recompute]
"""
import json
import os
import subprocess
import sys
import tempfile

COMMON = {
    "model.preset": "tiny",  # byte vocabulary (256)
    "model.family": "qwen3_5_text",
    "model.hidden": 128,
    "model.intermediate": 256,
    "model.heads": 1,
    "model.kv_heads": 1,
    "model.head_dim": 64,
    "model.partial_rotary_factor": 0.25,
    "model.linear_key_heads": 2,
    "model.linear_value_heads": 4,
    "model.linear_key_dim": 32,
    "model.linear_value_dim": 32,
    "model.linear_conv_kernel": 4,
    "model.context": 16384,
    "train.steps": 2,
    "train.micro_batch": 1,
    "train.global_batch": 1,
    "train.warmup": 0,
    "train.threads": 1,
    "data.eval_fraction": 0,
    "sample.tokens": 0,
    "log.report": "false",
    "ckpt.overwrite": "true",
}
SCHEDULES = [("linear only", "llllllll"), ("3:1", "lllf")]
LENGTHS = [1024, 4096, 16384]
BASE_T = 16


def sets(d):
    out = []
    for k, v in d.items():
        out += ["--set", f"{k}={v}"]
    return out


def train(zt, keys, tmp):
    metrics = os.path.join(tmp, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    keys = dict(keys, **{"log.metrics": metrics, "ckpt.dir": os.path.join(tmp, "ckpt")})
    subprocess.run([zt, "train"] + sets(keys), check=True, stdout=subprocess.DEVNULL)
    steps = [json.loads(line) for line in open(metrics) if '"step"' in line]
    last = [s for s in steps if "memory" in s][-1]
    return last["memory"]["activations"], last["peak_rss_bytes"]


def estimate(zt, keys, recompute):
    out = subprocess.run([zt, "estimate", "--device", "cpu", "--json"] + sets(keys),
                         check=True, capture_output=True, text=True).stdout
    row = [r for r in json.loads(out)["rows"] if r["stage"] == 0][0]["per_gpu"]
    return row["activations_recompute" if recompute else "activations"]


def mib(b):
    return f"{b / 2**20:.1f}"


def main():
    zt = sys.argv[1] if len(sys.argv) > 1 else "build-ci/src/apps/zt"
    recompute = "--recompute" in sys.argv
    print(f"recompute {str(recompute).lower()}; sizes in MiB; ratio: the figure over the one at T / 4")
    print()
    print("| layers | T | model act | estimate act | est / model | act ratio | peak RSS | "
          "RSS - RSS(T=16) | est - est(T=16) | est / RSS growth | RSS growth ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, types in SCHEDULES:
            keys = dict(COMMON, **{"model.layers": len(types), "model.layer_types": types,
                                   "train.recompute": str(recompute).lower()})
            base_keys = dict(keys, **{"train.seq_len": BASE_T})
            _, base_rss = train(zt, base_keys, tmp)
            base_est = estimate(zt, base_keys, recompute)
            prev = None
            for T in LENGTHS:
                k = dict(keys, **{"train.seq_len": T})
                act, rss = train(zt, k, tmp)
                est = estimate(zt, k, recompute)
                grow, est_grow = rss - base_rss, est - base_est
                ratio = f"{act / prev[0]:.2f}" if prev else ""
                rss_ratio = f"{grow / prev[1]:.2f}" if prev else ""
                print(f"| {name} ({types}) | {T} | {mib(act)} | {mib(est)} | {est / act:.4f} | {ratio} | "
                      f"{mib(rss)} | {mib(grow)} | {mib(est_grow)} | {est_grow / grow:.3f} | {rss_ratio} |",
                      flush=True)
                prev = (act, grow)


if __name__ == "__main__":
    main()
