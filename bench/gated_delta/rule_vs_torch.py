#!/usr/bin/env python3
"""zt's chunked gated delta rule, forward + backward, against transformers' pure-torch
torch_chunk_gated_delta_rule forward + autograd backward, on the CPU at the same shapes
and threads, float32 on both sides.

  python3 bench/gated_delta/rule_vs_torch.py TOOL [RUNS] [B T Hk Hv Dk Dv]

TOOL: build-ci/tests/kernels/gated_delta_tool (its `time` mode: the chunked forward then
its backward, in float). Default shape: B 1, T 2048, Hk 4, Hv 8, Dk 64, Dv 64, chunk 64,
an initial state, use_qk_l2norm_in_kernel=True, dout and dstate1 given. One thread each:
OMP_NUM_THREADS=1 for zt, torch.set_num_threads(1). Two decays: g = -A softplus(a + 1),
a ~ N(0, 1), with A per head uniform in (0.01, 16) (Qwen3_5GatedDeltaNet's A_log init: g to
about -20 per token, so the decays within a chunk reach float's subnormal range) and in
(0.01, 0.1) (mild: none do). The two sides run alternately, RUNS times each; printed: every
run's seconds, the best and the median of each, and their ratio.
"""
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import transformers
from transformers.models.qwen3_5 import modeling_qwen3_5 as qm

if len(sys.argv) not in (2, 3, 9):
    print(__doc__)
    sys.exit(2)
tool = sys.argv[1]
runs = int(sys.argv[2]) if len(sys.argv) >= 3 else 5
B, T, Hk, Hv, Dk, Dv = (int(x) for x in sys.argv[3:9]) if len(sys.argv) == 9 else (1, 2048, 4, 8, 64, 64)
torch.set_num_threads(1)
torch.manual_seed(0)
work = os.path.join(os.environ.get("TMPDIR", "/tmp"), "zt-gated-delta-bench")
os.makedirs(work, exist_ok=True)
src, dst = os.path.join(work, "time.in"), os.path.join(work, "time.out")


def inputs(a_max):
    """The rule's inputs (float32) with A uniform in (0.01, a_max); written for the tool."""
    f = torch.float32
    q, k = torch.randn(B, T, Hk, Dk, dtype=f), torch.randn(B, T, Hk, Dk, dtype=f)
    v = torch.randn(B, T, Hv, Dv, dtype=f)
    A = torch.empty(Hv).uniform_(0.01, a_max)
    g = -A * torch.nn.functional.softplus(torch.randn(B, T, Hv) + 1)
    beta = torch.randn(B, T, Hv).sigmoid()
    s0 = 0.5 * torch.randn(B, Hv, Dk, Dv)
    dout, ds1 = torch.randn(B, T, Hv, Dv), torch.randn(B, Hv, Dk, Dv)
    with open(src, "wb") as fh:
        fh.write(np.asarray([B, T, Hk, Hv, Dk, Dv, 64, 1], np.float64).tobytes())
        for x in (q, k, v, g, beta, s0, dout, ds1):
            fh.write(x.double().numpy().tobytes())
        fh.write(np.asarray([1], np.float64).tobytes())
    return q, k, v, g, beta, s0, dout, ds1


def zt_once():
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run([tool, "time", src, dst], check=True, env=env)
    return float(np.fromfile(dst, np.float64)[0])


def torch_once(q, k, v, g, beta, s0, dout, ds1):
    leaves = [x.clone().requires_grad_(True) for x in (q, k, v, g, beta, s0)]
    t0 = time.perf_counter()
    o, s1 = qm.torch_chunk_gated_delta_rule(*leaves[:5], chunk_size=64, initial_state=leaves[5],
                                            output_final_state=True, use_qk_l2norm_in_kernel=True)
    torch.autograd.grad((o * dout).sum() + (s1 * ds1).sum(), leaves)
    return time.perf_counter() - t0


print("shape: B %d, T %d, Hk %d, Hv %d, Dk %d, Dv %d, chunk 64, float32, 1 thread; torch %s, "
      "transformers %s" % (B, T, Hk, Hv, Dk, Dv, torch.__version__, transformers.__version__))
for name, a_max in (("A in (0.01, 16), the model's init", 16.0), ("A in (0.01, 0.1), mild", 0.1)):
    x = inputs(a_max)
    print("decay: %s; g from %.3g to %.3g" % (name, float(x[3].min()), float(x[3].max())))
    print("load average before: %.2f %.2f %.2f" % os.getloadavg())
    torch_once(*x)  # warm-up (allocator, first-call costs)
    zs, ts = [], []
    for _ in range(runs):
        zs.append(zt_once())
        ts.append(torch_once(*x))
    print("load average after: %.2f %.2f %.2f" % os.getloadavg())
    print("zt seconds:           " + ", ".join("%.4f" % s for s in zs))
    print("transformers seconds: " + ", ".join("%.4f" % s for s in ts))
    bz, bt, mz, mt = min(zs), min(ts), statistics.median(zs), statistics.median(ts)
    print("best:   zt %.4f s, transformers %.4f s, transformers / zt %.2f" % (bz, bt, bt / bz))
    print("median: zt %.4f s, transformers %.4f s, transformers / zt %.2f" % (mz, mt, mt / mz))
