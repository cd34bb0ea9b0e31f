#!/usr/bin/env python3
"""LoRA on each model family against Hugging Face PEFT, and each family's training runs.

  family_lora_peer_test.py ZT ZT_LORA_LOGITS WORKDIR

For each family a tiny random model is built with transformers' own config class and saved
with save_pretrained (vocab 256, so the shipped byte corpus trains it):
  llama3-untied    LlamaConfig, rope_scaling llama3 factor 8 (original context 16)
  mistral-tied     MistralConfig, sliding_window 5 < the 24 tokens, tied embeddings
  qwen2-untied     Qwen2Config (q/k/v biases, drawn N(0, 0.3))
  qwen3-tied       Qwen3Config, head_dim 24 != hidden/heads 16, q/k norms, attention_bias
  gemma3-tied      Gemma3TextConfig, a sliding (window 4) and a full layer, linear-scaled
                   RoPE on the full one, query_pre_attn_scalar 24, final soft-cap 8
  gemma2-untied    Gemma2Config, sliding and full layers (window 4), attention
                   soft-cap 3 and final soft-cap 5, query_pre_attn_scalar 24, lm_head adapted
  gptoss-untied    GptOssConfig, alternating layers (window 4), yarn over an original
                   context of 8, 4 experts (2 per token) with biases, clamped SwiGLU (limit
                   1.5), sinks and biases N(0, 0.3); adapters on q, k, v, o and both expert
                   stacks (PEFT's target_parameters), the sinks frozen (PEFT's counts)
  qwen35-untied    Qwen3_5TextConfig, a Gated DeltaNet layer then a full one (output gate,
                   partial RoPE 0.25); adapters on the Gated DeltaNet projections
                   (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj), q, k, v, o and
                   the MLP; conv1d, A_log, dt_bias and the gated norm frozen (PEFT's counts)
`zt convert hf-to-h5` imports it, then:
1. One LoRA step's gradients against PEFT: get_peft_model with the family's module names
   (q_proj ... down_proj, and lm_head in three cases), every lora_A / lora_B set to
   N(0, 0.3) (so both get a gradient), saved with save_pretrained; the mean next-token
   cross-entropy of 24 tokens, backward: d(loss)/d(every adapter tensor) of zt
   (ZT_LORA_LOGITS: Model + bind_lora + loss_and_grad, reading PEFT's file) against
   PEFT's autograd
   - in float64 on both sides (PEFT's model .double() with the steps transformers keeps
     in float32, RoPE and RMSNorm, taken in float64: hf_common.f64_forwards): per tensor
     max |zt - PEFT| / max |PEFT| <= 1e-9, the loss within 1e-9;
   - in float32 on both sides: zt's gradients no farther from the float64 ones than
     4 x PEFT's own float32 gradients are (per tensor, relative to its max |g|), and
     zt's float32 gradients within 1e-4 of PEFT's float32 ones relative to each tensor's
     max (fp32 rounding of two summation orders);
   - sensitivity: every adapter tensor's gradient is non-zero (max |g| > 1e-6).
   Then one full-weight AdamW step (full_step): zt's loss, gradient norm and every weight
   after the step against transformers' model and torch.optim.AdamW on one batch.
2. Training on the CPU from the imported base (`zt train` with ckpt.init_from, the
   checkpoint's model.* keys): full fine-tuning (20 steps), LoRA and QLoRA (not on experts; 6 steps) on the shipped
   corpus: each run exits 0 and its last step's loss is below its first.
3. The LoRA run's adapter checkpoint exported with `zt convert h5-to-hf --adapter`:
   PeftModel.from_pretrained on transformers' model of the family loads it, holds exactly
   all the checkpoint's A and B, equal (h5py); PEFT's save_pretrained of what it loaded
   holds the same tensors bit for bit and the same adapter_config (r, lora_alpha,
   use_rslora, target_modules, target_parameters), and zt (ZT_LORA_LOGITS) reading that
   re-saved adapter_model.safetensors gives PEFT's float64 logits within 1e-9 (the round
   trip zt -> PEFT -> zt); the trained adapters move the logits (> 1e-3).
ZT_FAMILY_LORA_ONLY=<name> runs one case. Exit 77 (CTest skip) without torch, transformers, peft or h5py (scripts/install-deps.sh
--hf-peers); ZT_REQUIRE_PEERS=1 fails instead.
"""
import contextlib
import json
import os
import subprocess
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "ckpt", "hf"))
from hf_common import (eager_in_dtype, f64_forwards, h5_model_keys, import_hf, peer_start,  # noqa: E402
                       perturb_biases_and_norms, require, run_zt, train_tiny)

TOL64 = 1e-9   # float64 on both sides
TOL32 = 1e-4   # float32 on both sides, relative to each tensor's max |gradient|
T = 24
MODULES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj",
           "up": "up_proj", "down": "down_proj", "lm_head": "lm_head",
           **{n: n for n in ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj")}}
GDN5 = "in_proj_qkv,in_proj_z,in_proj_b,in_proj_a,out_proj"
ALL7 = "q,k,v,o,gate,up,down"
PARAMS = {"experts.gate_up": "experts.gate_up_proj", "experts.down": "experts.down_proj"}  # PEFT's target_parameters
EXPERTS = "experts.gate_up,experts.down"
YARN = {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
        "original_max_position_embeddings": 8, "rope_theta": 150000.0}
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 16}


def cases(transformers):
    common = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                  rms_norm_eps=1e-5, initializer_range=0.3, bos_token_id=1, eos_token_id=None)
    t = transformers
    # (name, config, model class, lora targets, rank, alpha)
    return [
        ("llama3-untied", t.LlamaConfig(**common, rope_scaling=dict(LLAMA3), tie_word_embeddings=False),
         t.LlamaForCausalLM, ALL7 + ",lm_head", 4, 8.0),
        ("mistral-tied", t.MistralConfig(**common, sliding_window=5, tie_word_embeddings=True),
         t.MistralForCausalLM, ALL7 + ",lm_head", 4, 8.0),
        ("qwen2-untied", t.Qwen2Config(**common, tie_word_embeddings=False),
         t.Qwen2ForCausalLM, ALL7, 8, 16.0),
        ("qwen3-tied", t.Qwen3Config(**common, head_dim=24, attention_bias=True, tie_word_embeddings=True),
         t.Qwen3ForCausalLM, ALL7 + ",lm_head", 4, 8.0),
        ("gemma3-tied", t.Gemma3TextConfig(**common, head_dim=16, sliding_window=4, query_pre_attn_scalar=24,
                                           layer_types=["sliding_attention", "full_attention"],
                                           final_logit_softcapping=8.0, tie_word_embeddings=True,
                                           rope_scaling={"rope_type": "linear", "factor": 2.0}),
         t.Gemma3ForCausalLM, ALL7, 4, 8.0),
        ("gemma2-untied", t.Gemma2Config(**common, head_dim=16, sliding_window=4, query_pre_attn_scalar=24,
                                         attn_logit_softcapping=3.0, final_logit_softcapping=5.0,
                                         tie_word_embeddings=False),
         t.Gemma2ForCausalLM, ALL7 + ",lm_head", 4, 8.0),
        ("gptoss-untied", t.GptOssConfig(**{**common, "intermediate_size": 64}, head_dim=16, sliding_window=4,
                                         num_local_experts=4, num_experts_per_tok=2, swiglu_limit=1.5,
                                         rope_parameters=dict(YARN), tie_word_embeddings=False),
         t.GptOssForCausalLM, "q,k,v,o," + EXPERTS, 4, 8.0),
        ("qwen35-untied", t.Qwen3_5TextConfig(**common, head_dim=16, tie_word_embeddings=False,
                                              layer_types=["linear_attention", "full_attention"],
                                              linear_num_key_heads=2, linear_num_value_heads=4,
                                              linear_key_head_dim=8, linear_value_head_dim=12,
                                              linear_conv_kernel_dim=4),
         t.Qwen3_5ForCausalLM, ALL7 + "," + GDN5, 4, 8.0),
    ]


class Qwen35F64:
    """transformers' Qwen3.5 in float64 throughout: the float32 casts of its Gated DeltaNet
    functions and gated norm as float64 (qwen35_peer_test.ModuleTorch), and the decay's
    `.float()` (A_log, in_proj_a's output) a no-op on float64 tensors while open."""

    def __init__(self, torch):
        from qwen35_peer_test import ModuleTorch
        self.torch, self.module = torch, ModuleTorch(torch, float32=torch.float64)
        self.float = torch.Tensor.float

    def __enter__(self):
        plain = self.float
        f64 = self.torch.float64
        self.torch.Tensor.float = lambda t, *a, **k: t if t.dtype == f64 else plain(t, *a, **k)
        self.module.__enter__()

    def __exit__(self, *exc):
        self.module.__exit__(*exc)
        self.torch.Tensor.float = self.float


def load_kwargs(cfg):
    """from_pretrained's attention and experts for a family: gpt-oss has no SDPA path (its
    sinks) and its grouped_mm experts take no float64, eager for both; Gemma 2 has no SDPA
    path (the attention soft-cap): its eager with the softmax in the dtype."""
    if cfg.model_type == "gpt_oss":
        return {"attn_implementation": "eager", "experts_implementation": "eager"}
    if cfg.model_type == "gemma2":
        return {"attn_implementation": eager_in_dtype()}
    return {"attn_implementation": "sdpa"}


def prepare(torch, model):
    """perturb_biases_and_norms, and gpt-oss's sinks and expert biases N(0, 0.3)."""
    perturb_biases_and_norms(torch, model)
    with torch.no_grad():
        for n, w in model.named_parameters():
            if n.endswith(("sinks", "_bias")):
                w.normal_(0.0, 0.3)


def train_keys(cfg):
    """`zt train`'s model.* keys for a transformers config (the family's architecture)."""
    rope = cfg.rope_parameters
    keys = [f"model.family={cfg.model_type}", f"model.vocab={cfg.vocab_size}",
            f"model.hidden={cfg.hidden_size}", f"model.layers={cfg.num_hidden_layers}",
            f"model.heads={cfg.num_attention_heads}", f"model.kv_heads={cfg.num_key_value_heads}",
            f"model.intermediate={cfg.intermediate_size}",
            f"model.context={cfg.max_position_embeddings}", f"model.norm_eps={cfg.rms_norm_eps}",
            f"model.tied_embeddings={str(cfg.tie_word_embeddings).lower()}",
            f"model.rope_theta={rope['rope_theta']}"]
    if rope.get("rope_type", "default") == "llama3":
        keys += ["model.rope_type=llama3", f"model.rope_factor={rope['factor']}",
                 f"model.rope_low_freq_factor={rope['low_freq_factor']}",
                 f"model.rope_high_freq_factor={rope['high_freq_factor']}",
                 f"model.rope_original_context={rope['original_max_position_embeddings']}"]
    if getattr(cfg, "head_dim", None) and cfg.head_dim != cfg.hidden_size // cfg.num_attention_heads:
        keys.append(f"model.head_dim={cfg.head_dim}")
    if cfg.model_type in ("llama", "qwen3") and cfg.attention_bias:
        keys.append("model.attention_bias=true")
    if cfg.model_type == "mistral" and cfg.sliding_window:
        keys.append(f"model.sliding_window={cfg.sliding_window}")
    if cfg.model_type == "mixtral":
        keys += [f"model.experts={cfg.num_local_experts}", f"model.experts_per_token={cfg.num_experts_per_tok}",
                 f"model.router_aux_loss={str(cfg.output_router_logits).lower()}"]
    return keys


def peft_pass(torch, pm, ids, dtype, backward=True):
    """PEFT's logits [T, V] (float64), loss and {adapter name: gradient (float64)} (none
    without backward) of the mean next-token cross-entropy, in float64 (RoPE and RMSNorm
    too) or float32."""
    patched = f64_forwards(pm)
    pm.to(torch.float64 if dtype == "f64" else torch.float32)
    for mod, fwd in patched:
        if dtype == "f64":
            mod.forward = types.MethodType(fwd, mod)
    pm.zero_grad(set_to_none=True)
    qwen35 = dtype == "f64" and pm.config.model_type.startswith("qwen3_5")
    ctx = Qwen35F64(torch) if qwen35 else contextlib.nullcontext()
    try:
        with ctx:
            logits = pm(ids).logits[0]
            # transformers' own loss casts the logits to float32: the cross-entropy is taken
            # here in the logits' dtype.
            loss = torch.nn.functional.cross_entropy(logits[:-1], ids[0, 1:])
            if backward:
                loss.backward()
    finally:
        for mod, _ in patched:
            if "forward" in mod.__dict__:
                del mod.forward
    grads = {}
    for name, p in pm.named_parameters():
        if "lora_" in name and backward:
            key = name.replace("base_model.model.", "", 1).replace(".default", "")
            grads[key] = p.grad.detach().double().reshape(-1)
    return logits.detach().double(), float(loss.detach()), grads, len(patched)


def zt_pass(c, zt_lora_logits, ckpt, adapter, targets, rank, alpha, tokens, dtype, tag):
    p = subprocess.run([zt_lora_logits, ckpt, adapter, str(rank), str(alpha), targets, "0",
                        ",".join(map(str, tokens)), dtype],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    c.check(p.returncode == 0, f"{tag}: zt_lora_logits {dtype} (exit {p.returncode})")
    if p.returncode != 0:
        print(p.stderr[-2000:])
        return None
    return json.loads(p.stdout)


def rel(torch, a, b):
    """max |a - b| / max |b| over one tensor."""
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-300)).item()


def lora_config(peft, targets, rank, alpha):
    """PEFT's LoraConfig for zt's lora.targets (the experts as target_parameters)."""
    ts = targets.split(",")
    return peft.LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
                           target_modules=[MODULES[t] for t in ts if t in MODULES],
                           target_parameters=[PARAMS[t] for t in ts if t in PARAMS] or None)


def gradient_step(c, torch, peft, zt_lora_logits, name, folder, h5, model_cls, targets, rank, alpha, tokens):
    """Part 1: one LoRA step's gradients, zt against PEFT."""
    ids = torch.tensor([tokens])
    model = model_cls.from_pretrained(folder, dtype=torch.float32, **load_kwargs(model_cls.config_class))
    pm = peft.get_peft_model(model, lora_config(peft, targets, rank, alpha))
    trainable, total = pm.get_nb_trainable_parameters()
    torch.manual_seed(7)
    with torch.no_grad():
        for pname, prm in pm.named_parameters():
            if "lora_" in pname:
                prm.normal_(0.0, 0.3)
    adir = folder + "-peft"
    pm.save_pretrained(adir, save_embedding_layers=False)
    adapter = os.path.join(adir, "adapter_model.safetensors")
    hf = {d: peft_pass(torch, pm, ids, d) for d in ("f64", "f32")}
    c.check(hf["f64"][3] >= 2, f"{name}: float64 forwards on the rotary embedding and the RMSNorms "
                               f"({hf['f64'][3]} modules)")
    z = {d: zt_pass(c, zt_lora_logits, h5, adapter, targets, rank, alpha, tokens, d, name) for d in ("f64", "f32")}
    if z["f64"] is None or z["f32"] is None:
        return
    # The frozen units (norms, biases, gpt-oss's sinks) are frozen on both sides.
    c.check((z["f64"]["trainable"], z["f64"]["all"]) == (trainable, total),
            f"{name}: counts: zt trainable {z['f64']['trainable']}, all {z['f64']['all']} == PEFT's "
            f"{trainable}, {total}")
    zg = {d: {k: torch.tensor(v, dtype=torch.float64).reshape(-1) for k, v in z[d]["grads"].items()} for d in z}
    g64, g32 = hf["f64"][2], hf["f32"][2]
    c.check(set(zg["f64"]) == set(g64),
            f"{name}: zt's adapters are PEFT's ({len(g64)} tensors, targets {targets})")
    if set(zg["f64"]) != set(g64):
        print(sorted(set(zg["f64"]) ^ set(g64))[:8])
        return
    e64 = max(rel(torch, zg["f64"][k], g64[k]) for k in g64)
    l64 = abs(z["f64"]["loss"] - hf["f64"][1])
    z32 = max(rel(torch, zg["f32"][k], g64[k]) for k in g64)
    p32 = max(rel(torch, g32[k], g64[k]) for k in g64)
    zp32 = max(rel(torch, zg["f32"][k], g32[k]) for k in g64)
    # PEFT's own fp32 error on one tensor can be small by chance (a few rounding terms that
    # cancel: gemma3-tied's layer-0 q_proj B 1.4e-6, against 6.2e-6 for zt and a median of
    # 1.7e-6 over its tensors): each tensor's bound is 4 x the larger of PEFT's error on it
    # and PEFT's median error over the model's tensors.
    p32s = sorted(rel(torch, g32[k], g64[k]) for k in g64)
    p32med = p32s[len(p32s) // 2]
    worst4, worst_name = max((rel(torch, zg["f32"][k], g64[k]) / max(rel(torch, g32[k], g64[k]), p32med, 1e-12), k)
                             for k in g64)
    smallest = min(g64[k].abs().max().item() for k in g64)
    print(f"      {name}: loss {hf['f64'][1]:.6f}; gradients, max over {len(g64)} tensors of max|diff|/max|g|: "
          f"f64 zt-PEFT {e64:.2e}; f32 zt-f64 {z32:.2e}, PEFT f32-f64 {p32:.2e}, zt f32-PEFT f32 {zp32:.2e}; "
          f"smallest max|g| {smallest:.2e}")
    c.check(e64 <= TOL64, f"{name}: f64 gradients: max |zt - PEFT| / max |PEFT| = {e64:.2e} <= {TOL64:.0e}")
    c.check(l64 <= TOL64, f"{name}: f64 loss: |zt - PEFT| = {l64:.2e} <= {TOL64:.0e}")
    c.check(worst4 <= 4.0, f"{name}: f32 gradients: zt's error no more than 4 x PEFT's own fp32 error (median {p32med:.2e}) "
                           f"(worst ratio {worst4:.2f}, {worst_name}: zt {rel(torch, zg['f32'][worst_name], g64[worst_name]):.2e}, "
                           f"PEFT {rel(torch, g32[worst_name], g64[worst_name]):.2e})")
    c.check(zp32 <= TOL32, f"{name}: f32 gradients: max |zt - PEFT| / max |PEFT| = {zp32:.2e} <= {TOL32:.0e}")
    c.check(smallest > 1e-6, f"{name}: every adapter tensor gets a gradient (smallest max |g| {smallest:.2e})")


def metrics_losses(path):
    with open(path) as f:
        return [r["loss"] for r in map(json.loads, f) if "loss" in r and "step" in r]


def training(c, zt, work, name, h5, keys, targets, rank, alpha, methods=("full", "lora", "qlora")):
    """Part 2: full, LoRA and QLoRA runs (`methods`) from the imported base; returns the LoRA
    run's checkpoint directory (or None)."""
    lora_dir = None
    for method in methods:
        tag = f"{name}: zt train {method}"
        ck = os.path.join(work, f"{name}-{method}")
        metrics = ck + ".jsonl"
        # LoRA starts from B = 0 and moves slowly: a larger rate for the adapters
        lr = "3e-3" if method == "full" else "3e-2"
        extra = keys + [f"ckpt.init_from={h5}", f"log.metrics={metrics}", f"train.lr={lr}"]
        if method != "full":
            extra += [f"finetune.method={method}", f"lora.targets={targets}", f"lora.rank={rank}",
                      f"lora.alpha={alpha}"]
        steps = 20 if method == "full" else 6
        rc, out = train_tiny(zt, work, ck, steps, extra)
        c.check(rc == 0, f"{tag}, {steps} steps (exit {rc})")
        if rc != 0:
            print(out[-3000:])
            continue
        losses = metrics_losses(metrics)
        c.check(len(losses) == steps and losses[-1] < losses[0],
                f"{tag}: the loss falls ({' '.join(f'{x:.3f}' for x in losses)})")
        if method == "lora":
            lora_dir = ck
    return lora_dir


def peft_order(torch, cfg, name, value):
    """A checkpoint's adapter tensor (zt's order) in PEFT's: gpt-oss's gate_up B rows are
    gate then up in zt, interleaved (2i gate i, 2i + 1 up i) in PEFT, as transformers'
    gate_up_proj columns."""
    t = torch.from_numpy(value)
    if cfg.model_type == "gpt_oss" and name.endswith("mlp.experts.base_layer.lora_B.weight"):
        return t.reshape(2, t.shape[0] // 2, t.shape[1]).transpose(0, 1).reshape(t.shape)
    return t


def same_adapters(torch, a, b):
    """Two PEFT adapter folders hold the same tensors (bit for bit) and the same r, lora_alpha,
    use_rslora, target_modules and target_parameters."""
    from safetensors.torch import load_file
    ta, tb = (load_file(os.path.join(d, "adapter_model.safetensors")) for d in (a, b))
    ca, cb = (json.load(open(os.path.join(d, "adapter_config.json"))) for d in (a, b))
    keys = ("r", "lora_alpha", "use_rslora")
    lists = ("target_modules", "target_parameters")
    return (ta.keys() == tb.keys() and all(torch.equal(ta[k], tb[k]) for k in ta)
            and all(ca.get(k) == cb.get(k) for k in keys)
            and all(set(ca.get(k) or []) == set(cb.get(k) or []) for k in lists))


def export_adapters(c, torch, peft, h5py, zt, zt_lora_logits, name, folder, h5, model_cls, lora_dir,
                    targets, rank, alpha, tokens, load_kw=None, run=peft_pass):
    """Part 3: the LoRA run's adapters exported for PEFT (the base loaded with `load_kw` more
    from_pretrained arguments, PEFT's logits by `run`, peft_pass's signature)."""
    ckpt = os.path.join(lora_dir, open(os.path.join(lora_dir, "latest")).read().strip())
    out_dir = folder + "-adapters"
    rc, out = run_zt(zt, "convert", "h5-to-hf", ckpt, out_dir, "--adapter")
    c.check(rc == 0, f"{name}: zt convert h5-to-hf --adapter (exit {rc})")
    if rc != 0:
        print(out[-2000:])
        return
    base = model_cls.from_pretrained(folder, dtype=torch.float32, **{"attn_implementation": "sdpa", **(load_kw or {})})
    pm = peft.PeftModel.from_pretrained(base, out_dir)
    same, n = True, 0
    with h5py.File(ckpt, "r") as f:
        held = sum(1 for k in f["params"] if ".lora_" in k)
        for pname, prm in pm.named_parameters():
            if "lora_" in pname:
                key = pname.replace("base_model.model.", "", 1).replace(".default", "")
                same &= key in f["params"] and bool((peft_order(torch, base.config, key, f["params"][key][()])
                                                     == prm.detach()).all())
                n += 1
    c.check(same and n == held > 0, f"{name}: PEFT loads the export: its {n} adapter tensors are the "
                                     f"checkpoint's {held}, equal")
    # The round trip: PEFT saves what it loaded; the folder holds the same tensors (bit for
    # bit) and configuration, and zt reads PEFT's file back (the logits below).
    again = out_dir + "-resaved"
    pm.save_pretrained(again, save_embedding_layers=False)  # (lm_head targeted: PEFT adds the base's otherwise)
    c.check(same_adapters(torch, out_dir, again), f"{name}: PEFT's save_pretrained of the loaded export "
                                                  f"holds zt's tensors and adapter_config")
    ids = torch.tensor([tokens])
    logits, _, _, _ = run(torch, pm, ids, "f64", backward=False)
    with pm.disable_adapter(), torch.no_grad():
        plain = pm(ids).logits[0].double()
    z = zt_pass(c, zt_lora_logits, h5, os.path.join(again, "adapter_model.safetensors"), targets, rank,
                alpha, tokens, "f64", name + " export")
    if z is None:
        return
    d = (torch.tensor(z["logits"], dtype=torch.float64) - logits).abs().max().item()
    moved = (logits - plain).abs().max().item()
    print(f"      {name}: export: f64 logits max |zt - PEFT| {d:.2e}; the trained adapters move them by {moved:.3e}")
    c.check(d <= TOL64, f"{name}: PEFT's logits on the export == zt's (f64 max diff {d:.2e} <= {TOL64:.0e})")
    c.check(moved > 1e-3, f"{name}: the trained adapters move the logits ({moved:.3e} > 1e-3)")


# The full step (full_step): AdamW at lr 1e-2, betas 0.9/0.95, eps 0.1 (Adam's first step
# lr g / (|g| + eps) then depends on g itself, not on its sign alone: moe_lora_peer_test.py
# says why), no weight decay (torch's AdamW would decay the norms, biases and sinks zt
# does not decay) or clipping, on one batch of 2 x 24 byte tokens.
FULL_LR, FULL_EPS = 1e-2, 0.1
FULL_TOL = 1e-3  # every weight after the step: of the largest change (mixtral_peer_test.py's AUX_TOL)


def full_step(c, torch, h5py, zt, work, name, folder, h5, model_cls, keys):
    """One full-weight AdamW step of zt (`zt train`, exported fp32) against transformers'
    model of the family and torch.optim.AdamW on the same batch: the loss and gradient norm
    within 1e-5 relative, every weight after the step within FULL_TOL of the largest change,
    and every tensor moved (so the check can fail)."""
    from moe_lora_peer_test import one_batch
    from safetensors.torch import load_file
    os.makedirs(os.path.join(work, name + "-full1"), exist_ok=True)
    batch = one_batch(c, h5py, zt, os.path.join(work, name + "-full1"))
    if batch is None:
        return
    ck = os.path.join(work, name + "-full1", "ck")
    rc, out = train_tiny(zt, work, ck, 1, keys + [
        f"ckpt.init_from={h5}", f"data.path={batch[0]}", "train.seq_len=24", "train.global_batch=2",
        "train.micro_batch=2", f"train.lr={FULL_LR}", f"train.min_lr={FULL_LR}", "train.weight_decay=0",
        "train.beta1=0.9", "train.beta2=0.95", f"train.eps={FULL_EPS}", "train.grad_clip=0",
        "data.eval_fraction=0", "ckpt.every=1", f"log.metrics={ck}.jsonl"])
    exported = ck + "-hf"
    if rc == 0:
        rc, out = run_zt(zt, "convert", "h5-to-hf", "--dtype", "f32", os.path.join(ck, "step-1.h5"), exported)
    c.check(rc == 0, f"{name}: zt train, one full AdamW step, exported fp32 (exit {rc})")
    if rc != 0:
        print(out[-3000:])
        return
    z = [r for r in map(json.loads, open(ck + ".jsonl")) if "loss" in r and "step" in r][0]
    model = model_cls.from_pretrained(folder, dtype=torch.float32, **load_kwargs(model_cls.config_class))
    model.train()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    w = torch.tensor(batch[1])
    loss = torch.nn.functional.cross_entropy(model(w[:, :-1]).logits.reshape(-1, model.config.vocab_size),
                                             w[:, 1:].reshape(-1))
    loss.backward()
    norm = float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in model.parameters())))
    torch.optim.AdamW(model.parameters(), lr=FULL_LR, betas=(0.9, 0.95), eps=FULL_EPS, weight_decay=0.0).step()
    dl, dn = abs(z["loss"] - loss.item()) / loss.item(), abs(z["grad_norm"] - norm) / norm
    c.check(dl <= 1e-5 and dn <= 1e-5, f"{name}: full step: zt loss {z['loss']:.8f}, gradient norm "
                                       f"{z['grad_norm']:.6f} vs torch {loss.item():.8f}, {norm:.6f} (rel {dl:.1e}, {dn:.1e})")
    got = load_file(os.path.join(exported, "model.safetensors"))
    after = dict(model.named_parameters())
    if model.config.tie_word_embeddings:
        got.setdefault("lm_head.weight", got.get("model.embed_tokens.weight"))
    missing = sorted(set(after) - set(got))
    c.check(not missing, f"{name}: full step: the export holds every weight ({missing[:3]})")
    if missing:
        return
    scale = max((after[n] - before[n]).abs().max().item() for n in after)
    worst = max((got[n] - after[n]).abs().max().item() for n in after)
    still = [n for n in after if (after[n] - before[n]).abs().max().item() == 0.0]
    print(f"      {name}: full step: max |zt - torch AdamW| {worst:.2e}, largest change {scale:.2e}")
    c.check(worst <= FULL_TOL * scale, f"{name}: full step: every weight after it within {FULL_TOL} x the largest "
                                       f"change ({worst:.2e} <= {FULL_TOL * scale:.2e}; {len(after)} tensors)")
    c.check(not still, f"{name}: full step: every tensor moved ({still[:3]})")


def main():
    zt, zt_lora_logits, work, torch, c = peer_start(__doc__, "h5py", "safetensors", "peft")
    transformers, peft, h5py = require("transformers", "peft", "h5py")
    print(f"peft {peft.__version__}", flush=True)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 256, (T,), generator=gen).tolist()
    only = os.environ.get("ZT_FAMILY_LORA_ONLY")  # one case by name (e.g. qwen35-untied)
    for name, cfg, model_cls, targets, rank, alpha in cases(transformers):
        if only and name != only:
            continue
        torch.manual_seed(1)
        model = model_cls(cfg).to(torch.float32)
        prepare(torch, model)
        folder = os.path.join(work, name)
        model.save_pretrained(folder, safe_serialization=True)
        h5 = folder + ".h5"
        if not import_hf(c, zt, name, folder, h5):
            continue
        gradient_step(c, torch, peft, zt_lora_logits, name, folder, h5, model_cls, targets, rank, alpha, tokens)
        keys = h5_model_keys(h5)
        full_step(c, torch, h5py, zt, work, name, folder, h5, model_cls, keys)
        # QLoRA's NF4 base holds no experts: gpt-oss's experts take LoRA only
        methods = ("full", "lora") if EXPERTS in targets else ("full", "lora", "qlora")
        lora_dir = training(c, zt, work, name, h5, keys, targets, rank, alpha, methods)
        if lora_dir:
            export_adapters(c, torch, peft, h5py, zt, zt_lora_logits, name, folder, h5, model_cls, lora_dir,
                            targets, rank, alpha, tokens, load_kw=load_kwargs(model.config))
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
