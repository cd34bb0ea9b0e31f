#!/usr/bin/env python3
"""PyTorch peer of bench/model/bench_model: the same models on CPU.

Same shapes as bench_model's llama-small (hidden 512, 4 layers, 8 heads, 4 KV heads,
intermediate 1376, vocab 256, context 256), same batch (4 x 256), same step
(forward + backward + AdamW over all parameters), same thread count
(torch.set_num_threads). Written with torch.nn and F.scaled_dot_product_attention.

--model gpt-oss-small: bench_model's BM_TrainStep_GptOssSmall instead, built by transformers'
own GptOssForCausalLM (attn_implementation="eager"; --experts picks its experts
implementation, "eager" by default: a loop over the experts hit): hidden 512, 4 layers
(sliding 128 / full alternating), 8 heads, 2 KV heads, head_dim 64, 8 experts of 512 with
biases, 2 per token, vocab 256, the family's yarn, sinks and attention biases. The loss is the
cross-entropy of the logits against the targets as given (no shift), as zt's.

Prints one JSON line: {"steps_per_s_median": ..., "runs": [...], ...}; also steps per
second of process CPU time (steps_per_cpu_s_median), which on a busy machine is the fairer
single-thread figure (it does not count time the process was waiting for a core).

With --check DIR (a folder written by zt's bench/model/dump_model) it instead loads zt's
weights into this model by their Hugging Face names, runs it in float64 on zt's batch and
compares the loss, every parameter gradient and the last-position logits with zt's:
an independent check of the conventions (names, [out, in] weights, rotate_half RoPE,
GQA head sharing, ignore_index -100 targets).
"""
import argparse
import json
import math
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(seq, head_dim, theta):
    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    ang = torch.arange(seq, dtype=torch.float64)[:, None] * inv_freq[None, :]  # [T, D/2]
    ang = torch.cat([ang, ang], dim=-1)  # [T, D]
    return ang.cos().float(), ang.sin().float()


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.h, self.g, self.d = c["heads"], c["kv_heads"], c["hidden"] // c["heads"]
        self.q_proj = nn.Linear(c["hidden"], self.h * self.d, bias=False)
        self.k_proj = nn.Linear(c["hidden"], self.g * self.d, bias=False)
        self.v_proj = nn.Linear(c["hidden"], self.g * self.d, bias=False)
        self.o_proj = nn.Linear(self.h * self.d, c["hidden"], bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.h, self.d).transpose(1, 2)  # [B, H, T, D]
        k = self.k_proj(x).view(B, T, self.g, self.d).transpose(1, 2)  # [B, G, T, D]
        v = self.v_proj(x).view(B, T, self.g, self.d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, self.h * self.d))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c["hidden"], c["intermediate"], bias=False)
        self.up_proj = nn.Linear(c["hidden"], c["intermediate"], bias=False)
        self.down_proj = nn.Linear(c["intermediate"], c["hidden"], bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden"], c["norm_eps"])
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c["hidden"], c["norm_eps"])
        self.mlp = MLP(c)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab"], c["hidden"])
        self.layers = nn.ModuleList(Block(c) for _ in range(c["layers"]))
        self.norm = RMSNorm(c["hidden"], c["norm_eps"])
        self.lm_head = nn.Linear(c["hidden"], c["vocab"], bias=False)
        cos, sin = rope_tables(c["context"], c["hidden"] // c["heads"], c["rope_theta"])
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for n, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * c["layers"]) if n.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, tokens, targets=None):
        T = tokens.shape[1]
        x = self.embed_tokens(tokens)
        cos, sin = self.cos[:T], self.sin[:T]
        for blk in self.layers:
            x = blk(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def read_array(path, dtype):
    with open(path, "rb") as f:
        return torch.frombuffer(bytearray(f.read()), dtype=dtype)


def check_against_zt(folder):
    """Loads a dump_model folder, recomputes loss, grads and logits in float64, compares."""
    with open(os.path.join(folder, "manifest.json")) as f:
        man = json.load(f)
    c = man["config"]
    if c["tied_embeddings"]:
        raise SystemExit("--check: tied embeddings are not supported by this peer")
    B, T = man["batch"], man["seq"]
    model = Llama(c).double()
    units = {}
    state = {}
    for t in man["tensors"]:
        u = t["unit"]
        if u not in units:
            units[u] = (read_array(os.path.join(folder, f"unit_{u}.f32"), torch.float32),
                        read_array(os.path.join(folder, f"grad_{u}.f32"), torch.float32))
        n = math.prod(t["shape"])
        name = t["name"][len("model."):] if t["name"].startswith("model.") else t["name"]
        state[name] = (units[u][0][t["offset"]:t["offset"] + n].view(t["shape"]).double(),
                       units[u][1][t["offset"]:t["offset"] + n].view(t["shape"]).double())
    missing, unexpected = model.load_state_dict({k: v[0] for k, v in state.items()}, strict=False)
    if missing or unexpected:
        raise SystemExit(f"--check: names do not match: missing {missing}, unexpected {unexpected}")
    tokens = read_array(os.path.join(folder, "tokens.i32"), torch.int32).long().view(B, T)
    targets = read_array(os.path.join(folder, "targets.i32"), torch.int32).long().view(B, T)
    loss = model(tokens, targets)
    loss.backward()
    worst_name, worst = None, 0.0
    for name, p in model.named_parameters():
        ref = p.grad
        err = (state[name][1] - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)
        if err > worst:
            worst_name, worst = name, err
    with torch.no_grad():
        logits = model(tokens[:1])[0, -1]
    zt_logits = read_array(os.path.join(folder, "logits_last.f32"), torch.float32).double()
    logit_err = (zt_logits - logits).abs().max().item() / logits.abs().max().item()
    loss_err = abs(man["loss"] - loss.item()) / abs(loss.item())
    ok = loss_err < 1e-5 and worst < 1e-4 and logit_err < 1e-5
    print(json.dumps({"check": "zt vs pytorch (float64)", "model": c["name"], "batch": B, "seq": T,
                      "loss_zt": man["loss"], "loss_torch": loss.item(), "loss_rel_err": loss_err,
                      "grad_worst_rel_err": worst, "grad_worst_tensor": worst_name,
                      "logits_last_rel_err": logit_err, "ok": ok}))
    return 0 if ok else 1


LLAMA_SMALL = dict(vocab=256, hidden=512, layers=4, heads=8, kv_heads=4, intermediate=1376,
                   context=256, rope_theta=10000.0, norm_eps=1e-5)


def gpt_oss_small(experts):
    """transformers' GptOssForCausalLM on bench_model's gpt-oss-small shape; the family's
    defaults (GptOssConfig) for everything else: yarn, theta 150000, swiglu_limit 7, sinks."""
    from transformers import GptOssConfig, GptOssForCausalLM
    cfg = GptOssConfig(vocab_size=256, hidden_size=512, num_hidden_layers=4, num_attention_heads=8,
                       num_key_value_heads=2, head_dim=64, intermediate_size=512, num_local_experts=8,
                       num_experts_per_tok=2, sliding_window=128, tie_word_embeddings=False,
                       layer_types=["sliding_attention", "full_attention"] * 2, use_cache=False)
    model = GptOssForCausalLM._from_config(cfg, attn_implementation="eager", experts_implementation=experts)
    model.train()

    def loss_fn(tokens, targets):
        logits = model(input_ids=tokens, use_cache=False).logits
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

    impl = {"attn": model.config._attn_implementation, "experts": model.config._experts_implementation}
    return model, loss_fn, cfg.vocab_size, impl


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["llama-small", "gpt-oss-small"], default="llama-small")
    ap.add_argument("--experts", default="eager", help="gpt-oss-small: transformers' experts_implementation")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=10, help="timed steps per run")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--check", metavar="DIR", help="compare with a zt dump_model folder instead")
    args = ap.parse_args()
    if args.check:
        torch.set_num_threads(args.threads)
        raise SystemExit(check_against_zt(args.check))

    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    if args.model == "gpt-oss-small":
        model, loss_fn, vocab, impl = gpt_oss_small(args.experts)
    else:
        model, impl = Llama(LLAMA_SMALL), {}
        loss_fn, vocab = model, LLAMA_SMALL["vocab"]
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    tokens = torch.randint(0, vocab, (args.batch, args.seq))
    targets = torch.randint(0, vocab, (args.batch, args.seq))

    phases = {"fwd_ms": [], "bwd_ms": [], "adamw_ms": []}  # per step; CPU torch runs synchronously

    def step():
        opt.zero_grad(set_to_none=False)
        t0 = time.perf_counter()
        loss = loss_fn(tokens, targets)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        for k, a, b in (("fwd_ms", t0, t1), ("bwd_ms", t1, t2), ("adamw_ms", t2, t3)):
            phases[k].append(1e3 * (b - a))
        return loss.item()

    for _ in range(args.warmup):
        step()
    for v in phases.values():
        v.clear()
    runs, cpu_runs = [], []
    for _ in range(args.runs):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(args.steps):
            loss = step()
        runs.append(args.steps / (time.perf_counter() - t0))
        cpu_runs.append(args.steps / (time.process_time() - c0))
    nparams = sum(p.numel() for p in model.parameters())
    print(json.dumps({"peer": "pytorch", "model": args.model, "torch": torch.__version__,
                      "threads": torch.get_num_threads(), "batch": args.batch, "seq": args.seq,
                      "params": nparams, "implementation": impl,
                      "steps_per_s_median": statistics.median(runs), "runs": runs,
                      "steps_per_cpu_s_median": statistics.median(cpu_runs), "last_loss": loss,
                      "phases_ms_median": {k: statistics.median(v) for k, v in phases.items()}}))


if __name__ == "__main__":
    main()
