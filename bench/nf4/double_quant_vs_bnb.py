#!/usr/bin/env python3
"""Where zt's NF4 + double quantisation and bitsandbytes' differ.

  python3 bench/nf4/double_quant_vs_bnb.py [TRIALS]

zt's quantiser is the paper reference of tests/kernels/nf4_reference.py (kernels.nf4_peer
holds it bitwise equal to zt's nf4_tool). For TRIALS random N(0, 0.2) tensors of tiny's
v_proj shape (64 x 128: 128 NF4 blocks, one 256-block of absmax statistics) it compares
bitsandbytes' quantize_4bit(compress_statistics=True) with it level by level: the NF4
codes and first-level absmax, the 8-bit codes of the absmax statistics, their scale and
offset, and the dequantised values; for each differing statistics code, whether
bitsandbytes' code is the nearest level to the value it quantises with its own offset and
scale.
"""
import os
import sys

import numpy as np
import torch
import bitsandbytes.functional as F

trials = int(sys.argv[1]) if len(sys.argv) == 2 else 200
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "kernels"))
import nf4_reference as T  # noqa: E402

f32 = np.float32
zmap, bmap = T.dynamic_map(), np.sort(F.create_dynamic_map().numpy())
rng = np.random.default_rng(1)
n = dict(codes=0, absmax=0, stat_codes=0, scale=0, offset=0)
rel_same, rel_diff, nearer, farther, worst = [], [], 0, 0, None
for trial in range(trials):
    x = rng.normal(0, 0.2, 64 * 128).astype(f32)
    ref = T.reference(x)
    q, st = F.quantize_4bit(torch.from_numpy(x), blocksize=64, compress_statistics=True, quant_type="nf4")
    q1, st1 = F.quantize_4bit(torch.from_numpy(x), blocksize=64, compress_statistics=False, quant_type="nf4")
    deq = F.dequantize_4bit(q, st).numpy().reshape(-1).astype(np.float64)
    rel = np.abs(deq - ref["dequant"]) / np.maximum(np.abs(ref["dequant"]), 1e-30)
    rel[ref["dequant"] == 0] = 0
    n["codes"] += np.array_equal(q.numpy().reshape(-1), ref["codes"])
    n["absmax"] += np.array_equal(st1.absmax.numpy(), ref["absmax"])
    codes_same = np.array_equal(st.absmax.numpy(), ref["absmax_codes"])
    n["stat_codes"] += codes_same
    n["scale"] += np.array_equal(st.state2.absmax.numpy(), ref["absmax_scale"])
    n["offset"] += f32(st.offset) == ref["offset"][0]
    (rel_same if codes_same else rel_diff).append(rel.max())
    # Each side's code judged against the value it quantises with its own offset and scale:
    # zt's (absmax - zt's offset) / zt's scale, bitsandbytes' (absmax - its offset) / its
    # scale (the first-level absmax is the same on both sides). A code is "nearest" when no
    # level of its own map is nearer to its own value.
    yz = (ref["absmax"] - ref["offset"][0]).astype(np.float64) / np.repeat(ref["absmax_scale"].astype(np.float64), 256)[:ref["absmax"].size]
    bscale = np.repeat(st.state2.absmax.numpy().astype(np.float64), 256)[:ref["absmax"].size]
    yb = (st1.absmax.numpy().astype(np.float64) - float(st.offset)) / bscale
    for i in np.flatnonzero(st.absmax.numpy() != ref["absmax_codes"]):
        cb, cz = st.absmax.numpy()[i], ref["absmax_codes"][i]
        db, dz = abs(bmap[cb] - yb[i]), abs(zmap[cz] - yz[i])
        nearer += db <= np.abs(bmap - yb[i]).min()  # bitsandbytes' code nearest to its own value
        farther += db > np.abs(bmap - yb[i]).min()
        if worst is None or rel.max() > worst[0]:
            worst = (rel.max(), trial, i, yb[i], bmap[cb], db, yz[i], zmap[cz], dz)
print(f"bitsandbytes {__import__('bitsandbytes').__version__}, torch {torch.__version__}; {trials} tensors of 64 x 128")
print(f"equal to zt's: NF4 codes {n['codes']}, first-level absmax (no double quantisation) {n['absmax']}, "
      f"statistics codes {n['stat_codes']}, their scale {n['scale']}, offset {n['offset']} (of {trials})")
print(f"max relative difference of the dequantised values: {max(rel_same or [0]):.2e} where every statistics "
      f"code is equal; {min(rel_diff or [0]):.2e} .. {max(rel_diff or [0]):.2e} where one differs ({len(rel_diff)} tensors)")
print(f"a differing statistics code: bitsandbytes' code is the nearest level to its own (absmax - offset) / scale "
      f"in {nearer}, not the nearest in {farther}")
if worst:
    print("worst: tensor %d block %d: bitsandbytes' value %.6f, its level %.6f (%.2e away); zt's value %.6f, "
          "its level %.6f (%.2e away); dequantised values %.2e apart (relative)" % (worst[1:] + (worst[0],)))
