"""The QLoRA paper's NF4 + double quantisation in NumPy (tests and benches import it after
their peer check: `require("numpy")` first): NF4 over 64-element blocks, the absmax values
centred on their mean and quantised to 8 bits over 256-value blocks with the dynamic map.
kernels.nf4_peer holds it bitwise equal to zt's nf4_tool; bitsandbytes' dequantize_4bit
of its state is zt's dequantised tensor (kernels.nf4_peer_bnb).
"""
import numpy as np

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


def bnb_state(F, torch, ref, shape):
    """A bitsandbytes QuantState holding `ref` (reference()'s result) for a tensor of
    `shape`: F.dequantize_4bit(torch.from_numpy(ref["codes"]).reshape(-1, 1), state)."""
    state2 = F.QuantState(absmax=torch.from_numpy(ref["absmax_scale"].copy()),
                          code=torch.from_numpy(dynamic_map().copy()), blocksize=256, dtype=torch.float32)
    return F.QuantState(absmax=torch.from_numpy(ref["absmax_codes"].copy()), shape=shape,
                        code=torch.from_numpy(NF4.copy()), blocksize=64, quant_type="nf4",
                        dtype=torch.float32, offset=torch.tensor(ref["offset"][0]), state2=state2)

