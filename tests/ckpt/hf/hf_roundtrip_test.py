#!/usr/bin/env python3
"""zt convert hf-to-h5 / h5-to-hf against the Python reference packages.

Usage: hf_roundtrip_test.py ZT_BINARY WORKDIR GROUP

For a small Llama (tiny-like shapes, GQA) in BF16, F32 and F16, tied and untied, from one
file and from an index with shards, made with numpy / torch + safetensors:
  1. hf-to-h5: h5py reads every /params tensor equal to the source tensor converted to
     fp32, with the checksum of the file's format_version computed here (zt_checksums.py); root attributes as in
     docs/checkpoint-format.md (source_dtype, contents "weights", model_config);
  2. h5-to-hf (default dtype = source): safetensors' own loader reads every tensor with
     the source's dtype, shape and identical bytes; no extra tensor;
  3. h5-to-hf --max-shard-size: an index whose weight_map covers every tensor, shard names
     model-0000k-of-0000N.safetensors, total_size = the tensors' bytes;
  4. h5-to-hf --dtype f32 of a BF16 model: values equal to the BF16 values;
  5. config.json: the source's shape fields; transformers (when importable) loads the
     config and the model with no missing or unexpected keys.
GROUP picks the cases, one CTest test each (tests/ckpt/CMakeLists.txt), so that a skip
shows as a skip and never hides inside a pass:
  f32-f16       the F32 and F16 cases, checks 1-4 and config.json's fields (numpy);
  bf16          the BF16 cases, checks 1-4 (needs torch: numpy has no bfloat16);
  transformers  every case, checks 1-5 (needs torch and transformers).
Exit 77 (CTest: skipped), with the reason printed, when a module the group needs is
missing (numpy, h5py and safetensors for every group).
"""
import json
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_common import Checker, checksum, hf_config, llama_shapes, peer_missing, require, run_zt, write_config  # noqa: E402

np, h5py, safetensors, _ = require("numpy", "h5py", "safetensors", "xxhash")
import safetensors.numpy  # noqa: E402
from safetensors import safe_open  # noqa: E402
try:  # BF16 (numpy has no bfloat16) and the transformers checks need torch
    import torch
    import safetensors.torch
except ImportError:
    torch = None

TORCH_NAME = {"bf16": "bfloat16", "f32": "float32", "f16": "float16"}
ST_NAME = {"bf16": "BF16", "f32": "F32", "f16": "F16"}


def is_torch(t):
    return torch is not None and isinstance(t, torch.Tensor)


def raw(t):
    """The tensor's bytes as safetensors stores them (row-major, little-endian)."""
    return t.contiguous().view(torch.uint8).numpy().tobytes() if is_torch(t) else t.tobytes()


def as_f32(t):
    return t.float().numpy() if is_torch(t) else t.astype(np.float32)


def dtype_of(t):
    if is_torch(t):
        return {torch.bfloat16: "bf16", torch.float32: "f32", torch.float16: "f16"}[t.dtype]
    return {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}[t.dtype]


def save_file(tensors, path):
    if any(is_torch(t) for t in tensors.values()):
        safetensors.torch.save_file(tensors, path, metadata={"format": "pt"})
    else:
        safetensors.numpy.save_file(tensors, path, metadata={"format": "np"})


def load_file(path):
    """A file's tensors with safetensors' own reader (torch when available: it reads BF16)."""
    out = {}
    with safe_open(path, framework="pt" if torch is not None else "numpy") as f:
        for k in f.keys():
            out[k] = f.get_tensor(k)
    return out


def make_model(cfg, dtype, seed):
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in llama_shapes(cfg).items():
        t = rng.standard_normal(shape).astype(np.float32) * np.float32(0.02 if len(shape) == 2 else 1.0)
        if len(shape) == 1:
            t = np.float32(1.0) + np.float32(0.1) * t  # norm weights near 1
        if dtype == "bf16":
            out[name] = torch.from_numpy(np.ascontiguousarray(t)).to(torch.bfloat16).contiguous()
        else:
            out[name] = np.ascontiguousarray(t.astype({"f32": np.float32, "f16": np.float16}[dtype]))
    return out


def save_sharded(tensors, folder, shards):
    """Writes `tensors` as `shards` files + model.safetensors.index.json, like save_pretrained."""
    names = list(tensors)
    per = (len(names) + shards - 1) // shards
    weight_map, total = {}, 0
    for k in range(shards):
        file = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[k * per:(k + 1) * per]}
        save_file(part, os.path.join(folder, file))
        for n, t in part.items():
            weight_map[n] = file
            total += len(raw(t))
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def load_folder(folder):
    """Every tensor of an HF folder (single file or index), with safetensors' loader."""
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    out = {}
    for file in files:
        out.update(load_file(os.path.join(folder, file)))
    return out


def same_bytes(a, b):
    return (dtype_of(a) == dtype_of(b) and tuple(a.shape) == tuple(b.shape) and raw(a) == raw(b))


def case(c, zt, work, name, dtype, tied, shards, with_transformers):
    print(f"--- {name}: {dtype}, {'tied' if tied else 'untied'}, "
          f"{'%d shards' % shards if shards else 'one file'}")
    src = os.path.join(work, name, "src")
    shutil.rmtree(os.path.join(work, name), ignore_errors=True)
    cfg = hf_config(tied=tied, torch_dtype=TORCH_NAME[dtype])
    write_config(src, cfg)
    tensors = make_model(cfg, dtype, seed=len(name))
    if shards:
        save_sharded(tensors, src, shards)
    else:
        save_file(tensors, os.path.join(src, "model.safetensors"))

    ck = os.path.join(work, name, "ck.h5")
    rc, out = run_zt(zt, "convert", "hf-to-h5", src, ck)
    c.check(rc == 0, f"hf-to-h5 exits 0 (got {rc}) {out.strip()}")
    if rc != 0:
        return

    # 1. h5py reads what the source holds.
    with h5py.File(ck, "r") as f:
        c.check(f.attrs["format"] in ("zt-checkpoint", b"zt-checkpoint"), "format attribute")
        sd = f.attrs["source_dtype"]
        sd = sd.decode() if isinstance(sd, bytes) else sd
        c.check(sd == dtype, f"source_dtype is {sd!r}, expected {dtype!r}")
        contents = f.attrs["contents"]
        contents = contents.decode() if isinstance(contents, bytes) else contents
        c.check(contents == "weights", f"contents is {contents!r}")
        mc = json.loads(f.attrs["model_config"])
        c.check((mc["vocab"], mc["hidden"], mc["layers"], mc["heads"], mc["kv_heads"],
                 mc["intermediate"], mc["context"], mc["tied_embeddings"]) ==
                (cfg["vocab_size"], cfg["hidden_size"], cfg["num_hidden_layers"],
                 cfg["num_attention_heads"], cfg["num_key_value_heads"],
                 cfg["intermediate_size"], cfg["max_position_embeddings"], tied),
                f"model_config matches config.json: {f.attrs['model_config']}")
        c.check("optim" not in f, "no /optim in a weights-only file")
        c.check(set(f["params"].keys()) == set(tensors), "/params holds exactly the source's tensors")
        bad_values, bad_sums = [], []
        for n, t in tensors.items():
            d = f["params"][n]
            ref = as_f32(t)
            if d.dtype != np.float32 or d.shape != ref.shape or not np.array_equal(d[...], ref):
                bad_values.append(n)
            if int(d.attrs["checksum"]) != checksum(ref, f.attrs["format_version"]):
                bad_sums.append(n)
        c.check(not bad_values, f"h5py reads every tensor equal to the source in fp32 ({len(tensors)} tensors) {bad_values[:3]}")
        c.check(not bad_sums, f"every checksum equals the format_version {int(f.attrs['format_version'])} "
                f"checksum computed here {bad_sums[:3]}")

    # 2. Back to safetensors in the source dtype: identical bytes.
    out_dir = os.path.join(work, name, "out")
    rc, out = run_zt(zt, "convert", "h5-to-hf", ck, out_dir)
    c.check(rc == 0, f"h5-to-hf exits 0 (got {rc}) {out.strip()}")
    if rc != 0:
        return
    back = load_folder(out_dir)
    c.check(set(back) == set(tensors), f"exported tensor names equal the source's ({len(back)})")
    diff = [n for n in tensors if n not in back or not same_bytes(tensors[n], back[n])]
    c.check(not diff, f"every tensor has identical dtype ({ST_NAME[dtype]}), shape and bytes {diff[:3]}")
    with open(os.path.join(out_dir, "config.json")) as f:
        oc = json.load(f)
    keys = ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
            "num_attention_heads", "num_key_value_heads", "max_position_embeddings",
            "rms_norm_eps", "rope_theta", "tie_word_embeddings", "model_type", "architectures"]
    c.check(all(oc.get(k) == cfg[k] for k in keys) and oc["torch_dtype"] == TORCH_NAME[dtype],
            "config.json carries the source's shape, eps, theta, tying and torch_dtype")

    # 3. Sharded export.
    sh_dir = os.path.join(work, name, "out-sharded")
    rc, out = run_zt(zt, "convert", "h5-to-hf", ck, sh_dir, "--max-shard-size", "16K")
    c.check(rc == 0, f"h5-to-hf --max-shard-size 16K exits 0 (got {rc})")
    with open(os.path.join(sh_dir, "model.safetensors.index.json")) as f:
        idx = json.load(f)
    files = sorted(set(idx["weight_map"].values()))
    n = len(files)
    c.check(n > 1 and all(re.fullmatch(r"model-\d{5}-of-%05d\.safetensors" % n, x) for x in files)
            and files == [f"model-{k:05d}-of-{n:05d}.safetensors" for k in range(1, n + 1)],
            f"{n} shards named model-0000k-of-{n:05d}.safetensors")
    c.check(not os.path.exists(os.path.join(sh_dir, "model.safetensors")), "no model.safetensors beside the index")
    total = sum(len(raw(t)) for t in tensors.values())
    c.check(idx["metadata"]["total_size"] == total, f"total_size {idx['metadata']['total_size']} == {total}")
    sizes = [os.path.getsize(os.path.join(sh_dir, x)) for x in files]
    print(f"      shard file sizes: {sizes}")
    back = load_folder(sh_dir)
    c.check(set(back) == set(tensors) and all(same_bytes(tensors[k], back[k]) for k in tensors),
            "sharded export: every tensor identical")
    # A shard's tensors match where the index puts them.
    ok = True
    for file in files:
        for k in load_file(os.path.join(sh_dir, file)):
            ok &= idx["weight_map"][k] == file
    c.check(ok, "each shard holds exactly the tensors the index places there")

    # 4. Another dtype on request.
    if dtype == "bf16":
        f32_dir = os.path.join(work, name, "out-f32")
        rc, _ = run_zt(zt, "convert", "h5-to-hf", ck, f32_dir, "--dtype", "f32")
        back = load_folder(f32_dir)
        c.check(rc == 0 and all(dtype_of(back[k]) == "f32" and np.array_equal(as_f32(back[k]), as_f32(tensors[k]))
                                for k in tensors), "--dtype f32 of a BF16 model: F32 tensors equal to the BF16 values")
        with open(os.path.join(f32_dir, "config.json")) as f:
            c.check(json.load(f)["torch_dtype"] == "float32", "--dtype f32: torch_dtype float32")

    # 5. transformers loads what zt wrote (group "transformers" only).
    if not with_transformers:
        return
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM
    lc = LlamaConfig.from_pretrained(out_dir)
    c.check((lc.hidden_size, lc.num_key_value_heads, lc.tie_word_embeddings) ==
            (cfg["hidden_size"], cfg["num_key_value_heads"], tied),
            f"transformers {transformers.__version__} LlamaConfig.from_pretrained reads config.json")
    for folder in (out_dir, sh_dir):
        model, info = LlamaForCausalLM.from_pretrained(
            folder, output_loading_info=True,
            torch_dtype={"bf16": torch.bfloat16, "f32": torch.float32, "f16": torch.float16}[dtype])
        missing = [k for k in info["missing_keys"] if not k.endswith("rotary_emb.inv_freq")]
        sd = model.state_dict()
        same = all(same_bytes(sd[k].contiguous(), tensors[k]) for k in tensors)
        c.check(not missing and not info["unexpected_keys"] and same,
                f"LlamaForCausalLM.from_pretrained({os.path.basename(folder)}): no missing/unexpected keys, weights equal")


def main():
    groups = ("f32-f16", "bf16", "transformers")
    if len(sys.argv) != 4 or sys.argv[3] not in groups:
        print(__doc__)
        return 2
    zt, work, group = sys.argv[1], sys.argv[2], sys.argv[3]
    if group in ("bf16", "transformers") and torch is None:
        peer_missing(f"group {group} needs torch (numpy has no bfloat16), which is not importable")
    if group == "transformers":
        try:
            import transformers  # noqa: F401
        except Exception as e:  # noqa: BLE001
            peer_missing(f"group transformers needs the transformers package, which is not importable ({e})")
    os.makedirs(work, exist_ok=True)
    c = Checker()
    cases = [("bf16-untied", "bf16", False, 0), ("bf16-tied", "bf16", True, 0),
             ("f32-untied", "f32", False, 0), ("f32-tied-sharded", "f32", True, 3),
             ("bf16-untied-sharded", "bf16", False, 4), ("f16-untied", "f16", False, 0)]
    for name, dtype, tied, shards in cases:
        if group == "f32-f16" and dtype == "bf16" or group == "bf16" and dtype != "bf16":
            continue
        case(c, zt, work, name, dtype, tied, shards, group == "transformers")
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
