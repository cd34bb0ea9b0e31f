#!/usr/bin/env python3
"""Export of LoRA adapter checkpoints against Hugging Face PEFT.

  lora_export_test.py ZT ZT_LORA_LOGITS WORKDIR

1. `zt train` runs the `tiny` preset for 2 steps (hf_common.train_tiny; model.init_std 0.2,
   so the logits are far from uniform), untied and tied; each checkpoint is a base, exported with
   `zt convert h5-to-hf BASE.h5 BASE_HF --dtype f32`.
2. For each case (targets incl. lm_head on the untied and the tied base, rslora on and off)
   the test writes an adapter checkpoint itself with h5py, as docs/checkpoint-format.md
   "Adapter checkpoints" defines it (root attributes contents "adapters", finetune JSON,
   base_path, base_hash; /params/<PEFT name>.lora_A.weight [r, in] and .lora_B.weight
   [out, r] random non-zero N(0, 0.3), their moments, /state/rng; zt-sum64 checksums by
   the numpy definition), then:
   (a) `zt convert h5-to-hf ADAPTERS.h5 PEFT_DIR --adapter`: PEFT's
       PeftModel.from_pretrained(LlamaForCausalLM(BASE_HF), PEFT_DIR) holds exactly the
       file's A and B, and its logits (every position, float64 with transformers' float32
       steps - RoPE's angles, RMSNorm - in float64 as tests/model/hf/lora_peer_test.py
       does) equal zt's forward with the same adapters (zt_lora_logits, Model<double> +
       bind_lora) within 1e-9 (the issue asks 1e-5); the adapters move the logits by more
       than 0.1 (so a folder PEFT ignored would fail);
   (b) `zt convert h5-to-hf ADAPTERS.h5 MERGED --dtype f32` (merged, the default): every
       tensor of MERGED is PEFT's merge_and_unload() of (a), taken in float64, rounded to
       the nearest fp32 (within 0.5 ulp); on the tied base PEFT's merge is taken on the base
       loaded untied with lm_head = the embedding (PEFT's own advice: its merge on the tied
       matrix would change the embedding too, which the test shows) and MERGED is untied;
       transformers' logits of MERGED (float64 forward) are within 1e-5 x max |logit| of
       PEFT's merged model's and of the unmerged adapters' of (a) (the N(0, 0.3) adapters
       make logits up to ~100, so the fp32 rounding of the merged weights alone moves them
       by ~1e-5 .. 1e-3 absolute);
   (c) `zt generate --weights ADAPTERS.h5 --temperature 0` == transformers + PEFT's greedy
       `generate` (float32) on the same prompt ids;
   (d) refusals, exit 2 naming what: a missing base, another base (--base of the other
       shape), --base on a whole model, a malformed finetune attribute (not JSON, a rank
       that is a string, an unknown target), a missing adapter dataset, one the finetune
       attribute does not describe, a damaged one (its checksum), a malformed base_hash,
       --adapter on a whole model or a missing file, a merged export over a random base;
       --base naming a copy of the base works and --adapter of a random base's adapters
       exports, saying so.

  lora_export_test.py ZT ZT_LORA_LOGITS WORKDIR qlora

QLoRA's merged export against bitsandbytes: a `finetune.method = qlora` adapter file (q, v,
lm_head; r 4) on the untied base, `zt convert h5-to-hf` merged: every targeted W of the
export is bitsandbytes' dequantize_4bit of the QLoRA paper's NF4 + double quantisation of
W (tests/kernels/nf4_reference.py, bitwise zt's by kernels.nf4_peer) + scale * B A
(float64) rounded to fp32, within 0.5 ulp of the sum, the
other tensors are the base's bit for bit, and the NF4 round trip shows (most targeted
elements differ from LoRA's merge).
Exit 77 (CTest skip) when torch, transformers or peft (qlora: bitsandbytes) is missing
(scripts/install-deps.sh --hf-peers installs them).
"""
import json
import os
import shutil
import subprocess
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "ckpt", "hf"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "ckpt"))
sys.path.insert(0, HERE)
from hf_common import Checker, checksum, require, run_zt, torch_peers, train_tiny  # noqa: E402
from zt_checksums import sum64  # noqa: E402
from lora_peer_test import MODULES, rmsnorm_f64, rope_f64  # noqa: E402

TOL64 = 1e-9  # (a) float64 on both sides: lora_peer measured 2.6e-13 .. 8.4e-13
TOL = 1e-5    # (b) relative to the logits' scale: the merged weights are rounded to fp32
TEXT = "ROMEO:\nBut soft, what light through yonder window breaks?"
# (name, base tied, targets, rank, alpha, rslora)
CASES = [
    ("all8-rslora", False, "q,k,v,o,gate,up,down,lm_head", 4, 8.0, True),
    ("qv-lmhead-tied", True, "q,v,lm_head", 4, 8.0, False),
    ("down-lmhead", False, "down,lm_head", 2, 3.0, False),
]


def base_hash(h5py, np, path):
    """The base's content hash as the LoRA engine's checkpoint writer defines it (ckpt::
    base_hash): zt-sum64 of the uint64 sequence (fnv1a64(name), stored checksum) of the
    /params datasets in name order, 16 hex digits; check_base compares it."""
    seq = []
    with h5py.File(path, "r") as f:
        for name in sorted(f["params"].keys()):
            h = 0xcbf29ce484222325
            for byte in name.encode():
                h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
            seq += [h, int(f["params"][name].attrs["checksum"])]
    return "%016x" % sum64(np.array(seq, dtype=np.uint64))


def adapter_dims(cfg, target):
    """(in, out) of W [out, in] for a target of the checkpoint's model_config."""
    C, I, V = cfg["hidden"], cfg["intermediate"], cfg["vocab"]
    D = C // cfg["heads"]
    H, G = cfg["heads"] * D, cfg["kv_heads"] * D
    return {"q": (C, H), "k": (C, G), "v": (C, G), "o": (H, C), "gate": (C, I), "up": (C, I),
            "down": (I, C), "lm_head": (C, V)}[target]


def peft_names(cfg, targets):
    """[(module path, target)] in PEFT's order."""
    out = []
    for layer in range(cfg["layers"]):
        for t in ("q", "k", "v", "o", "gate", "up", "down"):
            if t in targets:
                part = "self_attn" if t in ("q", "k", "v", "o") else "mlp"
                out.append((f"model.layers.{layer}.{part}.{MODULES[t]}", t))
    if "lm_head" in targets:
        out.append(("lm_head", "lm_head"))
    return out


def write_adapters(h5py, np, path, base, base_path, finetune, seed, drop=None):
    """An adapter checkpoint per docs/checkpoint-format.md; returns {module: (A, B)}."""
    rng = np.random.default_rng(seed)
    with h5py.File(base, "r") as b:
        root = {k: b.attrs[k] for k in ("format", "format_version", "zt_version", "zt_commit",
                                         "model_config")}
    cfg = json.loads(root["model_config"])
    version = int(root["format_version"])  # the checksums of the base's format
    adapters = {}
    with h5py.File(path, "w") as f:
        for k, v in root.items():
            f.attrs[k] = v
        f.attrs["contents"] = "adapters"
        f.attrs["finetune"] = json.dumps(finetune)
        f.attrs["base_path"] = base_path
        f.attrs["base_hash"] = base_hash(h5py, np, base) if base_path else ""
        r = finetune["rank"]
        for name, t in peft_names(cfg, finetune["targets"]):
            din, dout = adapter_dims(cfg, t)
            a = rng.normal(0.0, 0.3, (r, din)).astype(np.float32)
            bm = rng.normal(0.0, 0.3, (dout, r)).astype(np.float32)
            adapters[name] = (a, bm)
            for suffix, x in ((".lora_A.weight", a), (".lora_B.weight", bm)):
                if drop == name + suffix:
                    continue
                for group in ("params", "optim/exp_avg", "optim/exp_avg_sq"):
                    val = x if group == "params" else np.abs(x) * 1e-3
                    d = f.create_dataset(f"{group}/{name}{suffix}", data=val, dtype="<f4")
                    d.attrs["checksum"] = np.uint64(checksum(val, version))
        st = f.create_group("state")
        st.attrs["step"] = np.int64(2)
        st.attrs["tokens_seen"] = np.int64(128)
        rngd = np.array([1], dtype=np.uint64)
        d = st.create_dataset("rng", data=rngd)
        d.attrs["checksum"] = np.uint64(checksum(rngd, version))
    return adapters


def f64_forward(torch, model, ids):
    """Logits [T, V] of `model` in float64, RoPE's angles and RMSNorm in float64 too."""
    from transformers.models.llama.modeling_llama import LlamaRMSNorm, LlamaRotaryEmbedding
    model.to(torch.float64)
    for m in model.modules():
        if isinstance(m, LlamaRotaryEmbedding):
            m.forward = types.MethodType(rope_f64, m)
        elif isinstance(m, LlamaRMSNorm):
            m.forward = types.MethodType(rmsnorm_f64, m)
    with torch.no_grad():
        return model(ids).logits[0].double()


def zt_logits(zt_lora_logits, ckpt, adapter_file, targets, rank, alpha, rslora, tokens):
    p = subprocess.run([zt_lora_logits, ckpt, adapter_file, str(rank), str(alpha), targets,
                        "1" if rslora else "0", ",".join(map(str, tokens)), "f64"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    if p.returncode != 0:
        print(p.stderr)
        return None
    return json.loads(p.stdout)


def qlora_main(zt, work):
    require("h5py", "safetensors")
    torch, transformers, peft, bnb = torch_peers("peft", "bitsandbytes")
    import bitsandbytes.functional as F
    import h5py
    import numpy as np
    from safetensors.numpy import load_file
    sys.path.insert(0, os.path.join(HERE, "..", "..", "kernels"))
    import nf4_reference as R
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    c = Checker()
    ck = os.path.join(work, "ck")
    rc, out = train_tiny(zt, work, ck, 2, ["model.init_std=0.2"])
    c.check(rc == 0, "zt train: tiny, 2 steps")
    if rc != 0:
        print(out[-4000:])
        c.finish()
    ckpt = os.path.abspath(os.path.join(ck, open(os.path.join(ck, "latest")).read().strip()))
    rank, alpha = 4, 8.0
    finetune = {"method": "qlora", "rank": rank, "alpha": alpha, "dropout": 0.0, "rslora": False,
                "targets": ["q", "v", "lm_head"]}
    ad_h5 = os.path.join(work, "adapters-qlora.h5")
    ad = write_adapters(h5py, np, ad_h5, ckpt, ckpt, finetune, 7)
    merged = os.path.join(work, "merged")
    rc, out = run_zt(zt, "convert", "h5-to-hf", ad_h5, merged, "--dtype", "f32")
    c.check(rc == 0, "h5-to-hf merged (qlora)")
    if rc != 0:
        print(out)
        c.finish()
    zt_t = load_file(os.path.join(merged, "model.safetensors"))
    scale = alpha / rank
    worst, nf4_moved, targeted, others_equal = 0.0, 0, 0, True
    with h5py.File(ckpt, "r") as f:
        names = sorted(f["params"].keys())
        for name in names:
            w = f["params"][name][()]
            module = name[:-len(".weight")]
            if module not in ad:
                others_equal &= np.array_equal(zt_t[name], w)
                continue
            a, b = ad[module]
            # W quantised by the paper's NF4 + double quantisation (tests/kernels/nf4_reference.py;
            # its NF4 codes and absmax are bitsandbytes' quantize_4bit's bit for bit) and
            # dequantised by bitsandbytes' dequantize_4bit. Not bitsandbytes' own quantize_4bit
            # with compress_statistics: its CPU quantiser may take the farther of two near-tied
            # statistics levels (bench/results/nf4-double-quant-vs-bnb.md), a level step apart
            # (5.4e-5 .. 1.3e-2 relative) that depends on the trained weights. The sum is then
            # rounded once: within 0.5 ulp, nothing more.
            nf4 = R.reference(w.reshape(-1))
            state = R.bnb_state(F, torch, nf4, torch.Size(w.shape))
            deq = F.dequantize_4bit(torch.from_numpy(nf4["codes"]).reshape(-1, 1), quant_state=state)
            deq = deq.numpy().reshape(w.shape).astype(np.float64)
            delta = scale * (b.astype(np.float64) @ a.astype(np.float64))
            ref = deq + delta
            ulp_ref = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
            err = np.abs(zt_t[name].astype(np.float64) - ref) - 0.5 * ulp_ref
            zero = deq == 0
            worst = max(worst, float((err[~zero] / np.abs(deq[~zero])).max()))
            others_equal &= bool((err[zero] <= 0).all())  # NF4's exact 0 on both sides
            lora = (w.astype(np.float64) + delta).astype(np.float32)
            nf4_moved += int((zt_t[name] != lora).sum())
            targeted += w.size
    c.check(sorted(zt_t) == names and others_equal,
            "untargeted tensors: the base's, bit for bit; NF4 zeros: the update alone")
    c.check(worst <= 0, f"targeted W: the NF4 round trip (the paper's quantiser, bitsandbytes' "
            f"dequantize_4bit) + scale B A, rounded to fp32: within 0.5 ulp of the sum "
            f"(excess {worst:.2e} x |dequantised W|)")
    c.check(nf4_moved > targeted // 2, f"the NF4 round trip shows: {nf4_moved} of {targeted} "
            "targeted elements differ from LoRA's merge")
    c.finish()


def main():
    if len(sys.argv) == 5 and sys.argv[4] == "qlora":
        return qlora_main(sys.argv[1], sys.argv[3])
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    zt, zt_lora_logits, work = sys.argv[1:]
    require("h5py", "safetensors")
    torch, transformers, peft = torch_peers("peft")
    import h5py
    import numpy as np
    from peft import PeftModel
    from transformers import LlamaForCausalLM
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    c = Checker()
    tokens = list(TEXT.encode())  # the byte vocabulary: token = byte
    ids = torch.tensor([tokens])

    bases = {}
    for tied in (False, True):
        name = "tied" if tied else "untied"
        ck = os.path.join(work, f"ck-{name}")
        rc, out = train_tiny(zt, work, ck, 2, ["model.init_std=0.2",
                                               f"model.tied_embeddings={str(tied).lower()}"])
        c.check(rc == 0, f"zt train: tiny ({name} embeddings), 2 steps")
        if rc != 0:
            print(out[-4000:])
            c.finish()
        ckpt = os.path.abspath(os.path.join(ck, open(os.path.join(ck, "latest")).read().strip()))
        base_hf = os.path.join(work, f"base-hf-{name}")
        rc, out = run_zt(zt, "convert", "h5-to-hf", ckpt, base_hf, "--dtype", "f32")
        c.check(rc == 0, f"zt convert h5-to-hf BASE ({name}, f32)")
        if rc != 0:
            print(out)
            c.finish()
        bases[tied] = (ckpt, base_hf)

    for i, (case, tied, targets, rank, alpha, rslora) in enumerate(CASES):
        ckpt, base_hf = bases[tied]
        tag = f"{case} ({'tied' if tied else 'untied'}, r {rank}, alpha {alpha}, rslora {rslora})"
        finetune = {"method": "lora", "rank": rank, "alpha": alpha, "dropout": 0.05,
                    "rslora": rslora, "targets": targets.split(",")}
        adapters_h5 = os.path.join(work, f"adapters-{case}.h5")
        ad = write_adapters(h5py, np, adapters_h5, ckpt, ckpt, finetune, 200 + i)

        # (a) the PEFT folder on PEFT
        peft_dir = os.path.join(work, f"peft-{case}")
        rc, out = run_zt(zt, "convert", "h5-to-hf", adapters_h5, peft_dir, "--adapter")
        c.check(rc == 0 and f"zt convert h5-to-hf {ckpt} BASE_HF" in out,
                f"{tag}: h5-to-hf --adapter (and its output names the base's export)")
        if rc != 0:
            print(out)
            continue
        with open(os.path.join(peft_dir, "adapter_config.json")) as f:
            acfg = json.load(f)
        c.check(acfg["peft_type"] == "LORA" and acfg["r"] == rank and acfg["lora_alpha"] == alpha
                and acfg["use_rslora"] == rslora
                and sorted(acfg["target_modules"]) == sorted(MODULES[t] for t in targets.split(",")),
                f"{tag}: adapter_config.json r, lora_alpha, use_rslora, target_modules")
        base = LlamaForCausalLM.from_pretrained(base_hf, torch_dtype=torch.float32)
        pm = PeftModel.from_pretrained(base, peft_dir).eval()
        loaded, exact = 0, True
        for name, prm in pm.named_parameters():
            for mod, (a, b) in ad.items():
                if name == f"base_model.model.{mod}.lora_A.default.weight":
                    exact &= np.array_equal(prm.detach().numpy(), a)
                    loaded += 1
                elif name == f"base_model.model.{mod}.lora_B.default.weight":
                    exact &= np.array_equal(prm.detach().numpy(), b)
                    loaded += 1
        c.check(loaded == 2 * len(ad) and exact,
                f"{tag}: PEFT loaded the file's {2 * len(ad)} adapter tensors bit for bit ({loaded} found)")
        peft_logits = f64_forward(torch, pm, ids)
        z = zt_logits(zt_lora_logits, ckpt, os.path.join(peft_dir, "adapter_model.safetensors"),
                      targets, rank, alpha, rslora, tokens)
        if z is None:
            c.check(False, f"{tag}: zt_lora_logits")
            continue
        zl = torch.tensor(z["logits"], dtype=torch.float64)
        with torch.no_grad():
            base_logits = f64_forward(torch, LlamaForCausalLM.from_pretrained(base_hf, torch_dtype=torch.float32), ids)
        d = (zl - peft_logits).abs().max().item()
        moved = (peft_logits - base_logits).abs().max().item()
        c.check(d <= TOL64, f"{tag}: (a) PEFT on the exported folder: max |logit zt - PEFT| = {d:.3e} <= {TOL64:.0e}")
        c.check(moved > 0.1, f"{tag}: the adapters move the logits by {moved:.3f} > 0.1")

        # (b) the merged export
        merged = os.path.join(work, f"merged-{case}")
        rc, out = run_zt(zt, "convert", "h5-to-hf", adapters_h5, merged, "--dtype", "f32")
        c.check(rc == 0, f"{tag}: h5-to-hf merged")
        if rc != 0:
            print(out)
            continue
        with open(os.path.join(merged, "config.json")) as f:
            mcfg = json.load(f)
        untie = tied and "lm_head" in targets
        c.check(mcfg["tie_word_embeddings"] == (tied and not untie),
                f"{tag}: merged config tie_word_embeddings {mcfg['tie_word_embeddings']}")
        zm = LlamaForCausalLM.from_pretrained(merged, torch_dtype=torch.float32)
        zt_sd = {k: v.detach().numpy().copy() for k, v in zm.state_dict().items()}
        ml = f64_forward(torch, zm, ids)
        # PEFT's merge_and_unload in float64 (of the fp32 base and adapters): zt's merged fp32
        # weights must be its correctly rounded values.
        if untie:  # PEFT's advice for a tied target: merge on the base loaded untied
            b2 = LlamaForCausalLM.from_pretrained(base_hf, torch_dtype=torch.float32,
                                                  tie_word_embeddings=False)
            b2.lm_head.weight.data = b2.model.embed_tokens.weight.data.clone()
            ref = PeftModel.from_pretrained(b2, peft_dir).double().merge_and_unload()
            naive = PeftModel.from_pretrained(
                LlamaForCausalLM.from_pretrained(base_hf, torch_dtype=torch.float32), peft_dir).merge_and_unload()
            nd = (f64_forward(torch, naive, ids) - peft_logits).abs().max().item()
            print(f"      {tag}: PEFT's merge_and_unload on the tied matrix moves the logits "
                  f"from the adapters' by {nd:.3f} (it changes the embedding too)")
        else:
            ref = PeftModel.from_pretrained(
                LlamaForCausalLM.from_pretrained(base_hf, torch_dtype=torch.float32),
                peft_dir).double().merge_and_unload()
        ref_sd = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
        worst, changed = 0.0, 0
        for k, r64 in ref_sd.items():
            ulp = np.spacing(np.abs(r64).astype(np.float32)).astype(np.float64)
            worst = max(worst, float((np.abs(zt_sd[k].astype(np.float64) - r64) / ulp).max()))
            changed += int((zt_sd[k] != r64.astype(np.float32)).sum())
        c.check(sorted(zt_sd) == sorted(ref_sd) and worst <= 0.5 + 1e-6,
                f"{tag}: (b) merged weights == PEFT's float64 merge_and_unload rounded to fp32 "
                f"(worst {worst:.3f} fp32 ulp; {changed} elements off the nearest)")
        rl = f64_forward(torch, ref, ids)
        scale = rl.abs().max().item()
        dm = (ml - rl).abs().max().item()
        du = (ml - peft_logits).abs().max().item()
        c.check(dm <= TOL * scale and du <= TOL * scale,
                f"{tag}: (b) merged export's logits vs PEFT's merged {dm:.3e}, vs the unmerged "
                f"adapters {du:.3e} <= {TOL:.0e} x max |logit| {scale:.1f} (the fp32 rounding of "
                f"the merged weights)")

        # (c) zt generate on the adapter checkpoint vs transformers + PEFT greedy (float32)
        prompt = tokens[:12]
        rc, out = run_zt(zt, "generate", "--weights", adapters_h5, "--prompt-ids",
                         ",".join(map(str, prompt)), "--temperature", "0", "--max-new-tokens", "12",
                         "--json", "--threads", "1")
        line = [ln for ln in out.splitlines() if ln.startswith("{")]
        if rc != 0 or not line:
            print(out)
            c.check(False, f"{tag}: (c) zt generate on the adapter checkpoint")
            continue
        zt_ids = json.loads(line[-1])["ids"]
        gm = PeftModel.from_pretrained(
            LlamaForCausalLM.from_pretrained(base_hf, torch_dtype=torch.float32), peft_dir).eval()
        with torch.no_grad():
            g = gm.generate(input_ids=torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                            do_sample=False, max_new_tokens=12, min_new_tokens=12, eos_token_id=None,
                            pad_token_id=0)
        hf_ids = g[0, len(prompt):].tolist()
        c.check(zt_ids == hf_ids and len(set(hf_ids)) >= 3,
                f"{tag}: (c) zt generate greedy {zt_ids} == PEFT {hf_ids} ({len(set(hf_ids))} distinct)")

    # (d) refusals
    ckpt_u, _ = bases[False]
    ckpt_t, _ = bases[True]
    qv = {"method": "lora", "rank": 2, "alpha": 4.0, "dropout": 0.0, "rslora": False,
          "targets": ["q", "v"]}

    def refused(args, words, what):
        rc, out = run_zt(zt, *args)
        ok = rc == 2 and all(w in out for w in words)
        c.check(ok, f"(d) {what}: exit {rc}, names {words}")
        if not ok:
            print(out[-2000:])

    missing = os.path.join(work, "no-such-base.h5")
    ad_missing = os.path.join(work, "ad-missing-base.h5")
    write_adapters(h5py, np, ad_missing, ckpt_u, missing, qv, 1)
    refused(["convert", "h5-to-hf", ad_missing, os.path.join(work, "o1")], [missing, "--base"],
            "h5-to-hf, base missing")
    refused(["generate", "--weights", ad_missing, "--prompt-ids", "1,2", "--max-new-tokens", "1"],
            [missing], "generate, base missing")
    ad_ok = os.path.join(work, "ad-ok.h5")
    write_adapters(h5py, np, ad_ok, ckpt_u, ckpt_u, qv, 2)
    refused(["convert", "h5-to-hf", ad_ok, os.path.join(work, "o2"), "--base", ckpt_t],
            [ckpt_t, "tied_embeddings"], "another base (--base of the tied model)")
    refused(["generate", "--weights", ad_ok, "--base", ckpt_t, "--prompt-ids", "1,2"],
            [ckpt_t, "tied_embeddings"], "generate, another base")
    refused(["convert", "h5-to-hf", ckpt_u, os.path.join(work, "o3"), "--base", ckpt_u],
            ["--base", "not adapters"], "--base on a whole-model checkpoint")
    refused(["convert", "h5-to-hf", ckpt_u, os.path.join(work, "o4"), "--adapter"],
            ["--adapter", "no LoRA adapters"], "--adapter on a whole-model checkpoint")
    refused(["convert", "h5-to-hf", missing, os.path.join(work, "o4"), "--adapter"],
            [missing, "not found"], "--adapter on a missing file")
    copy = os.path.join(work, "base-copy.h5")
    shutil.copyfile(ckpt_u, copy)
    rc, out = run_zt(zt, "convert", "h5-to-hf", ad_missing, os.path.join(work, "o5"), "--base", copy)
    c.check(rc == 0, f"--base naming a copy of the base exports (exit {rc})")
    # The same shape with other values (a valid file: its checksum rewritten) is another
    # base: its content hash differs from the one the adapters recorded.
    changed = os.path.join(work, "base-changed.h5")
    shutil.copyfile(ckpt_u, changed)
    with h5py.File(changed, "a") as f:
        d = f["params"]["model.norm.weight"]
        x = d[()]
        x[0] += 0.5
        d[...] = x
        d.attrs["checksum"] = np.uint64(checksum(x, int(f.attrs["format_version"])))
    refused(["convert", "h5-to-hf", ad_ok, os.path.join(work, "o13"), "--base", changed],
            [changed, "content hash"], "a base of the same shape with other values (hash)")
    refused(["generate", "--weights", ad_ok, "--base", changed, "--prompt-ids", "1,2"],
            [changed, "content hash"], "generate, a base with other values")
    for label, text, words in (
            ("not JSON", '{"method": "lora", "rank": 2', ["finetune"]),
            ("rank a string", json.dumps(dict(qv, rank="2")), ["finetune", "rank"]),
            ("unknown target", json.dumps(dict(qv, targets=["q", "x"])), ["finetune", '"x"']),
            ("no method", json.dumps({k: v for k, v in qv.items() if k != "method"}), ["finetune", "method"])):
        bad = os.path.join(work, f"ad-bad-{label.replace(' ', '-')}.h5")
        write_adapters(h5py, np, bad, ckpt_u, ckpt_u, qv, 3)
        with h5py.File(bad, "a") as f:
            f.attrs["finetune"] = text
        refused(["convert", "h5-to-hf", bad, os.path.join(work, "o6")], [bad] + words,
                f"finetune {label}")
        refused(["convert", "h5-to-hf", bad, os.path.join(work, "o7"), "--adapter"], [bad] + words,
                f"finetune {label} (--adapter)")
    ad_random = os.path.join(work, "ad-random-base.h5")
    write_adapters(h5py, np, ad_random, ckpt_u, "", qv, 5)
    refused(["convert", "h5-to-hf", ad_random, os.path.join(work, "o9")], [ad_random, "random base"],
            "merged export of adapters on a random base")
    rc, out = run_zt(zt, "convert", "h5-to-hf", ad_random, os.path.join(work, "o10"), "--adapter")
    c.check(rc == 0 and "random base" in out, f"--adapter of a random base's adapters exports, saying so (exit {rc})")
    ad_hash = os.path.join(work, "ad-bad-hash.h5")
    write_adapters(h5py, np, ad_hash, ckpt_u, ckpt_u, qv, 6)
    with h5py.File(ad_hash, "a") as f:
        f.attrs["base_hash"] = "not-a-hash"
    refused(["convert", "h5-to-hf", ad_hash, os.path.join(work, "o11"), "--adapter"],
            [ad_hash, "base_hash", "not-a-hash"], "a malformed base_hash")
    ad_sum = os.path.join(work, "ad-bad-checksum.h5")
    write_adapters(h5py, np, ad_sum, ckpt_u, ckpt_u, qv, 7)
    flipped = "model.layers.0.self_attn.q_proj.lora_A.weight"
    with h5py.File(ad_sum, "a") as f:
        d = f["params"][flipped]
        x = d[()]
        x[0, 0] += 1.0
        d[...] = x  # the checksum attribute is left as it was
    refused(["convert", "h5-to-hf", ad_sum, os.path.join(work, "o12")], [ad_sum, flipped, "checksum"],
            "an adapter dataset whose contents fail its checksum")
    gone = "model.layers.1.self_attn.v_proj.lora_B.weight"
    ad_drop = os.path.join(work, "ad-drop.h5")
    write_adapters(h5py, np, ad_drop, ckpt_u, ckpt_u, qv, 4, drop=gone)
    refused(["convert", "h5-to-hf", ad_drop, os.path.join(work, "o8"), "--adapter"],
            [ad_drop, gone], "a missing adapter dataset")
    extra = "model.layers.0.self_attn.k_proj.lora_A.weight"  # k is not among the targets
    ad_extra = os.path.join(work, "ad-extra.h5")
    write_adapters(h5py, np, ad_extra, ckpt_u, ckpt_u, qv, 8)
    with h5py.File(ad_extra, "a") as f:
        x = np.ones((2, 64), dtype=np.float32)
        d = f["params"].create_dataset(extra, data=x)
        d.attrs["checksum"] = np.uint64(checksum(x, int(f.attrs["format_version"])))
    refused(["convert", "h5-to-hf", ad_extra, os.path.join(work, "o14"), "--adapter"],
            [ad_extra, extra], "an adapter dataset its finetune attribute does not describe")
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
