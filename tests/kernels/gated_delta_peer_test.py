#!/usr/bin/env python3
"""zt's Gated DeltaNet CPU kernels (gated_delta_tool, float64) against transformers 5.24's
pure-torch forms in modeling_qwen3_5, on random inputs:

- the rule: torch_chunk_gated_delta_rule (chunk 64) and torch_recurrent_gated_delta_rule,
  use_qk_l2norm_in_kernel=True, T = 150 (two chunks and a short one), Hv = 2 Hk, with an
  initial state and without; out and the final state of zt's chunked and recurrent forms;
  zt's backward of the chunked form against torch's autograd through
  torch_chunk_gated_delta_rule (dq, dk, dv, dg, dbeta, dstate0 for a given dout, dstate1);
- the conv: torch's conv1d as Qwen3_5GatedDeltaNet does it (causal_conv1d_fn: padding K - 1,
  groups = channels, SiLU), and with a conv state (the K - 1 inputs before, concatenated in
  front and their outputs dropped, as the model does with a cache);
- the decay: -A_log.exp() * softplus(a + dt_bias) as the model writes it;
- the gated norm: Qwen3_5RMSNormGated.

transformers casts inside these functions to float32 (`.to(torch.float32)`); here they run
with that name bound to float64 (the module's `torch` seen through a proxy whose float32 is
float64), so both sides compute in double. Bound: 1e-12 of the largest magnitude of each
compared tensor.

Usage: gated_delta_peer_test.py TOOL WORKDIR. Exits 77 (SKIPPED) without torch and
transformers; where CI requires its peers (ZT_REQUIRE_PEERS=1) that fails.
"""
import os
import sys
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ckpt", "hf"))
from hf_common import require  # noqa: E402  (a missing module: skip, or fail in CI)
from tool_peer import ToolPeer  # noqa: E402  (tests/kernels)

peer = ToolPeer(__doc__)
np, torch, transformers = require("numpy", "torch", "transformers")
from transformers.models.qwen3_5 import modeling_qwen3_5 as qm  # noqa: E402

torch.manual_seed(0)
torch.set_num_threads(1)
BOUND = 1e-12


class Float64Torch(types.ModuleType):
    """torch, with float32 meaning float64 (for the casts inside transformers' functions)."""

    def __init__(self):
        super().__init__("torch")
        self.float32 = torch.float64

    def __getattr__(self, name):
        return getattr(torch, name)


qm.torch = Float64Torch()


def close(what, ours, theirs):
    peer.close(what, ours, theirs, BOUND)


def split(flat, *shapes):
    out, at = [], 0
    for s in shapes:
        n = int(np.prod(s))
        out.append(flat[at:at + n].reshape(s))
        at += n
    assert at == flat.size, (at, flat.size)
    return out


def check_rule(B, T, Hk, Hv, Dk, Dv, with_state):
    print("rule: B %d, T %d, Hk %d, Hv %d, Dk %d, Dv %d, chunk 64%s" % (
        B, T, Hk, Hv, Dk, Dv, ", initial state" if with_state else ""))
    d = torch.float64
    q = torch.randn(B, T, Hk, Dk, dtype=d, requires_grad=True)
    k = torch.randn(B, T, Hk, Dk, dtype=d, requires_grad=True)
    v = torch.randn(B, T, Hv, Dv, dtype=d, requires_grad=True)
    a = torch.randn(B, T, Hv, dtype=d)
    g = (-torch.rand(Hv, dtype=d).mul(4).exp() * torch.nn.functional.softplus(a + 1))
    g = g.detach().requires_grad_(True)
    beta = torch.randn(B, T, Hv, dtype=d).sigmoid().requires_grad_(True)
    s0 = (0.5 * torch.randn(B, Hv, Dk, Dv, dtype=d)).requires_grad_(True)
    dout = torch.randn(B, T, Hv, Dv, dtype=d)
    ds1 = torch.randn(B, Hv, Dk, Dv, dtype=d)
    init = s0 if with_state else None
    o_c, s_c = qm.torch_chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=64,
                                               initial_state=init, output_final_state=True,
                                               use_qk_l2norm_in_kernel=True)
    o_r, s_r = qm.torch_recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=init,
                                                   output_final_state=True,
                                                   use_qk_l2norm_in_kernel=True)
    assert o_c.dtype == torch.float64, o_c.dtype
    leaves = [q, k, v, g, beta] + ([s0] if with_state else [])
    theirs = torch.autograd.grad((o_c * dout).sum() + (s_c * ds1).sum(), leaves)
    arrays = [q, k, v, g, beta] + ([s0] if with_state else []) + [dout, ds1]
    flat = peer.run("rule", [B, T, Hk, Hv, Dk, Dv, 64, 1 if with_state else 0], *arrays)
    shapes = [o_c.shape, s_c.shape, o_r.shape, s_r.shape] + [x.shape for x in leaves]
    if not with_state:
        shapes.append((0,))
    ours = split(flat, *shapes)
    close("chunked out", ours[0], o_c.detach())
    close("chunked final state", ours[1], s_c.detach())
    close("recurrent out", ours[2], o_r.detach())
    close("recurrent final state", ours[3], s_r.detach())
    for name, o, t in zip(("dq", "dk", "dv", "dg", "dbeta", "dstate0"), ours[4:], theirs):
        close("chunked backward " + name + " (autograd)", o, t)


def check_conv(B, T, C, K, with_past):
    print("conv: B %d, T %d, channels %d, kernel %d%s" % (B, T, C, K,
                                                         ", conv state" if with_past else ""))
    d = torch.float64
    x = torch.randn(B, T, C, dtype=d)
    w = torch.randn(C, K, dtype=d) * 0.5  # conv1d.weight.squeeze(1)
    past = torch.randn(B, C, K - 1, dtype=d)
    xt = x.transpose(1, 2)  # [B, C, T] as the model's mixed_qkv
    if with_past:
        y = qm.causal_conv1d_fn(torch.cat([past, xt], dim=-1), w, None, activation="silu")
        y = y[:, :, -T:]
        ours = peer.run("conv", [B, T, C, K, 1], x, w, past)
    else:
        y = qm.causal_conv1d_fn(xt, w, None, activation="silu")
        ours = peer.run("conv", [B, T, C, K, 0], x, w)
    close("conv1d + silu", ours.reshape(B, T, C), y.transpose(1, 2))


def check_decay(N, Hv):
    print("decay: N %d, Hv %d" % (N, Hv))
    d = torch.float64
    a = 3 * torch.randn(N, Hv, dtype=d)
    A_log = torch.log(torch.empty(Hv, dtype=d).uniform_(0.01, 16))
    dt_bias = torch.randn(Hv, dtype=d)
    g = -A_log.exp() * torch.nn.functional.softplus(a + dt_bias)
    close("g", peer.run("decay", [N, Hv], a, A_log, dt_bias).reshape(N, Hv), g)


def check_norm(N, D, eps):
    print("gated rmsnorm: N %d, D %d, eps %g" % (N, D, eps))
    d = torch.float64
    mod = qm.Qwen3_5RMSNormGated(D, eps=eps).to(d)
    with torch.no_grad():
        mod.weight.copy_(1 + 0.3 * torch.randn(D, dtype=d))
    x, z = torch.randn(N, D, dtype=d), torch.randn(N, D, dtype=d)
    y = mod(x, z)
    assert y.dtype == torch.float64, y.dtype
    close("gated rmsnorm", peer.run("norm", [N, D, eps], x, z, mod.weight).reshape(N, D), y)


check_rule(2, 150, 2, 4, 16, 12, True)
check_rule(1, 150, 1, 2, 32, 16, False)
check_conv(2, 37, 20, 4, False)
check_conv(2, 37, 20, 4, True)
check_decay(50, 6)
check_norm(40, 24, 1e-6)

peer.finish()
