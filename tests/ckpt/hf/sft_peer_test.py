#!/usr/bin/env python3
"""zt's masked (instruction-tuning) loss against Hugging Face transformers' Llama.

  sft_peer_test.py ZT ZT_SFT_LOSS WORKDIR

1. `zt train` trains the `tiny` preset briefly on the shipped corpus (1 rank) and
   `zt convert h5-to-hf --dtype f32` exports it: both sides hold the same fp32 weights.
2. Masked batch: two rows, each an instruction example (byte tokens) right-padded; the
   prompt and the padding are masked. transformers: `model(ids, labels=labels)` with
   labels -100 on prompt and padding (it shifts the labels and takes the mean over the
   rest, over the whole batch); zt: ZT_SFT_LOSS (tests/ckpt/hf/zt_sft_loss.cpp,
   Model::loss with targets -1 there). |zt - hf| <= 1e-5.
3. Packed row: the three examples placed back to back in one row with positions
   restarting at each (as `zt train` packs `zt convert sft-to-tokens` rows); zt's loss
   x its target count == the sum over the examples of transformers' loss x count, each
   example run ALONE (positions from 0, no other example to attend to), and each
   example's loss inside the row (the others' targets masked) == transformers' on it
   alone. That proves the position and attention resets. Bounds 1e-5 (relative for the
   sum).
4. Sensitivity: the same packed row without positions (plain causal attention over the
   whole row) must miss transformers' sum by more than 10 x the bound, and the masked
   loss must differ from the unmasked one by more than 100 x the bound.
Exit 77 (CTest skip) when torch or transformers is missing (scripts/install-deps.sh
--hf-peers installs them).
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_common import Checker, run_zt, torch_peers, train_tiny  # noqa: E402

TOL = 1e-5
T = 200
EXAMPLES = [  # (prompt, response): original text, byte tokens
    ("### Instruction:\nName a colour of the sky.\n\n### Response:\n", "Blue.\n"),
    ("### Instruction:\nAdd two and three.\n\n### Response:\n", "Five.\n"),
    ("### Instruction:\nSay hello.\n\n### Response:\n", "Hello there, friend.\n"),
]


def tokens_of(prompt, response):
    """Byte ids of an example and its loss mask (1 on the response bytes)."""
    p, r = list(prompt.encode()), list(response.encode())
    return p + r, [0] * len(p) + [1] * len(r)


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    zt, zt_sft_loss, work = sys.argv[1:]
    torch, transformers = torch_peers()
    from transformers import LlamaForCausalLM
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    c = Checker()

    ck = os.path.join(work, "ck")
    rc, out = train_tiny(zt, work, ck, 60)
    c.check(rc == 0, "zt train: tiny, 60 steps, 1 rank")
    if rc != 0:
        print(out[-4000:])
        c.finish()
    ckpt = os.path.join(ck, open(os.path.join(ck, "latest")).read().strip())
    hf = os.path.join(work, "hf-f32")
    rc, out = run_zt(zt, "convert", "h5-to-hf", ckpt, hf, "--dtype", "f32")
    c.check(rc == 0, "zt convert h5-to-hf --dtype f32")
    if rc != 0:
        print(out)
        c.finish()

    def zt_loss(batch):
        path = os.path.join(work, "batch.json")
        with open(path, "w") as f:
            json.dump(batch, f)
        q = subprocess.run([zt_sft_loss, ckpt, path], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=300)
        if q.returncode != 0:
            print(q.stderr)
            c.check(False, "zt_sft_loss")
            c.finish()
        r = json.loads(q.stdout)
        return r["loss"], r["count"]

    model = LlamaForCausalLM.from_pretrained(hf, torch_dtype=torch.float32)
    model.eval()

    def hf_loss(rows, labels):
        with torch.no_grad():
            return float(model(torch.tensor(rows), labels=torch.tensor(labels)).loss)

    # 2. masked batch: examples 0 and 2, one per row, right-padded with byte 0 (masked)
    rows, masks = [], []
    for e in (0, 2):
        ids, m = tokens_of(*EXAMPLES[e])
        rows.append(ids + [0] * (T + 1 - len(ids)))
        masks.append(m + [0] * (T + 1 - len(m)))
    labels = [[t if m else -100 for t, m in zip(r, mk)] for r, mk in zip(rows, masks)]
    h = hf_loss(rows, labels)
    z, n = zt_loss({"tokens": [r[:T] for r in rows],
                    "targets": [[l if l >= 0 else -1 for l in lab[1:]] for lab in labels]})
    z_all, _ = zt_loss({"tokens": [r[:T] for r in rows], "targets": [r[1:] for r in rows]})
    print(f"      masked batch (2 rows x {T}, {n} targets): zt {z:.8f} hf {h:.8f} "
          f"diff {abs(z - h):.3e}; unmasked zt {z_all:.8f}")
    c.check(abs(z - h) <= TOL, f"masked batch: |zt - transformers| = {abs(z - h):.3e} <= {TOL}")
    c.check(abs(z - z_all) > 100 * TOL, "masked loss differs from the unmasked loss")

    # 3. packed row: all three examples back to back, positions restarting at each
    packed, pmask, pos, owner = [], [], [], []
    hf_sum, hf_count, hf_each = 0.0, 0, []
    for e, (prompt, response) in enumerate(EXAMPLES):
        ids, m = tokens_of(prompt, response)
        m[0] = 0  # an example's first token is never a target (sft-to-tokens does the same)
        packed += ids
        pmask += m
        pos += list(range(len(ids)))
        owner += [e] * len(ids)
        lab = [t if mm else -100 for t, mm in zip(ids, m)]
        cnt = sum(1 for l in lab[1:] if l >= 0)
        hf_each.append(hf_loss([ids], [lab]))
        hf_sum += hf_each[-1] * cnt
        hf_count += cnt
    pad = T + 1 - len(packed)
    c.check(pad >= 1, f"the packed examples fit one row of {T + 1} tokens")
    packed += [0] * pad
    pmask += [0] * pad
    owner += [-1] * pad
    pos += list(range(len(ids), len(ids) + pad))  # padding continues the last example
    targets = [t if m else -1 for t, m in zip(packed[1:], pmask[1:])]
    z, n = zt_loss({"tokens": [packed[:T]], "targets": [targets], "positions": [pos[:T]]})
    z_plain, _ = zt_loss({"tokens": [packed[:T]], "targets": [targets]})
    rel = abs(z * n - hf_sum) / hf_sum
    rel_plain = abs(z_plain * n - hf_sum) / hf_sum
    print(f"      packed row ({len(EXAMPLES)} examples, {n} targets): zt sum {z * n:.6f}, "
          f"transformers per example {hf_sum:.6f} (relative diff {rel:.3e}); without positions "
          f"zt {z_plain * n:.6f} (relative diff {rel_plain:.3e})")
    c.check(n == hf_count, f"target count {n} == {hf_count}")
    c.check(rel <= TOL, f"packed: zt == sum of transformers' per-example losses ({rel:.3e} <= {TOL})")
    c.check(rel_plain > 10 * TOL, "packed without positions misses it by > 10 x the bound (the test can fail)")
    # each example's own loss inside the packed row (the other examples' targets masked)
    for e, h in enumerate(hf_each):
        t_e = [t if owner[i + 1] == e else -1 for i, t in enumerate(targets)]
        z_e, n_e = zt_loss({"tokens": [packed[:T]], "targets": [t_e], "positions": [pos[:T]]})
        print(f"      example {e} in the packed row ({n_e} targets): zt {z_e:.8f} hf alone {h:.8f} "
              f"diff {abs(z_e - h):.3e}")
        c.check(abs(z_e - h) <= TOL, f"example {e}: packed zt == transformers alone "
                f"({abs(z_e - h):.3e} <= {TOL})")
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
