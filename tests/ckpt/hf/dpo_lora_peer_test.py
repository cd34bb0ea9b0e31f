#!/usr/bin/env python3
"""zt's LoRA DPO and ORPO against TRL 1.16 + PEFT on a tiny model and four pairs.

  dpo_lora_peer_test.py ZT ZT_LOGITS WORKDIR   (ZT_LOGITS unused: zt_hf_peer_test's arguments)

1. A base as dpo_peer_test.py (the `tiny` preset trained 3 steps by zt, exported fp32),
   its pairs (DPO: seq_len 63, one pair cut; ORPO: seq_len 127, none cut).
2. For DPO and ORPO, LoRA rank 4 on q, v, gate (alpha 8, no dropout): zt trains with lr 0
   for one step (its checkpoint holds the initial adapters: A from train.seed, B = 0),
   exported with `h5-to-hf --adapter` and loaded by PEFT (is_trainable); then zt trains 2
   steps of AdamW (lr 1e-2 constant, betas 0.9/0.95, eps 1e-3 (EPS), no weight decay or
   clipping), and
   TRL's trainer (DPOTrainer: the reference is the base with PEFT's adapters disabled;
   ORPOTrainer) runs the same 2 steps on the same batch with torch's AdamW:
   - each step's loss and gradient norm (the adapters') equal zt's within 1e-5 relative
     (step 1's DPO loss is ln 2 on both sides: B = 0, the policy is the reference);
   - the adapters after step 2 (every lora_A, lora_B element) equal zt's step-2
     checkpoint's (exported) within 1e-5 of their largest magnitude, and moved from the
     initial ones by far more than that (the check can fail).
Exit 77 (CTest skip) without torch / transformers / trl / peft (scripts/install-deps.sh
--hf-peers); ZT_REQUIRE_PEERS=1 fails instead.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dpo_peer_test import PAIRS, TOKENIZER, adamw_steps, setup  # noqa: E402
from hf_common import peer_start, require, run_zt  # noqa: E402

TOL = 1e-5
LR = 1e-2
# AdamW's epsilon: 1e-3, not 1e-8, so that an element whose gradient is at the level of
# fp32 rounding (some lora_B elements) moves by about lr x g / eps, not lr x sign(g): with
# eps 1e-8 a few such elements of 17408 differ by up to 6e-5 after 2 steps on the same
# gradients to 1e-7 (the update, not the objective, amplifies the rounding).
EPS = 1e-3
LORA = ["finetune.method=lora", "lora.rank=4", "lora.alpha=8", "lora.targets=q,v,gate"]


def zt_train(zt, work, name, base, data, seq, objective, lr, steps):
    """zt LoRA training of `steps` steps, a checkpoint after each; returns (step records, exit, output)."""
    args = [zt, "train"]
    for kv in ["model.preset=tiny", "model.vocab=257", f"ckpt.init_from={base}", f"data.path={data}",
               f"train.seq_len={seq}", "train.global_batch=8", "train.micro_batch=8", f"train.steps={steps}",
               f"train.lr={lr}", f"train.min_lr={lr}", "train.warmup=0", "train.weight_decay=0",
               "train.grad_clip=0", "train.beta1=0.9", "train.beta2=0.95", f"train.eps={EPS}",
               "data.eval_fraction=0", "eval.every=0", "sample.tokens=0", "train.threads=1",
               "train.peak_tflops=1", f"finetune.objective={objective}", "dpo.beta=0.1", "orpo.lambda=0.1",
               f"log.metrics={name}.jsonl", f"ckpt.dir={name}", "ckpt.every=1"] + LORA:
        args += ["--set", kv]
    p = subprocess.run(args, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600,
                       env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
    path = os.path.join(work, f"{name}.jsonl")
    rows = [r for r in map(json.loads, open(path)) if "loss" in r] if os.path.exists(path) else []
    return rows, p.returncode, p.stdout


def trl_side(torch, hf, adapters, tok, work, objective, row):
    """TRL's trainer on a PEFT model of the base + `adapters`: 2 steps of torch AdamW on the
    whole batch. Returns ([(loss, grad norm)] per step, {name: tensor} adapters after)."""
    from datasets import Dataset
    from peft import PeftModel
    from transformers import LlamaForCausalLM
    base = LlamaForCausalLM.from_pretrained(hf, dtype=torch.float32)
    model = PeftModel.from_pretrained(base, adapters, is_trainable=True)
    common = dict(output_dir=os.path.join(work, f"trl-{objective}"), beta=0.1, max_length=row, report_to="none",
                  use_cpu=True, bf16=False, fp16=False, per_device_train_batch_size=len(PAIRS),
                  dataloader_num_workers=0)
    if objective == "dpo":
        from trl import DPOConfig, DPOTrainer
        trainer = DPOTrainer(model=model, args=DPOConfig(**common), train_dataset=Dataset.from_list(PAIRS),
                             processing_class=tok)
    else:
        from trl.experimental.orpo import ORPOConfig, ORPOTrainer
        trainer = ORPOTrainer(model=model, args=ORPOConfig(**common), train_dataset=Dataset.from_list(PAIRS),
                              processing_class=tok)
    steps = adamw_steps(torch, trainer, model, LR, EPS)
    # (DPOTrainer may add a "ref" adapter, a frozen copy of the initial ones: B = 0, the
    # base, as zt's adapters-off reference; the trained adapter is "default".)
    after = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n and ".default." in n}
    return steps, after


def load_adapters(torch, folder):
    from safetensors.torch import load_file
    return load_file(os.path.join(folder, "adapter_model.safetensors"))


def check_adapters(c, torch, tag, after, end_dir, init_dir, tol):
    """TRL + PEFT's trained adapters `after` against zt's exported ones (end_dir): every
    element within tol of the largest, and moved from the initial ones (init_dir) by far more."""
    zt_end, zt_init = load_adapters(torch, end_dir), load_adapters(torch, init_dir)
    worst, scale, moved, matched = 0.0, 0.0, 0.0, 0
    for name, t in after.items():
        key = name.replace(".default", "")
        if key not in zt_end:
            continue
        matched += 1
        worst = max(worst, (zt_end[key] - t).abs().max().item())
        scale = max(scale, t.abs().max().item())
        moved = max(moved, (zt_end[key] - zt_init[key]).abs().max().item())
    c.check(matched == len(after) == len(zt_end) and matched > 0,
            f"{tag}: {matched} adapter tensors matched by name (PEFT {len(after)}, zt {len(zt_end)})")
    c.check(worst <= tol * scale and moved > 100 * tol * scale,
            f"{tag}: adapters after step 2: max |zt - TRL| {worst:.3e} <= {tol} x {scale:.3f}; "
            f"moved {moved:.3e} from the initial ones")


def main():
    zt, _, work, torch, c = peer_start(__doc__, "h5py", "safetensors", "peft", "datasets", "trl")
    import peft
    import trl
    print(f"trl {trl.__version__}, peft {peft.__version__}", flush=True)
    from transformers import PreTrainedTokenizerFast
    ckpt, hf = setup(c, zt, work)
    tok = PreTrainedTokenizerFast.from_pretrained(TOKENIZER)
    tok.pad_token = tok.eos_token  # (ORPOTrainer pads with it; masked out)

    for objective, seq, data in (("dpo", 63, "pairs.h5"), ("orpo", 127, "pairs128.h5")):
        init, rc, out = zt_train(zt, work, f"{objective}-init", ckpt, data, seq, objective, 0.0, 1)
        c.check(rc == 0 and len(init) == 1, f"{objective}: zt LoRA, lr 0, 1 step (exit {rc})")
        if rc != 0:
            print(out[-3000:])
            continue
        init_dir = os.path.join(work, f"{objective}-init-peft")
        rc, out = run_zt(zt, "convert", "h5-to-hf", os.path.join(work, f"{objective}-init", "step-1.h5"),
                         init_dir, "--adapter")
        c.check(rc == 0, f"{objective}: the initial adapters exported for PEFT (exit {rc})")
        got, rc, out = zt_train(zt, work, objective, ckpt, data, seq, objective, LR, 2)
        c.check(rc == 0 and len(got) == 2, f"{objective}: zt LoRA, 2 AdamW steps (exit {rc})")
        if rc != 0 or len(got) != 2:
            print(out[-3000:])
            continue
        end_dir = os.path.join(work, f"{objective}-step2-peft")
        rc, out = run_zt(zt, "convert", "h5-to-hf", os.path.join(work, objective, "step-2.h5"), end_dir, "--adapter")
        c.check(rc == 0, f"{objective}: zt's step-2 adapters exported (exit {rc})")
        steps, after = trl_side(torch, hf, init_dir, tok, work, objective, seq + 1)
        for k, ((loss, norm), z) in enumerate(zip(steps, got), 1):
            dl = abs(z["loss"] - loss) / abs(loss)
            dn = abs(z["grad_norm"] - norm) / norm
            c.check(dl <= TOL and dn <= TOL,
                    f"{objective} LoRA step {k}: zt loss {z['loss']:.9f}, grad norm {z['grad_norm']:.9f} vs "
                    f"TRL + PEFT {loss:.9f}, {norm:.9f}: rel {dl:.2e}, {dn:.2e} (<= {TOL})")
        if not os.path.isdir(end_dir):
            continue
        check_adapters(c, torch, objective, after, end_dir, init_dir, TOL)
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
