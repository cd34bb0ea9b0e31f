#!/usr/bin/env python3
"""RoPE scaling against transformers: tiny random Llamas with rope_scaling llama3 (factor 8)
and linear, in both config.json forms, tied and untied, imported by zt.

  rope_peer_test.py ZT ZT_LOGITS WORKDIR

For each case, transformers' own LlamaConfig + LlamaForCausalLM (random weights, float32)
is saved with save_pretrained. The installed transformers (5.x) writes `rope_parameters`
(rope_theta and rope_type inside); the transformers-4 form (top-level rope_theta and
rope_scaling) is made by rewriting that config.json; when the installed transformers
writes the old form, the new one is made the other way round. Then:
  - `zt convert hf-to-h5` imports the folder; ZT_LOGITS (tests/ckpt/hf/zt_logits.cpp)
    prints zt's logits of every prefix, its KV-cache logits, loss and greedy continuation
  - logits (and KV-cache logits): max |zt - transformers| <= 1e-5 x max(1, max |logit|)
  - loss: |zt - transformers| <= 1e-5
  - greedy continuation equal token for token (zt's sampler and `zt generate
    --temperature 0` on the HF folder itself)
  - `zt convert h5-to-hf` exports it again: transformers' AutoConfig reads the same
    rope_theta / rope_type / factors, and the exported model's logits equal the original's
    (the same fp32 weights: exactly)
  - sensitivity: the same weights without rope scaling give logits that differ from the
    scaled ones by more than 10 x the tolerance (so the test sees the scaling)
Exit 77 (CTest skip) without torch/transformers (scripts/install-deps.sh --hf-peers).
"""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_common import compare_with_transformers, hf_llama_run, peer_start, run_zt  # noqa: E402

NEW = 16
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 16}
LINEAR = {"rope_type": "linear", "factor": 4.0}


def to_v4(cfg):
    """transformers 4's form: top-level rope_theta + rope_scaling (null when default)."""
    cfg = dict(cfg)
    params = dict(cfg.pop("rope_parameters"))
    cfg["rope_theta"] = params.pop("rope_theta")
    cfg["rope_scaling"] = None if params.get("rope_type") == "default" else params
    return cfg


def to_v5(cfg):
    """transformers 5's form: rope_parameters with rope_theta and rope_type inside."""
    cfg = dict(cfg)
    scaling = cfg.pop("rope_scaling", None) or {"rope_type": "default"}
    params = dict(scaling)
    params.setdefault("rope_type", params.pop("type", "default"))
    params["rope_theta"] = cfg.pop("rope_theta", 10000.0)
    cfg["rope_parameters"] = params
    return cfg


def main():
    zt, zt_logits, work, torch, c = peer_start(__doc__)
    from transformers import AutoConfig, LlamaConfig, LlamaForCausalLM
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 96, (24,), generator=gen).tolist()
    ids = torch.tensor([tokens])
    hf_run = lambda folder: hf_llama_run(torch, folder, ids, NEW)  # noqa: E731

    cases = [("llama3-untied", LLAMA3, False), ("llama3-tied", LLAMA3, True),
             ("linear-untied", LINEAR, False)]
    for name, scaling, tied in cases:
        torch.manual_seed(1)
        cfg = LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                          rms_norm_eps=1e-5, rope_theta=10000.0, rope_scaling=dict(scaling),
                          tie_word_embeddings=tied, initializer_range=0.3, bos_token_id=1,
                          eos_token_id=2)
        model = LlamaForCausalLM(cfg).to(torch.float32)
        base = os.path.join(work, name)
        model.save_pretrained(base + "-saved", safe_serialization=True)
        saved = json.load(open(os.path.join(base + "-saved", "config.json")))
        native = "v5" if "rope_parameters" in saved else "v4"
        forms = {"v5": saved if native == "v5" else to_v5(saved),
                 "v4": saved if native == "v4" else to_v4(saved)}
        print(f"      {name}: transformers writes the {native} form; the other is rewritten")
        # The same weights without scaling: the sensitivity reference.
        plain = dict(forms["v4"], rope_scaling=None)
        plain_dir = base + "-plain"
        shutil.copytree(base + "-saved", plain_dir)
        json.dump(plain, open(os.path.join(plain_dir, "config.json"), "w"), indent=2)
        hl_plain, _, _ = hf_run(plain_dir)
        for form, cj in forms.items():
            tag = f"{name} {form}"
            folder = f"{base}-{form}"
            shutil.copytree(base + "-saved", folder)
            json.dump(cj, open(os.path.join(folder, "config.json"), "w"), indent=2)
            h5 = folder + ".h5"
            got = compare_with_transformers(c, torch, zt, zt_logits, tag, folder, h5, tokens, NEW,
                                            hl_plain, "unscaled vs scaled")
            if got is None:
                continue
            hl, hgen = got
            # Export and re-load.
            exported = folder + "-export"
            rc, out = run_zt(zt, "convert", "h5-to-hf", h5, exported, "--dtype", "f32")
            c.check(rc == 0, f"{tag}: zt convert h5-to-hf (exit {rc})")
            if rc != 0:
                print(out)
                continue
            a, b = AutoConfig.from_pretrained(folder), AutoConfig.from_pretrained(exported)
            ra, rb = a.rope_parameters, b.rope_parameters
            c.check(ra == rb, f"{tag}: AutoConfig reads the export's RoPE as the original's ({rb})")
            c.check(a.tie_word_embeddings == b.tie_word_embeddings == tied,
                    f"{tag}: tie_word_embeddings {b.tie_word_embeddings} kept")
            el, eloss, egen = hf_run(exported)
            c.check(torch.equal(el, hl) and egen == hgen,
                    f"{tag}: transformers on the export: the same logits (max diff "
                    f"{(el - hl).abs().max().item():.1e}) and continuation")
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
