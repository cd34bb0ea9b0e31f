#!/usr/bin/env python3
"""Every engine feature on the gemma3_text, gpt_oss, qwen3_5_text and qwen3_5_moe_text families (issues 55, 56).

  family_engine_test.py ZT WORKDIR MPIEXEC...   (MPIEXEC ends in the rank count 2)

A tiny model of each family, built by `zt train` from its model.* keys (gemma3_text:
sliding and full layers, a window of 4 under 32-token rows, a RoPE per layer type with
linear scaling, query_pre_attn_scalar, the final soft-cap, tied; gpt_oss: alternating
layers, yarn over an original context of 8, attention biases and sinks, 4 experts with
biases, 2 per token, the clamped SwiGLU), 4 steps on the shipped corpus at global
batch 4. One table, each case either:
- works: exit 0, and every step's loss and gradient norm equal its reference run's
  within 1e-5 relative (the reference: stage 0 at 1 rank; a LoRA, QLoRA, DPO or ORPO
  case's own 1-rank stage-0 run);
- or is refused: exit 2 with a message naming the reason.
The cases: ZeRO stages 0-3 at 2 ranks, hpZ (4 ranks, simulated nodes of 2), CPU offload
of the optimizer (stage 2) and of the parameters (stage 3), LoRA and QLoRA at stage 3,
LoRA on gpt-oss's experts, DPO at stage 3 and ORPO at stage 2, the stage-3 2-rank run's
step-2 checkpoint resumed at 1 rank (steps 3-4 equal the 2-rank run's), expert
parallelism 2 (gpt_oss and qwen3_5_moe_text: equal to stage 0 at 1 rank, and its step-2
checkpoint resumed at 1 rank without expert parallelism; gemma3_text and qwen3_5_text,
without experts: refused). Then `zt generate --temperature 0` of each family's final checkpoint
equals its Hugging Face export's, token for token (transformers' own greedy against
zt's is tests/ckpt/hf/gemma_peer_test.py and gptoss_peer_test.py). qwen3_5_text: Gated
DeltaNet layers 0, 1, 3 and a full layer 2 (output gate, partial RoPE 0.25); LoRA and QLoRA
on the Gated DeltaNet projections and the full layer's q, k, v, o at stage 3; expert
parallelism is refused by name. qwen3_5_moe_text: a Gated DeltaNet layer and a full layer,
each with 4 experts (2 per token) and the shared expert; the same cases, and expert
parallelism 2 (the shared expert on every rank). ZT_FAMILY_ENGINE_ONLY=<family>
runs one family.
"""
import json
import os
import shutil
import subprocess
import sys

TOL = 1e-5  # fp32 sums in other orders (ranks, accumulation, offload): measured <= 1e-6
STEPS = 4
HERE = os.path.dirname(os.path.abspath(__file__))
TOKENIZER = os.path.normpath(os.path.join(HERE, "..", "..", "examples", "tokenizer-bytes"))

FAMILIES = {
    "gemma3_text": dict(family="gemma3_text", vocab=257, hidden=64, layers=3, layer_types="ssf", heads=4,
                        kv_heads=2, head_dim=16, intermediate=96, context=64, sliding_window=4,
                        query_pre_attn_scalar=24, rope_local_theta=10000, rope_theta=1000000,
                        rope_type="linear", rope_factor=2, final_logit_softcap=8, tied_embeddings="true"),
    "gpt_oss": dict(family="gpt_oss", vocab=257, hidden=64, layers=2, layer_types="sf", heads=4, kv_heads=2,
                    head_dim=16, intermediate=64, context=64, experts=4, experts_per_token=2,
                    attention_bias="true", sliding_window=4, rope_type="yarn", rope_factor=4,
                    rope_original_context=8, rope_beta_fast=32, rope_beta_slow=1, rope_truncate="false",
                    rope_theta=150000, swiglu_limit=1.5, tied_embeddings="false"),
    "qwen3_5_text": dict(family="qwen3_5_text", vocab=257, hidden=64, layers=4, layer_types="llfl", heads=4,
                         kv_heads=2, head_dim=16, intermediate=96, context=64, partial_rotary_factor=0.25,
                         linear_key_heads=2, linear_value_heads=4, linear_key_dim=16, linear_value_dim=8,
                         linear_conv_kernel=4, attention_bias="false", tied_embeddings="false"),
    "qwen3_5_moe_text": dict(family="qwen3_5_moe_text", vocab=257, hidden=64, layers=2, layer_types="lf",
                             heads=4, kv_heads=2, head_dim=16, intermediate=32, moe_intermediate=32,
                             shared_expert_intermediate=48, experts=4, experts_per_token=2, context=64,
                             partial_rotary_factor=0.25, linear_key_heads=2, linear_value_heads=4,
                             linear_key_dim=16, linear_value_dim=8, linear_conv_kernel=4,
                             attention_bias="false", tied_embeddings="false"),
}
# What zt refuses on a family, by name.
LINEAR = ["Gated DeltaNet"]
ALL7 = "lora.targets=q,k,v,o,gate,up,down"
EXPERTS = "lora.targets=q,v,experts.gate_up,experts.down"
GDN = "lora.targets=q,k,v,o,in_proj_qkv,in_proj_z,in_proj_b,in_proj_a,out_proj,gate,up,down"
GDN_MOE = "lora.targets=q,k,v,o,in_proj_qkv,in_proj_z,in_proj_b,in_proj_a,out_proj"  # the MLP: experts
GDN_RANK = "lora.rank=4"  # <= in_proj_b and in_proj_a's 4 rows (linear_value_heads)
DPO = ["finetune.objective=dpo", "data.path={work}/pairs.h5"]
ORPO = ["finetune.objective=orpo", "data.path={work}/pairs.h5"]
# (name, families, ranks, keys, reference case, or the words of the refusal). "{base}" is
# the family's stage-0 final checkpoint (the pre-trained base of the fine-tuning cases).
BOTH = tuple(FAMILIES)
S3 = ["zero.stage=3"]
CASES = [
    ("stage0", BOTH, 1, ["zero.stage=0"], None),
    ("stage0_np2", BOTH, 2, ["zero.stage=0"], "stage0"),
    ("stage1_np2", BOTH, 2, ["zero.stage=1"], "stage0"),
    ("stage2_np2", BOTH, 2, ["zero.stage=2"], "stage0"),
    ("stage3_np2", BOTH, 2, S3 + ["ckpt.every=2"], "stage0"),
    ("hpz_np4", BOTH, 4, S3 + ["zero.hpz_partition_size=2", "runtime.ranks_per_node=2", "train.micro_batch=1"],
     "stage0"),
    ("offload_optimizer", BOTH, 2, ["zero.stage=2", "offload.optimizer=cpu"], "stage0"),
    ("offload_params", BOTH, 2, S3 + ["offload.optimizer=cpu", "offload.params=cpu"], "stage0"),
    ("resume_np1", BOTH, 1, ["zero.stage=0", "ckpt.resume={dir}/stage3_np2/step-2.h5"], "stage3_np2"),
    ("lora", ("gemma3_text",), 1, ["finetune.method=lora", ALL7], None),
    ("lora_stage3_np2", ("gemma3_text",), 2, S3 + ["finetune.method=lora", ALL7], "lora"),
    ("qlora", ("gemma3_text",), 1, ["finetune.method=qlora", ALL7], None),
    ("qlora_stage3_np2", ("gemma3_text",), 2, S3 + ["finetune.method=qlora", ALL7], "qlora"),
    ("lora", ("gpt_oss",), 1, ["finetune.method=lora", EXPERTS], None),
    ("lora_stage3_np2", ("gpt_oss",), 2, S3 + ["finetune.method=lora", EXPERTS], "lora"),
    ("qlora", ("gpt_oss",), 1, ["finetune.method=qlora", "lora.targets=q,k,v,o"], None),
    ("qlora_stage3_np2", ("gpt_oss",), 2, S3 + ["finetune.method=qlora", "lora.targets=q,k,v,o"], "qlora"),
    ("qlora_experts", ("gpt_oss",), 1, ["finetune.method=qlora", EXPERTS],
     ["zt's NF4 base holds no expert weights", "finetune.method = lora"]),
    ("lora_gate", ("gpt_oss",), 1, ["finetune.method=lora", ALL7],
     ["lora.targets has gate on a gpt_oss model", "experts.gate_up"]),
    ("dpo", BOTH, 1, DPO, None),
    ("dpo_stage3_np2", BOTH, 2, S3 + DPO, "dpo"),
    ("orpo", BOTH, 1, ORPO, None),
    ("orpo_stage2_np2", BOTH, 2, ["zero.stage=2"] + ORPO, "orpo"),
    ("ep2", ("gpt_oss", "qwen3_5_moe_text"), 2, ["moe.expert_parallel=2", "ckpt.every=2"], "stage0"),
    ("resume_ep2_np1", ("gpt_oss", "qwen3_5_moe_text"), 1, ["zero.stage=0", "ckpt.resume={dir}/ep2/step-2.h5"], "ep2"),
    ("ep2", ("gemma3_text", "qwen3_5_text"), 2, ["moe.expert_parallel=2"], ["moe.expert_parallel"]),
    ("lora", ("qwen3_5_text",), 1, ["finetune.method=lora", GDN, GDN_RANK], None),
    ("lora", ("qwen3_5_moe_text",), 1, ["finetune.method=lora", GDN_MOE, GDN_RANK], None),
    ("lora_stage3_np2", ("qwen3_5_text",), 2, S3 + ["finetune.method=lora", GDN, GDN_RANK], "lora"),
    ("lora_stage3_np2", ("qwen3_5_moe_text",), 2, S3 + ["finetune.method=lora", GDN_MOE, GDN_RANK], "lora"),
    ("qlora", ("qwen3_5_text",), 1, ["finetune.method=qlora", GDN, GDN_RANK], None),
    ("qlora", ("qwen3_5_moe_text",), 1, ["finetune.method=qlora", GDN_MOE, GDN_RANK], None),
    ("qlora_stage3_np2", ("qwen3_5_text",), 2, S3 + ["finetune.method=qlora", GDN, GDN_RANK], "qlora"),
    ("qlora_stage3_np2", ("qwen3_5_moe_text",), 2, S3 + ["finetune.method=qlora", GDN_MOE, GDN_RANK], "qlora"),
]
FINETUNE = ("finetune.", "data.path=")


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    zt, work, mpiexec = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3:]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    results = []

    def check(ok, what):
        results.append(bool(ok))
        print(("ok    " if ok else "FAIL  ") + what, flush=True)

    def run(cmd):
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
        done = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=600, env=env)
        return done.returncode, done.stdout + done.stderr

    def np_(n):  # MPIEXEC_NUMPROC_FLAG 2 -> n (ZT_MPIEXEC_FLAGS oversubscribe)
        at = mpiexec.index("2")
        return mpiexec[:at] + [str(n)] + mpiexec[at + 1:]

    with open(os.path.join(work, "pairs.jsonl"), "w") as f:
        for i in range(8):
            f.write(json.dumps({"prompt": f"Q: what is {i} plus {i + 3}?\nA: ", "chosen": f"It is {2 * i + 3}.",
                                "rejected": f"Perhaps {7 * i + 1}, or not."}) + "\n")
    rc, out = run([zt, "convert", "pairs-to-tokens", "--tokenizer", TOKENIZER, "--seq-len", "47", "pairs.jsonl",
                   "pairs.h5"])
    check(rc == 0, f"pairs-to-tokens (exit {rc})")
    if rc != 0:
        print(out[-2000:])
        return 1

    only = os.environ.get("ZT_FAMILY_ENGINE_ONLY")  # one family (a quicker local run)
    for fam, model in FAMILIES.items():
        if only and fam != only:
            continue
        d = os.path.join(work, fam)
        os.makedirs(d)
        steps = {}
        for name, fams, ranks, keys, want in CASES:
            if fam not in fams:
                continue
            tag = f"{fam} {name} ({ranks} rank{'s' if ranks > 1 else ''})"
            keys = [k.replace("{dir}", d).replace("{work}", work) for k in keys]
            if any(k.startswith(FINETUNE) for k in keys):
                keys.append(f"ckpt.init_from={d}/stage0/step-{STEPS}.h5")
            sets = [f"model.{k}={v}" for k, v in model.items()] + [
                "train.seq_len=47" if any(k.startswith("data.path=") for k in keys) else "train.seq_len=32",
                "train.global_batch=4", "train.micro_batch=2", f"train.steps={STEPS}", "train.warmup=0",
                "train.lr=3e-3", "train.threads=1", "eval.every=0", "sample.tokens=0", "data.eval_fraction=0",
                "train.peak_tflops=1", f"ckpt.dir={name}", f"log.metrics={name}.jsonl"] + keys
            cmd = (np_(ranks) if ranks > 1 else []) + [zt, "train"] + [a for kv in sets for a in ("--set", kv)]
            p = subprocess.run(cmd, cwd=d, capture_output=True, text=True, timeout=600,
                               env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                                        OMP_NUM_THREADS="1"))
            text = p.stdout + p.stderr
            if isinstance(want, list):
                ok = p.returncode == 2 and all(w in text for w in want)
                check(ok, f"{tag}: refused, exit {p.returncode}, naming {want}")
                if not ok:
                    print(text[-2000:])
                continue
            check(p.returncode == 0, f"{tag}: trains (exit {p.returncode})")
            if p.returncode != 0:
                print(text[-3000:])
                continue
            with open(os.path.join(d, f"{name}.jsonl")) as f:
                rows = {r["step"]: (r["loss"], r["grad_norm"]) for r in map(json.loads, f) if "step" in r and "loss" in r}
            steps[name] = rows
            if want is None:
                losses = [rows[s][0] for s in sorted(rows)]
                check(len(rows) == STEPS and len(set(losses)) == STEPS,
                      f"{tag}: {STEPS} steps, every loss differs ({' '.join(f'{x:.5f}' for x in losses)})")
                continue
            ref = steps.get(want, {})
            first = 3 if name.startswith("resume") else 1
            worst = max((abs(a - b) / abs(b) for s in range(first, STEPS + 1) if s in rows and s in ref
                         for a, b in zip(rows[s], ref[s])), default=float("inf"))
            same = all(s in rows and s in ref for s in range(first, STEPS + 1))
            check(same and worst <= TOL, f"{tag}: steps {first}-{STEPS}' losses and gradient norms equal {want}'s "
                                         f"({worst:.1e} relative <= {TOL:.0e})")
        # generate: the checkpoint and its Hugging Face export, greedy, the same tokens
        ck = os.path.join(d, "stage0", f"step-{STEPS}.h5")
        hf = os.path.join(d, "hf")
        rc, out = run([zt, "convert", "h5-to-hf", "--dtype", "f32", ck, hf])
        check(rc == 0, f"{fam}: h5-to-hf of the stage-0 checkpoint (exit {rc})")
        ids = []
        for src in (ck, hf):
            rc, out = run([zt, "generate", "--weights", src, "--prompt-ids", "1,40,41,42,43,44,45,46",
                           "--temperature", "0", "--max-new-tokens", "40", "--json"])
            lines = [line for line in out.splitlines() if line.startswith("{")]
            ids.append(json.loads(lines[0])["ids"] if rc == 0 and lines else None)
            if rc != 0:
                print(out[-2000:])
        check(ids[0] is not None and ids[0] == ids[1] and len(ids[0]) == 40,
              f"{fam}: zt generate, 40 greedy tokens past the window: the checkpoint's == its export's "
              f"({ids[0][:8] if ids[0] else None}...)")
    fails = results.count(False)
    print("PASS" if fails == 0 else f"FAIL ({fails})")
    return 0 if fails == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
