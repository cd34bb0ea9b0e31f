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
            res.setdefault((t, name), []).append(run(cmd, t))

print("\n| threads | implementation | median step (ms) | rounds' medians (ms) | DeepSpeed / it | STREAM triad (GB/s) | bound (ms) | bound / step |")
print("|---|---|---|---|---|---|---|---|")
for t in a.threads:
    ds = statistics.median(r["median_s"] for r in res[(t, "deepspeed")])
    for name in ["zt avx512", "zt scalar", "zt avx512 +bf16 copy", "deepspeed", "torch fused"]:
        rs = res[(t, name)]
        med = statistics.median(r["median_s"] for r in rs)
        per = ", ".join("%.1f" % (r["median_s"] * 1e3) for r in rs)
        if "triad_GBps" in rs[0]:
            triad = statistics.median(r["triad_GBps"] for r in rs)
            bound = statistics.median(r["bound_s"] for r in rs)
            extra = "%.2f | %.1f | %.2f" % (triad, bound * 1e3, bound / med)
        else:
            extra = "| |"
        print("| %d | %s | %.1f | %s | %.2f | %s |" % (t, name, med * 1e3, per, ds / med, extra))
