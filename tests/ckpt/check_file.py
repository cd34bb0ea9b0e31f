#!/usr/bin/env python3
"""A zt checkpoint read by tools that are not zt (tests/ckpt/CMakeLists.txt runs it).

  check_file.py FILE [DUMPDIR]

- `h5dump -H FILE` lists every tensor of the model (named in the model_config attribute)
  under /params, /optim/exp_avg and /optim/exp_avg_sq with its global shape, fp32;
- h5py reads /params/model.layers.0.self_attn.q_proj.weight and
  /params/model.embed_tokens.weight bitwise equal to Engine::gather_full_params of the
  engine that saved them (raw float32 dumps in DUMPDIR, written by test_ckpt_reshard.np4;
  skipped without DUMPDIR);
- every dataset's `checksum` attribute equals the checksum of its contents its
  format_version names (zt-xxh3 with Python's xxhash, zt-sum64 with numpy), computed
  here from the definitions in docs/checkpoint-format.md (tests/ckpt/zt_checksums.py).
Exit 77 (skipped) when h5py, numpy, xxhash or h5dump is missing.
"""
import json
import os
import re
import shutil
import subprocess
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf")]
from hf_common import require  # noqa: E402  (a missing module: skip, or fail in CI)
h5py, np, _ = require("h5py", "numpy", "xxhash")
from zt_checksums import checksum  # noqa: E402
if not shutil.which("h5dump"):
    print("SKIPPED: h5dump not found (apt-get install hdf5-tools)")
    sys.exit(77)

def tensors(c):
    """HF Llama names and shapes of the model (zt's ParamLayout order)."""
    V, C, I, D = c["vocab"], c["hidden"], c["intermediate"], c["hidden"] // c["heads"]
    H, G = c["heads"], c["kv_heads"]
    out = [("model.embed_tokens.weight", (V, C))]
    for l in range(c["layers"]):
        p = "model.layers.%d." % l
        out += [(p + "input_layernorm.weight", (C,)), (p + "self_attn.q_proj.weight", (H * D, C)),
                (p + "self_attn.k_proj.weight", (G * D, C)), (p + "self_attn.v_proj.weight", (G * D, C)),
                (p + "self_attn.o_proj.weight", (C, H * D)), (p + "post_attention_layernorm.weight", (C,)),
                (p + "mlp.gate_proj.weight", (I, C)), (p + "mlp.up_proj.weight", (I, C)),
                (p + "mlp.down_proj.weight", (C, I))]
    out.append(("model.norm.weight", (C,)))
    if not c["tied_embeddings"]:
        out.append(("lm_head.weight", (V, C)))
    return out


def main():
    path = sys.argv[1]
    dumps = sys.argv[2] if len(sys.argv) > 2 else None
    f = h5py.File(path, "r")
    attr = lambda k: f.attrs[k].decode() if isinstance(f.attrs[k], bytes) else str(f.attrs[k])
    assert attr("format") == "zt-checkpoint", attr("format")
    cfg = json.loads(attr("model_config"))
    expect = tensors(cfg)

    # h5dump -H: every dataset with its global shape, in each group.
    header = subprocess.run(["h5dump", "-H", path], capture_output=True, text=True, check=True).stdout
    # Groups and datasets nest by indentation in h5dump's output.
    found = {}
    stack = []
    last = None
    for line in header.splitlines():
        indent = len(line) - len(line.lstrip())
        s = line.strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        m = re.match(r'GROUP "([^"]+)" \{', s)
        if m:
            stack.append((indent, m.group(1)))
            continue
        m = re.match(r'DATASET "([^"]+)" \{', s)
        if m:
            last = "/".join(g for _, g in stack if g != "/") + "/" + m.group(1)
            continue
        m = re.match(r"DATASPACE\s+SIMPLE \{ \( ([\d, ]+) \)", s)
        if m and last:
            found[last] = tuple(int(x) for x in m.group(1).split(","))
            last = None
    missing = []
    for group in ("params", "optim/exp_avg", "optim/exp_avg_sq"):
        for name, shape in expect:
            if found.get(group + "/" + name) != shape:
                missing.append((group + "/" + name, shape, found.get(group + "/" + name)))
    if missing:
        print("FAIL: h5dump -H does not list these with their global shape:", missing[:5])
        return 1
    print("h5dump -H: %d datasets, every tensor of %s in /params, /optim/exp_avg, "
          "/optim/exp_avg_sq with its global shape, e.g. %s %s"
          % (len(found), cfg["name"], expect[1][0], expect[1][1]))

    # h5py against the engine's gathered parameters.
    for name, dump in (("model.layers.0.self_attn.q_proj.weight", "q_proj0.f32"),
                       ("model.embed_tokens.weight", "embed.f32")) if dumps else ():
        got = f["/params/" + name][...]
        ref = np.fromfile(os.path.join(dumps, dump), dtype=np.float32)
        if got.dtype != np.float32 or got.tobytes() != ref.tobytes():
            print("FAIL: h5py's %s differs from Engine::gather_full_params" % name)
            return 1
        print("h5py: /params/%s %s float32 == Engine::gather_full_params (bitwise, %d elements)"
              % (name, got.shape, got.size))

    # Checksums from the definition of the file's version.
    version = int(f.attrs["format_version"])
    algo = "zt-xxh3 (Python's xxhash)" if version >= 2 else "zt-sum64 (numpy)"
    bad = []
    count = 0
    def visit(name, obj):
        nonlocal count
        if isinstance(obj, h5py.Dataset):
            count += 1
            if int(obj.attrs["checksum"]) != checksum(obj[...], version):
                bad.append(name)
    f.visititems(visit)
    if bad:
        print("FAIL: checksum attribute differs from %s of the contents:" % algo, bad[:5])
        return 1
    print("checksums: format_version %d, all %d datasets match %s" % (version, count, algo))
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
