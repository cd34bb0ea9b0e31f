#!/usr/bin/env python3
"""zt's numerics against an outside implementation: Hugging Face transformers' Llama.

  hf_peer_test.py ZT ZT_LOGITS WORKDIR

1. `zt train` trains the `tiny` preset for a few steps on the shipped corpus (1 rank),
   so the logits are far from uniform.
2. `zt convert h5-to-hf` exports it as F32 and as BF16; `zt convert hf-to-h5` reads the
   BF16 export back, so zt holds exactly the bf16-rounded weights transformers loads.
3. For each (export, checkpoint) pair: transformers' `LlamaForCausalLM.from_pretrained`
   (torch_dtype float32: the BF16 weights upcast) against ZT_LOGITS (tests/ckpt/hf/
   zt_logits.cpp: zt's Model through the library) on the same bytes of text:
   - logits of every position: max |zt - transformers| <= 1e-5 x max(1, max |logit|)
     (TOL relative to the logits' scale: both sides sum up to 512 fp32 products per
     output in different orders, Eigen vs torch's BLAS; measured 6.7e-6 (F32) and
     8.6e-6 (BF16) absolute at a max |logit| of 11.2, so even 1e-5 absolute holds here)
   - loss (mean next-token cross-entropy): |zt - transformers| <= 1e-5
   - the same logits from zt's key/value-cache decoding (Model::decode, one token at a
     time), within the same tolerance
   - greedy continuation: zt's sampler at temperature -> 0 == transformers' greedy
     `generate` (do_sample=False), token for token, and not degenerate (>= 5 distinct);
     and `zt generate --temperature 0` (KV cache) on the Hugging Face folder itself (F32,
     BF16) == the same
4. Sensitivity (so the test can fail): the BF16 weights change the logits by far more
   than TOL (zt on F32 vs transformers on BF16 must differ by > 10 x TOL), and the
   trained logits are not near-uniform (their spread is > 1).
Exit 77 (CTest skip) when torch or transformers is missing (scripts/install-deps.sh
--hf-peers installs them).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_common import hf_llama_run, peer_start, run_zt, train_tiny, zt_logits_json  # noqa: E402

TOL = 1e-5
PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks?\nJULIET:\n"
NEW = 40


def main():
    zt, zt_logits, work, torch, c = peer_start(__doc__)

    # 1. train (1 rank, no mpirun: MPI's singleton init)
    ck = os.path.join(work, "ck")
    rc, out = train_tiny(zt, work, ck, 150)
    if rc != 0:
        print(out[-4000:])
    c.check(rc == 0, "zt train: tiny, 150 steps, 1 rank")
    if rc != 0:
        c.finish()

    # 2. exports
    hf32, hf16, bf16_h5 = (os.path.join(work, n) for n in ("hf-f32", "hf-bf16", "bf16.h5"))
    for args in (("h5-to-hf", ck, hf32, "--dtype", "f32"), ("h5-to-hf", ck, hf16, "--dtype", "bf16"),
                 ("hf-to-h5", hf16, bf16_h5)):
        rc, out = run_zt(zt, "convert", *args)
        c.check(rc == 0, "zt convert " + " ".join(os.path.basename(a) for a in args))
        if rc != 0:
            print(out)
            c.finish()

    tokens = list(PROMPT.encode())  # the byte vocabulary: token = byte
    ids = torch.tensor([tokens])
    zt_run = lambda ckpt: zt_logits_json(c, zt_logits, ckpt, tokens, NEW)  # noqa: E731
    hf_run = lambda folder: hf_llama_run(torch, folder, ids, NEW)  # noqa: E731

    results = {}
    for name, folder, ckpt in (("f32", hf32, os.path.join(ck, "latest")), ("bf16", hf16, bf16_h5)):
        if name == "f32":  # ckpt.dir's `latest` names the file; read_full wants the file
            ckpt = os.path.join(ck, open(ckpt).read().strip())
        z = zt_run(ckpt)
        zl = torch.tensor(z["logits"], dtype=torch.float64)
        hl, hloss, hgen = hf_run(folder)
        results[name] = (zl, hl)
        dl = (zl - hl).abs().max().item()
        tol = TOL * max(1.0, zl.abs().max().item())
        dloss = abs(z["loss"] - hloss)
        top2 = zl.topk(2, dim=-1).values
        margin = (top2[:, 0] - top2[:, 1]).min().item()
        print(f"      {name}: logits {tuple(zl.shape)}, spread (std) {zl.std().item():.3f}, "
              f"max |zt - hf| {dl:.3e} (max |logit| {zl.abs().max().item():.2f}); loss zt {z['loss']:.8f} hf {hloss:.8f} diff {dloss:.3e}; "
              f"smallest top-1/top-2 margin {margin:.3e}")
        print(f"      {name}: greedy zt {bytes(z['greedy'])!r}")
        print(f"      {name}: greedy hf {bytes(hgen)!r}")
        c.check(zl.shape == hl.shape, f"{name}: logits shape {tuple(zl.shape)} on both sides")
        c.check(zl.std().item() > 1.0, f"{name}: trained logits are not near-uniform (std > 1)")
        c.check(dl <= tol, f"{name}: max |logit zt - transformers| = {dl:.3e} <= {tol:.3e}")
        kl = torch.tensor(z["kv_logits"], dtype=torch.float64)
        dkv = (kl - hl).abs().max().item() if kl.shape == hl.shape else float("inf")
        c.check(dkv <= tol, f"{name}: max |KV-cache logit zt - transformers| = {dkv:.3e} <= {tol:.3e}")
        rc, gen_out = run_zt(zt, "generate", "--weights", folder, "--prompt-ids",
                             ",".join(map(str, tokens)), "--temperature", "0",
                             "--max-new-tokens", str(NEW), "--json")
        lines = [l for l in gen_out.splitlines() if l.startswith("{")]
        zgen = json.loads(lines[0])["ids"] if rc == 0 and lines else None
        if rc != 0:
            print(gen_out)
        print(f"      {name}: zt generate (KV cache, HF folder) {bytes(zgen or [])!r}")
        c.check(zgen == hgen, f"{name}: `zt generate --temperature 0` on the HF folder == transformers' greedy")
        c.check(dloss <= TOL, f"{name}: |loss zt - transformers| = {dloss:.3e} <= {TOL}")
        c.check(z["greedy"] == z["argmax"], f"{name}: zt's sampler at temperature -> 0 is the argmax")
        c.check(len(set(z["greedy"])) >= 5,
                f"{name}: the greedy continuation is not degenerate ({len(set(z['greedy']))} distinct tokens >= 5)")
        c.check(z["greedy"] == hgen, f"{name}: greedy continuation of {NEW} tokens equal")

    # 4. the tolerance tells bf16 weights from f32 ones
    d = (results["f32"][0] - results["bf16"][1]).abs().max().item()
    scale = max(1.0, results["f32"][0].abs().max().item())
    c.check(d > 10 * TOL * scale,
            f"sensitivity: zt on F32 vs transformers on BF16 differ by {d:.3e} > 10 x the tolerance {10 * TOL * scale:.3e}")
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
