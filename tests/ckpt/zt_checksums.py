"""zt's checkpoint checksums computed from their definitions (docs/checkpoint-format.md,
"Checksums") with numpy and Python's xxhash: the independent check of the `checksum`
attribute zt writes on every dataset (tests/ckpt/check_file.py, tests/ckpt/hf).

  checksum(x, format_version)  -> zt-xxh3 (version 2) or zt-sum64 (version 1) of array x
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf"))
from hf_common import require  # noqa: E402  (a missing peer: skip, or fail in CI)

np, xxhash = require("numpy", "xxhash")

U = np.uint64
XXH3_CHUNK = 1 << 18  # zt-xxh3's chunk, bytes


def mix64(z):
    """splitmix64's finaliser over a np.uint64 array (wrapping arithmetic)."""
    z = z + U(0x9E3779B97F4A7C15)
    z = (z ^ (z >> U(30))) * U(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> U(27))) * U(0x94D049BB133111EB)
    return z ^ (z >> U(31))


def sum64(x):
    """zt-sum64 (format_version 1): sum over i of mix64(mix64(i) ^ bits(x[i])) mod 2^64."""
    x = np.ascontiguousarray(x).reshape(-1)
    bits = x.view(np.uint32).astype(U) if x.dtype == np.float32 else x.astype(U)
    i = np.arange(bits.size, dtype=U)
    with np.errstate(over="ignore"):
        return int(mix64(mix64(i) ^ bits).sum(dtype=U))


def xxh3_sum(x):
    """zt-xxh3 (format_version 2): the little-endian bytes cut into 256 KiB chunks, chunk j
    hashed with XXH3-64 seeded with j, the hashes added mod 2^64."""
    x = np.ascontiguousarray(x).reshape(-1)
    b = memoryview(x.astype(x.dtype.newbyteorder("<"), copy=False).tobytes())
    total = 0
    for j, at in enumerate(range(0, len(b), XXH3_CHUNK)):
        total += xxhash.xxh3_64_intdigest(b[at:at + XXH3_CHUNK], seed=j)
    return total % (1 << 64)


def checksum(x, format_version):
    """The checksum a file of `format_version` stores for contents x."""
    return xxh3_sum(x) if int(format_version) >= 2 else sum64(x)


def missing_module():
    """None, or the name of a module the checks need that is not installed."""
    for name in ("numpy", "xxhash"):
        try:
            __import__(name)
        except ImportError:
            return name
    return None
