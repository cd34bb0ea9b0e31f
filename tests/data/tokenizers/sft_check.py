"""`zt convert sft-to-tokens` against a Python construction of the same file (part of
tokenizer_parity_test.py): LitGPT's Alpaca prompt, the prompt and the response encoded
alone by Python's tokenizers / sentencepiece (BOS before the prompt, EOS after the
response), labels as Hugging Face / LitGPT take them (the prompt masked), greedy packing
into rows of seq_len + 1 padded with EOS, or one example per row; truncation and drop
counts; a malformed line is exit 2 naming FILE:LINE and the field."""
import json
import os
import subprocess

EXAMPLES = [
    {"instruction": "Give three tips for staying healthy.", "input": "",
     "output": "1. Eat well.\n2. Sleep 8 hours.\n3. Move every day."},
    {"instruction": "Translate to French.", "input": "Good morning, café 😀",
     "output": "Bonjour, café 😀"},
    {"instruction": "Sum the numbers.", "input": "12 345 6789", "output": "7146"},
    {"instruction": "Write a very long answer.", "input": "",
     "output": "All the world's a stage, and all the men and women merely players. " * 12},
    # Fields past 16 bytes per token of a row (issue 36 class 6): encoded from a prefix,
    # their first row tokens compared with the whole field's here.
    {"instruction": "Answer at great length.", "input": "",
     "output": "They have their exits and their entrances; café 😀 one man plays many parts. " * 90},
    {"instruction": "Summarise: " + "His acts being seven ages. At first the infant, mewling. " * 90,
     "input": "", "output": "A life."},
    {"instruction": "Say nothing.", "output": ""},
]


def alpaca(instruction, inp):
    """LitGPT's Alpaca prompt style (litgpt/prompts.py), written out."""
    if inp:
        return ("Below is an instruction that describes a task, paired with an input that provides further "
                "context. Write a response that appropriately completes the request.\n\n"
                f"### Instruction:\n{instruction}\n\n### Input:\n{inp}\n\n### Response:\n")
    return ("Below is an instruction that describes a task. Write a response that appropriately completes "
            f"the request.\n\n### Instruction:\n{instruction}\n\n### Response:\n")


def expected(encode, bos, eos, seq_len, pack, drop_long):
    row = seq_len + 1
    tokens, mask, starts = [], [], []
    truncated = dropped = 0

    def pad():
        used = len(tokens) % row
        if used:
            tokens.extend([eos] * (row - used))
            mask.extend([0] * (row - used))
    for e in EXAMPLES:
        p = ([bos] if bos is not None else []) + encode(alpaca(e["instruction"], e.get("input") or "").encode())
        r = encode(e["output"].encode()) + [eos]
        ids, labels = p + r, [-100] * len(p) + r  # Hugging Face / LitGPT labels
        m = [0 if x == -100 else 1 for x in labels]
        m[0] = 0
        if len(ids) > row:
            if drop_long:
                dropped += 1
                continue
            truncated += 1
            ids, m = ids[:row], m[:row]
        if not any(m):
            continue
        used = len(tokens) % row
        if not pack or (used and used + len(ids) > row):
            pad()
        starts.append(len(tokens))
        tokens += ids
        mask += m
    pad()
    return tokens, mask, starts, truncated, dropped


def check_sft(zt, work, name, folder, encode, bos, eos, env, check, h5py):
    """encode: bytes -> ids (Python's package, no special tokens)."""
    data = os.path.join(work, f"{name}-alpaca.jsonl")
    with open(data, "w", encoding="utf-8") as f:
        for e in EXAMPLES:
            f.write(json.dumps(e, ensure_ascii=False) + "\n")
    for seq_len, pack, too_long in ((160, True, "truncate"), (160, False, "drop"), (700, True, "truncate")):
        out = os.path.join(work, f"{name}-sft-{seq_len}-{'packed' if pack else 'unpacked'}-{too_long}.h5")
        args = [zt, "convert", "sft-to-tokens", "--tokenizer", folder, "--format", "alpaca",
                "--seq-len", str(seq_len), "--too-long", too_long] + ([] if pack else ["--no-pack"]) + [data, out]
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=120)
        what = f"{name}: sft-to-tokens seq_len {seq_len} {'packed' if pack else 'unpacked'} {too_long}"
        if p.returncode != 0:
            check(False, f"{what} (exit {p.returncode})")
            print(p.stdout)
            continue
        tokens, mask, starts, truncated, dropped = expected(encode, bos, eos, seq_len, pack, too_long == "drop")
        with h5py.File(out, "r") as f:
            got = (f["tokens"][:].tolist(), f["loss_mask"][:].tolist(),
                   f["doc_starts"][:].tolist() if "doc_starts" in f else [0], int(f.attrs["row_len"]))
        check(got == (tokens, mask, starts, seq_len + 1),
              f"{what}: tokens, loss mask, example starts equal Python's ({len(tokens)} tokens, "
              f"{sum(mask)} targets, {len(starts)} examples)")
        check(f"{truncated} truncated" in p.stdout and f"{dropped} dropped longer" in p.stdout,
              f"{what}: counts printed ({truncated} truncated, {dropped} dropped): {p.stdout.strip()[-160:]!r}")
    bad = os.path.join(work, "bad.jsonl")
    with open(bad, "w") as f:
        f.write(json.dumps(EXAMPLES[0]) + "\n" + json.dumps({"instruction": "x", "output": 5}) + "\n")
    p = subprocess.run([zt, "convert", "sft-to-tokens", "--tokenizer", folder, "--format", "alpaca",
                        "--seq-len", "64", bad, os.path.join(work, "bad.h5")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=120)
    check(p.returncode == 2 and f"{bad}:2" in p.stdout and "'output'" in p.stdout,
          f"{name}: a malformed line is exit 2 naming file:line and the field (exit {p.returncode})")
