#!/usr/bin/env python3
"""zt's CPU AdamW (bench_cpu_adam, with the STREAM-triad bound measured in the same
process) beside DeepSpeed's DeepSpeedCPUAdam and torch.optim.AdamW(fused=True) on the
same parameter count and threads, interleaved round by round. Prints JSON lines and a
markdown table of medians and ratios.
  python3 bench/offload/run_cpu_adam.py --build build-offload --n 33554432 --threads 1 2 --rounds 3
"""
import argparse, json, os, statistics, subprocess, sys

ap = argparse.ArgumentParser()
ap.add_argument("--build", default="build")
ap.add_argument("--n", type=int, default=32 << 20)
ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--iters", type=int, default=20)
ap.add_argument("--impls", nargs="+", default=["zt avx512", "deepspeed", "zt scalar", "torch fused", "zt avx512 +bf16 copy"])
ap.add_argument("--from-log", help="only print the table of an earlier run's JSON lines")
a = ap.parse_args()
here = os.path.dirname(os.path.abspath(__file__))
zt = os.path.join(a.build, "bench/offload/bench_cpu_adam")

def run(cmd, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONWARNINGS="ignore")
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    line = [l for l in out.splitlines() if l.startswith("{")][-1]
    r = json.loads(line)
    print(json.dumps(r), flush=True)
    return r

res = {}
names = {"zt": None, "deepspeed": "deepspeed", "torch-fused": "torch fused"}
def key(r):
    if r["impl"] != "zt":
        return names[r["impl"]]
    return "zt %s%s" % (r["isa"], " +bf16 copy" if r["copy"] == "bf16" else "")
if a.from_log:
    for line in open(a.from_log):
        if line.startswith("{"):
            r = json.loads(line)
            res.setdefault((r["threads"], key(r)), []).append(r)
    a.rounds = 0
    a.threads = sorted({t for t, _ in res})
for rnd in range(a.rounds):
    for t in a.threads:
        common = ["--n", str(a.n), "--threads", str(t), "--iters", str(a.iters)]
        for name, cmd in [
            ("zt avx512", [zt] + common + ["--isa", "avx512"]),
            ("deepspeed", [sys.executable, os.path.join(here, "ds_cpu_adam.py")] + common),
            ("zt scalar", [zt] + common + ["--isa", "scalar"]),
            ("torch fused", [sys.executable, os.path.join(here, "ds_cpu_adam.py"), "--impl", "torch-fused"] + common),
            ("zt avx512 +bf16 copy", [zt] + common + ["--isa", "avx512", "--copy", "bf16"]),
        ]:
            if name in a.impls:
                res.setdefault((t, name), []).append(run(cmd, t))

print("\nwall: median over rounds of each run's median step, and the fastest step of all rounds;")
print("cpu: process CPU seconds per step / threads (leaves out time the threads were preempted).")
print("bound = bytes the step moves (28 B/param, 30 with the bf16 copy) / STREAM triad rate (same process, same clock).\n")
print("| threads | implementation | wall median (ms) | rounds (ms) | wall best (ms) | cpu (ms) | DeepSpeed / it, wall | DeepSpeed / it, cpu | triad wall / cpu (GB/s) | bound / step, wall | bound / step, cpu |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for t in a.threads:
    ds = statistics.median(r["median_s"] for r in res[(t, "deepspeed")])
    ds_cpu = statistics.median(r["cpu_median_s"] for r in res[(t, "deepspeed")]) / t
    for name in ["zt avx512", "zt scalar", "zt avx512 +bf16 copy", "deepspeed", "torch fused"]:
        rs = res.get((t, name))
        if not rs:
            continue
        med = statistics.median(r["median_s"] for r in rs)
        best = min(r["min_s"] for r in rs)
        cpu = statistics.median(r["cpu_median_s"] for r in rs) / t
        per = ", ".join("%.0f" % (r["median_s"] * 1e3) for r in rs)
        if "triad_GBps" in rs[0]:
            triad = statistics.median(r["triad_GBps"] for r in rs)
            triad_cpu = statistics.median(r["triad_cpu_GBps"] for r in rs)
            bytes_ = rs[0]["bytes_per_step"]
            extra = "%.2f / %.2f | %.2f | %.2f" % (triad, triad_cpu, bytes_ / (triad * 1e9) / med,
                                                 bytes_ / (triad_cpu * 1e9) / cpu)
        else:
            extra = "| | |"
        print("| %d | %s | %.1f | %s | %.1f | %.1f | %.2f | %.2f | %s |" % (t, name, med * 1e3, per, best * 1e3, cpu * 1e3, ds / med, ds_cpu / cpu, extra))
