"""Shared helpers of the Hugging Face conversion tests (tests/ckpt/hf/*.py).

Independent of zt's C++ code: tensors are made with torch and written with the
`safetensors` package; checkpoints are read with h5py; their checksums are computed from the definitions of
docs/checkpoint-format.md (tests/ckpt/zt_checksums.py: Python's xxhash, numpy).
"""
import importlib
import json
import os
import subprocess
import sys

SKIP = 77  # CTest SKIP_RETURN_CODE
# The Python peers scripts/install-deps.sh installs (pinned: scripts/python-peers.txt; --hf-peers: torch and
# after): a test that cannot import one skips naming it, or fails where CI requires them.
PEERS = ("numpy", "h5py", "safetensors", "xxhash", "torch", "transformers", "peft",
         "accelerate", "bitsandbytes", "tokenizers", "sentencepiece", "jinja2", "trl", "datasets")
HINT = ("scripts/install-deps.sh installs numpy, h5py, safetensors and xxhash for this python3; "
        "--hf-peers adds torch, transformers, peft, bitsandbytes, tokenizers, sentencepiece, jinja2")


def skip(reason):
    """Exit with SKIP (CTest reports the test as skipped) after printing why."""
    print(f"SKIPPED: {reason}", flush=True)
    sys.exit(SKIP)


def peer_missing(what):
    """A Python peer of the test is missing: skip naming it, or, where CI requires every
    pinned peer (ZT_REQUIRE_PEERS=1, exported by .ci/run), fail: CI cannot go green
    with a comparison that did not run."""
    if os.environ.get("ZT_REQUIRE_PEERS") == "1":
        print(f"FAIL: {what}; ZT_REQUIRE_PEERS=1 (CI) requires every pinned peer ({HINT})", flush=True)
        os._exit(1)
    print(f"SKIPPED: {what} ({HINT})", flush=True)
    os._exit(SKIP)


def _peer_import_hook(kind, value, tb):
    """An ImportError of a peer module that reaches the top (a module-level import, e.g.
    zt_checksums' numpy) is a missing peer, not a crash of the test."""
    name = getattr(value, "name", None) or ""
    if issubclass(kind, ImportError) and name.split(".")[0] in PEERS:
        peer_missing(f"python module '{name}' is missing ({value}) for {sys.executable}")
    sys.__excepthook__(kind, value, tb)


sys.excepthook = _peer_import_hook
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_versions import check_pin, pinned_versions  # noqa: E402,F401  (scripts/python-peers.txt)


def require(*modules):
    """Import the modules (dotted names too), in order, or exit through peer_missing naming
    the first that does not import (an ImportError, or a library of it that fails to load),
    each top-level peer's version checked against its pin (check_pin). Call it first: before
    importing anything that needs a peer, and before any work."""
    out = []
    for name in modules:
        try:
            top = name.split(".")[0]
            check_pin(top, importlib.import_module(top))  # the version before any use
            mod = importlib.import_module(name)
        except Exception as e:  # noqa: BLE001  (a broken peer is a missing one)
            peer_missing(f"python module '{name}' is missing or broken ({type(e).__name__}: {e}) "
                         f"for {sys.executable}")
        out.append(mod)
    return out


def torch_peers(*extra):
    """Imports torch, transformers and `extra` (e.g. "peft") for a peer test through
    require (a missing one: skip or fail; versions checked against their pins); one torch
    thread; the versions printed. Returns the modules in that order."""
    names = ("torch", "transformers") + extra
    mods = require(*names)
    mods[0].set_num_threads(1)
    print(", ".join(f"{n} {m.__version__}" for n, m in zip(names, mods)), flush=True)
    return mods


# The peers that load in a moment: required before torch, so that a missing one is
# noticed without waiting for torch's import.
LIGHT_PEERS = ("numpy", "h5py", "safetensors", "xxhash", "tokenizers", "sentencepiece", "jinja2")


def peer_start(doc, *peers):
    """The start of a peer test `SCRIPT ZT ZT_LOGITS WORKDIR`: (zt, zt_logits, work, torch,
    Checker) with WORKDIR emptied, or exits (2 with the usage; SKIP without the peers):
    torch, transformers and `peers` required first (the LIGHT_PEERS among them first)."""
    if len(sys.argv) != 4:
        print(doc)
        sys.exit(2)
    zt, zt_logits, work = sys.argv[1:]
    require(*[p for p in peers if p.split(".")[0] in LIGHT_PEERS])
    torch = torch_peers(*[p for p in peers if p.split(".")[0] not in LIGHT_PEERS])[0]
    import shutil
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    return zt, zt_logits, work, torch, Checker()


def zt_logits_json(c, zt_logits, ckpt, tokens, new):
    """zt's side of a peer test (tests/ckpt/hf/zt_logits.cpp) as a dict; a failure is a
    failed check and the end of the test."""
    p = subprocess.run([zt_logits, ckpt, ",".join(map(str, tokens)), str(new)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    if p.returncode != 0:
        print(p.stderr)
        c.check(False, f"zt_logits {ckpt}")
        c.finish()
    return json.loads(p.stdout)


def hf_llama_run(torch, folder, ids, new):
    """transformers' causal LM of the folder's model_type (AutoModelForCausalLM: Llama,
    Mistral, Qwen2, Qwen3, ...) from `folder` (float32) on ids [1, T]: (logits [T, V]
    float64, loss, greedy continuation of `new` tokens)."""
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        out = model(ids, labels=ids)  # transformers shifts the labels itself
        gen = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                             min_new_tokens=new, do_sample=False, pad_token_id=0)
    return out.logits[0].double(), float(out.loss), gen[0, ids.shape[1]:].tolist()


def eager_in_dtype():
    """The name of an attention registered with transformers: its eager attention (scores,
    Gemma 2's soft-cap, the mask, softmax) with the softmax in the inputs' dtype, where
    transformers' eager takes it in float32 (for Gemma 2, which has no SDPA path)."""
    import torch
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask
    from transformers.models.llama.modeling_llama import repeat_kv

    def attend(module, query, key, value, attention_mask, scaling=None, softcap=None, **_):
        key = repeat_kv(key, module.num_key_value_groups)
        value = repeat_kv(value, module.num_key_value_groups)
        w = torch.matmul(query, key.transpose(2, 3)) * scaling
        if softcap is not None:
            w = torch.tanh(w / softcap) * softcap
        if attention_mask is not None:
            w = w + attention_mask
        w = torch.softmax(w, dim=-1)
        return torch.matmul(w, value).transpose(1, 2).contiguous(), w
    AttentionInterface.register("eager_in_dtype", attend)
    AttentionMaskInterface.register("eager_in_dtype", eager_mask)
    return "eager_in_dtype"


def hf_f64_logits(torch, folder, ids):
    """transformers' logits [T, V] of the folder's model in float64, with the steps it keeps
    in float32 whatever the dtype (RoPE's frequencies and angles, RMSNorm) taken in float64
    too (f64_forwards) and SDPA attention (its CPU path keeps the dtype): the exact answer
    to within float64 rounding, for the fp32 logits of both zt and transformers."""
    import types
    from transformers import AutoModelForCausalLM
    from transformers import AutoConfig
    # MoE experts: transformers 5's default grouped_mm takes no float64; its eager loop does.
    hc = AutoConfig.from_pretrained(folder)
    moe = ({"experts_implementation": "eager"}
           if hasattr(hc, "num_local_experts") or hasattr(hc, "num_experts") else {})
    # gpt-oss has no SDPA path (its sinks): eager, whose softmax keeps the dtype too; nor has
    # Gemma 2 (the attention soft-cap): its eager with the softmax in the dtype.
    attn = {"gpt_oss": "eager", "gemma2": eager_in_dtype()}.get(hc.model_type, "sdpa")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64, attn_implementation=attn,
                                                 **moe)
    model.eval()
    for mod, fwd in f64_forwards(model):
        mod.forward = types.MethodType(fwd, mod)
    with torch.no_grad():
        return model(ids).logits[0].double()


def check_against_hf(c, torch, tag, z, hf, zt, folder, tokens, new, tol=1e-5):
    """The checks of a peer test on one imported folder: zt's answer z (zt_logits_json)
    against transformers' hf = (logits, loss, greedy) (hf_llama_run): logits and KV-cache
    logits within tol x max(1, max |logit|) of transformers' float32 ones, and no farther
    from transformers' float64 answer (hf_f64_logits: RoPE and RMSNorm in float64 too) than
    max(tol x max(1, max |logit|), 2 x transformers' own fp32 distance from it), loss within tol, the greedy
    continuation equal (and not degenerate), and `zt generate --temperature 0` on the HF
    folder equal to it. Returns the relative tolerance (for sensitivity checks).
    Why not 1e-5 absolute: the tiny models' logits reach |9| (initializer_range 0.3), where
    fp32 rounding alone moves either implementation's logits 1e-5 .. 2.5e-5 from the exact
    answer (measured, printed: transformers' fp32 1.3e-5 .. 2.5e-5, zt's 0.8e-5 .. 2.1e-5 on
    the rope cases): 1e-5 absolute is below fp32's own error there, for transformers too."""
    hl, hloss, hgen = hf
    zl = torch.tensor(z["logits"], dtype=torch.float64)
    kl = torch.tensor(z["kv_logits"], dtype=torch.float64)
    t = tol * max(1.0, zl.abs().max().item())
    dl = (zl - hl).abs().max().item() if zl.shape == hl.shape else float("inf")
    dkv = (kl - hl).abs().max().item() if kl.shape == hl.shape else float("inf")
    exact = hf_f64_logits(torch, folder, torch.tensor([tokens]))
    d64 = (zl - exact).abs().max().item() if zl.shape == exact.shape else float("inf")
    k64 = (kl - exact).abs().max().item() if kl.shape == exact.shape else float("inf")
    h64 = (hl - exact).abs().max().item()
    print(f"      {tag}: max |zt - hf| {dl:.3e}, KV {dkv:.3e} (max |logit| "
          f"{zl.abs().max().item():.2f}); against float64: zt {d64:.3e}, KV {k64:.3e}, transformers "
          f"fp32 {h64:.3e}; loss zt {z['loss']:.8f} hf {hloss:.8f}")
    c.check(dl <= t, f"{tag}: max |logit zt - transformers| = {dl:.3e} <= {t:.3e}")
    c.check(dkv <= t, f"{tag}: max |KV-cache logit zt - transformers| = {dkv:.3e} <= {t:.3e}")
    # The same scale as above (tol x the largest logit): zt's GEMMs accumulate in other
    # orders on other CPUs (8 lanes on AVX2, 16 on AVX-512; 3.8e-5 at |logit| 9 on AVX2).
    bound = max(t, 2 * h64)
    c.check(max(d64, k64) <= bound,
            f"{tag}: zt's fp32 logits as close to transformers' float64 ones as its own fp32 are: "
            f"max |zt - f64| {d64:.3e}, KV {k64:.3e} <= max({t:.3e}, 2 x {h64:.3e})")
    c.check(abs(z["loss"] - hloss) <= tol, f"{tag}: |loss zt - transformers| <= {tol}")
    c.check(z["greedy"] == hgen, f"{tag}: greedy continuation of {new} tokens equal")
    c.check(len(set(hgen)) >= 3, f"{tag}: the continuation is not degenerate "
                                 f"({len(set(hgen))} distinct tokens >= 3)")
    rc, gen_out = run_zt(zt, "generate", "--weights", folder, "--prompt-ids",
                         ",".join(map(str, tokens)), "--temperature", "0",
                         "--max-new-tokens", str(new), "--json")
    lines = [l for l in gen_out.splitlines() if l.startswith("{")]
    zgen = json.loads(lines[0])["ids"] if rc == 0 and lines else None
    if zgen != hgen:
        print(gen_out[-2000:])
    c.check(zgen == hgen, f"{tag}: `zt generate --temperature 0` on the HF folder == transformers' greedy")
    return t


def rope_inv_freq_f64(torch, params, dim):
    """The D/2 RoPE inverse frequencies of a transformers rope_parameters dict (rope_theta,
    rope_type default / linear / llama3 and their factors) in float64, written from
    transformers' modeling_rope_utils formulas (which evaluate them in float32)."""
    import math
    inv = 1.0 / (params["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    kind = params.get("rope_type", "default")
    if kind == "linear":
        return inv / params["factor"]
    if kind == "llama3":
        factor, low, high = params["factor"], params["low_freq_factor"], params["high_freq_factor"]
        old = params["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        out = torch.where(wavelen > old / low, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        medium = (wavelen >= old / high) & (wavelen <= old / low)
        return torch.where(medium, (1 - smooth) * out / factor + smooth * out, out)
    if kind == "yarn":  # _compute_yarn_parameters (no partial rotary)
        factor, old = params["factor"], params["original_max_position_embeddings"]
        fast, slow = params.get("beta_fast") or 32, params.get("beta_slow") or 1
        base = params["rope_theta"]

        def corr(n):
            return dim * math.log(old / (n * 2 * math.pi)) / (2 * math.log(base))
        low, high = corr(fast), corr(slow)
        if params.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
        extra = 1 - ramp
        return inv / factor * (1 - extra) + inv * extra
    if kind != "default":
        raise ValueError(f"rope_inv_freq_f64: rope_type {kind}")
    return inv


def rope_attention_factor(params):
    """yarn's attention factor (cos and sin are multiplied by it); 1 for the other types."""
    import math
    if params.get("rope_type") != "yarn":
        return 1.0
    if params.get("attention_factor"):
        return params["attention_factor"]

    def m(s, k=1.0):
        return 0.1 * k * math.log(s) + 1.0 if s > 1 else 1.0
    f, ms, md = params["factor"], params.get("mscale"), params.get("mscale_all_dim")
    return m(f, ms) / m(f, md) if ms and md else m(f)


def rope_f64(self, x, position_ids, layer_type=None):
    """A rotary embedding module's forward with the inverse frequencies, angles, cos and
    sin in float64 (transformers computes them in float32), cast to x's dtype; with
    layer_type (Gemma 3's RoPE per layer type) that type's rope_parameters."""
    import torch
    cfg = self.config
    dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    params = cfg.rope_parameters[layer_type] if layer_type else cfg.rope_parameters
    dim = int(dim * params.get("partial_rotary_factor", 1.0))  # Qwen3.5's partial RoPE
    if position_ids.ndim == 3:  # Qwen3.5's multimodal RoPE: text positions are its 3 rows'
        assert all(torch.equal(position_ids[0], r) for r in position_ids)
        position_ids = position_ids[0]
    inv = rope_inv_freq_f64(torch, params, dim)
    freqs = position_ids[..., None].double() * inv
    # gpt-oss's rotary returns the D/2 angles (its _apply_rotary_emb halves the head).
    emb = freqs if type(self).__name__.startswith("GptOss") else torch.cat((freqs, freqs), dim=-1)
    a = rope_attention_factor(params)
    return (emb.cos() * a).to(x.dtype), (emb.sin() * a).to(x.dtype)


def rmsnorm_f64(self, x):
    """An RMSNorm module's forward (Llama's, Mistral's, Qwen's; Gemma's (1 + w)) without its
    cast to float32."""
    import torch
    variance = x.pow(2).mean(-1, keepdim=True)
    if type(self).__name__.startswith(("Gemma", "Qwen3_5")):  # (1 + w): Gemma, Qwen3.5
        return (1.0 + self.weight) * (x * torch.rsqrt(variance + self.eps))
    return self.weight * (x * torch.rsqrt(variance + self.variance_epsilon))


def router_f64(self, hidden_states):
    """A MoE TopKRouter's forward (Mixtral's, Qwen2-MoE's, Qwen3-MoE's) with the softmax in
    float64 (transformers takes it in float32 whatever the dtype): the top k of the
    probabilities, renormalised unless the router's norm_topk_prob is false."""
    import torch
    x = hidden_states.reshape(-1, self.hidden_dim)
    if type(self).__name__ == "GptOssTopKRouter":  # bias; softmax of the top k logits
        logits = torch.nn.functional.linear(x, self.weight, self.bias)
        top, idx = torch.topk(logits, self.top_k, dim=-1)
        return logits, torch.softmax(top.double(), dim=1).to(logits.dtype), idx
    logits = torch.nn.functional.linear(x, self.weight)
    top, idx = torch.topk(torch.softmax(logits.double(), dim=-1), self.top_k, dim=-1)
    if getattr(self, "norm_topk_prob", True):
        top = top / top.sum(dim=-1, keepdim=True)
    return logits, top.to(logits.dtype), idx


def f64_forwards(model):
    """[(module, float64 forward)] for every rotary embedding and RMSNorm of a transformers
    model (and MoE router): the steps transformers keeps in float32 whatever the model's dtype. Set each
    module's forward to it (types.MethodType) for a float64 reference; `del
    module.forward` restores the class's."""
    out = []
    for m in model.modules():
        name = type(m).__name__
        if name.endswith("RotaryEmbedding"):
            out.append((m, rope_f64))
        elif name.endswith("RMSNorm"):
            out.append((m, rmsnorm_f64))
        elif name.endswith("TopKRouter"):
            out.append((m, router_f64))
    return out


def perturb_biases_and_norms(torch, model):
    """Biases drawn N(0, 0.3) and norm weights 1 + N(0, 0.1) (transformers initialises them
    to 0 and 1), so a test sees them."""
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith(".bias"):
                p.normal_(0.0, 0.3)
            elif "norm" in pname:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))


def h5_model_keys(h5):
    """`zt train`'s model.* keys of a checkpoint's model (its model_config attribute, as the
    refusal of another model's checkpoint lists them): every field it holds, RoPE's
    scaling fields that are set."""
    import h5py
    with h5py.File(h5, "r") as f:
        cfg = json.loads(f.attrs["model_config"])

    def val(v):
        return str(v).lower() if isinstance(v, bool) else str(v)
    keys = []
    for k, v in cfg.items():
        if k == "rope_scaling":
            names = {"type": "rope_type", "original_context": "rope_original_context"}
            keys += [f"model.{names.get(rk, 'rope_' + rk)}={val(rv)}" for rk, rv in v.items() if rv or rk == "type"]
        elif k != "name":
            keys.append(f"model.{k}={val(v)}")
    return keys


def import_hf(c, zt, tag, folder, h5):
    """`zt convert hf-to-h5 FOLDER H5`, checked; True when it succeeded."""
    rc, out = run_zt(zt, "convert", "hf-to-h5", folder, h5)
    c.check(rc == 0, f"{tag}: zt convert hf-to-h5 (exit {rc})")
    if rc != 0:
        print(out)
    return rc == 0


def export_f32(c, zt, tag, h5, exported):
    """`zt convert h5-to-hf H5 EXPORTED --dtype f32`, checked; True when it succeeded."""
    rc, out = run_zt(zt, "convert", "h5-to-hf", h5, exported, "--dtype", "f32")
    c.check(rc == 0, f"{tag}: zt convert h5-to-hf (exit {rc})")
    if rc != 0:
        print(out)
    return rc == 0


def tensor_names(folder):
    """The tensor names of every safetensors file of a model folder."""
    from safetensors import safe_open
    names = set()
    for f in os.listdir(folder):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(folder, f), "pt") as s:
                names |= set(s.keys())
    return names


def config_value(cfg, key):
    """A transformers config's key as the model uses it (head_dim: hidden / heads when the
    config has none)."""
    v = getattr(cfg, key, None)
    if key == "head_dim" and v is None:
        return cfg.hidden_size // cfg.num_attention_heads
    return v


def import_and_check(c, torch, zt, tag, folder, tokens, new, zt_run, hf_run, tol=1e-5):
    """`zt convert hf-to-h5 folder folder.h5`, then check_against_hf on it. Returns (h5, hf,
    z, t): transformers' (logits, loss, greedy), zt's answer and the relative tolerance, or
    None when the import failed."""
    h5 = folder + ".h5"
    if not import_hf(c, zt, tag, folder, h5):
        return None
    hf, z = hf_run(folder), zt_run(h5)
    return h5, hf, z, check_against_hf(c, torch, tag, z, hf, zt, folder, tokens, new, tol)


def check_aux_loss(c, torch, tag, folder, ids, z, moe_layers, k, tol=1e-5):
    """zt's load-balancing loss (z: zt_logits_json's answer) within tol of transformers'
    (aux_loss with output_router_logits=True, whatever the config's flag; float32) on ids
    [1, T], and every row of the `moe_layers` MoE layers routed to k experts."""
    from transformers import AutoModelForCausalLM
    m = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.no_grad():
        haux = float(m(ids, output_router_logits=True).aux_loss)
    print(f"      {tag}: aux loss zt {z['aux']:.8f} hf {haux:.8f}; tokens per expert (zt, "
          f"{moe_layers} MoE layers) {z['tokens_per_expert']}")
    c.check(abs(z["aux"] - haux) <= tol, f"{tag}: |aux loss zt - transformers| <= {tol}")
    c.check(sum(z["tokens_per_expert"]) == moe_layers * ids.shape[1] * k,
            f"{tag}: zt routed every row of the {moe_layers} MoE layers to {k} experts")


def check_export(c, torch, zt, tag, folder, h5, hf, z, zt_run, hf_run, arch, keys):
    """`zt convert h5-to-hf` of h5 (imported from folder) into folder-export, checked: its
    model_type is the folder's and its architectures [arch], AutoConfig reads each of
    `keys` as in the folder's config, the same tensor names as transformers' save,
    transformers on it gives hf's (logits, loss, greedy) exactly (the same fp32 weights),
    and zt re-imports it with the same logits as z (zt_run's answer on h5)."""
    from transformers import AutoConfig
    exported = folder + "-export"
    if not export_f32(c, zt, tag, h5, exported):
        return
    a, b = AutoConfig.from_pretrained(folder), AutoConfig.from_pretrained(exported)
    c.check(b.model_type == a.model_type and b.architectures == [arch],
            f"{tag}: the export is model_type {b.model_type}, {b.architectures}")
    for key in keys:
        va, vb = config_value(a, key), config_value(b, key)
        c.check(va == vb, f"{tag}: AutoConfig reads the export's {key} {vb} (transformers' save: {va})")
    names_hf, names_zt = tensor_names(folder), tensor_names(exported)
    c.check(names_hf == names_zt, f"{tag}: the export's tensor names are transformers' "
                                  f"({len(names_zt)} tensors; differ: {sorted(names_hf ^ names_zt)[:4]})")
    hl, hloss, hgen = hf
    el, eloss, egen = hf_run(exported)
    c.check(torch.equal(el, hl) and egen == hgen and eloss == hloss,
            f"{tag}: transformers on the export: the same logits (max diff "
            f"{(el - hl).abs().max().item():.1e}), loss and continuation")
    h5b = exported + ".h5"
    rc, out = run_zt(zt, "convert", "hf-to-h5", exported, h5b)
    zb = zt_run(h5b) if rc == 0 else None
    c.check(rc == 0 and zb["logits"] == z["logits"],
            f"{tag}: zt re-imports its export with the same logits (exit {rc})")


def check_fused(c, torch, zt, model_class, src, fused, zt_run):
    """A MoE model folder src (per-expert tensors, imported to src.h5) saved again under
    transformers 5's run-time names (the state dict: fused experts.gate_up_proj /
    down_proj) into fused: zt imports it with the same logits."""
    import shutil
    from safetensors.torch import save_file
    m = model_class.from_pretrained(src, dtype=torch.float32)
    os.makedirs(fused)
    save_file({n: t.contiguous() for n, t in m.state_dict().items()},
              os.path.join(fused, "model.safetensors"), metadata={"format": "pt"})
    shutil.copy(os.path.join(src, "config.json"), fused)
    c.check(any(n.endswith("experts.gate_up_proj") for n in tensor_names(fused)),
            "fused: the state dict holds transformers 5's gate_up_proj")
    if import_hf(c, zt, "fused", fused, fused + ".h5"):
        c.check(zt_run(fused + ".h5")["logits"] == zt_run(src + ".h5")["logits"],
                "fused: the same logits as the per-expert files")


def peft_multimodal(c, torch, tag, base, ad, n):
    """PEFT loads the --adapter folder `ad` onto the multimodal model `base` (a
    *ForConditionalGeneration): its n tensors under the class's names
    (model.language_model.*), exactly, and nothing else adapted. Returns the PeftModel."""
    import peft
    from safetensors import safe_open
    pm = peft.PeftModel.from_pretrained(base, ad)
    with safe_open(os.path.join(ad, "adapter_model.safetensors"), "pt") as f:
        keys = sorted(f.keys())
        saved = {k: f.get_tensor(k) for k in keys}
    held = peft.get_peft_model_state_dict(pm)
    c.check(sorted(held) == keys and len(keys) == n and
            all(".language_model.layers." in k for k in keys) and
            all(torch.equal(held[k], saved[k]) for k in keys),
            f"{tag}: PEFT loads the {len(keys)} adapter tensors onto {type(base).__name__} under "
            f"its names (model.language_model.*), exactly, and adapts nothing else (PEFT holds "
            f"{len(held)})")
    return pm


def with_config(src, dst, **changes):
    """A copy of model folder src at dst with config.json's keys changed (None: null)."""
    import shutil
    shutil.copytree(src, dst)
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg.update(changes)
    json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=2)
    return dst


def run_zt(zt, *args):
    """Runs `zt ARGS...`; returns (exit code, stdout + stderr)."""
    p = subprocess.run([zt, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
                       env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                                OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
    return p.returncode, p.stdout


def compare_with_transformers(c, torch, zt, zt_logits, tag, folder, h5, tokens, new, other, other_what):
    """`zt convert hf-to-h5 folder h5`, then check_against_hf on the folder (tolerance 1e-5),
    and transformers' logits at least 10 x the tolerance away from `other` (logits of the
    same model without what the test is about: `other_what`). Returns (logits, greedy) of
    transformers, or None when the import failed."""
    if not import_hf(c, zt, tag, folder, h5):
        return None
    hf = hl, _, hgen = hf_llama_run(torch, folder, torch.tensor([tokens]), new)
    tol = check_against_hf(c, torch, tag, zt_logits_json(c, zt_logits, h5, tokens, new), hf, zt,
                           folder, tokens, new)
    dother = (other - hl).abs().max().item()
    print(f"      {tag}: {other_what} {dother:.3e}")
    c.check(dother > 10 * tol, f"{tag}: sensitivity: {other_what}: the logits move by "
                               f"{dother:.3e} > 10 x tol")
    return hl, hgen


def train_tiny(zt, work, ckpt_dir, steps, extra=()):
    """`zt train` of the `tiny` preset on the shipped corpus, 1 rank (no mpirun: MPI's
    singleton init), micro and global batch 8 x 64 tokens, lr 1e-2, no eval or sample,
    checkpoints into ckpt_dir; `extra`: more KEY=VALUE settings. Returns (exit code,
    stdout + stderr)."""
    train = [zt, "train", "--set", f"train.steps={steps}", "--set", "train.micro_batch=8",
             "--set", "train.global_batch=8", "--set", "train.seq_len=64",
             "--set", "train.warmup=0", "--set", "train.lr=1e-2", "--set", "train.threads=1",
             "--set", "eval.every=0", "--set", "sample.tokens=0", "--set", f"ckpt.dir={ckpt_dir}",
             "--set", "train.peak_tflops=1"]
    for kv in extra:
        train += ["--set", kv]
    p = subprocess.run(train, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=600, cwd=work,
                       env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                                OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                                XDG_CACHE_HOME=os.path.join(work, "cache")))
    return p.returncode, p.stdout


def hf_config(vocab=64, hidden=32, inter=64, layers=2, heads=4, kv=2, ctx=64, tied=False,
              torch_dtype="bfloat16", **extra):
    cfg = dict(architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=vocab,
               hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
               num_attention_heads=heads, num_key_value_heads=kv, max_position_embeddings=ctx,
               rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=tied,
               torch_dtype=torch_dtype, bos_token_id=1, eos_token_id=2)
    cfg.update(extra)
    return cfg


def llama_shapes(cfg):
    """HF Llama tensor names and shapes, written out from the architecture."""
    V, C, I = cfg["vocab_size"], cfg["hidden_size"], cfg["intermediate_size"]
    H, G = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = C // H
    shapes = {"model.embed_tokens.weight": (V, C)}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        shapes.update({p + "input_layernorm.weight": (C,),
                       p + "self_attn.q_proj.weight": (H * D, C),
                       p + "self_attn.k_proj.weight": (G * D, C),
                       p + "self_attn.v_proj.weight": (G * D, C),
                       p + "self_attn.o_proj.weight": (C, H * D),
                       p + "post_attention_layernorm.weight": (C,),
                       p + "mlp.gate_proj.weight": (I, C),
                       p + "mlp.up_proj.weight": (I, C),
                       p + "mlp.down_proj.weight": (C, I)})
    shapes["model.norm.weight"] = (C,)
    if not cfg["tie_word_embeddings"]:
        shapes["lm_head.weight"] = (V, C)
    return shapes


def checksum(x, format_version):
    """The checksum a zt checkpoint of `format_version` stores for float32 array x
    (tests/ckpt/zt_checksums.py: zt-xxh3 with Python's xxhash, zt-sum64 with numpy)."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from zt_checksums import checksum as of_version
    return of_version(x, format_version)


def write_config(folder, cfg):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


class Checker:
    """Counts failures; each check prints one line."""

    def __init__(self):
        self.failures = 0
        self.checks = 0

    def check(self, ok, what):
        self.checks += 1
        if not ok:
            self.failures += 1
        print(("ok    " if ok else "FAIL  ") + what, flush=True)

    def finish(self):
        print(f"{self.checks - self.failures}/{self.checks} checks passed")
        if self.checks == 0:
            print("FAIL  no check ran: a test that checks nothing must not pass")
            sys.exit(1)
        sys.exit(1 if self.failures else 0)


class CausalLMPeer:
    """The shared frame of a peer test of one causal-LM family (mistral_peer_test.py,
    mixtral_peer_test.py): peer_start, `t` random prompt tokens (seed 0, vocab 96), and per
    case `imported` (save transformers' model, import it, check_against_hf) and `exported`
    (export, AutoConfig and transformers on the export, zt re-imports it)."""

    def __init__(self, doc, t, new, tol=1e-5, peers=()):
        self.zt, self.zt_logits, self.work, self.torch, self.c = peer_start(doc, *peers)
        gen = self.torch.Generator().manual_seed(0)
        self.tokens = self.torch.randint(0, 96, (t,), generator=gen).tolist()
        self.ids = self.torch.tensor([self.tokens])
        self.new, self.tol = new, tol

    def zt_run(self, ckpt):
        return zt_logits_json(self.c, self.zt_logits, ckpt, self.tokens, self.new)

    def hf_run(self, folder):
        return hf_llama_run(self.torch, folder, self.ids, self.new)

    def imported(self, name, model_cls, cfg, saved, prepare=None):
        """Saves model_cls(cfg) (seed 1, float32; prepare(model) first when given) to
        WORK/name with save_pretrained, checks its config.json holds `saved` (key: value),
        imports it and checks zt against transformers (check_against_hf). Returns (folder,
        h5, hf, z, tol), or None when the import failed."""
        self.torch.manual_seed(1)
        model = model_cls(cfg).to(self.torch.float32)
        if prepare:
            prepare(model)
        folder = os.path.join(self.work, name)
        model.save_pretrained(folder, safe_serialization=True)
        got = json.load(open(os.path.join(folder, "config.json")))
        self.c.check(all(got.get(k) == v for k, v in saved.items()),
                     f"{name}: transformers saved {saved}")
        h5 = folder + ".h5"
        if not import_hf(self.c, self.zt, name, folder, h5):
            return None
        hf = self.hf_run(folder)
        z = self.zt_run(h5)
        tol = check_against_hf(self.c, self.torch, name, z, hf, self.zt, folder, self.tokens,
                               self.new, self.tol)
        return folder, h5, hf, z, tol

    def exported(self, name, folder, h5, hf, z, architecture, keys):
        """`zt convert h5-to-hf --dtype f32` of h5: AutoConfig reads the export's model_type
        and architectures as the original's, and `keys` equal; transformers on the export
        gives the same logits (exactly: the same fp32 weights), loss and continuation; zt
        re-imports the export with the same logits. Returns the export's folder, or None
        when the export failed."""
        from transformers import AutoConfig
        c, (hl, hloss, hgen) = self.c, hf
        exported = folder + "-export"
        if not export_f32(c, self.zt, name, h5, exported):
            return None
        a, b = AutoConfig.from_pretrained(folder), AutoConfig.from_pretrained(exported)
        c.check(b.model_type == a.model_type and b.architectures == [architecture],
                f"{name}: the export is model_type {b.model_type}, {b.architectures}")
        for key in keys:
            c.check(getattr(a, key) == getattr(b, key),
                    f"{name}: AutoConfig reads the export's {key} {getattr(b, key)}")
        el, eloss, egen = self.hf_run(exported)
        c.check(self.torch.equal(el, hl) and egen == hgen and eloss == hloss,
                f"{name}: transformers on the export: the same logits (max diff "
                f"{(el - hl).abs().max().item():.1e}), loss and continuation")
        h5b = exported + ".h5"
        rc, out = run_zt(self.zt, "convert", "hf-to-h5", exported, h5b)
        zb = self.zt_run(h5b) if rc == 0 else None
        c.check(rc == 0 and zb["logits"] == z["logits"],
                f"{name}: zt re-imports its export with the same logits (exit {rc})")
        return exported
