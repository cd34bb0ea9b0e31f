#!/usr/bin/env python3
"""zt's LoRA against Hugging Face PEFT on the same exported model.

  lora_peer_test.py ZT ZT_LORA_LOGITS WORKDIR

1. `zt train` runs the `tiny` preset for 2 steps with a wide init (model.init_std 0.2, so
   the logits are far from uniform) and `zt convert h5-to-hf` exports it (F32).
2. For several lora configurations (target sets incl. lm_head; rslora; ranks):
   - PEFT's `get_peft_model` on transformers' LlamaForCausalLM of that folder:
     * its init: every lora_B is zero, every lora_A lies in [-1/sqrt(in), 1/sqrt(in)]
       and reaches past 0.9 of that bound (kaiming_uniform_ with a = sqrt(5));
     * its `get_nb_trainable_parameters()` == zt's trainable_counts (trainable, all), and
       the line `print_trainable_parameters()` prints == zt's trainable_banner;
   - every lora_A and lora_B set to N(0, 0.3) (so B A != 0 and the adapters move the
     logits), saved with `save_pretrained` (adapter_model.safetensors), and read by
     ZT_LORA_LOGITS (tests/model/hf/zt_lora_logits.cpp: zt's Model with bind_lora):
     * logits of every position: max |zt - PEFT| <= 1e-5 x max(1, max |logit|)
       (relative to the logits' scale as ckpt.hf.peer_transformers: fp32 sums in
       different orders);
     * loss (mean next-token cross-entropy): |zt - PEFT| <= 1e-5;
   - sensitivity (so the test can fail): the adapters change PEFT's logits by more than
     100 x the tolerance against the base model's.
Exit 77 (CTest skip) when torch, transformers or peft is missing
(scripts/install-deps.sh --hf-peers installs them).
"""
import contextlib
import io
import json
import math
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "ckpt", "hf"))
from hf_common import Checker, SKIP, run_zt  # noqa: E402

TOL = 1e-5
TEXT = "ROMEO:\nBut soft, what light through yonder window breaks?"
# (targets, rank, alpha, rslora)
CASES = [
    ("q,v", 8, 16.0, False),
    ("q,k,v,o,gate,up,down", 4, 8.0, False),
    ("q,k,v,o,gate,up,down,lm_head", 16, 32.0, True),
    ("down,lm_head", 2, 3.0, False),
]
MODULES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj",
           "up": "up_proj", "down": "down_proj", "lm_head": "lm_head"}


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    zt, zt_lora_logits, work = sys.argv[1:]
    try:
        import torch
        import transformers
        from transformers import LlamaForCausalLM
        import peft
        from peft import LoraConfig, get_peft_model
    except Exception as e:  # noqa: BLE001 (ImportError, or a torch whose libraries fail to load)
        print(f"SKIPPED: torch/transformers/peft not importable ({e}); "
              "install them with scripts/install-deps.sh --hf-peers")
        return SKIP
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"peft {peft.__version__}", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    c = Checker()

    ck = os.path.join(work, "ck")
    train = [zt, "train", "--set", "train.steps=2", "--set", "train.micro_batch=2",
             "--set", "train.global_batch=2", "--set", "train.seq_len=32",
             "--set", "model.init_std=0.2", "--set", "train.threads=1",
             "--set", "eval.every=0", "--set", "data.eval_fraction=0", "--set", "sample.tokens=0",
             "--set", f"ckpt.dir={ck}", "--set", "train.peak_tflops=1"]
    p = subprocess.run(train, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=300, cwd=work,
                       env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                                OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                                XDG_CACHE_HOME=os.path.join(work, "cache")))
    c.check(p.returncode == 0, "zt train: tiny, 2 steps")
    if p.returncode != 0:
        print(p.stdout[-4000:])
        c.finish()
    hf32 = os.path.join(work, "hf-f32")
    rc, out = run_zt(zt, "convert", "h5-to-hf", ck, hf32, "--dtype", "f32")
    c.check(rc == 0, "zt convert h5-to-hf (f32)")
    if rc != 0:
        print(out)
        c.finish()
    ckpt = os.path.join(ck, open(os.path.join(ck, "latest")).read().strip())

    tokens = list(TEXT.encode())  # the byte vocabulary: token = byte
    ids = torch.tensor([tokens])
    with torch.no_grad():
        base = LlamaForCausalLM.from_pretrained(hf32, torch_dtype=torch.float32).eval()
        base_logits = base(ids).logits[0].double()
    c.check(base_logits.std().item() > 0.5, "the base's logits are not near-uniform")

    for i, (targets, rank, alpha, rslora) in enumerate(CASES):
        tag = f"targets {targets} r {rank} alpha {alpha} rslora {rslora}"
        model = LlamaForCausalLM.from_pretrained(hf32, torch_dtype=torch.float32)
        lc = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.0, use_rslora=rslora,
                        target_modules=[MODULES[t] for t in targets.split(",")], bias="none",
                        task_type="CAUSAL_LM")
        pm = get_peft_model(model, lc)
        # PEFT's init, as zt documents it
        a_ok = b_ok = True
        reach = 1.0
        for name, prm in pm.named_parameters():
            if ".lora_A." in name:
                bound = 1.0 / math.sqrt(prm.shape[1])
                m = prm.abs().max().item()
                a_ok &= m <= bound * (1 + 1e-6)
                reach = min(reach, m / bound)
            elif ".lora_B." in name:
                b_ok &= bool((prm == 0).all())
        c.check(a_ok and reach > 0.9, f"{tag}: PEFT's lora_A in U(-1/sqrt(in), 1/sqrt(in)) (reach {reach:.3f})")
        c.check(b_ok, f"{tag}: PEFT's lora_B zero")
        trainable, all_params = pm.get_nb_trainable_parameters()
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            pm.print_trainable_parameters()
        peft_banner = buf.getvalue().strip()

        torch.manual_seed(100 + i)
        with torch.no_grad():
            for name, prm in pm.named_parameters():
                if "lora_" in name:
                    prm.normal_(0.0, 0.3)
        adir = os.path.join(work, f"adapter-{i}")
        pm.save_pretrained(adir)
        pm.eval()
        with torch.no_grad():
            out = pm(ids, labels=ids)  # the labels are shifted by transformers itself
        hl, hloss = out.logits[0].double(), float(out.loss)

        p = subprocess.run([zt_lora_logits, ckpt, os.path.join(adir, "adapter_model.safetensors"),
                            str(rank), str(alpha), targets, "1" if rslora else "0",
                            ",".join(map(str, tokens))],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
        if p.returncode != 0:
            print(p.stderr)
            c.check(False, f"{tag}: zt_lora_logits")
            continue
        z = json.loads(p.stdout)
        print(f"      {tag}: PEFT  {peft_banner}")
        print(f"      {tag}: zt    {z['banner']}")
        c.check((z["trainable"], z["all"]) == (trainable, all_params),
                f"{tag}: counts zt ({z['trainable']}, {z['all']}) == PEFT ({trainable}, {all_params})")
        c.check(z["banner"] == peft_banner, f"{tag}: banner == PEFT's print_trainable_parameters")
        zl = torch.tensor(z["logits"], dtype=torch.float64)
        c.check(zl.shape == hl.shape, f"{tag}: logits shape {tuple(zl.shape)} on both sides")
        if zl.shape != hl.shape:
            continue
        dl = (zl - hl).abs().max().item()
        tol = TOL * max(1.0, zl.abs().max().item())
        moved = (hl - base_logits).abs().max().item()
        dloss = abs(z["loss"] - hloss)
        print(f"      {tag}: max |zt - PEFT| {dl:.3e} (max |logit| {zl.abs().max().item():.2f}), "
              f"adapters move the logits by {moved:.3f}; loss zt {z['loss']:.8f} PEFT {hloss:.8f} "
              f"diff {dloss:.3e}")
        c.check(dl <= tol, f"{tag}: max |logit zt - PEFT| = {dl:.3e} <= {tol:.3e}")
        c.check(dloss <= TOL, f"{tag}: |loss zt - PEFT| = {dloss:.3e} <= {TOL:.0e}")
        c.check(moved > 100 * tol, f"{tag}: the adapters move the logits ({moved:.3e} > 100 x tol)")
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
