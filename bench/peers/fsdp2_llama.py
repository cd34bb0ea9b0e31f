#!/usr/bin/env python3
"""One rank of PyTorch FSDP2 (torch.distributed.fsdp.fully_shard, gloo, CPU) training
transformers' LlamaForCausalLM with zt's `tiny` shapes: the peer of zt's ZeRO-3 in
bench/peers/fsdp2_vs_zt.sh.

  fsdp2_llama.py --rank R --world W --master ADDR [--steps 8] [--micro-batch 16] [--seq 128]
                 [--corpus data/tinyshakespeare.txt] [--out FILE.json]

Model: vocab 256, hidden 128, 4 layers, 4 heads, 2 KV heads, SwiGLU 512, context 256,
untied head, RMSNorm eps 1e-5, RoPE theta 1e4 (zt's tiny preset), fp32, normal(0.02) init.
Sharding: fully_shard on every decoder layer, then on the whole model (embedding, final
norm and head in the root group), reshard_after_forward=True: ZeRO-3's gather before
use and release after, reduce-scatter of gradients. Step: forward + backward on
micro-batch x seq random windows of the corpus bytes, gradient clipping at 1.0, AdamW
(lr 3e-3, betas 0.9/0.95, eps 1e-8, weight decay 0.1), one OpenMP thread per rank.
Step time: wall time of each step on this rank (loss.item() closes it).
Rank 0 writes {"step_time_s": [...], "loss": [...]} to --out.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", required=True)
    ap.add_argument("--port", type=int, default=29512)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--micro-batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--corpus", default=os.path.join(os.path.dirname(__file__), "../../data/tinyshakespeare.txt"))
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(1234)
    dist.init_process_group("gloo", init_method=f"tcp://{a.master}:{a.port}", rank=a.rank,
                            world_size=a.world)
    cfg = LlamaConfig(vocab_size=256, hidden_size=128, intermediate_size=512, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
                      initializer_range=0.02, attn_implementation="sdpa")
    model = LlamaForCausalLM(cfg)
    for layer in model.model.layers:
        fully_shard(layer, reshard_after_forward=True)
    fully_shard(model, reshard_after_forward=True)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.1)
    data = torch.frombuffer(bytearray(open(a.corpus, "rb").read()), dtype=torch.uint8).long()
    g = torch.Generator().manual_seed(1000 + a.rank)
    times, losses = [], []
    dist.barrier()
    for _ in range(a.steps):
        t0 = time.perf_counter()
        starts = torch.randint(0, data.numel() - a.seq - 1, (a.micro_batch,), generator=g)
        x = torch.stack([data[s:s + a.seq] for s in starts.tolist()])
        out = model(input_ids=x, labels=x)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss = out.loss.item()
        times.append(time.perf_counter() - t0)
        losses.append(loss)
    dist.barrier()
    if a.rank == 0 and a.out:
        with open(a.out, "w") as f:
            json.dump({"step_time_s": times, "loss": losses, "torch": torch.__version__}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
