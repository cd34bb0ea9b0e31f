#!/usr/bin/env python3
"""What the subcommands print and which options they honour (docs/reliability.md, "Careless
and hostile input, 2026-12-07").

  cli_output_test.py ZT WORKDIR

1. Machine-readable output: every machine-readable mode of every subcommand (the options
   whose --help text says JSON or nagios; a new one this test does not run fails it), run
   where zt used to log (LoRA adapters merged, a sample generated, a nagios check): stdout
   is exactly the documented output, read by the strict parser (json.loads of the whole
   stdout; nagios: the check's report lines only, each '#'-led or a row of numbers).
2. Options that another option turns off, over every subcommand: a warning naming the
   option as given, and runs where it is not off stay silent. A chat template whose
   special tokens the tokenizer lacks (chatml over a byte-level tokenizer) exits 2; with
   them added it runs. A prompt longer than the window the model sees is a warning.
3. Option errors name the option as the user spelled it: `generate --threads 4096` (not
   train.threads), `--prompt ''` (empty, not missing) and an empty value for every option
   of every subcommand that takes one.
Exit 77 (skipped) without Python's `tokenizers` (the byte-level tokenizer of case 2).
"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ckpt", "hf"))
from hf_common import require  # noqa: E402  (a missing peer: skip, or fail in CI)

TINY = ["log.report=false", "model.hidden=32", "model.layers=1", "model.heads=2", "model.kv_heads=2",
        "model.intermediate=64", "model.context=32", "model.vocab=512", "train.seq_len=16",
        "train.micro_batch=2", "train.global_batch=2", "train.steps=1", "sample.tokens=0", "eval.every=0",
        "data.eval_fraction=0", "train.peak_tflops=1", "train.threads=1", "ckpt.overwrite=true"]
CHECK_FAST = ["--ops", "all_reduce", "--min-bytes", "8", "--max-bytes", "8", "--iters", "1", "--warmup", "0",
              "--straggler-iters", "1", "--straggler-bytes", "8", "--pair-iters", "1", "--pair-bytes", "8",
              "--burn-seconds", "0"]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def sets(keys):
    return [x for k in keys for x in ("--set", k)]


def main():
    zt, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    tokenizers, = require("tokenizers")  # case 2's byte-level tokenizer; before any work
    subprocess.run(["rm", "-rf", work])
    os.makedirs(work)
    env = dict(os.environ, OMP_NUM_THREADS="1", XDG_CACHE_HOME=os.path.join(work, "cache"), ZT_GNUPLOT="/nonexistent")

    def run(*args):
        p = subprocess.run([zt, *args], cwd=work, env=env, capture_output=True, text=True, errors="replace", timeout=120,
                           stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout, p.stderr

    def need(args, label):
        rc, out, err = run(*args)
        if rc != 0:
            print("setup failed: %s (exit %d)\n%s%s" % (label, rc, out, err))
            sys.exit(1)

    # A base checkpoint (byte data, vocabulary 512) and a LoRA adapter checkpoint on it.
    text = os.path.join(work, "in.txt")
    with open(text, "w") as f:
        f.write("ROMEO: a small text for the tokens, and the chat turns.\n" * 60)
    tokens = os.path.join(work, "tokens.h5")
    need(["convert", "text-to-tokens", text, tokens], "text-to-tokens")
    base_ck, lora_ck = os.path.join(work, "base"), os.path.join(work, "lora")
    need(["train"] + sets(TINY + ["data.path=" + tokens, "ckpt.dir=" + base_ck]), "train the base")
    need(["train"] + sets(TINY + ["data.path=" + tokens, "ckpt.dir=" + lora_ck, "finetune.method=lora",
                                  "ckpt.init_from=" + os.path.join(base_ck, "step-1.h5")]), "train LoRA")
    gen = ["generate", "--weights", base_ck, "--prompt", "RO", "--max-new-tokens", "3", "--threads", "1"]

    # 1. Machine-readable modes: stdout read whole by the strict parser.
    def strict_json(out):
        try:
            json.loads(out)
            return True
        except ValueError:
            return False

    def nagios_report(out):  # the check's report: '#' lines and rows of numbers, nothing else
        return all(not line.strip() or line.startswith("#") or re.match(r"^(\s+\d|node \d+ \()", line)
                   for line in out.splitlines()) and "#" in out

    modes = {
        ("generate", "--json"): [
            ("adapters merged", ["generate", "--weights", lora_ck, "--prompt", "RO", "--max-new-tokens", "3",
                                 "--threads", "1", "--json"], strict_json, "merged"),
            ("a sample", gen + ["--json", "--temperature", "0.7"], strict_json, "tokens/s")],
        ("estimate", "--json"): [("a config", ["estimate", "--json"] + sets(TINY), strict_json, None)],
        ("check", "--exit-codes"): [("nagios", ["check", "--exit-codes", "nagios"] + CHECK_FAST, nagios_report, None)],
    }
    for sub in ("generate", "estimate", "check", "train", "report", "convert text-to-tokens"):
        rc, out, _ = run(*sub.split(), "--help")
        for line in out.splitlines():
            m = re.match(r"^\s+(--[a-z][a-z0-9-]*)\b.*\b(JSON|nagios)\b", line)
            if m:
                check((sub, m.group(1)) in modes, "%s %s (machine-readable by its --help) is tested" % (sub, m.group(1)))
    for (sub, opt), cases in modes.items():
        for label, argv, parse, logged in cases:
            rc, out, err = run(*argv)
            check(rc in (0, 1) and parse(out),
                  "%s %s (%s): exit %d, stdout parsed whole%s" % (sub, opt, label, rc, "" if parse(out) else ":\n" + out))
            if logged:
                check(logged in err, "%s %s (%s): the log line '%s' is on stderr" % (sub, opt, label, logged))

    # 2. Options another option turns off: a warning naming the option as given.
    inert = [
        (gen + ["--chat-template", "chatml"], "--chat-template chatml has no effect in this run: it applies with --chat"),
        (gen + ["--temperature", "0", "--top-k", "5"], "--top-k 5 has no effect in this run: --temperature 0 is greedy"),
        (gen + ["--temperature", "0", "--top-p", "0.5"], "--top-p 0.5 has no effect"),
        (gen + ["--temperature", "0", "--seed", "7"], "--seed 7 has no effect"),
        (["check", "--baseline-fraction", "0.5"] + CHECK_FAST, "--baseline-fraction 0.5 has no effect in this run: it gates against --baseline"),
        (["check", "--io-bytes", "4K"] + CHECK_FAST, "--io-bytes 4K has no effect in this run"),
        (["convert", "sft-to-tokens", "--format", "alpaca", "--chat-template", "chatml", "--tokenizer", "x",
          "--seq-len", "16", text, os.path.join(work, "sft.h5")], "--chat-template chatml has no effect in this run"),
        (gen + ["--window", "64"], "--window 64 is more than the model's context (32 tokens)"),
        (gen[:4] + ["RO" * 40] + gen[5:], "the prompt is 80 tokens, more than the 32 the model sees"),
    ]
    for argv, want in inert:
        rc, out, err = run(*argv)
        check(want in err, "%s: warns '%s' (exit %d)%s" % (" ".join(argv[:1] + argv[-4:]), want, rc,
                                                            "" if want in err else ":\n" + err))
    for argv in (gen + ["--top-k", "5", "--seed", "7"], gen):  # sampling: nothing is off
        rc, out, err = run(*argv)
        check(rc == 0 and "no effect" not in err and "WARNING" not in err,
              "%s: no warning (exit %d)%s" % (" ".join(argv), rc, "" if rc == 0 else "\n" + err))

    # A chat template whose special tokens the tokenizer lacks; the same with them added runs.
    for name, extra in (("bytes", []), ("chatml", ["<|im_start|>", "<|im_end|>"])):
        d = os.path.join(work, "tok-" + name)
        os.makedirs(d)
        tok = tokenizers.Tokenizer(tokenizers.models.BPE())
        tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = tokenizers.decoders.ByteLevel()
        tr = tokenizers.trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"] + extra,
                                            initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
                                            show_progress=False)
        tok.train([text], tr)
        tok.save(os.path.join(d, "tokenizer.json"))
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump({"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "add_bos_token": False}, f)
        # no new tokens: the model's 512 ids are more than this tokenizer decodes
        rc, out, err = run(*gen[:6], "0", *gen[7:], "--tokenizer", d, "--chat", "--chat-template", "chatml")
        if name == "bytes":
            ok = rc == 2 and re.search(r"--chat-template chatml: tokenizer '.*' has no token '<\|im_start\|>'", err)
            check(ok, "chatml over a byte-level tokenizer: exit %d%s" % (rc, "" if ok else "\n" + err))
        else:
            check(rc == 0, "chatml over a tokenizer holding its tokens: exit %d\n%s" % (rc, err))

    # 3. Option errors name the option as given.
    for argv, want in [(gen[:-2] + ["--threads", "4096"], r"--threads 4096: more OpenMP threads"),
                       (gen[:4] + [""] + gen[5:], r"--prompt: an empty value")]:
        rc, out, err = run(*argv)
        ok = rc == 2 and re.search(want, err) and "train.threads" not in err
        check(ok, "%s: exit %d /%s/%s" % (" ".join(argv[-2:]), rc, want, "" if ok else "\n" + err))
    for sub in ("generate", "estimate", "check", "train", "report", "convert text-to-tokens",
                "convert sft-to-tokens", "convert pairs-to-tokens", "convert h5-to-hf", "convert hf-to-h5"):
        rc, out, _ = run(*sub.split(), "--help")
        for line in out.splitlines():
            m = re.match(r"^\s+(--[a-z][a-z0-9-]*)\s+[A-Z]", line)
            if not m or m.group(1) == "--help":
                continue
            rc, out, err = run(*sub.split(), m.group(1), "")
            check(rc == 2 and (m.group(1) + ":") in err, "%s %s '': exit %d naming the option" % (sub, m.group(1), rc))

    print("%d failures" % len(failures) if failures else "PASS")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
