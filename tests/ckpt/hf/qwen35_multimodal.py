"""Qwen3.5's multimodal folders (qwen35_peer_test.py's last part), one row each:
Qwen3_5ForConditionalGeneration (the hybrid text model: Gated DeltaNet layers 0, 2, 3, a full
layer 1) and Qwen3_5MoeForConditionalGeneration (qwen3_5_moe: layers l, f, l, f; 4 experts,
top 2, the shared expert). Each a tiny one made by transformers' own class with a 2-block
vision tower, plus an mtp.* tensor as the published checkpoints hold:
  - zt imports its text model: its logits equal, bit for bit, zt's of the same text model
    saved by transformers as the row's causal LM (whose transformers logits equal the class's
    on input_ids alone); against transformers' float64 logits within max(1e-5 x max|logit|,
    2 x transformers' own fp32 error); the loss within 1e-5
  - the export loads in transformers as the class with transformers' tensor names, every
    tensor bit-identical (the vision and mtp tensors, and the text weights), and the same
    config (transformers' config objects of the two folders equal); zt re-imports it
  - bad input: a vision tensor missing, no text_config, a tensor neither the text model's
    nor carried (model.audio_tower.*), and on the MoE row an expert's tensor missing: exit 2
    naming the file and the field (or tensor); nothing written
The dense row also (kept small on the MoE row, which shares the code):
  - a full fine-tune: one step, then a resume with the source file moved away; each
    checkpoint exports as Qwen3_5ForConditionalGeneration with the vision tower
    bit-identical, the text weights trained, and the export's text logits zt's
  - the PEFT adapter names: one LoRA step on a full-attention-only folder of the class;
    PEFT loads the --adapter folder onto the class exactly
"""
import json
import os
import re

from hf_common import peft_multimodal, run_zt, with_config, zt_logits_json

ARCH = "Qwen3_5ForConditionalGeneration"  # the dense row's (adapters)
MTP = "mtp.fc.weight"
VISION = dict(depth=2, hidden_size=32, intermediate_size=48, num_heads=2, out_hidden_size=64,
              patch_size=4, temporal_patch_size=2, spatial_merge_size=2, num_position_embeddings=16)


class Row:
    """A multimodal class's transformers classes: `cls` (the folder's), `config` (its
    config), `causal` and `text_config` (its text model alone), `mod` (its modeling module,
    None for Qwen3.5's: f64_logits's ModuleTorch)."""

    def __init__(self, moe):
        import transformers
        from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe
        kind = "Qwen3_5Moe" if moe else "Qwen3_5"
        self.name = "qwen35moe-mm" if moe else "qwen35-mm"
        self.arch = kind + "ForConditionalGeneration"
        self.cls = getattr(transformers, self.arch)
        self.config = getattr(transformers, kind + "Config")
        self.causal = getattr(transformers, kind + "ForCausalLM")
        self.text_config = getattr(transformers, kind + "TextConfig")
        self.mod, self.moe = (modeling_qwen3_5_moe if moe else None), moe


def text_logits(p, row, folder):
    """transformers' logits [T, V] (float64) and loss of the folder's class on input_ids alone."""
    model = row.cls.from_pretrained(folder, dtype=p.torch.float32)
    model.eval()
    with p.torch.no_grad():
        out = model(input_ids=p.ids, labels=p.ids)
    return out.logits[0].double(), float(out.loss)


def same_logits(p, row, tag, folder, ckpt, f64):
    """transformers' text logits of `folder` against zt's on `ckpt`: zt's as close to
    float64 (f64) as the issue's rule allows (max(1e-5 x max|logit|, 2 x transformers' own
    fp32 error)), the loss within 1e-5; prints max |zt - transformers|. Returns zt's answer."""
    hl, hloss = text_logits(p, row, folder)
    z = zt_logits_json(p.c, p.zt_logits, ckpt, p.tokens, 1)
    zl = p.torch.tensor(z["logits"], dtype=p.torch.float64)
    exact = f64(folder, row.cls, row.mod)
    h64 = (hl - exact).abs().max().item()
    bound = max(p.tol * max(1.0, zl.abs().max().item()), 2 * h64)
    d = (zl - hl).abs().max().item() if zl.shape == hl.shape else float("inf")
    d64 = (zl - exact).abs().max().item() if zl.shape == hl.shape else float("inf")
    print(f"      {tag}: max |zt - hf| {d:.3e}; against float64: zt {d64:.3e}, transformers "
          f"fp32 {h64:.3e}")
    p.c.check(d64 <= bound and abs(z["loss"] - hloss) <= p.tol,
              f"{tag}: zt's logits against float64 {d64:.3e} <= max(1e-5 x max|logit|, 2 x "
              f"{h64:.3e}) = {bound:.3e}, loss {z['loss']:.8f} vs transformers' {hloss:.8f}")
    return z


def as_causal_lm(p, row, folder, text):
    """The folder's text model saved by transformers as the row's causal LM (folder-text);
    checks that transformers' logits of the two classes are equal."""
    torch = p.torch
    mm = row.cls.from_pretrained(folder, dtype=torch.float32)
    lm = row.causal(row.text_config(**text)).to(torch.float32)
    pre = "model.language_model."
    sd = {("model." + k[len(pre):] if k.startswith(pre) else k): v
          for k, v in mm.state_dict().items() if k.startswith(pre) or k == "lm_head.weight"}
    lm.load_state_dict(sd)
    out = folder + "-text"
    lm.save_pretrained(out)
    a, b = text_logits(p, row, folder)[0], None
    with torch.no_grad():
        b = lm.eval()(p.ids).logits[0].double()
    p.c.check(torch.equal(a, b), f"transformers: {row.arch}'s text logits equal "
                                 f"{row.causal.__name__}'s on the same text weights")
    return out


def kept(p, row, src, out, tag, trained):
    """The export `out` loads as the class with `src`'s names, its vision and mtp tensors
    bit-identical, and its text weights equal to src's (or, `trained`, moved)."""
    from safetensors.torch import load_file
    torch = p.torch
    a = load_file(os.path.join(src, "model.safetensors"))
    b = load_file(os.path.join(out, "model.safetensors"))
    arch = json.load(open(os.path.join(out, "config.json"))).get("architectures")
    loaded = row.cls.from_pretrained(out) if arch == [row.arch] else None
    vis = [k for k in a if k.startswith(("model.visual.", "mtp."))]
    text = [k for k in a if k not in vis]
    q = "model.language_model.layers.0.linear_attn.in_proj_qkv.weight"
    same_text = all(k in b and torch.equal(a[k], b[k]) for k in text)
    p.c.check(loaded is not None and sorted(a) == sorted(b) and len(vis) > 20 and MTP in vis and
              all(torch.equal(a[k], b[k]) for k in vis) and
              (not torch.equal(a[q], b[q]) if trained else same_text),
              f"{tag}: the export loads as {row.arch} with the folder's {len(a)} tensor names, "
              f"its {len(vis)} vision and mtp tensors bit-identical, the text weights "
              f"{'trained' if trained else 'bit-identical'} (architectures {arch})")


def run_train(p, folder, model, *keys):
    """`zt train` from the imported folder's byte tokens with `model` and `keys` set."""
    base = ["data.path=" + folder + "-tokens.h5", "train.seq_len=16", "train.global_batch=2",
            "train.micro_batch=1", "data.eval_fraction=0", "eval.every=0", "sample.tokens=0",
            "ckpt.every=1", "train.threads=1", "train.lr=0.01", "train.min_lr=0.01",
            "train.warmup=0"]
    return run_zt(p.zt, "train", *[a for kv in base + model + list(keys) for a in ("--set", kv)])


def multimodal(p, text, f64, moe=False):
    """The checks of this module's docstring on one row; `text`: the text model's config keys
    (moe: qwen3_5_moe_text's); f64(folder, cls, mod): transformers' float64 logits of the
    folder's model as class cls (its modeling module mod)."""
    from safetensors.torch import load_file, save_file
    c, torch, row = p.c, p.torch, Row(moe)
    text = dict(text, vocab_size=264)
    torch.manual_seed(4)
    model = row.cls(row.config(text_config=text, vision_config=VISION)).to(torch.float32)
    with torch.no_grad():
        for name, w in model.named_parameters():
            if name.startswith("model.language_model.") and "norm" in name:
                w.copy_((1.0 if "linear_attn.norm" in name else 0.0) + 0.3 * torch.randn_like(w))
            elif name.endswith(("A_log", "dt_bias")):
                w.normal_(0.0, 0.5)
    name = row.name
    folder = os.path.join(p.work, name)
    model.save_pretrained(folder)
    w = load_file(os.path.join(folder, "model.safetensors"))
    w[MTP] = torch.randn(64, 128)  # the published checkpoints' multi-token prediction head
    save_file(w, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    h5 = folder + ".h5"
    rc, out = run_zt(p.zt, "convert", "hf-to-h5", folder, h5)
    c.check(rc == 0, f"{name}: zt convert hf-to-h5 of a {row.arch} folder (exit {rc})")
    if rc != 0:
        print(out[-2000:])
        return
    z = same_logits(p, row, f"{name}: the text model", folder, h5, f64)
    text_folder = as_causal_lm(p, row, folder, text)
    rc, _ = run_zt(p.zt, "convert", "hf-to-h5", text_folder, text_folder + ".h5")
    zt_text = zt_logits_json(c, p.zt_logits, text_folder + ".h5", p.tokens, 1) if rc == 0 else {}
    c.check(zt_text.get("logits") == z["logits"],
            f"{name}: zt's logits of the folder equal, bit for bit, zt's of its text model saved "
            f"as {row.causal.__name__} (exit {rc})")
    out = folder + "-export"
    rc, _ = run_zt(p.zt, "convert", "h5-to-hf", h5, out, "--dtype", "f32")
    c.check(rc == 0, f"{name}: zt convert h5-to-hf (exit {rc})")
    if rc != 0:
        return
    kept(p, row, folder, out, name, trained=False)
    cfgs = [row.config.from_pretrained(f).to_dict() for f in (folder, out)]
    for d in cfgs:
        d.pop("_name_or_path", None)
    c.check(cfgs[0] == cfgs[1], f"{name}: transformers' {row.config.__name__} of the export "
                                f"equals the folder's (every field, vision_config included)")
    rc, _ = run_zt(p.zt, "convert", "hf-to-h5", out, out + ".h5")
    zb = zt_logits_json(c, p.zt_logits, out + ".h5", p.tokens, 1) if rc == 0 else None
    c.check(rc == 0 and zb["logits"] == z["logits"],
            f"{name}: zt re-imports its export with the same logits (exit {rc})")
    if not moe:
        fine_tune(p, row, folder, f64)
        adapters(p, text, folder + "-tokens.h5")
    refusals(p, row, folder, w)


def fine_tune(p, row, folder, f64):
    """A full fine-tune: the checkpoints carry the vision tower; the source moved before the
    resume."""
    c, name, h5 = p.c, row.name, folder + ".h5"
    with open(folder + ".txt", "w") as f:
        f.write("".join(chr(32 + (7 * i) % 95) for i in range(33)))
    run_zt(p.zt, "convert", "text-to-tokens", "--force", folder + ".txt", folder + "-tokens.h5")
    first = (f"ckpt.init_from={h5}", "train.steps=1", f"ckpt.dir={folder}-full")
    rc1, out1 = run_train(p, folder, [], *first)
    # The model keys: as the refusal's hint names them (the checkpoint's), and the schedule.
    model_keys = re.findall(r"--set (model\.[a-z_]+=\S+)", out1) if rc1 == 2 else []
    model_keys.append("model.layer_types=lfll")
    if model_keys:
        rc1, out1 = run_train(p, folder, model_keys, *first)
    moved = folder + "-moved.h5"
    os.replace(h5, moved)
    rc2, out2 = run_train(p, folder, model_keys, "ckpt.resume=auto", "train.steps=2",
                          f"ckpt.dir={folder}-full") if rc1 == 0 else (1, "")
    os.replace(moved, h5)
    c.check((rc1, rc2) == (0, 0) and "resumed from" in out2,
            f"{name}-full: one full step, a resume to step 2 with the source moved (exits {rc1} {rc2})")
    if (rc1, rc2) != (0, 0):
        print((out1 + out2)[-2000:])
    else:
        for step in (1, 2):
            ck = os.path.join(folder + "-full", f"step-{step}.h5")
            exp = f"{folder}-full-{step}"
            rc, _ = run_zt(p.zt, "convert", "h5-to-hf", ck, exp, "--dtype", "f32")
            c.check(rc == 0, f"{name}-full step {step}: zt convert h5-to-hf (exit {rc})")
            if rc == 0:
                kept(p, row, folder, exp, f"{name}-full step {step}", trained=True)
                same_logits(p, row, f"{name}-full step {step}: the export's text model", exp, ck, f64)


def refusals(p, row, folder, w):
    """Bad input: exit 2 naming the file and the field or tensor; nothing written. `w`: the
    folder's tensors."""
    from safetensors.torch import save_file
    torch = p.torch

    def without(tag, drop=(), add=None):
        d = with_config(folder, f"{folder}-bad-{tag}")
        t = {k: v for k, v in w.items() if k not in drop}
        t.update(add or {})
        save_file(t, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        return d
    gone = "model.visual.blocks.1.mlp.linear_fc1.weight"
    stray = "model.audio_tower.proj.weight"
    no_text = with_config(folder, folder + "-bad-no-text")
    ja = json.load(open(os.path.join(folder, "config.json")))
    json.dump({k: v for k, v in ja.items() if k != "text_config"},
              open(os.path.join(no_text, "config.json"), "w"))
    cases = [("a vision tensor missing", without("vision", drop=[gone]),
              (f"'{gone}'", "config.json", "'vision_config'")),
             ("no text_config", no_text, ("config.json", "'text_config'")),
             ("a tensor neither text nor carried", without("stray", add={stray: torch.zeros(2, 2)}),
              (f"'{stray}'", "model.safetensors", "model.visual.*", "mtp.*"))]
    if row.moe:
        expert = "model.language_model.layers.2.mlp.experts.3.up_proj.weight"
        d = without("expert", drop=[expert])
        cases.append(("an expert's tensor missing", d, (f"'{expert}'", f"'{d}'")))
    for tag, d, says in cases:
        rc, out = run_zt(p.zt, "convert", "hf-to-h5", d, d + ".h5")
        p.c.check(rc == 2 and all(x in out for x in says) and not os.path.exists(d + ".h5"),
                  f"{row.name}: bad input ({tag}): exit {rc} naming {', '.join(says)}; nothing "
                  f"written")
        if rc != 2:
            print(out[-1500:])


def adapters(p, text, tokens):
    """A LoRA step (q, v) on a Qwen3_5ForConditionalGeneration of full-attention layers only
    (LoRA is refused on Gated DeltaNet layers): the --adapter folder loads in PEFT onto the
    class under its names (model.language_model.*), exactly, nothing on the vision tower."""
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration
    c, torch = p.c, p.torch
    full = dict(text, vocab_size=264, num_hidden_layers=2, layer_types=["full_attention"] * 2)
    torch.manual_seed(5)
    folder = os.path.join(p.work, "qwen35-mm-lora")
    Qwen3_5ForConditionalGeneration(Qwen3_5Config(text_config=full, vision_config=VISION)) \
        .save_pretrained(folder)
    rc1, _ = run_zt(p.zt, "convert", "hf-to-h5", folder, folder + ".h5")
    os.replace(tokens, folder + "-tokens.h5")
    first = (f"ckpt.init_from={folder}.h5", "finetune.method=lora", "lora.targets=q,v",
             "train.steps=1", f"ckpt.dir={folder}-run")
    rc2, out = run_train(p, folder, [], *first)
    model_keys = re.findall(r"--set (model\.[a-z_]+=\S+)", out) if rc2 == 2 else []
    if model_keys:
        rc2, out = run_train(p, folder, model_keys + ["model.layer_types=ff"], *first)
    ad = folder + "-peft"
    rc3, out3 = run_zt(p.zt, "convert", "h5-to-hf", os.path.join(folder + "-run", "step-1.h5"),
                       ad, "--adapter") if rc2 == 0 else (1, "")
    c.check((rc1, rc2, rc3) == (0, 0, 0) and ARCH in out3,
            f"qwen35-mm-lora: import, one LoRA step, --adapter export naming {ARCH} "
            f"(exits {rc1} {rc2} {rc3})")
    if rc3 != 0:
        print((out + out3)[-2000:])
        return
    base = Qwen3_5ForConditionalGeneration.from_pretrained(folder, dtype=torch.float32)
    peft_multimodal(c, torch, "qwen35-mm-lora", base, ad, 8)
