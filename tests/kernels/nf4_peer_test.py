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

f32 = np.float32
NF4 = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
                -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
                0.07958029955625534, 0.16093020141124725, 0.24611230194568634,
                0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                0.7229568362236023, 1.0], dtype=f32)


def dynamic_map():
    levels = []
    for e in range(7):
        steps = 2 ** e
        for j in range(steps):
            v = f32(10.0 ** (e - 6) * (0.1 + 0.9 * (2 * j + 1) / (2 * steps)))
            levels += [v, -v]
    levels += [f32(0), f32(1)]
    return np.sort(np.array(levels, dtype=f32))


def quantize_level(v, block, levels):
    """Blockwise absmax quantization to the nearest level (ties to the lower one)."""
    mids = ((levels[:-1] + levels[1:]) / f32(2)).astype(f32)
    n = v.size
    blocks = -(-n // block)
    absmax = np.zeros(blocks, dtype=f32)
    codes = np.zeros(n, dtype=np.uint8)
    for b in range(blocks):
        part = v[b * block:(b + 1) * block]
        c = np.abs(part).max()
        absmax[b] = c
        inv = f32(1) / max(c, f32(1e-38))
        y = np.clip((part * inv).astype(f32), f32(-1), f32(1))
        codes[b * block:(b + 1) * block] = np.searchsorted(mids, y, side="left")
    return codes, absmax


def reference(x):
    codes, absmax = quantize_level(x, 64, NF4)
    if codes.size % 2:
        codes = np.append(codes, np.uint8(0))
    packed = ((codes[0::2] << 4) | codes[1::2]).astype(np.uint8)
    offset = f32(absmax.astype(np.float64).mean())
    qabs, scale = quantize_level((absmax - offset).astype(f32), 256, dynamic_map())
    decoded = (dynamic_map()[qabs] * np.repeat(scale, 256)[:qabs.size]).astype(f32) + offset
    nibbles = np.empty(packed.size * 2, dtype=np.uint8)
    nibbles[0::2], nibbles[1::2] = packed >> 4, packed & 0xF
    values = (NF4[nibbles[:x.size]] * np.repeat(decoded, 64)[:x.size]).astype(f32)
    return dict(codes=packed, absmax=absmax, absmax_codes=qabs, absmax_scale=scale,
                offset=np.array([offset], dtype=f32), dequant=values)


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
