#!/usr/bin/env python3
"""zt's mixture-of-experts block (moe_tool) against transformers' Mixtral, in float32:
MixtralSparseMoeBlock's output, the experts its router picks (torch.topk's choice, ties
included), load_balancing_loss_func's auxiliary loss, and torch autograd's gradients of
L = sum(out * R) + coef * aux with respect to the input, the router and both expert
tensors.

Cases: random weights (E 4, k 2); E 8, k 2 with every router row equal (all
probabilities tie) and with two equal rows that win about half the rows (the others
scaled by 0.01); E 8, k 1, also with three tied winners; E 128, k 2 (torch's
partial-sort branch, k * 64 <= E), random and all tied. Bounds: outputs and gradients within 1e-5 of the largest
magnitude, the aux loss within 1e-6, the chosen experts identical.

Usage: moe_peer_test.py MOE_TOOL WORKDIR. Exits 77 (SKIPPED) without torch and
transformers; where CI requires its peers (ZT_REQUIRE_PEERS=1) that fails.
"""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ckpt", "hf"))
from hf_common import require  # noqa: E402  (a missing module: skip, or fail in CI)

if len(sys.argv) != 3:
    print(__doc__)
    sys.exit(2)
tool, work = sys.argv[1], sys.argv[2]
np, torch, transformers = require("numpy", "torch", "transformers")
from transformers.models.mixtral import modeling_mixtral as mm  # noqa: E402

os.makedirs(work, exist_ok=True)
torch.manual_seed(0)
failures = []


def close(what, ours, theirs, bound):
    err = float(np.max(np.abs(ours - theirs))) if ours.size else 0.0
    scale = max(1.0, float(np.max(np.abs(theirs))) if theirs.size else 1.0)
    ok = err <= bound * scale
    print("  %-10s max abs diff %.3e (bound %.1e x %.3g) %s" % (what, err, bound, scale, "ok" if ok else "FAIL"))
    if not ok:
        failures.append(what)


def case(name, N, C, I, E, k, coef, tie_rows=None, others=1.0):
    print("%s: N %d C %d I %d E %d k %d coef %g" % (name, N, C, I, E, k, coef))
    cfg = mm.MixtralConfig(hidden_size=C, intermediate_size=I, num_local_experts=E,
                           num_experts_per_tok=k, router_jitter_noise=0.0)
    block = mm.MixtralSparseMoeBlock(cfg).float()
    x = torch.randn(1, N, C)
    with torch.no_grad():
        block.gate.weight.copy_(torch.randn(E, C) * 0.5)
        if tie_rows is not None:
            for r in range(E):  # the tied rows equal, the others scaled by `others`
                if r in tie_rows:
                    block.gate.weight[r] = block.gate.weight[tie_rows[0]]
                else:
                    block.gate.weight[r] *= others
        block.experts.gate_up_proj.copy_(torch.randn(E, 2 * I, C) * 0.3)
        block.experts.down_proj.copy_(torch.randn(E, C, I) * 0.3)
    R = torch.randn(1, N, C)
    x.requires_grad_(True)
    out = block(x)
    logits, _, chosen = block.gate(x.reshape(-1, C))
    aux = mm.load_balancing_loss_func((logits,), E, k)
    loss = (out * R).sum() + coef * aux
    grads = torch.autograd.grad(loss, [x, block.gate.weight, block.experts.gate_up_proj,
                                       block.experts.down_proj])

    inp = os.path.join(work, name + ".in")
    outp = os.path.join(work, name + ".out")
    with open(inp, "wb") as f:
        f.write(struct.pack("<5q", N, C, I, E, k))
        f.write(struct.pack("<d", coef))
        for t in (x, block.gate.weight, block.experts.gate_up_proj, block.experts.down_proj, R):
            f.write(t.detach().numpy().astype("<f4").tobytes())
    rc = os.spawnv(os.P_WAIT, tool, [tool, inp, outp])
    if rc != 0:
        failures.append("%s: moe_tool exit %d" % (name, rc))
        return
    raw = open(outp, "rb").read()
    pos = 0

    def take(dtype, n):
        nonlocal pos
        a = np.frombuffer(raw, dtype=dtype, count=n, offset=pos)
        pos += a.nbytes
        return a

    z_out = take("<f4", N * C)
    z_idx = take("<i4", N * k)
    z_aux = take("<f8", 1)[0]
    z_grads = [take("<f4", N * C), take("<f4", E * C), take("<f4", E * 2 * I * C), take("<f4", E * C * I)]
    same = np.array_equal(z_idx.reshape(N, k), chosen.numpy())
    # Rows whose choice or order a tie decides: equal probabilities among the first k + 1.
    probs = torch.softmax(logits.detach().float(), -1).sort(-1, descending=True).values[:, :k + 1]
    tied = int((probs[:, 1:] == probs[:, :-1]).any(-1).sum())
    print("  ties      %d of %d rows decided by a tie" % (tied, N))
    if tie_rows is not None and tied == 0:
        failures.append(name + ": no row's choice is decided by a tie (the case tests nothing)")
    print("  experts   %s (first rows zt %s, transformers %s)" % (
        "identical" if same else "DIFFER", z_idx.reshape(N, k)[:2].tolist(), chosen[:2].tolist()))
    if not same:
        failures.append(name + " experts")
    close("out", z_out, out.detach().numpy().ravel(), 1e-5)
    close("aux", np.array([z_aux]), np.array([float(aux.detach())]), 1e-6)
    for what, ours, theirs in zip(("dx", "drouter", "dgate_up", "ddown"), z_grads, grads):
        close(what, ours, theirs.numpy().ravel(), 1e-5)


case("random", 16, 8, 6, 4, 2, 0.02)
case("ties_all", 12, 8, 6, 8, 2, 0.02, tie_rows=list(range(8)))
case("ties_two", 12, 8, 6, 8, 2, 0.5, tie_rows=[2, 5], others=0.01)
case("top1", 12, 8, 6, 8, 1, 0.1)
case("top1_ties", 12, 8, 6, 8, 1, 0.1, tie_rows=[1, 3, 6], others=0.01)
case("many_experts", 10, 8, 4, 128, 2, 0.02)
case("many_ties", 10, 8, 4, 128, 2, 0.02, tie_rows=list(range(128)))
if failures:
    print("FAIL: " + ", ".join(failures))
    sys.exit(1)
print("PASS")
