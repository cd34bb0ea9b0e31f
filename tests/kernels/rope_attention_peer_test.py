#!/usr/bin/env python3
"""zt's RoPE scaling, partial rotary, attention sinks and attention logit soft-capping
(rope_attention_tool, float64) against transformers:

- yarn: ROPE_INIT_FUNCTIONS["yarn"]'s inverse frequencies and attention factor for
  gpt-oss's rope_scaling (factor 32, beta_fast 32, beta_slow 1, original context 4096,
  theta 150000, head dim 64) with truncate false (gpt-oss's) and true (the default), for
  DeepSeek-V3's (factor 40, mscale 1, mscale_all_dim 1, beta_fast 32, beta_slow 1,
  original context 4096, theta 10000, rotary dim 64), with mscale 0.707 / mscale_all_dim 1,
  with an explicit attention_factor, and with yarn on a partial rotary dim;
- partial rotary: Phi's rotary embedding (partial_rotary_factor 0.5 and 0.4 of head dim 80)
  applied as PhiAttention does (rotate_half on the first rotary dims, the rest passed
  through), and gpt-oss's yarn rotary embedding (cos and sin times the attention factor)
  applied with its apply_rotary_pos_emb, on random vectors at positions 0..47;
- sinks: gpt-oss's eager_attention_forward (sinks, sliding window 3 and full causal, GQA);
- soft-cap: Gemma 2's eager_attention_forward with softcap (attn_logit_softcapping) 3 and
  a sliding window, scores scaled by query_pre_attn_scalar^-0.5; a cap of 4.5 moves
  transformers' output by more than the bound (the check can fail).

Bounds: inverse frequencies within 2e-6 relative (transformers computes them in float32:
theta ** (2i / d), its reciprocal and the ramp blend, a few float32 ulps of 6e-8 each; zt
in double), the attention factor within 1e-6 relative (float32 vs double log); rotated
vectors within 2e-5 of the largest magnitude (float32 angles p * inv_freq up to 48 rad: ulp
4e-6) and attention outputs within 1e-5 (float32 softmax and products), transformers run
in float32.

Usage: rope_attention_peer_test.py TOOL WORKDIR. Exits 77 (SKIPPED) without torch and
transformers; where CI requires its peers (ZT_REQUIRE_PEERS=1) that fails.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ckpt", "hf"))
from hf_common import require  # noqa: E402  (a missing module: skip, or fail in CI)

if len(sys.argv) != 3:
    print(__doc__)
    sys.exit(2)
tool, work = sys.argv[1], sys.argv[2]
np, torch, transformers = require("numpy", "torch", "transformers")
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.models.gemma2 import modeling_gemma2 as g2  # noqa: E402
from transformers.models.gpt_oss import modeling_gpt_oss as go  # noqa: E402
from transformers.models.phi import modeling_phi as phi  # noqa: E402

os.makedirs(work, exist_ok=True)
torch.manual_seed(0)
torch.set_num_threads(1)
failures = []


def close(what, ours, theirs, bound, relative_each=False):
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    if relative_each:
        err = float(np.max(np.abs(ours - theirs) / np.abs(theirs)))
        scale = 1.0
    else:
        err = float(np.max(np.abs(ours - theirs)))
        scale = max(1.0, float(np.max(np.abs(theirs))))
    ok = err <= bound * scale
    print("  %-34s max %s diff %.3e (bound %.1e x %.3g) %s" % (
        what, "rel" if relative_each else "abs", err, bound, scale, "ok" if ok else "FAIL"))
    if not ok:
        failures.append(what)


def run(mode, header, *arrays):
    src, dst = os.path.join(work, mode + ".in"), os.path.join(work, mode + ".out")
    with open(src, "wb") as f:
        f.write(np.asarray(header, np.float64).tobytes())
        for a in arrays:
            f.write(np.ascontiguousarray(a, np.float64).tobytes())
    subprocess.run([tool, mode, src, dst], check=True)
    return np.fromfile(dst, np.float64)


def zt_rope(params, theta, rd, x):
    """zt's attention factor, inv_freq [rd/2] and x [T, nh, D] rotated at positions 0..T-1."""
    T, nh, D = x.shape
    yarn = params.get("rope_type") == "yarn"
    header = [1 if yarn else 0, theta, rd, params.get("factor", 1.0),
              params.get("beta_fast", 32.0), params.get("beta_slow", 1.0),
              params.get("original_max_position_embeddings", 0),
              1 if params.get("truncate", True) else 0, params.get("mscale", 0.0),
              params.get("mscale_all_dim", 0.0), params.get("attention_factor", 0.0), T, nh, D]
    out = run("rope", header, x)
    return out[0], out[1:1 + rd // 2], out[1 + rd // 2:].reshape(T, nh, D)


def gpt_oss_config(head_dim, theta, params, partial=1.0):
    rope = dict(params, rope_theta=theta)
    if partial != 1.0:
        rope["partial_rotary_factor"] = partial
    return go.GptOssConfig(head_dim=head_dim, num_attention_heads=4, num_key_value_heads=2,
                           hidden_size=4 * head_dim,
                           max_position_embeddings=int(params["factor"] * 4096),
                           rope_parameters=rope)


def check_yarn(name, head_dim, theta, params, partial=1.0):
    print("%s: head dim %d, theta %g, %s%s" % (name, head_dim, theta, params,
                                               "" if partial == 1.0 else ", partial %g" % partial))
    cfg = gpt_oss_config(head_dim, theta, params, partial)
    inv, factor = ROPE_INIT_FUNCTIONS["yarn"](cfg, "cpu")
    rd = int(head_dim * partial)
    T, nh = 48, 3
    x = torch.randn(T, nh, head_dim)
    a, zinv, y = zt_rope(params, theta, rd, x.double().numpy())
    close("attention factor", [a], [factor], 1e-6, relative_each=True)
    close("inv_freq", zinv, inv.numpy(), 2e-6, relative_each=True)
    if partial == 1.0:  # gpt-oss's own rotary embedding and application
        emb = go.GptOssRotaryEmbedding(cfg)
        cos, sin = emb(x, torch.arange(T)[None])
        theirs, _ = go.apply_rotary_pos_emb(x.transpose(0, 1)[None], x.transpose(0, 1)[None],
                                            cos, sin)
        close("rotated (GptOssRotaryEmbedding)", y, theirs[0].transpose(0, 1).numpy(), 2e-5)


def check_partial(name, head_dim, partial):
    print("%s: Phi rotary, head dim %d, partial_rotary_factor %g" % (name, head_dim, partial))
    cfg = phi.PhiConfig(hidden_size=4 * head_dim, num_attention_heads=4,
                        rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                         "partial_rotary_factor": partial})
    emb = phi.PhiRotaryEmbedding(cfg)
    rd = int(head_dim * partial)
    T, nh = 48, 3
    x = torch.randn(1, nh, T, head_dim)
    cos, sin = emb(x, torch.arange(T)[None])
    rot, keep = x[..., :rd], x[..., rd:]  # as PhiAttention.forward
    rot, _ = phi.apply_rotary_pos_emb(rot, rot, cos, sin)
    theirs = torch.cat((rot, keep), dim=-1)[0].transpose(0, 1)  # [T, nh, D]
    a, zinv, y = zt_rope({"rope_type": "default"}, 10000.0, rd, x[0].transpose(0, 1).double().numpy())
    close("inv_freq", zinv, emb.inv_freq.numpy(), 2e-6, relative_each=True)
    close("rotated, rest passed through", y, theirs.numpy(), 2e-5)


class Module(torch.nn.Module):
    """The attention module transformers' eager_attention_forward reads (GQA, eval)."""
    def __init__(self, H, G):
        super().__init__()
        self.num_key_value_groups = H // G
        self.training = False


def causal_mask(T, window):
    i = torch.arange(T)
    allowed = (i[None, :] <= i[:, None]) & ((window <= 0) | (i[None, :] > i[:, None] - window))
    return torch.zeros(T, T).masked_fill(~allowed, float("-inf"))[None, None]


def as_zt(t):
    return t.transpose(1, 2).double().numpy()  # [B, T, heads, D]


def check_sinks(name, B, T, H, G, D, window):
    print("%s: B %d T %d H %d G %d D %d window %d" % (name, B, T, H, G, D, window))
    q, k, v = torch.randn(B, H, T, D), torch.randn(B, G, T, D), torch.randn(B, G, T, D)
    sinks = torch.randn(H) * 2
    mod = Module(H, G)
    mod.sinks = sinks
    theirs, _ = go.eager_attention_forward(mod, q, k, v, causal_mask(T, window), D ** -0.5)
    ours = run("attention", [B, T, H, G, D, window, 0, 1], as_zt(q), as_zt(k), as_zt(v),
               sinks.double().numpy())
    close("out (eager_attention_forward)", ours.reshape(B, T, H, D), theirs.numpy(), 1e-5)


def check_softcap(name, B, T, H, G, D, window, cap, scalar):
    """Gemma 2's eager attention: scores q k^T scalar^-0.5, capped, masked, softmax. zt's
    kernel scales by D^-0.5: q is handed to it times sqrt(D / scalar), as zt's model does."""
    print("%s: B %d T %d H %d G %d D %d window %d cap %g" % (name, B, T, H, G, D, window, cap))
    q, k, v = torch.randn(B, H, T, D) * 2, torch.randn(B, G, T, D), torch.randn(B, G, T, D)
    mask, mod = causal_mask(T, window), Module(H, G)
    theirs, _ = g2.eager_attention_forward(mod, q, k, v, mask, scaling=scalar ** -0.5,
                                           softcap=cap)
    ours = run("attention", [B, T, H, G, D, window, cap, 0], as_zt(q) * (D / scalar) ** 0.5,
               as_zt(k), as_zt(v))
    close("out (gemma2 eager_attention_forward)", ours.reshape(B, T, H, D), theirs.numpy(), 1e-5)
    other, _ = g2.eager_attention_forward(mod, q, k, v, mask, scaling=scalar ** -0.5,
                                          softcap=1.5 * cap)
    moved = float((other - theirs).abs().max())
    ok = moved > 1e-3
    print("  %-34s moves transformers' output by %.3e %s" % ("cap x 1.5", moved,
                                                             "ok" if ok else "FAIL"))
    if not ok:
        failures.append(name + ": cap x 1.5 does not move the output")


gpt_oss = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
           "original_max_position_embeddings": 4096}
check_yarn("gpt-oss yarn, truncate false", 64, 150000.0, dict(gpt_oss, truncate=False))
check_yarn("gpt-oss yarn, truncate true", 64, 150000.0, dict(gpt_oss, truncate=True))
deepseek = {"rope_type": "yarn", "factor": 40.0, "beta_fast": 32.0, "beta_slow": 1.0,
            "mscale": 1.0, "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096}
check_yarn("DeepSeek-V3 yarn (mscale 1, 1)", 64, 10000.0, deepseek)
check_yarn("yarn mscale 0.707, mscale_all_dim 1", 64, 10000.0, dict(deepseek, mscale=0.707))
check_yarn("yarn attention_factor 1.25", 64, 10000.0, dict(gpt_oss, attention_factor=1.25))
check_yarn("yarn on a partial rotary dim", 128, 10000.0, gpt_oss, partial=0.5)
check_partial("partial rotary 0.5", 80, 0.5)
check_partial("partial rotary 0.4", 80, 0.4)
check_sinks("gpt-oss sinks, full causal", 2, 19, 4, 2, 16, 0)
check_sinks("gpt-oss sinks, sliding window 3", 2, 19, 4, 2, 16, 3)
check_sinks("gpt-oss sinks, MQA window 7", 1, 23, 3, 1, 8, 7)
check_softcap("Gemma 2 soft-cap 3, full causal", 2, 19, 4, 2, 16, 0, 3.0, 24.0)
check_softcap("Gemma 2 soft-cap 3, sliding window 5", 2, 19, 4, 2, 16, 5, 3.0, 24.0)

if failures:
    print("FAIL: " + ", ".join(failures))
    sys.exit(1)
print("PASS")
