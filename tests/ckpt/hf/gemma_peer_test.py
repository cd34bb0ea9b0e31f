#!/usr/bin/env python3
"""Gemma 3 (gemma3_text) and Gemma 2 (gemma2) against transformers: tiny random models made
by transformers' own classes, imported by zt.

  gemma_peer_test.py ZT ZT_LOGITS WORKDIR

Each case: 6 layers (the 5 sliding : 1 full pattern, or a pattern of its own), a sliding
window of 4 under a 16-token prompt and a 60-token continuation, a RoPE per layer type
(sliding 10000 unscaled, full 1e6 with linear scaling), query_pre_attn_scalar unlike
head_dim, every norm weight drawn N(1, 0.5) (transformers zero-initialises Gemma's (1 + w)
norms, which would hide them; near 0 the tied model's continuation repeats one token). Then (CausalLMPeer, as mistral_peer_test.py):
  - logits and KV-cache logits within max(1e-5 x max|logit|, 2 x transformers' own fp32
    error against float64), loss, greedy continuation past the window, `zt generate`
  - the export (`zt convert h5-to-hf`) reloads in transformers with the same logits,
    loss and continuation exactly, the same tensor names, and zt re-imports it
  - transformers 4's config form of the same model (rope_theta, rope_local_base_freq,
    rope_scaling, sliding_window_pattern; no layer_types) imports to the same logits
  - sensitivity: the window +-1, the sliding layers' theta, the full layers' theta,
    query_pre_attn_scalar, the final soft-cap and the norm offset (every norm weight + 1)
    each move transformers' logits by more than 10 x the tolerance
  - attn_logit_softcapping: transformers 5.24's Gemma3ForCausalLM ignores it (its attention
    gets no softcap, eager included): a copy with attn_logit_softcapping 3.0 gives
    transformers' eager logits bit-equal to the copy without it, so zt refuses the key
    (below) rather than cap; the soft-cap kernel itself is checked against Gemma 2's
    eager attention in tests/kernels/rope_attention_peer_test.py
  - bad input: a layer_types of the wrong length, an unknown layer type, linear_attention,
    attn_logit_softcapping set, a scaled sliding-layer RoPE: exit 2 naming config.json,
    the field and what is wrong, nothing written
Then the multimodal folder (Gemma3ForConditionalGeneration: a tiny SigLIP vision tower and
projector beside the same text model, tied and untied, float32 and bfloat16):
  - the text model's logits, loss, continuation and `zt generate` against transformers'
    text-only forward, as above
  - the export loads in transformers as Gemma3ForConditionalGeneration with every tensor
    (vision tower and projector included) bit-identical, the same tensor names and
    text_config, and zt re-imports it
  - a LoRA step (zt train, ckpt.init_from the imported folder): the merged export is
    Gemma3ForConditionalGeneration with the vision tower bit-identical and q_proj moved;
    the --adapter folder loads in PEFT onto Gemma3ForConditionalGeneration under its
    names, adapting the text model only, and PEFT's logits equal zt's merged model's;
    with the base moved away, --adapter warns that it wrote the text model's names
  - a full step from the same import, then a resume to step 2 with the imported file moved
    away: each checkpoint exports as Gemma3ForConditionalGeneration with the vision tower
    bit-identical, and transformers' logits of the export equal zt's of the checkpoint
  - two exports differing in one vision tensor only carry different export ids
  - bad input: a gemma3 config.json without text_config, a folder without one vision
    tensor: exit 2 naming the file and the field or tensor, nothing written
Then Gemma 2 (gemma2: Gemma2ForCausalLM, no q/k norms, one RoPE, alternating sliding and
full layers, both soft-caps, attention 3.0 and final 5.0 so that they bind), tied with
transformers' default schedule and untied with a layer_types of its own:
  - logits, KV-cache logits, loss, continuation past the window and `zt generate` as above
  - the export reloads in transformers with every tensor bit-identical and the same
    logits, loss and continuation, and zt re-imports it
  - transformers 4's form (rope_theta, no rope_parameters, no layer_types) imports alike
  - sensitivity: the attention cap 2.0 and null, the final cap null, the window +-1,
    rope_theta and query_pre_attn_scalar each move transformers' logits by > 10 x tol
  - bad input: a soft-cap of 0: exit 2 naming config.json and the key, nothing written
Exit 77 (CTest skip) without torch/transformers/peft (scripts/install-deps.sh --hf-peers).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_common import (CausalLMPeer, peft_multimodal, run_zt, with_config,  # noqa: E402
                       zt_logits_json)


def vision_kept(p, src, out, tag):
    """The export `out` loads as Gemma3ForConditionalGeneration with the folder `src`'s
    vision tower and projector bit-identical and q_proj moved (trained)."""
    from safetensors.torch import load_file
    from transformers import Gemma3ForConditionalGeneration
    a, b = load_file(os.path.join(src, "model.safetensors")), \
        load_file(os.path.join(out, "model.safetensors"))
    vis = [k for k in a if not k.startswith("language_model.")]
    q = "language_model.model.layers.0.self_attn.q_proj.weight"
    arch = json.load(open(os.path.join(out, "config.json"))).get("architectures")
    loaded = Gemma3ForConditionalGeneration.from_pretrained(out) \
        if arch == ["Gemma3ForConditionalGeneration"] else None
    p.c.check(loaded is not None and len(vis) > 0 and
              all(k in b and p.torch.equal(a[k], b[k]) for k in vis) and
              q in b and not p.torch.equal(a[q], b[q]),
              f"{tag}: the export loads as Gemma3ForConditionalGeneration, its {len(vis)} "
              f"vision and projector tensors bit-identical, q_proj trained (architectures {arch})")
    return loaded


def text_logits(p, model):
    """transformers' text-only logits [T, V] (float64) of a Gemma3ForConditionalGeneration."""
    model.eval()
    with p.torch.no_grad():
        return model(input_ids=p.ids).logits[0].double()


def same_logits(p, tag, hl, ckpt):
    """transformers' logits hl against zt's (zt_logits) on the checkpoint `ckpt`."""
    z = zt_logits_json(p.c, p.zt_logits, ckpt, p.tokens, 1)  # (context 64: no continuation)
    zl = p.torch.tensor(z["logits"], dtype=p.torch.float64)
    tol = p.tol * max(1.0, zl.abs().max().item())
    d = (zl - hl).abs().max().item() if zl.shape == hl.shape else float("inf")
    p.c.check(d <= tol, f"{tag}: max |logit transformers - zt| = {d:.3e} <= {tol:.3e}")
    return tol


def trained(p, vision):
    """One LoRA step and one full step (then a resume) from an imported gemma3 folder
    (vocab 264: byte tokens); every export keeps the vision tower."""
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3TextConfig
    c, torch, work = p.c, p.torch, p.work
    text = Gemma3TextConfig(vocab_size=264, hidden_size=64, intermediate_size=96,
                            num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
                            head_dim=16, max_position_embeddings=64, sliding_window=4,
                            query_pre_attn_scalar=24)
    cfg = Gemma3Config(text_config=text.to_dict(), vision_config=vision.to_dict(),
                       mm_tokens_per_image=4, image_token_index=260, boi_token_index=261,
                       eoi_token_index=262)
    torch.manual_seed(1)
    folder = os.path.join(work, "mm-lora")
    Gemma3ForConditionalGeneration(cfg).save_pretrained(folder)
    with open(os.path.join(work, "mm-lora.txt"), "w") as f:
        f.write("".join(chr(32 + (7 * i) % 95) for i in range(33)))
    rc1, _ = run_zt(p.zt, "convert", "hf-to-h5", folder, folder + ".h5")
    rc2, _ = run_zt(p.zt, "convert", "text-to-tokens", "--force",
                    os.path.join(work, "mm-lora.txt"), folder + "-tokens.h5")
    model = ["model.family=gemma3_text", "model.vocab=264", "model.hidden=64", "model.layers=6",
             "model.heads=4", "model.kv_heads=2", "model.intermediate=96",
             "model.tied_embeddings=true", "model.head_dim=16", "model.context=64",
             "model.norm_eps=1e-6", "model.sliding_window=4", "model.layer_types=sssssf",
             "model.rope_theta=1000000", "model.rope_local_theta=10000",
             "model.query_pre_attn_scalar=24", "train.lr=0.01",
             "train.min_lr=0.01", "train.warmup=0", f"data.path={folder}-tokens.h5",
             "train.seq_len=16", "train.global_batch=2", "train.micro_batch=1",
             "data.eval_fraction=0", "eval.every=0", "sample.tokens=0", "ckpt.every=1",
             "train.threads=1"]

    def train(*keys):
        return run_zt(p.zt, "train", *[a for kv in model + list(keys) for a in ("--set", kv)])
    rc3, out = train(f"ckpt.init_from={folder}.h5", "finetune.method=lora", "lora.targets=q,v",
                     "train.steps=1", f"ckpt.dir={folder}-run")
    step1 = os.path.join(folder + "-run", "step-1.h5")
    merged = folder + "-merged"
    rc4, _ = run_zt(p.zt, "convert", "h5-to-hf", step1, merged, "--dtype", "f32") \
        if rc3 == 0 else (1, "")
    c.check((rc1, rc2, rc3, rc4) == (0, 0, 0, 0),
            f"mm-lora: import, tokens, one LoRA step, merged export (exits {rc1} {rc2} {rc3} {rc4})")
    if rc4 != 0:
        print(out[-2000:])
        return
    vision_kept(p, folder, merged, "mm-lora merged")
    # The adapters as a PEFT folder on the multimodal base: PEFT's names for
    # Gemma3ForConditionalGeneration, no adapter on the vision tower, and PEFT's logits
    # (base + adapters, unmerged) equal zt's of the merged model.
    ad = folder + "-peft"
    rc5, _ = run_zt(p.zt, "convert", "h5-to-hf", step1, ad, "--adapter")
    rc6, _ = run_zt(p.zt, "convert", "hf-to-h5", merged, merged + ".h5")
    c.check((rc5, rc6) == (0, 0), f"mm-lora: --adapter export, merged re-import (exits {rc5} {rc6})")
    if (rc5, rc6) != (0, 0):
        return
    base = Gemma3ForConditionalGeneration.from_pretrained(folder, dtype=torch.float32)
    hl_base = text_logits(p, base)
    pm = peft_multimodal(c, torch, "mm-lora", base, ad, 24)
    hl = text_logits(p, pm)
    tol = same_logits(p, "mm-lora PEFT on the multimodal base", hl, merged + ".h5")
    d = (hl - hl_base).abs().max().item()
    c.check(d > 10 * tol, f"mm-lora: the adapters move PEFT's logits by {d:.3e} > 10 x tol")
    # The base moved away: the adapter folder is the text model's, and the export says so.
    os.replace(folder + ".h5", folder + "-away.h5")
    rc, out = run_zt(p.zt, "convert", "h5-to-hf", step1, ad + "-nobase", "--adapter")
    os.replace(folder + "-away.h5", folder + ".h5")
    c.check(rc == 0 and "is not there" in out and "multimodal" in out,
            f"mm-lora: --adapter with the base moved away warns that the names are the text "
            f"model's (exit {rc})")
    # A full fine-tune: every checkpoint carries the vision tower (the base file is not read
    # again: moved away before the resume), exports whole, and its text weights are zt's.
    rc7, out = train(f"ckpt.init_from={folder}.h5", "train.steps=1", f"ckpt.dir={folder}-full")
    moved = folder + "-moved.h5"
    os.replace(folder + ".h5", moved)
    rc8, out8 = train("ckpt.resume=auto", "train.steps=2", f"ckpt.dir={folder}-full") \
        if rc7 == 0 else (1, "")
    os.replace(moved, folder + ".h5")
    c.check((rc7, rc8) == (0, 0) and "resumed from" in out8,
            f"mm-full: one full step, a resume to step 2 with the base moved (exits {rc7} {rc8})")
    if (rc7, rc8) != (0, 0):
        print((out + out8)[-2000:])
        return
    for step in (1, 2):
        ck = os.path.join(folder + "-full", f"step-{step}.h5")
        exp = f"{folder}-full-{step}"
        rc, _ = run_zt(p.zt, "convert", "h5-to-hf", ck, exp, "--dtype", "f32")
        c.check(rc == 0, f"mm-full step {step}: zt convert h5-to-hf (exit {rc})")
        loaded = vision_kept(p, folder, exp, f"mm-full step {step}") if rc == 0 else None
        if loaded is not None:
            same_logits(p, f"mm-full step {step}: the export's text model",
                        text_logits(p, loaded), ck)


def multimodal(p, prepare):
    """The multimodal folder's checks (the docstring's second part)."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file
    from transformers import (Gemma3Config, Gemma3ForConditionalGeneration, Gemma3TextConfig,
                              SiglipVisionConfig)
    c, torch = p.c, p.torch
    vision = SiglipVisionConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                num_attention_heads=2, image_size=28, patch_size=14)

    def names(folder):
        with safe_open(os.path.join(folder, "model.safetensors"), "pt") as f:
            return sorted(f.keys())
    folder = None
    for name, tied, dtype in (("mm-tied", True, "f32"), ("mm-untied", False, "f32"),
                              ("mm-tied-bf16", True, "bf16")):
        text = Gemma3TextConfig(vocab_size=96, hidden_size=64, intermediate_size=96,
                                num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
                                head_dim=16, max_position_embeddings=128, sliding_window=4,
                                query_pre_attn_scalar=24, initializer_range=0.3, bos_token_id=2,
                                eos_token_id=None, pad_token_id=0,
                                rope_scaling={"rope_type": "linear", "factor": 2.0})
        cfg = Gemma3Config(text_config=text.to_dict(), vision_config=vision.to_dict(),
                           mm_tokens_per_image=4, image_token_index=90, boi_token_index=91,
                           eoi_token_index=92, tie_word_embeddings=tied, initializer_range=0.3)

        def prep(model):
            prepare(model)
            with torch.no_grad():  # N(0, 0.3): the tied head's continuation repeats one token
                model.get_input_embeddings().weight.normal_(0.0, 0.1)
            if dtype == "bf16":
                model.to(torch.bfloat16)
        got = p.imported(name, Gemma3ForConditionalGeneration, cfg,
                         dict(model_type="gemma3", tie_word_embeddings=tied), prepare=prep)
        if got is None:
            continue
        folder, h5, hf, z, tol = got
        out = folder + "-export"
        if dtype == "f32":
            out = p.exported(name, folder, h5, hf, z, "Gemma3ForConditionalGeneration",
                             ("tie_word_embeddings", "mm_tokens_per_image", "image_token_index"))
        else:  # the source dtype: bf16 weights written back as they were read
            rc, _ = run_zt(p.zt, "convert", "h5-to-hf", h5, out)
            c.check(rc == 0, f"{name}: zt convert h5-to-hf in the source dtype (exit {rc})")
        if not out or not os.path.exists(out):
            continue
        a, b = load_file(os.path.join(folder, "model.safetensors")), \
            load_file(os.path.join(out, "model.safetensors"))
        c.check(names(out) == names(folder),
                f"{name}: the export holds the folder's {len(a)} tensor names")
        ma = Gemma3ForConditionalGeneration.from_pretrained(folder).state_dict()
        mb = Gemma3ForConditionalGeneration.from_pretrained(out).state_dict()
        same = sorted(ma) == sorted(mb) and all(
            ma[k].dtype == mb[k].dtype and torch.equal(ma[k], mb[k]) for k in ma)
        nvision = sum(1 for k in a if "vision" in k or "projector" in k)
        c.check(same and nvision > 0 and all(k in b and torch.equal(a[k], b[k]) for k in a),
                f"{name}: transformers loads the export as Gemma3ForConditionalGeneration with "
                f"every tensor bit-identical ({len(ma)}, of which {nvision} vision and projector)")
        ja, jb = (json.load(open(os.path.join(f, "config.json"))) for f in (folder, out))
        keep = ("vision_config", "mm_tokens_per_image", "image_token_index", "boi_token_index")
        c.check(all(ja.get(k) == jb.get(k) for k in keep) and
                all(jb["text_config"].get(k) == v for k, v in ja["text_config"].items()
                    if k not in ("dtype", "torch_dtype", "tie_word_embeddings")),
                f"{name}: the export's config.json keeps vision_config, the image tokens and "
                f"every text_config value")
    if folder is None:
        return
    trained(p, vision)
    # Two exports that differ in one vision tensor only carry different export ids (hf-to-h5
    # refuses a folder mixing their shards).
    folder = os.path.join(p.work, "mm-tied")
    other = with_config(folder, folder + "-other-vision")
    t = load_file(os.path.join(folder, "model.safetensors"))
    t["vision_tower.post_layernorm.bias"] += 1.0
    save_file(t, os.path.join(other, "model.safetensors"), metadata={"format": "pt"})
    ids = []
    for d in (folder, other):
        rc1, _ = run_zt(p.zt, "convert", "hf-to-h5", d, d + "-id.h5")
        rc2, _ = run_zt(p.zt, "convert", "h5-to-hf", d + "-id.h5", d + "-id", "--dtype", "f32")
        with safe_open(os.path.join(d + "-id", "model.safetensors"), "pt") as f:
            ids.append((rc1, rc2, f.metadata().get("zt_export_id")))
    c.check(ids[0][:2] == ids[1][:2] == (0, 0) and ids[0][2] != ids[1][2],
            f"exports differing in one vision tensor have different export ids {ids}")
    # Bad input: exit 2 naming the file and the field or tensor; nothing written.
    folder = os.path.join(p.work, "mm-tied")
    cj = json.load(open(os.path.join(folder, "config.json")))
    bad = with_config(folder, folder + "-bad-no-text")
    json.dump({k: v for k, v in cj.items() if k != "text_config"},
              open(os.path.join(bad, "config.json"), "w"))
    gone = "vision_tower.encoder.layers.1.mlp.fc1.weight"
    missing = with_config(folder, folder + "-bad-vision")
    t = load_file(os.path.join(folder, "model.safetensors"))
    del t[gone]
    save_file(t, os.path.join(missing, "model.safetensors"), metadata={"format": "pt"})
    for tag, d, says in (("no text_config", bad, ("config.json", "'text_config'")),
                         ("a vision tensor missing", missing,
                          (f"'{gone}'", "config.json", "'vision_config'"))):
        rc, out = run_zt(p.zt, "convert", "hf-to-h5", d, d + ".h5")
        c.check(rc == 2 and all(x in out for x in says) and not os.path.exists(d + ".h5"),
                f"bad input ({tag}): exit {rc} naming {', '.join(says)}; nothing written")


def v4_form(p, name, folder, z, v4):
    """transformers 4's config.json `v4` of the model in `folder` imports to zt's logits z."""
    old = with_config(folder, f"{folder}-v4")
    json.dump(v4, open(os.path.join(old, "config.json"), "w"), indent=2)
    rc, _ = run_zt(p.zt, "convert", "hf-to-h5", old, old + ".h5")
    p.c.check(rc == 0 and p.zt_run(old + ".h5")["logits"] == z["logits"],
              f"{name}: transformers 4's config form imports to the same logits (exit {rc})")


def gemma2(p, norms):
    """Gemma 2's checks (the docstring's third part)."""
    from safetensors.torch import load_file
    from transformers import Gemma2Config, Gemma2ForCausalLM
    c, torch = p.c, p.torch
    for name, types, tied in (("g2-alt-tied", None, True),
                              ("g2-types-untied", ["full_attention", "sliding_attention",
                                                   "sliding_attention", "full_attention"], False)):
        cfg = Gemma2Config(vocab_size=96, hidden_size=64, intermediate_size=96,
                           num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                           head_dim=16, max_position_embeddings=128, sliding_window=4,
                           query_pre_attn_scalar=24, layer_types=types, attn_logit_softcapping=3.0,
                           final_logit_softcapping=5.0, tie_word_embeddings=tied,
                           rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                           initializer_range=0.3, bos_token_id=2, eos_token_id=None,
                           pad_token_id=0)
        def prep(model):
            norms(model)
            with torch.no_grad():  # N(0, 0.3): the tied head's continuation repeats one token
                model.get_input_embeddings().weight.normal_(0.0, 0.1)
        got = p.imported(name, Gemma2ForCausalLM, cfg,
                         dict(model_type="gemma2", attn_logit_softcapping=3.0,
                              final_logit_softcapping=5.0), prepare=prep)
        if got is None:
            continue
        folder, h5, hf, z, tol = got
        hl = hf[0]
        for tag, change in (("attn_logit_softcapping 2.0", dict(attn_logit_softcapping=2.0)),
                            ("attn_logit_softcapping null", dict(attn_logit_softcapping=None)),
                            ("final_logit_softcapping null", dict(final_logit_softcapping=None)),
                            ("sliding_window 3", dict(sliding_window=3)),
                            ("sliding_window 5", dict(sliding_window=5)),
                            ("rope_theta 500", dict(rope_parameters={"rope_type": "default",
                                                                     "rope_theta": 500.0})),
                            ("query_pre_attn_scalar 16", dict(query_pre_attn_scalar=16))):
            ol, _, _ = p.hf_run(with_config(folder, f"{folder}-{tag.replace(' ', '-')}", **change))
            d = (ol - hl).abs().max().item()
            c.check(d > 10 * tol, f"{name}: sensitivity: {tag} moves the logits by {d:.3e} > "
                                  f"10 x tol")
        cj = json.load(open(os.path.join(folder, "config.json")))
        v4 = {k: v for k, v in cj.items() if k not in ("rope_parameters", "layer_types")}
        v4["rope_theta"] = cj["rope_parameters"]["rope_theta"]
        if types is not None:
            v4["layer_types"] = types
        v4_form(p, name, folder, z, v4)
        out = p.exported(name, folder, h5, hf, z, "Gemma2ForCausalLM",
                         ("sliding_window", "layer_types", "rope_parameters",
                          "query_pre_attn_scalar", "final_logit_softcapping",
                          "attn_logit_softcapping", "tie_word_embeddings"))
        if out:
            ma, mb = (Gemma2ForCausalLM.from_pretrained(d).state_dict() for d in (folder, out))
            a, b = (load_file(os.path.join(d, "model.safetensors")) for d in (folder, out))
            c.check(sorted(ma) == sorted(mb) and all(torch.equal(ma[k], mb[k]) for k in ma) and
                    sorted(a) == sorted(b),
                    f"{name}: transformers loads the export with every tensor bit-identical "
                    f"({len(ma)}), the same {len(a)} tensor names")
    folder = os.path.join(p.work, "g2-alt-tied")
    for key in ("attn_logit_softcapping", "final_logit_softcapping"):
        bad = with_config(folder, f"{folder}-bad-{key}", **{key: 0.0})
        rc, out = run_zt(p.zt, "convert", "hf-to-h5", bad, bad + ".h5")
        c.check(rc == 2 and "config.json" in out and f"'{key}'" in out and "> 0" in out
                and not os.path.exists(bad + ".h5"),
                f"bad input ({key} 0): exit {rc} naming config.json and {key}; nothing written")


def main():
    p = CausalLMPeer(__doc__, t=16, new=60, peers=("peft",))
    from transformers import Gemma3TextConfig, Gemma3ForCausalLM
    c, torch = p.c, p.torch

    def norms(model, shift=None):
        with torch.no_grad():
            for n, w in model.named_parameters():
                if "norm" in n:
                    if shift is None:
                        w.normal_(1.0, 0.5)
                    else:
                        w.add_(shift)

    # (name, layer_types or None (the 5:1 default), final soft-cap, tied)
    cases = [("g6-5to1-tied", None, None, True),
             ("g6-mixed-softcap", ["full_attention", "sliding_attention", "sliding_attention",
                                   "full_attention", "sliding_attention", "sliding_attention"],
              8.0, False)]
    for name, types, cap, tied in cases:
        cfg = Gemma3TextConfig(vocab_size=96, hidden_size=64, intermediate_size=96,
                               num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
                               head_dim=16, max_position_embeddings=128, sliding_window=4,
                               query_pre_attn_scalar=24, layer_types=types,
                               final_logit_softcapping=cap, tie_word_embeddings=tied,
                               rope_scaling={"rope_type": "linear", "factor": 2.0},
                               initializer_range=0.3, bos_token_id=2, eos_token_id=None,
                               pad_token_id=0)
        got = p.imported(name, Gemma3ForCausalLM, cfg,
                         dict(model_type="gemma3_text", sliding_window=4,
                              final_logit_softcapping=cap), prepare=norms)
        if got is None:
            continue
        folder, h5, hf, z, tol = got
        hl = hf[0]

        def moved(tag, dst):
            ol, _, _ = p.hf_run(dst)
            d = (ol - hl).abs().max().item()
            c.check(d > 10 * tol, f"{name}: sensitivity: {tag} moves the logits by {d:.3e} > "
                                  f"10 x tol")
        cj = json.load(open(os.path.join(folder, "config.json")))
        rp = cj["rope_parameters"]
        for w in (3, 5):
            moved(f"sliding_window {w}", with_config(folder, f"{folder}-w{w}", sliding_window=w))
        for kind, theta in (("sliding_attention", 500.0), ("full_attention", 10000.0)):
            r = json.loads(json.dumps(rp))
            r[kind]["rope_theta"] = theta
            moved(f"{kind} rope_theta {theta}",
                  with_config(folder, f"{folder}-{kind}", rope_parameters=r))
        moved("query_pre_attn_scalar 16",
              with_config(folder, f"{folder}-q16", query_pre_attn_scalar=16))
        moved("final_logit_softcapping " + ("null" if cap else "2.0"),
              with_config(folder, f"{folder}-cap", final_logit_softcapping=None if cap else 2.0))
        eager = {}
        for tag, d in (("null", folder), ("3.0", with_config(folder, f"{folder}-attn-cap",
                                                             attn_logit_softcapping=3.0))):
            m = Gemma3ForCausalLM.from_pretrained(d, dtype=torch.float32,
                                                  attn_implementation="eager").eval()
            with torch.no_grad():
                eager[tag] = m(p.ids).logits
        d = (eager["3.0"] - eager["null"]).abs().max().item()
        c.check(d == 0.0, f"{name}: transformers' Gemma3 (eager) ignores attn_logit_softcapping "
                          f"3.0: its logits move by {d:.3e} (zt refuses the key on import)")
        m = Gemma3ForCausalLM.from_pretrained(folder, dtype=torch.float32)
        norms(m, shift=1.0)
        m.save_pretrained(f"{folder}-norm+1")
        moved("every norm weight + 1", f"{folder}-norm+1")
        # transformers 4's form of the same model: the same logits in zt.
        v4 = {k: v for k, v in cj.items() if k not in ("rope_parameters", "layer_types")}
        v4.update(rope_theta=rp["full_attention"]["rope_theta"],
                  rope_local_base_freq=rp["sliding_attention"]["rope_theta"],
                  rope_scaling={"rope_type": "linear", "factor": 2.0})
        if types is None:
            v4["sliding_window_pattern"] = 6
        else:
            v4["layer_types"] = types
        v4_form(p, name, folder, z, v4)
        p.exported(name, folder, h5, hf, z, "Gemma3ForCausalLM",
                   ("sliding_window", "layer_types", "rope_parameters", "query_pre_attn_scalar",
                    "final_logit_softcapping", "tie_word_embeddings"))
    # Bad input: exit 2 naming the file and the field.
    folder = os.path.join(p.work, cases[0][0])
    short, sliding = ["sliding_attention"] * 5, "sliding_attention"
    for tag, change, field, says in (
            ("short", dict(layer_types=short), "layer_types", "num_hidden_layers (6)"),
            ("unknown", dict(layer_types=short + ["chunked_attention"]), "layer_types",
             '"chunked_attention"'),
            ("linear", dict(layer_types=short + ["linear_attention"]), "layer_types",
             "Qwen3.5's linear attention"),
            ("attn-softcap", dict(attn_logit_softcapping=50.0), "attn_logit_softcapping",
             "does not apply it"),
            ("sliding-scaled", dict(rope_parameters={
                "full_attention": {"rope_type": "default", "rope_theta": 1e6},
                sliding: {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}}),
             "rope_parameters.sliding_attention.rope_type", "without scaling")):
        bad = with_config(folder, f"{folder}-bad-{tag}", **change)
        rc, out = run_zt(p.zt, "convert", "hf-to-h5", bad, bad + ".h5")
        c.check(rc == 2 and "config.json" in out and f"'{field}'" in out and says in out
                and not os.path.exists(bad + ".h5"),
                f"bad input ({tag}): exit {rc} naming config.json, {field} and {says}; nothing "
                f"written")
    gemma2(p, norms)
    multimodal(p, norms)
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
