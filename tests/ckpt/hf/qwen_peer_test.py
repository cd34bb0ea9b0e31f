#!/usr/bin/env python3
"""Qwen2 / Qwen3 against transformers: tiny random models of each family, imported by zt.

  qwen_peer_test.py ZT ZT_LOGITS WORKDIR

Cases, each built with transformers' own Qwen2Config / Qwen3Config + *ForCausalLM (random
weights, float32; biases drawn N(0, 0.3) and norm weights 1 + N(0, 0.1), since transformers
initialises them to 0 and 1), saved with save_pretrained:
  qwen2 untied and tied      q/k/v biases (o_proj none)
  qwen3 untied               q/k norms, head_dim 24 != hidden / heads = 16
  qwen3 tied attention_bias  the same with q/k/v and o biases
Then, per case:
  - `zt convert hf-to-h5` imports the folder; ZT_LOGITS prints zt's logits of every prefix,
    its KV-cache logits, loss and greedy continuation
  - logits (and KV-cache logits): max |zt - transformers| <= 1e-5 x max(1, max |logit|)
  - loss: |zt - transformers| <= 1e-5
  - greedy continuation equal token for token (zt's sampler and `zt generate
    --temperature 0` on the HF folder itself)
  - `zt convert h5-to-hf` exports it again: AutoConfig reads the same model_type, head_dim,
    attention_bias and tie_word_embeddings, and transformers' logits on the export equal the
    original's (the same fp32 weights: exactly)
  - sensitivity: the same model with its biases zeroed and q/k norm weights set to 1 gives
    logits more than 10 x the tolerance away (so the test sees the family's pieces)
  qwen2 / qwen3 sliding      use_sliding_window true, sliding_window 8 < 24 tokens,
                             max_window_layers 1 of 2 (layer 0 full, layer 1 sliding): the
    same checks, the export's use_sliding_window / sliding_window / max_window_layers /
    layer_types as the original's, and sensitivity: the same weights with the window one
    longer or shorter, or the first sliding layer 0 or 2, move transformers' logits by more
    than 10 x the tolerance (so an off-by-one in zt would be seen)
  qwen2 layer_types          transformers 5's form (layer_types given, max_window_layers left
    at its default): imported as the same model; a sliding layer before a full one is
    refused by name (exit 2)
Exit 77 (CTest skip) without torch/transformers (scripts/install-deps.sh --hf-peers).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_common import (compare_with_transformers, hf_llama_run, peer_start,  # noqa: E402
                       perturb_biases_and_norms, run_zt)

NEW = 16
SLIDING = dict(tie_word_embeddings=False, use_sliding_window=True, sliding_window=8,
               max_window_layers=1)
WINDOW_KEYS = ("use_sliding_window", "sliding_window", "max_window_layers", "layer_types")


def main():
    zt, zt_logits, work, torch, c = peer_start(__doc__)
    from transformers import (AutoConfig, AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM,
                              Qwen3Config, Qwen3ForCausalLM)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 96, (24,), generator=gen).tolist()
    ids = torch.tensor([tokens])
    common = dict(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                  rms_norm_eps=1e-5, initializer_range=0.3)  # no eos: min_new_tokens would mask it
    cases = [
        ("qwen2-untied", Qwen2Config, Qwen2ForCausalLM, dict(tie_word_embeddings=False)),
        ("qwen2-tied", Qwen2Config, Qwen2ForCausalLM, dict(tie_word_embeddings=True)),
        ("qwen3-untied", Qwen3Config, Qwen3ForCausalLM,
         dict(tie_word_embeddings=False, head_dim=24)),
        ("qwen3-tied-bias", Qwen3Config, Qwen3ForCausalLM,
         dict(tie_word_embeddings=True, head_dim=24, attention_bias=True)),
        ("qwen2-sliding", Qwen2Config, Qwen2ForCausalLM, dict(SLIDING)),
        ("qwen3-sliding", Qwen3Config, Qwen3ForCausalLM, dict(SLIDING, head_dim=24)),
        ("qwen2-layer-types", Qwen2Config, Qwen2ForCausalLM,
         dict(use_sliding_window=True, sliding_window=8,
              layer_types=["full_attention", "sliding_attention"])),
    ]
    for name, config_cls, model_cls, extra in cases:
        torch.manual_seed(1)
        cfg = config_cls(**common, **extra)
        model = model_cls(cfg).to(torch.float32)
        perturb_biases_and_norms(torch, model)
        folder = os.path.join(work, name)
        model.save_pretrained(folder, safe_serialization=True)
        # Sliding cases: the same weights with the window or the first sliding layer moved.
        variants = []
        if extra.get("max_window_layers") == 1:
            for what, change in (("sliding_window 9", dict(sliding_window=9)),
                                 ("sliding_window 7", dict(sliding_window=7)),
                                 ("max_window_layers 0", dict(max_window_layers=0)),
                                 ("max_window_layers 2", dict(max_window_layers=2))):
                other = model_cls(config_cls(**common, **dict(extra, **change))).to(torch.float32)
                other.load_state_dict(model.state_dict())
                with torch.no_grad():
                    variants.append((what, other(ids).logits[0].double()))
        # The sensitivity reference: biases 0, q/k norm weights 1.
        with torch.no_grad():
            for pname, p in model.named_parameters():
                if pname.endswith(".bias"):
                    p.zero_()
                elif pname.endswith(("q_norm.weight", "k_norm.weight")):
                    p.fill_(1.0)
            plain = model(ids).logits[0].double()
        got = compare_with_transformers(c, torch, zt, zt_logits, name, folder, folder + ".h5",
                                        tokens, NEW, plain, "without biases / q-k norms")
        if got is None:
            continue
        hl, hgen = got
        for what, ol in variants:
            d = (ol - hl.double()).abs().max().item()
            c.check(d > 10 * 1e-5 * max(1.0, hl.abs().max().item()),
                    f"{name}: sensitivity: {what} moves transformers' logits by {d:.1e}")
        exported = folder + "-export"
        rc, out = run_zt(zt, "convert", "h5-to-hf", folder + ".h5", exported, "--dtype", "f32")
        c.check(rc == 0, f"{name}: zt convert h5-to-hf (exit {rc})")
        if rc != 0:
            print(out)
            continue
        a, b = AutoConfig.from_pretrained(folder), AutoConfig.from_pretrained(exported)
        for key in ("model_type", "head_dim", "attention_bias", "tie_word_embeddings",
                    "num_key_value_heads", "rope_parameters"):
            va, vb = getattr(a, key, None), getattr(b, key, None)
            if key == "head_dim" and va is None:
                va = a.hidden_size // a.num_attention_heads
            c.check(va == vb, f"{name}: AutoConfig reads the export's {key} as the original's ({vb})")
        keys = WINDOW_KEYS if "max_window_layers" in extra else ("layer_types",)
        if "layer_types" in extra:  # the export writes max_window_layers 1 for the default 28
            keys = ("use_sliding_window", "sliding_window", "layer_types")
        for key in keys:
            va, vb = getattr(a, key, None), getattr(b, key, None)
            c.check(va == vb, f"{name}: AutoConfig reads the export's {key} as the original's ({vb})")
        el, _, egen = hf_llama_run(torch, exported, ids, NEW)
        c.check(torch.equal(el, hl) and egen == hgen,
                f"{name}: transformers on the export: the same logits (max diff "
                f"{(el - hl).abs().max().item():.1e}) and continuation")
        c.check(type(AutoModelForCausalLM.from_config(b)) is model_cls,
                f"{name}: the export loads as {model_cls.__name__}")

    # A sliding layer before a full one: zt has no form for it, refused by name.
    cj = json.load(open(os.path.join(work, "qwen2-sliding", "config.json")))
    cj.update(layer_types=["sliding_attention", "full_attention"])
    sw = os.path.join(work, "qwen2-sliding-first")
    os.makedirs(sw, exist_ok=True)
    json.dump(cj, open(os.path.join(sw, "config.json"), "w"))
    os.symlink(os.path.join(work, "qwen2-sliding", "model.safetensors"),
               os.path.join(sw, "model.safetensors"))
    rc, out = run_zt(zt, "convert", "hf-to-h5", sw, sw + ".h5")
    c.check(rc == 2 and "layer_types" in out and "full-attention layer 1" in out,
            f"layer_types sliding then full: exit {rc} (2) naming the field")
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
