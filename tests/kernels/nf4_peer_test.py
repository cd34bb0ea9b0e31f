#!/usr/bin/env python3
"""zt's NF4 + double quantization (nf4_tool) against two independent references:

1. a NumPy reference written from the QLoRA paper (NF4 over 64-element blocks, the absmax
   values centred on their mean and quantized to 8 bits over 256-value blocks with the
   dynamic map), bitwise: codes, statistics, offset, dequantized values;
2. bitsandbytes' own functions on the CPU: the NF4 codes and absmax of quantize_4bit
   bitwise, its dynamic map within one ulp (it evaluates the formula in float32), and its
   dequantize_4bit of zt's quantized state bitwise equal to zt's dequantized values (the
   same format means the same tensor).

Usage: nf4_peer_test.py NF4_TOOL WORKDIR paper|bitsandbytes: one half per CTest test
(kernels.nf4_peer, kernels.nf4_peer_bnb), so that a missing bitsandbytes shows as a skip,
not inside a pass. Exits 77 (SKIPPED: the module) without numpy (paper) or torch and
bitsandbytes (bitsandbytes); where CI requires its peers (ZT_REQUIRE_PEERS=1) that fails.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ckpt", "hf"))
from hf_common import require  # noqa: E402  (a missing module: skip, or fail in CI)

half = sys.argv[3] if len(sys.argv) == 4 else None
if half not in ("paper", "bitsandbytes"):
    print(__doc__)
    sys.exit(2)
(np,) = require("numpy")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nf4_reference import NF4, dynamic_map, f32, reference  # noqa: E402,F401  (after numpy's check)

def run_zt(tool, workdir, name, x):
    src = os.path.join(workdir, name + ".f32")
    x.astype("<f4").tofile(src)
    out = os.path.join(workdir, name)
    rc = os.spawnv(os.P_WAIT, tool, [tool, src, out])
    if rc != 0:
        sys.exit(f"FAIL: nf4_tool exited {rc} on {name}")
    types = dict(codes=np.uint8, absmax_codes=np.uint8)
    return {k: np.fromfile(f"{out}.{k}", dtype=types.get(k, "<f4"))
            for k in ("codes", "absmax_codes", "absmax_scale", "offset", "absmax", "dequant", "map")}


def same(what, a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.tobytes() != b.tobytes():
        bad = np.flatnonzero(a.view(np.uint8) != b.view(np.uint8)) if a.shape == b.shape else []
        sys.exit(f"FAIL: {what}: zt and the reference differ (shapes {a.shape} {b.shape}, "
                 f"{len(bad)} bytes differ, first at {bad[:5]})")
    print(f"  {what}: bitwise equal ({a.size} values)")


def main():
    tool, workdir = sys.argv[1], sys.argv[2]
    if half == "bitsandbytes":
        require("torch", "bitsandbytes")
    os.makedirs(workdir, exist_ok=True)
    rng = np.random.default_rng(20261124)
    cases = {
        "normal_64x700": rng.normal(0, 0.02, 64 * 700).astype(f32),
        "heavy_tails_64x300": (rng.standard_t(2, 64 * 300) * 0.05).astype(f32),
        "tail_and_zero_blocks": np.concatenate([np.zeros(128, f32),
                                                rng.normal(0, 1, 64 * 300 + 37).astype(f32)]),
        "odd_length": rng.normal(0, 3, 2 * 64 + 5).astype(f32),
    }
    if half == "paper":
        zt_map = None
        for name, x in cases.items():
            print(f"{name}: {x.size} elements")
            got, ref = run_zt(tool, workdir, name, x), reference(x)
            zt_map = got["map"]
            for key in ("codes", "absmax", "absmax_codes", "absmax_scale", "offset", "dequant"):
                same(f"{key} vs the paper reference", got[key], ref[key])
        same("dynamic map vs the paper reference", zt_map, dynamic_map())
        print("PASS")
        return

    torch, _ = require("torch", "bitsandbytes")
    import bitsandbytes.functional as F
    zt_map = run_zt(tool, workdir, "odd_length", cases["odd_length"])["map"]
    bnb_map = F.create_dynamic_map().numpy()
    ulps = np.abs(bnb_map.view(np.int32).astype(np.int64) - zt_map.view(np.int32).astype(np.int64))
    if ulps.max() > 1:
        sys.exit(f"FAIL: dynamic map: {int(ulps.max())} ulps from bitsandbytes'")
    print(f"  dynamic map vs bitsandbytes: {int((ulps > 0).sum())} of 256 levels 1 ulp apart, the rest equal")
    same("NF4 code book vs bitsandbytes", NF4, F.get_4bit_type("nf4", device="cpu").numpy())
    for name, x in cases.items():
        got = run_zt(tool, workdir, name, x)
        t = torch.from_numpy(x.copy())
        if x.size % 64 == 0:  # bitsandbytes divides (not multiplies) in a partial last block
            packed, state = F.quantize_4bit(t, blocksize=64, quant_type="nf4", compress_statistics=False)
            same(f"{name}: NF4 codes vs bitsandbytes", got["codes"], packed.numpy().reshape(-1))
            same(f"{name}: absmax vs bitsandbytes", got["absmax"], state.absmax.numpy())
        state2 = F.QuantState(absmax=torch.from_numpy(got["absmax_scale"].copy()),
                              code=torch.from_numpy(zt_map.copy()), blocksize=256, dtype=torch.float32)
        state = F.QuantState(absmax=torch.from_numpy(got["absmax_codes"].copy()), shape=t.shape,
                             code=torch.from_numpy(NF4.copy()), blocksize=64, quant_type="nf4",
                             dtype=torch.float32, offset=torch.tensor(got["offset"][0]), state2=state2)
        deq = F.dequantize_4bit(torch.from_numpy(got["codes"].copy()).reshape(-1, 1), quant_state=state)
        same(f"{name}: bitsandbytes' dequantize_4bit of zt's state vs zt's", got["dequant"], deq.numpy().reshape(-1))
    print("PASS")


if __name__ == "__main__":
    main()
