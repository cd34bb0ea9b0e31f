#!/usr/bin/env python3
"""`zt generate` with a real tokenizer and `zt convert h5-to-hf` with the tokenizer, against
transformers.

  generate_export_test.py ZT WORKDIR [SHIPPED_CORPUS]

1. make_tokenizers.py trains the Llama 3-form byte-level BPE (no downloads); the test adds
   Llama 3's chat tokens and template (chat_template_test.py's LLAMA3) to it.
2. `zt convert text-to-tokens --tokenizer` + `zt train` (tiny model, model.vocab = the
   tokenizer's): the checkpoint's root attributes record the tokenizer (name, absolute
   path, hash) as the token file does.
3. `zt convert h5-to-hf` copies tokenizer.json and tokenizer_config.json: the folder loads
   with AutoTokenizer and AutoModelForCausalLM; AutoTokenizer's ids of a prompt equal the
   prompt ids zt generate uses.
4. Greedy: `zt generate --temperature 0` on the checkpoint (its recorded tokenizer) and on
   the exported folder (the folder's tokenizer) == transformers' generate(do_sample=False)
   + tokenizer.decode(skip_special_tokens=True), ids and text; with --chat, the prompt is
   apply_chat_template([user], add_generation_prompt=True) and generation stops at
   <|eot_id|> as transformers does with that eos_token_id. With the Qwen3.5 form and template
   (chat_template.jinja) the --chat prompt equals apply_chat_template's with enable_thinking
   True and False (--no-thinking); --no-thinking with Llama 3's template is exit 2.
5. Refusals (exit 2): a tokenizer file edited after training (h5-to-hf and generate name
   the checkpoint and both hashes), a tokenizer folder gone; `--tokenizer PATH` naming a
   copy of the same files exports.
Exit 77 (CTest skip) without torch, transformers, tokenizers or h5py.
"""
import json
import os
import shutil
import subprocess
import sys

from chat_template_test import LLAMA3, QWEN3_5, ZT_ENV, make_tokenizers  # also puts tests/ckpt/hf on the path
from hf_common import Checker, require, torch_peers

NEW = 24
PROMPTS = ["ROMEO:\nBut soft, what light", "Hello, world! It's a test"]


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__)
        return 2
    zt, work = sys.argv[1:3]
    h5py, tokenizers = require("h5py", "tokenizers")
    torch, transformers = torch_peers()
    make_tokenizers.fresh(work, sys.argv[3] if len(sys.argv) == 4 else None)
    env = dict(ZT_ENV, XDG_CACHE_HOME=os.path.join(work, "cache"))
    c = Checker()
    check, finish = c.check, c.finish

    def zt_run(*args):
        return subprocess.run([zt, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                              timeout=600, cwd=work)

    # 1. the tokenizer: Llama 3 form + chat tokens and template
    tokdir = os.path.join(work, "tok")
    shutil.copytree(os.path.join(work, "llama3"), tokdir)
    tok = tokenizers.Tokenizer.from_file(os.path.join(tokdir, "tokenizer.json"))
    tok.add_special_tokens([tokenizers.AddedToken(t, normalized=False, special=True)
                            for t in ("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>")])
    tok.save(os.path.join(tokdir, "tokenizer.json"))
    cfg = json.load(open(os.path.join(tokdir, "tokenizer_config.json")))
    cfg["chat_template"] = LLAMA3
    json.dump(cfg, open(os.path.join(tokdir, "tokenizer_config.json"), "w"), indent=1)
    vocab = tok.get_vocab_size(with_added_tokens=True)
    eos, eot = tok.token_to_id(cfg["eos_token"]), tok.token_to_id("<|eot_id|>")

    # 2. token file, training, the checkpoint's record
    data = os.path.join(work, "data.h5")
    p = zt_run("convert", "text-to-tokens", "--tokenizer", tokdir, os.path.join(work, "train.txt"), data)
    check(p.returncode == 0, f"text-to-tokens --tokenizer (exit {p.returncode})")
    if p.returncode != 0:
        print(p.stdout)
        finish()
    ck = os.path.join(work, "ck")
    p = zt_run("train", "--set", f"data.path={data}", "--set", f"model.vocab={vocab}", "--set", "train.steps=200",
               "--set", "train.micro_batch=8", "--set", "train.global_batch=8", "--set", "train.seq_len=64",
               "--set", "train.warmup=0", "--set", "train.lr=3e-3", "--set", "train.threads=1",
               "--set", "eval.every=0", "--set", f"ckpt.dir={ck}", "--set", "train.peak_tflops=1",
               # the sample after training: greedy, the first prompt, with the data's tokenizer
               "--set", f"sample.tokens={NEW}", "--set", "sample.temperature=0",
               "--set", f"sample.prompt={PROMPTS[0]}")
    check(p.returncode == 0, f"zt train on the token file (model.vocab {vocab}; exit {p.returncode})")
    if p.returncode != 0:
        print(p.stdout[-3000:])
        finish()
    train_log = p.stdout
    ckpt = os.path.join(ck, open(os.path.join(ck, "latest")).read().strip())
    with h5py.File(data, "r") as f:
        tattrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
    with h5py.File(ckpt, "r") as f:
        cattrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
    rec = (cattrs.get("tokenizer"), cattrs.get("tokenizer_path"), cattrs.get("tokenizer_hash"))
    check(rec == (tattrs.get("tokenizer"), tattrs.get("tokenizer_path"), tattrs.get("tokenizer_hash"))
          and os.path.realpath(rec[1] or "") == os.path.realpath(tokdir),
          f"the checkpoint records the token file's tokenizer {rec}")

    # 3. export with the tokenizer
    hf = os.path.join(work, "hf")
    p = zt_run("convert", "h5-to-hf", ck, hf)
    check(p.returncode == 0, f"h5-to-hf (exit {p.returncode})")
    if p.returncode != 0:
        print(p.stdout)
        finish()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        same = open(os.path.join(hf, name), "rb").read() == open(os.path.join(tokdir, name), "rb").read()
        check(same, f"h5-to-hf copied {name}")
    hft = transformers.AutoTokenizer.from_pretrained(hf)
    model = transformers.AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32)
    model.eval()
    check(True, f"the exported folder loads: {type(hft).__name__}, {type(model).__name__}")

    def hf_greedy(ids, stops):
        with torch.no_grad():
            x = torch.tensor([ids])
            out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=NEW, do_sample=False,
                                 eos_token_id=stops, pad_token_id=eos)
        new = out[0, len(ids):].tolist()
        return new, hft.decode(new, skip_special_tokens=True)

    def zt_greedy(weights, *extra):
        p = zt_run("generate", "--weights", weights, "--temperature", "0", "--max-new-tokens", str(NEW),
                   "--threads", "1", "--json", *extra)
        if p.returncode != 0:
            print(p.stdout[-2000:])
            return None
        line = [x for x in p.stdout.splitlines() if x.startswith("{")]
        return json.loads(line[-1]) if line else None

    for prompt in PROMPTS:
        want_ids = hft(prompt)["input_ids"]
        new, text = hf_greedy(want_ids, [eos])
        if prompt == PROMPTS[0]:  # zt train's sample: the same prompt encoding, decoder and decode
            sample = train_log.split("-" * 40 + "\n")[1] if train_log.count("-" * 40) >= 2 else None
            # (the log ends the sample with a newline: compared without trailing newlines, as a
            # continuation may end with its own)
            check(sample is not None and sample.rstrip("\n") == (prompt + text).rstrip("\n"),
                  f"zt train's greedy sample (the data's tokenizer) == the prompt + transformers' "
                  f"greedy continuation ({len(new)} tokens)")
            if sample is None or sample.rstrip("\n") != (prompt + text).rstrip("\n"):
                print(f"    zt train {sample!r}\n    hf       {prompt + text!r}")
        check(len(set(new)) >= 5, f"prompt {prompt[:20]!r}: transformers' greedy continuation is not degenerate "
                                  f"({len(set(new))} distinct tokens >= 5): {text!r}")
        for label, weights in (("checkpoint (recorded tokenizer)", ck), ("exported folder", hf)):
            z = zt_greedy(weights, "--prompt", prompt)
            check(z is not None and z["prompt_ids"] == want_ids,
                  f"{label}: prompt {prompt[:20]!r}: zt's ids == AutoTokenizer's ({len(want_ids)} ids)")
            check(z is not None and z["ids"] == new and z["text"] == text,
                  f"{label}: greedy ids and text == transformers' generate + decode ({len(new)} tokens, "
                  f"{len(set(new))} distinct)")
            if z is not None and (z["ids"] != new or z["text"] != text):
                print(f"    zt {z['ids']} {z['text']!r}\n    hf {new} {text!r}")
    # --chat: Llama 3's template, stop at <|eot_id|>
    conv = [{"role": "user", "content": PROMPTS[1]}]
    want_ids = hft.apply_chat_template(conv, add_generation_prompt=True, tokenize=True)
    if not isinstance(want_ids, list):
        want_ids = want_ids["input_ids"]
    new, text = hf_greedy(want_ids, [eos, eot])
    z = zt_greedy(ck, "--chat", "--prompt", PROMPTS[1])
    check(z is not None and z["prompt_ids"] == want_ids and z.get("chat_template") == "llama3",
          f"--chat: prompt ids == apply_chat_template(add_generation_prompt=True) ({len(want_ids)} ids)")
    check(z is not None and z["ids"] == new and z["text"] == text,
          f"--chat: greedy ids and text == transformers' with eos_token_id [EOS, <|eot_id|>] ({len(new)} tokens)")
    if z is not None and (z["ids"] != new or z["text"] != text):
        print(f"    zt {z['ids']} {z['text']!r}\n    hf {new} {text!r}")

    # --chat with Qwen3.5's template (chat_template.jinja; the qwen3_5 form's ids fit the model):
    # the generation prompt opens a think block, or with --no-thinking writes an empty one
    qdir = os.path.join(work, "qwen3_5")
    with open(os.path.join(qdir, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(QWEN3_5)
    hfq = transformers.AutoTokenizer.from_pretrained(qdir)
    for thinking, extra in ((True, []), (False, ["--no-thinking"])):
        want_ids = hfq.apply_chat_template(conv, add_generation_prompt=True, tokenize=True,
                                           enable_thinking=thinking)["input_ids"]
        p = zt_run("generate", "--weights", ck, "--tokenizer", qdir, "--chat", "--prompt", PROMPTS[1], *extra,
                   "--max-new-tokens", "1", "--temperature", "0", "--threads", "1", "--json")
        line = [x for x in p.stdout.splitlines() if x.startswith("{")]
        z = json.loads(line[-1]) if p.returncode == 0 and line else {}
        check(z.get("prompt_ids") == want_ids and z.get("chat_template") == "qwen3.5",
              f"--chat{' --no-thinking' if extra else ''}, qwen3.5: prompt ids == apply_chat_template("
              f"add_generation_prompt=True, enable_thinking={thinking}) ({len(want_ids)} ids; exit {p.returncode})")
        if z.get("prompt_ids") != want_ids:
            print(p.stdout[-1500:])
    p = zt_run("generate", "--weights", ck, "--chat", "--no-thinking", "--prompt", "x", "--max-new-tokens", "1")
    check(p.returncode == 2 and "enable_thinking" in p.stdout and "llama3" in p.stdout,
          f"--no-thinking with Llama 3's template: exit 2 naming the template (exit {p.returncode})")

    # 4. refusals, and --tokenizer naming the files
    copy = os.path.join(work, "tok-copy")
    shutil.copytree(tokdir, copy)
    cfgp = os.path.join(tokdir, "tokenizer_config.json")
    original = open(cfgp).read()
    open(cfgp, "w").write(original.replace('"eos_token"', '"model_max_length": 64, "eos_token"'))
    p = zt_run("convert", "h5-to-hf", ck, os.path.join(work, "hf-changed"))
    check(p.returncode == 2 and "changed" in p.stdout and rec[2] in p.stdout and "--tokenizer" in p.stdout
          and not os.path.exists(os.path.join(work, "hf-changed", "config.json")),
          f"h5-to-hf with the tokenizer edited since training: exit 2 naming both hashes, nothing written "
          f"(exit {p.returncode})")
    p = zt_run("generate", "--weights", ck, "--prompt", "x", "--max-new-tokens", "2")
    check(p.returncode == 2 and "changed" in p.stdout,
          f"generate with the tokenizer edited since training: exit 2 (exit {p.returncode})")
    shutil.rmtree(tokdir)
    p = zt_run("convert", "h5-to-hf", ck, os.path.join(work, "hf-gone"))
    check(p.returncode == 2 and "gone" in p.stdout and tokdir in p.stdout,
          f"h5-to-hf with the tokenizer folder gone: exit 2 naming it (exit {p.returncode})")
    p = zt_run("convert", "h5-to-hf", "--tokenizer", copy, ck, os.path.join(work, "hf-copy"))
    ok = p.returncode == 0 and os.path.exists(os.path.join(work, "hf-copy", "tokenizer.json"))
    check(ok, f"h5-to-hf --tokenizer naming a copy of the same files exports (exit {p.returncode})")
    other = os.path.join(work, "gpt2")
    p = zt_run("convert", "h5-to-hf", "--tokenizer", other, ck, os.path.join(work, "hf-other"))
    check(p.returncode == 2 and rec[2] in p.stdout,
          f"h5-to-hf --tokenizer naming another tokenizer: exit 2 (exit {p.returncode})")
    finish()


if __name__ == "__main__":
    sys.exit(main() or 0)
