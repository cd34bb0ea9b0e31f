"""Absent config.json fields, every family zt imports: zt's values against transformers'.

    hf_defaults_test.py ZT ZT_HF_CONFIG WORKDIR

The families are those zt names when it refuses an unknown model_type. For each, the
reference is transformers' own config class (AutoConfig.from_pretrained on the same
config.json): its to_dict() of a default instance, and of a small one (so that defaults
derived from other fields, num_key_value_heads and head_dim, are exercised), and of one
with use_sliding_window true, each written whole, with each field zt reads removed in
turn, and with every optional field removed at once. zt (tests/ckpt/hf/zt_hf_config.cpp:
read_hf_config) must give transformers' value for every field it reads, or refuse (exit
2) naming the removed field and saying it is absent (or missing). Skipped without
transformers (hf_common.torch_peers).
"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_common import Checker, torch_peers  # noqa: E402

# The architecture's sizes: zt refuses their absence by name.
REQUIRED = ["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
            "intermediate_size"]
# Fields zt reads (removed in turn); "rope" stands for rope_theta, rope_parameters and
# rope_scaling together (a file without any RoPE setting).
OPTIONAL = ["num_key_value_heads", "max_position_embeddings", "rope", "rms_norm_eps",
            "tie_word_embeddings", "head_dim", "attention_bias", "qkv_bias", "sliding_window",
            "use_sliding_window", "max_window_layers", "layer_types", "num_local_experts",
            "num_experts", "num_experts_per_tok", "moe_intermediate_size", "norm_topk_prob",
            "shared_expert_intermediate_size", "decoder_sparse_step", "mlp_only_layers",
            "router_aux_loss_coef", "output_router_logits", "query_pre_attn_scalar",
            "final_logit_softcapping", "attn_logit_softcapping"]


def without(d, field):
    d = dict(d)
    for k in (["rope_theta", "rope_parameters", "rope_scaling"] if field == "rope" else [field]):
        d.pop(k, None)
    return d


def reference(c, mt):
    """transformers' values of what zt reads, under zt_hf_config's names."""
    heads = c.num_attention_heads
    r = {"vocab_size": c.vocab_size, "hidden_size": c.hidden_size,
         "num_hidden_layers": c.num_hidden_layers, "num_attention_heads": heads,
         "num_key_value_heads": c.num_key_value_heads if c.num_key_value_heads is not None else heads,
         # qwen3_5_moe_text has none (every layer routed): the experts' width.
         "intermediate_size": getattr(c, "intermediate_size", None) or c.moe_intermediate_size,
         "max_position_embeddings": c.max_position_embeddings,
         "rope_theta": c.rope_parameters["rope_theta"],
         "rope_type": c.rope_parameters.get("rope_type", "default"),
         "rms_norm_eps": c.rms_norm_eps, "tie_word_embeddings": c.tie_word_embeddings,
         "head_dim": getattr(c, "head_dim", None) or c.hidden_size // heads}
    if mt.startswith("qwen3_5"):  # Qwen3.5's partial RoPE (0.25 when absent)
        r["partial_rotary_factor"] = c.rope_parameters.get("partial_rotary_factor", 1.0)
        for key in ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                    "linear_value_head_dim", "linear_conv_kernel_dim"):
            r[key] = getattr(c, key)
    if mt == "qwen2_moe":
        r["attention_bias"] = c.qkv_bias
    elif hasattr(c, "attention_bias") and mt not in ("mistral", "mixtral", "qwen2"):
        r["attention_bias"] = c.attention_bias
    # Which layers slide, and the window: Qwen2/Qwen3/Qwen2-MoE's layer_types; Mistral's and
    # Mixtral's sliding_window (every layer); Qwen3-MoE's with use_sliding_window.
    n = c.num_hidden_layers
    window = getattr(c, "sliding_window", None)
    if getattr(c, "layer_types", None) is not None:
        types = list(c.layer_types)
    elif mt == "qwen3_moe":
        types = ["sliding_attention" if c.use_sliding_window and window else "full_attention"] * n
    else:
        types = ["sliding_attention" if window else "full_attention"] * n
    r["layer_types"] = types
    if "sliding_attention" in types:
        r["sliding_window"] = window
    if hasattr(c, "final_logit_softcapping"):  # Gemma's scalars (null: no cap, 0 in zt)
        r["query_pre_attn_scalar"] = c.query_pre_attn_scalar
        r["final_logit_softcapping"] = c.final_logit_softcapping or 0.0
        r["attn_logit_softcapping"] = c.attn_logit_softcapping or 0.0
    if hasattr(c, "num_experts_per_tok"):
        r["num_experts"] = c.num_local_experts if mt == "mixtral" else c.num_experts
        r["num_experts_per_tok"] = c.num_experts_per_tok
        r["router_aux_loss_coef"] = c.router_aux_loss_coef
        r["output_router_logits"] = c.output_router_logits
        if mt != "mixtral":
            r["moe_intermediate_size"] = c.moe_intermediate_size
            # Absent from qwen3_5_moe_text's config: renormalised, every layer routed.
            r["norm_topk_prob"] = getattr(c, "norm_topk_prob", True)
            r["decoder_sparse_step"] = getattr(c, "decoder_sparse_step", 1)
            r["mlp_only_layers"] = list(getattr(c, "mlp_only_layers", []))
        if mt in ("qwen2_moe", "qwen3_5_moe_text"):
            r["shared_expert_intermediate_size"] = c.shared_expert_intermediate_size
    return r


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        sys.exit(2)
    zt, tool, work = sys.argv[1:]
    _, transformers = torch_peers()
    from transformers import AutoConfig, CONFIG_MAPPING
    os.makedirs(work, exist_ok=True)
    c = Checker()
    case = [0]

    def run(d):
        case[0] += 1
        folder = os.path.join(work, f"case{case[0]}")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(d, f)
        p = subprocess.run([tool, os.path.join(folder, "config.json")], capture_output=True,
                           text=True, timeout=60)
        return folder, p

    # The families zt imports, as its refusal of an unknown model_type lists them.
    _, p = run({"model_type": "no_such_family"})
    families = re.findall(r'"([a-z0-9_]+)"', p.stderr.split("zt imports", 1)[-1].split("\n")[0])
    c.check(p.returncode == 2 and len(families) >= 7, f"zt lists the families it imports: {families}")

    def compare(tag, d, removed):
        folder, p = run(d)
        try:
            ref = reference(AutoConfig.from_pretrained(folder), d["model_type"])
        except Exception as e:  # noqa: BLE001
            print(f"skip  {tag}: transformers refuses it too ({e})")
            return
        types = ref["layer_types"]
        unrepresentable = "sliding_attention" in types and "full_attention" in types[types.index("sliding_attention"):]
        if p.returncode == 2 and unrepresentable:
            # transformers' layers: a full one after a sliding one, which zt cannot hold;
            # the refusal says so, and says where layer_types came from when the file has none.
            ok = "full layers followed by sliding ones" in p.stderr and (
                "layer_types" in d or "derived" in p.stderr)
            c.check(ok, f"{tag}: refused (full after sliding): {p.stderr.strip()[:400]}")
            return
        if p.returncode == 2:
            named = any(f in p.stderr for f in removed)
            said = "absent" in p.stderr or "missing" in p.stderr
            c.check(named and said, f"{tag}: refused naming the absent field: {p.stderr.strip()[:300]}")
            return
        if p.returncode != 0:
            c.check(False, f"{tag}: zt_hf_config exit {p.returncode}: {p.stderr.strip()[:300]}")
            return
        z = json.loads(p.stdout)
        diff = {k: (z.get(k), v) for k, v in ref.items() if z.get(k) != v}
        c.check(not diff, f"{tag}: zt equals transformers" + (f" (zt, transformers): {diff}" if diff else ""))

    # 32 heads: every family's default num_key_value_heads (4 .. 32) divides it.
    SMALL = {"hidden_size": 1024, "num_attention_heads": 32, "num_hidden_layers": 4,
             "intermediate_size": 512, "vocab_size": 128}
    for mt in families:
        cls = CONFIG_MAPPING[mt]
        required = [k for k in REQUIRED if k in cls().to_dict()]  # qwen3_5_moe_text: no intermediate_size
        small = {k: v for k, v in SMALL.items() if k in required}
        variants = {"default": cls().to_dict(), "small": cls(**small).to_dict()}
        if "use_sliding_window" in cls().to_dict():
            variants["sliding"] = cls(**small, use_sliding_window=True, sliding_window=64,
                                      max_window_layers=2).to_dict()
        if "linear_conv_kernel_dim" in cls().to_dict():  # Qwen3.5: every layer full
            variants["full"] = cls(**small, layer_types=["full_attention"] * 4).to_dict()
        for vname, base in variants.items():
            base = {k: v for k, v in base.items() if v is not None or k == "sliding_window"}
            compare(f"{mt}/{vname}/whole", base, [])
            for field in OPTIONAL:
                if field in base or (field == "rope" and "rope_parameters" in base):
                    compare(f"{mt}/{vname}/no {field}", without(base, field),
                            ["rope_theta"] if field == "rope" else [field])
            minimal = {k: v for k, v in base.items() if k in required or k == "model_type"}
            compare(f"{mt}/{vname}/every optional field absent", minimal,
                    [k for k in base if k not in minimal])
        for field in required:
            _, p = run(without(cls(**small).to_dict(), field))
            c.check(p.returncode == 2 and field in p.stderr and "missing" in p.stderr,
                    f"{mt}: no {field}: refused by name: {p.stderr.strip()[:200]}")
    c.finish()


if __name__ == "__main__":
    main()
