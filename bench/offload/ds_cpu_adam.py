#!/usr/bin/env python3
"""Peer of bench_cpu_adam: DeepSpeed's DeepSpeedCPUAdam (AdamW mode) on one flat fp32
parameter of n elements, the same hyper-parameters and threads; or torch.optim.AdamW
(--impl torch-fused / torch-foreach) for reference. One JSON line."""
import argparse, json, os, statistics, time

ap = argparse.ArgumentParser()
ap.add_argument("--n", type=int, default=32 << 20)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--iters", type=int, default=20)
ap.add_argument("--impl", default="deepspeed", choices=["deepspeed", "torch-fused", "torch-foreach"])
a = ap.parse_args()
import torch
torch.set_num_threads(a.threads)
i = torch.arange(a.n, dtype=torch.float32)
p = torch.nn.Parameter(0.01 * (i % 97))
p.grad = 1e-3 * (i % 13) - 6e-3
kw = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
if a.impl == "deepspeed":
    from deepspeed.ops.adam import DeepSpeedCPUAdam
    opt = DeepSpeedCPUAdam([p], adamw_mode=True, **kw)
elif a.impl == "torch-fused":
    opt = torch.optim.AdamW([p], fused=True, **kw)
else:
    opt = torch.optim.AdamW([p], foreach=True, **kw)
times, cpu = [], []
for it in range(a.iters + 2):
    t0, c0 = time.perf_counter(), time.process_time()
    opt.step()
    if it >= 2:
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
print(json.dumps({"impl": a.impl, "n": a.n, "threads": a.threads, "median_s": statistics.median(times),
                  "min_s": min(times), "cpu_median_s": statistics.median(cpu), "omp": os.environ.get("OMP_NUM_THREADS")}))
