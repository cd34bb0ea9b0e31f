#!/usr/bin/env python3
"""zt convert hf-to-h5 / h5-to-hf refuse bad input: exit code 2 and a message naming the
file and the field at fault.

Usage: hf_refusal_test.py ZT_BINARY WORKDIR

Every hostile file is written byte by byte here (struct + json), so no safetensors
writer's own checks stand between the test and zt's reader. Needs numpy and h5py (the
tampered-checkpoint case); exits 77 (CTest: skipped, with the reason) without them.
"""
import json
import os
import shutil
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_common import Checker, hf_config, llama_shapes, require, run_zt, write_config  # noqa: E402

np, h5py = require("numpy", "h5py")


def st_bytes(entries, data, header_len=None, raw_header=None, metadata=None):
    """A safetensors file from (name, dtype, shape, begin, end) entries and a data buffer."""
    if raw_header is None:
        h = {name: {"dtype": dt, "shape": list(shape), "data_offsets": [b, e]}
             for name, dt, shape, b, e in entries}
        if metadata is not None:
            h["__metadata__"] = metadata
        raw_header = json.dumps(h).encode()
    n = len(raw_header) if header_len is None else header_len
    return struct.pack("<Q", n) + raw_header + data


def good_entries(cfg, dtype="F32"):
    """Entries and data for a valid model (consecutive offsets, zeros)."""
    size = {"F32": 4, "BF16": 2, "F16": 2}[dtype]
    entries, off = [], 0
    for name, shape in llama_shapes(cfg).items():
        nbytes = int(np.prod(shape)) * size
        entries.append([name, dtype, shape, off, off + nbytes])
        off += nbytes
    return entries, bytes(off)


def folder(work, name, cfg=None, st=None, files=None):
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    if cfg is not None:
        write_config(d, cfg)
    if st is not None:
        with open(os.path.join(d, "model.safetensors"), "wb") as f:
            f.write(st)
    for fname, content in (files or {}).items():
        with open(os.path.join(d, fname), "wb") as f:
            f.write(content if isinstance(content, bytes) else content.encode())
    return d


def expect_refusal(c, zt, what, args, needles):
    rc, out = run_zt(zt, *args)
    missing = [n for n in needles if n not in out]
    c.check(rc == 2 and not missing,
            f"{what}: exit {rc} (want 2), names {needles}" +
            (f" MISSING {missing} in: {out.strip()[:400]}" if missing else ""))
    if rc == 2 and not missing:
        line = next((l for l in out.splitlines() if "ERROR" in l), out.strip().splitlines()[0])
        print(f"      {line.strip()[:220]}")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    zt, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    c = Checker()
    cfg = hf_config(torch_dtype="float32")
    entries, data = good_entries(cfg)
    st_name = lambda d: os.path.join(d, "model.safetensors")  # noqa: E731
    # --force: the valid folder's conversion below leaves never.h5, and each refusal must
    # come from the input, not from the existing output.
    imp = lambda d: ["convert", "hf-to-h5", "--force", d, os.path.join(work, "never.h5")]  # noqa: E731

    # The valid folder converts (so each refusal below is caused by its one change).
    d = folder(work, "valid", cfg, st_bytes(entries, data))
    rc, out = run_zt(zt, *imp(d))
    c.check(rc == 0, f"the unmodified folder converts (exit {rc}) {out.strip()[:200]}")

    # Missing things.
    expect_refusal(c, zt, "missing folder", imp(os.path.join(work, "nope")), ["nope", "not found"])
    d = folder(work, "no-config", None, st_bytes(entries, data))
    expect_refusal(c, zt, "missing config.json", imp(d), [os.path.join(d, "config.json")])
    d = folder(work, "no-weights", cfg)
    expect_refusal(c, zt, "no safetensors file", imp(d), [d, "model.safetensors"])

    # Hostile safetensors headers.
    d = folder(work, "len-beyond", cfg, st_bytes(entries, data, header_len=1 << 40))
    expect_refusal(c, zt, "header length beyond the file", imp(d), [st_name(d), "header length"])
    d = folder(work, "tiny-file", cfg, b"\x01\x02\x03")
    expect_refusal(c, zt, "file shorter than 8 bytes", imp(d), [st_name(d), "8-byte"])
    d = folder(work, "fifo", cfg)
    os.mkfifo(os.path.join(d, "model.safetensors"))
    expect_refusal(c, zt, "a FIFO as model.safetensors (must not hang)", imp(d), [st_name(d), "not a regular file"])
    d = folder(work, "fifo-config", None, st_bytes(entries, data))
    os.mkfifo(os.path.join(d, "config.json"))
    expect_refusal(c, zt, "a FIFO as config.json (must not hang)", imp(d), [os.path.join(d, "config.json"), "not a regular file"])
    d = folder(work, "bad-json", cfg, st_bytes([], data, raw_header=b'{"a": [1, 2'))
    expect_refusal(c, zt, "header not JSON", imp(d), [st_name(d), "not valid JSON"])
    e = [list(x) for x in entries]
    e[-1][4] += 4
    d = folder(work, "offset-range", cfg, st_bytes(e, data))
    expect_refusal(c, zt, "data_offsets disagree with shape*dtype", imp(d), [st_name(d), e[-1][0], "data_offsets"])
    e = [list(x) for x in entries]
    e[-1][3] += 4
    e[-1][4] += 4
    d = folder(work, "offset-out", cfg, st_bytes(e, data))
    expect_refusal(c, zt, "data_offsets past the buffer", imp(d), [st_name(d), e[-1][0], "data_offsets", "past"])
    e = [list(x) for x in entries]
    e[1][3] -= 4
    e[1][4] -= 4
    d = folder(work, "overlap", cfg, st_bytes(e, data))
    expect_refusal(c, zt, "overlapping tensors", imp(d), [st_name(d), e[1][0], "overlap"])
    d = folder(work, "leftover", cfg, st_bytes(entries, data + bytes(8)))
    expect_refusal(c, zt, "bytes after the last tensor", imp(d), [st_name(d), "left over"])
    e = [list(x) for x in entries]
    e[0][1] = "F99"
    d = folder(work, "dtype", cfg, st_bytes(e, data))
    expect_refusal(c, zt, "unknown dtype", imp(d), [st_name(d), e[0][0], "dtype", "F99"])
    e = [list(x) for x in entries]
    e[0][1], e[0][2], e[0][4] = "I32", e[0][2], e[0][4]
    d = folder(work, "int-dtype", cfg, st_bytes(e, data))
    expect_refusal(c, zt, "integer tensor", imp(d), [st_name(d), e[0][0], "I32"])
    e = [list(x) for x in entries]
    e[0][2] = [-1, 32]
    d = folder(work, "neg-shape", cfg, st_bytes(e, data))
    expect_refusal(c, zt, "negative dimension", imp(d), [st_name(d), e[0][0], "shape"])
    # The same tensor named twice (hand-written JSON: a dict cannot hold it).
    first = json.dumps({"dtype": "F32", "shape": [1], "data_offsets": [0, 4]})
    raw = ('{"x": %s, "x": %s}' % (first, first)).encode()
    d = folder(work, "dup", cfg, st_bytes([], bytes(4), raw_header=raw))
    expect_refusal(c, zt, "duplicate tensor name", imp(d), [st_name(d), "'x'", "twice"])
    raw = b'{"x": {"dtype": "F32", "dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}'
    d = folder(work, "dup-field", cfg, st_bytes([], bytes(4), raw_header=raw))
    expect_refusal(c, zt, "duplicate field in an entry", imp(d), [st_name(d), "'dtype'", "twice"])
    raw = b'{"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "extra": 1}}'
    d = folder(work, "extra-field", cfg, st_bytes([], bytes(4), raw_header=raw))
    expect_refusal(c, zt, "unknown field in an entry", imp(d), [st_name(d), "'extra'"])
    deep = b'{"x": {"dtype": "F32", "shape": [' + b"[" * 100000 + b"]" * 100000 + b'], "data_offsets": [0, 4]}}'
    d = folder(work, "deep", cfg, st_bytes([], bytes(4), raw_header=deep))
    expect_refusal(c, zt, "deeply nested shape", imp(d), [st_name(d), "shape"])

    # The model does not match its config.
    e = [list(x) for x in entries]
    q = "model.layers.0.self_attn.q_proj.weight"
    i = [x[0] for x in e].index(q)
    e[i][2] = [16, 64]  # same bytes, other shape
    d = folder(work, "shape", cfg, st_bytes(e, data))
    expect_refusal(c, zt, "tensor shape other than config.json's", imp(d), [st_name(d), q, "[16, 64]", "[32, 32]"])
    d = folder(work, "other-config", hf_config(hidden=48, heads=4, kv=2, torch_dtype="float32"), st_bytes(entries, data))
    expect_refusal(c, zt, "config of another model", imp(d), ["model.embed_tokens.weight", "[64, 32]", "[64, 48]", "config.json"])
    untied_cfg_without_norm = dict(cfg, tie_word_embeddings=True)  # shapes without lm_head
    e, data_wo = good_entries(untied_cfg_without_norm)
    d = folder(work, "missing-tensor", cfg, st_bytes(e, data_wo))
    expect_refusal(c, zt, "missing tensor", imp(d), [d, "lm_head.weight", "missing"])
    e = [list(x) for x in entries] + [["model.layers.0.self_attn.q_proj.bias", "F32", [32], len(data), len(data) + 128]]
    d = folder(work, "bias", cfg, st_bytes(e, data + bytes(128)))
    expect_refusal(c, zt, "unknown tensor (a bias)", imp(d), [st_name(d), "q_proj.bias"])

    # Configs zt cannot represent.
    cfg_path = lambda d: os.path.join(d, "config.json")  # noqa: E731
    # attention_bias true is a Llama with q/k/v/o biases (issue 38): weights without them
    # are refused naming the first missing bias.
    d = folder(work, "cfg-attention_bias", hf_config(torch_dtype="float32", attention_bias=True), st_bytes(entries, data))
    expect_refusal(c, zt, "config attention_bias = true, no bias tensors", imp(d), [d, "q_proj.bias", "missing"])
    for key, value in [("rope_scaling", {"type": "yarn", "factor": 2.0}),
                       ("mlp_bias", True), ("model_type", "gemma"), ("hidden_act", "gelu"),
                       ("head_dim", 16), ("hidden_size", "32")]:
        d = folder(work, "cfg-" + key, hf_config(torch_dtype="float32", **{key: value}), st_bytes(entries, data))
        expect_refusal(c, zt, f"config {key} = {json.dumps(value)}", imp(d), [cfg_path(d), key])
    # Issue 36 class 5: every RoPE field of transformers 4 and 5 read or refused by name.
    rope_cases = [
        ("rope_parameters yarn without its original context", dict(rope_parameters={"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4}),
         ["rope_parameters.original_max_position_embeddings", "missing", "yarn"]),
        ("rope_parameters dynamic", dict(rope_parameters={"rope_type": "dynamic", "factor": 2.0}),
         ["rope_parameters.rope_type", "dynamic"]),
        ("rope_scaling llama3 without factor", dict(rope_scaling={"rope_type": "llama3", "low_freq_factor": 1.0, "high_freq_factor": 4.0}),
         ["rope_scaling.factor", "missing"]),
        ("rope_parameters per layer type", dict(rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1e4}}),
         ["rope_parameters.full_attention", "per-layer-type"]),
        ("rope_parameters partial_rotary_factor 0.5", dict(rope_parameters={"rope_type": "default", "partial_rotary_factor": 0.5}),
         ["partial_rotary_factor"]),
        ("rope_scaling and rope_parameters disagree", dict(rope_scaling={"rope_type": "linear", "factor": 2.0},
                                                           rope_parameters={"rope_type": "linear", "factor": 4.0, "rope_theta": 1e4}),
         ["rope_scaling", "disagrees with rope_parameters"]),
        ("rope_theta and rope_parameters.rope_theta disagree", dict(rope_theta=5e5, rope_parameters={"rope_type": "default", "rope_theta": 1e4}),
         ["rope_theta", "disagrees"]),
        ("num_hidden_layers 10000000 (bounded before allocating)", dict(num_hidden_layers=10000000),
         ["num_hidden_layers", "10000000", "limit 65536"]),
        ("max_position_embeddings 2^30", dict(max_position_embeddings=1 << 30), ["max_position_embeddings", "limit"]),
        ("attention_dropout 0.1", dict(attention_dropout=0.1), ["attention_dropout", "no dropout"]),
        ("pretraining_tp 0", dict(pretraining_tp=0), ["pretraining_tp"]),
        ("quantization_config", dict(quantization_config={"quant_method": "gptq", "bits": 4}), ["quantization_config"]),
    ]
    for k, (what, extra, needles) in enumerate(rope_cases):
        d = folder(work, f"cfg5-{k}",
                   hf_config(torch_dtype="float32", **extra), st_bytes(entries, data))
        expect_refusal(c, zt, f"config {what}", imp(d), [cfg_path(d)] + needles)
    # A NUL byte and junk after the JSON object (nlohmann would stop at the NUL).
    d = folder(work, "cfg-nul", None, st_bytes(entries, data),
               {"config.json": json.dumps(cfg).encode() + b"\0junk{"})
    expect_refusal(c, zt, "config.json with a NUL byte and junk after it", imp(d), [cfg_path(d), "NUL byte"])
    # Non-finite weights: exit 2 naming the tensor, the file and the folder, for hf-to-h5
    # and for `zt generate` on the folder.
    for bad_value in (float("nan"), float("inf")):
        arr = np.zeros(len(data) // 4, dtype="<f4")
        q_entry = next(x for x in entries if x[0] == q)
        arr[q_entry[3] // 4 + 5] = bad_value
        d = folder(work, f"nonfinite-{bad_value}", cfg, st_bytes(entries, arr.tobytes()))
        expect_refusal(c, zt, f"a {bad_value} weight (hf-to-h5)", imp(d), [q, st_name(d), d, "non-finite"])
        expect_refusal(c, zt, f"a {bad_value} weight (zt generate)",
                       ["generate", "--weights", d, "--prompt-ids", "1,2", "--max-new-tokens", "2"],
                       [q, st_name(d), "non-finite"])
    # transformers 5's form is read, not ignored: a llama3-scaled model keeps its RoPE.
    v5 = hf_config(torch_dtype="float32", rope_parameters={
        "rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 16, "rope_theta": 500000.0})
    del v5["rope_theta"]  # as transformers 5 writes it: rope_theta inside rope_parameters only
    d = folder(work, "v5-llama3", v5, st_bytes(entries, data))
    v5_h5 = os.path.join(work, "v5-llama3.h5")
    rc, out = run_zt(zt, "convert", "hf-to-h5", "--force", d, v5_h5)
    stored = {}
    if rc == 0:
        with h5py.File(v5_h5, "r") as f:
            stored = json.loads(f.attrs["model_config"])
    c.check(rc == 0 and stored.get("rope_theta") == 500000.0 and stored.get("rope_scaling", {}).get("type") == "llama3"
            and stored["rope_scaling"].get("factor") == 32.0 and stored["rope_scaling"].get("original_context") == 16,
            f"rope_parameters llama3 (transformers 5) imported with its RoPE (exit {rc}): {stored.get('rope_theta')}, {stored.get('rope_scaling')}")
    if rc != 0:
        print(out)
    bad = hf_config(torch_dtype="float32")
    del bad["num_hidden_layers"]
    d = folder(work, "cfg-missing", bad, st_bytes(entries, data))
    expect_refusal(c, zt, "config without num_hidden_layers", imp(d), [cfg_path(d), "num_hidden_layers", "missing"])
    d = folder(work, "cfg-heads", hf_config(heads=5, kv=5, torch_dtype="float32"), st_bytes(entries, data))
    expect_refusal(c, zt, "config hidden % heads != 0", imp(d), [cfg_path(d), "model.hidden"])

    # Hostile indexes.
    for shard in ["../../x", "/etc/passwd", "sub/model.safetensors", "..", "a\\b"]:
        wm = {x[0]: "model-00001-of-00001.safetensors" for x in entries}
        wm[q] = shard
        d = folder(work, "idx", cfg, None, {
            "model-00001-of-00001.safetensors": st_bytes(entries, data),
            "model.safetensors.index.json": json.dumps({"metadata": {"total_size": 1}, "weight_map": wm})})
        expect_refusal(c, zt, f"index shard {shard!r}", imp(d),
                       [os.path.join(d, "model.safetensors.index.json"), "weight_map." + q, shard])
    wm = {x[0]: "model-00001-of-00001.safetensors" for x in entries[:-1]}
    d = folder(work, "idx-unlisted", cfg, None, {
        "model-00001-of-00001.safetensors": st_bytes(entries, data),
        "model.safetensors.index.json": json.dumps({"weight_map": wm})})
    expect_refusal(c, zt, "shard holds a tensor the index does not place there", imp(d),
                   [os.path.join(d, "model-00001-of-00001.safetensors"), entries[-1][0], "weight_map"])
    wm = {x[0]: "model-00001-of-00001.safetensors" for x in entries}
    wm["model.extra.weight"] = "model-00001-of-00001.safetensors"
    d = folder(work, "idx-absent", cfg, None, {
        "model-00001-of-00001.safetensors": st_bytes(entries, data),
        "model.safetensors.index.json": json.dumps({"weight_map": wm})})
    expect_refusal(c, zt, "index names a tensor the shard lacks", imp(d), ["model.extra.weight", "weight_map"])
    wm = {x[0]: "model-00002-of-00002.safetensors" for x in entries}
    d = folder(work, "idx-noshard", cfg, None, {"model.safetensors.index.json": json.dumps({"weight_map": wm})})
    expect_refusal(c, zt, "index names a missing shard", imp(d), [os.path.join(d, "model-00002-of-00002.safetensors")])

    # Export refusals.
    ck = os.path.join(work, "valid.h5")
    rc, _ = run_zt(zt, "convert", "hf-to-h5", os.path.join(work, "valid"), ck)
    expect_refusal(c, zt, "missing checkpoint", ["convert", "h5-to-hf", os.path.join(work, "none.h5"), os.path.join(work, "o")],
                   [os.path.join(work, "none.h5")])
    expect_refusal(c, zt, "a Hugging Face folder as CKPT", ["convert", "h5-to-hf", os.path.join(work, "valid"), os.path.join(work, "o")],
                   [os.path.join(work, "valid"), "is a Hugging Face folder", "hf-to-h5"])
    expect_refusal(c, zt, "--dtype f8", ["convert", "h5-to-hf", ck, os.path.join(work, "o"), "--dtype", "f8"], ["--dtype", "f8"])
    expect_refusal(c, zt, "--max-shard-size 5Q", ["convert", "h5-to-hf", ck, os.path.join(work, "o"), "--max-shard-size", "5Q"], ["5Q"])
    if rc == 0:
        bad_ck = os.path.join(work, "tampered.h5")
        shutil.copy(ck, bad_ck)
        with h5py.File(bad_ck, "r+") as f:
            ds = f["params"]["model.norm.weight"]
            v = ds[...]
            v[3] += 1.0
            ds[...] = v
        expect_refusal(c, zt, "checkpoint whose data no longer matches its checksum",
                       ["convert", "h5-to-hf", bad_ck, os.path.join(work, "o")],
                       [bad_ck, "model.norm.weight", "checksum"])
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
