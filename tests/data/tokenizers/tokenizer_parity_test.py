#!/usr/bin/env python3
"""zt's text tokenizers against Python's `tokenizers` and `sentencepiece` packages.

  tokenizer_parity_test.py ZT_TOKENIZE ZT WORKDIR [SHIPPED_CORPUS]

1. make_tokenizers.py trains ten small tokenizers in WORKDIR (byte-level BPE as GPT-2,
   as Llama 3 (its regex, 256 specials), as Qwen2 (NFC, its regex), as Qwen3.5 (made and
   saved by transformers' Qwen3_5Tokenizer: NFC, letters with their marks) and as gpt-oss's
   o200k_harmony (tiktoken's o200k regex, the harmony specials at 199998-200018),
   SentencePiece-style BPE in tokenizer.json as TinyLlama, with Metaspace and as Gemma 3
   (262,145 tokens, byte fallback), SentencePiece BPE and unigram tokenizer.model) and
   writes the parity corpus: Unicode scripts, whitespace runs, digits, emoji, CRLF, code,
   each family's special-token text, invalid UTF-8.
2. For each tokenizer, every corpus line and the whole corpus: zt's ids (ZT_TOKENIZE, the
   library) == Python's ids, and zt's decode == Python's decode (skip_special_tokens).
   tokenizers gets the bytes decoded with errors="replace" (the only way such bytes reach
   it); sentencepiece gets the bytes. Byte-level tokenizers round-trip valid UTF-8 exactly.
   BOS/EOS: zt's prefix + ids + suffix == transformers-style add_special_tokens=True ids
   (the template, or tokenizer_config.json's add_bos_token/add_eos_token).
   qwen3_5 also: AutoTokenizer picks Qwen3_5Tokenizer for the folder (config.json's
   model_type qwen3_5; also where tokenizer_config.json names Qwen2's class, as Qwen3.5's
   hub folders do) and its ids equal zt's; Qwen2's regex on the same vocabulary gives other
   ids on some case (the corpus tells the two forms apart).
3. `zt convert text-to-tokens --tokenizer DIR A.txt B.txt OUT.h5`: the tokens (h5py) are
   prefix + ids(A) + suffix + EOS, then B's; attributes name the tokenizer, its vocab and
   hash; `zt train` with model.vocab other than the file's vocab exits 2 naming both.
4. `zt convert sft-to-tokens` (sft_check.py): tokens, loss mask and example starts equal a
   Python construction (LitGPT's Alpaca prompt, Hugging Face labels -100 on the prompt,
   packing or one example per row, truncation or drop); a malformed line is exit 2.
The SentencePiece unigram ids are compared by their own CTest test, which reads this
test's WORKDIR (data.hf.tokenizer_parity_unigram, FIXTURES_REQUIRED):

  tokenizer_parity_test.py --unigram-ids ZT_TOKENIZE WORKDIR

it skips when Python's sentencepiece is not of libsentencepiece's series (0.1.x and 0.2.x
break unigram ties differently); scripts/install-deps.sh --hf-peers installs a match.
Exit 77 (CTest skip; a failure where CI requires its peers, ZT_REQUIRE_PEERS=1) without
tokenizers, sentencepiece, transformers or h5py.
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_tokenizers  # noqa: E402


def unigram_ids(zt_tokenize, work):
    """spm_unigram's ids (zt_tokenize) == Python's sentencepiece's on every corpus case."""
    sys.path.insert(0, os.path.join(HERE, "..", "..", "ckpt", "hf"))
    from hf_common import peer_missing, require
    (spm,) = require("sentencepiece")
    lib = os.environ.get("ZT_LIBSENTENCEPIECE_VERSION", "")
    if not lib or lib.rsplit(".", 1)[0] != spm.__version__.rsplit(".", 1)[0]:
        peer_missing(f"Python's sentencepiece {spm.__version__} is not of libsentencepiece {lib or '?'}'s "
                     "series: unigram ties break differently, the ids cannot be compared")
    folder = os.path.join(work, "spm_unigram")
    corpus = open(os.path.join(work, "corpus.bin"), "rb").read()
    cases = corpus.split(b"\n") + [corpus]
    p = subprocess.run([zt_tokenize, folder, os.path.join(work, "corpus.bin")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120, check=True)
    zc = json.loads(p.stdout)["cases"]
    sp = spm.SentencePieceProcessor(model_file=os.path.join(folder, "tokenizer.model"))
    py_ids = [sp.encode(c) for c in cases]
    bad = [i for i in range(len(cases)) if zc[i]["ids"] != py_ids[i]]
    for i in bad[:3]:
        print(f"  case {i} {cases[i][:80]!r}\n    zt     {zc[i]['ids'][:40]}\n    python {py_ids[i][:40]}")
    print(f"sentencepiece {spm.__version__}, libsentencepiece {lib}: spm_unigram ids of {len(cases)} cases "
          f"({sum(len(x) for x in py_ids)} tokens): {len(bad)} differ")
    return 1 if bad else 0


def check_qwen3_5(folder, texts, zc, tok, transformers, tokenizers, check):
    """transformers' own class on the folder as it loads a Qwen3.5 checkpoint's, and the
    corpus's power to tell Qwen3.5's split from Qwen2's."""
    cfg_path = os.path.join(folder, "tokenizer_config.json")
    cfg = json.load(open(cfg_path))
    for declared in (cfg.get("tokenizer_class"), "Qwen2TokenizerFast"):
        cfg["tokenizer_class"] = declared
        json.dump(cfg, open(cfg_path, "w"), indent=1)
        hf = transformers.AutoTokenizer.from_pretrained(folder)
        hf_ids = [hf(t, add_special_tokens=False)["input_ids"] for t in texts]
        bad = [i for i in range(len(texts)) if zc[i]["ids"] != hf_ids[i]]
        check(type(hf).__name__ == "Qwen3_5Tokenizer" and not bad,
              f"qwen3_5: AutoTokenizer (tokenizer_class {declared}, model_type qwen3_5) is {type(hf).__name__}; "
              f"its ids of {len(texts)} cases equal zt's ({len(bad)} differ)")
    j = json.load(open(os.path.join(folder, "tokenizer.json")))
    split = j["pre_tokenizer"]["pretokenizers"][0]
    check(split["pattern"]["Regex"] == make_tokenizers.QWEN3_5_REGEX,
          "qwen3_5: tokenizer.json holds the regex of transformers' Qwen3_5Tokenizer")
    split["pattern"]["Regex"] = make_tokenizers.QWEN2_REGEX
    qwen2 = tokenizers.Tokenizer.from_str(json.dumps(j))
    differ = [i for i, t in enumerate(texts) if qwen2.encode(t, add_special_tokens=False).ids
              != tok.encode(t, add_special_tokens=False).ids]
    check(len(differ) > 0, f"qwen3_5: Qwen2's regex on the same vocabulary changes the ids of {len(differ)} cases "
                           "(the corpus tells the two splits apart)")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--unigram-ids":
        return unigram_ids(sys.argv[2], sys.argv[3])
    if len(sys.argv) not in (4, 5):
        print(__doc__)
        return 2
    zt_tokenize, zt, work = sys.argv[1:4]
    shipped = sys.argv[4] if len(sys.argv) == 5 else None
    sys.path.insert(0, os.path.join(HERE, "..", "..", "ckpt", "hf"))
    from hf_common import require  # a missing module: skip, or fail in CI
    h5py, np, spm, tokenizers, transformers = require("h5py", "numpy", "sentencepiece", "tokenizers", "transformers")
    lib = os.environ.get("ZT_LIBSENTENCEPIECE_VERSION", "")
    print(f"tokenizers {tokenizers.__version__}, sentencepiece {spm.__version__} "
          f"(zt links libsentencepiece {lib or '?'}); spm_unigram's ids: data.hf.tokenizer_parity_unigram",
          flush=True)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    sys.path.insert(0, HERE)
    from sft_check import check_sft
    args = [sys.executable, os.path.join(HERE, "make_tokenizers.py"), work] + ([shipped] if shipped else [])
    subprocess.run(args, check=True)
    corpus = open(os.path.join(work, "corpus.bin"), "rb").read()
    cases = corpus.split(b"\n") + [corpus]
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        if not ok:
            failures.append(what)

    names = ["gpt2", "llama3", "qwen2", "qwen3_5", "tinyllama", "metaspace", "gemma3", "o200k_harmony", "spm_bpe",
             "spm_unigram"]
    info = {}
    for name in names:
        folder = os.path.join(work, name)
        p = subprocess.run([zt_tokenize, folder, os.path.join(work, "corpus.bin")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        if p.returncode != 0:
            check(False, f"{name}: zt_tokenize: {p.stderr.decode(errors='replace')}")
            continue
        z = json.loads(p.stdout)
        info[name] = z["info"]
        cfg = json.load(open(os.path.join(folder, "tokenizer_config.json")))
        if name.startswith("spm"):
            sp = spm.SentencePieceProcessor(model_file=os.path.join(folder, "tokenizer.model"))
            py_ids = [sp.encode(c) for c in cases]
            py_dec = [sp.decode(ids).encode() for ids in py_ids]
            specials = ([sp.bos_id()] if cfg.get("add_bos_token", True) else [],
                        [sp.eos_id()] if cfg.get("add_eos_token", False) else [])
            vocab = sp.get_piece_size()
        else:
            tok = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
            texts = [c.decode("utf-8", errors="replace") for c in cases]
            py_ids = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
            py_dec = [tok.decode(ids).encode() for ids in py_ids]
            full = tok.encode(texts[0], add_special_tokens=True).ids
            n = len(py_ids[0])
            k = next(i for i in range(len(full) + 1) if full[i:i + n] == py_ids[0])
            pre, post = full[:k], full[k + n:]
            if "add_bos_token" in cfg:
                pre = [tok.token_to_id(cfg["bos_token"])] if cfg["add_bos_token"] else []
            if "add_eos_token" in cfg:
                post = [tok.token_to_id(cfg["eos_token"])] if cfg["add_eos_token"] else []
            specials = (pre, post)
            vocab = tok.get_vocab_size(with_added_tokens=True)
        zc = z["cases"]
        if name != "spm_unigram":  # its ids: their own test (--unigram-ids), 0.1.x/0.2.x ties differ
            bad = [i for i in range(len(cases)) if zc[i]["ids"] != py_ids[i]]
            for i in bad[:3]:
                print(f"  case {i} {cases[i][:80]!r}\n    zt     {zc[i]['ids'][:40]}\n    python {py_ids[i][:40]}")
            check(not bad, f"{name}: ids of {len(cases)} cases equal Python's "
                           f"({sum(len(x) for x in py_ids)} tokens; {len(bad)} differ)")
        bad = [i for i in range(len(cases)) if bytes.fromhex(zc[i]["decoded_hex"]) != py_dec[i]]
        for i in bad[:3]:
            print(f"  case {i}\n    zt     {bytes.fromhex(zc[i]['decoded_hex'])[:80]!r}\n    python {py_dec[i][:80]!r}")
        check(not bad, f"{name}: decodes equal Python's ({len(bad)} differ)")
        if name == "qwen3_5":
            check_qwen3_5(folder, texts, zc, tok, transformers, tokenizers, check)
        if name in ("gpt2", "llama3", "qwen2", "qwen3_5"):
            # valid UTF-8 without special-token text (decode skips special tokens); Qwen's NFC
            # normalizer: the texts already in NFC
            import unicodedata
            valid = [i for i, c in enumerate(cases) if c.decode("utf-8", errors="replace").encode() == c
                     and b"<|" not in c and b"think>" not in c and b"tool_call>" not in c
                     and (not name.startswith("qwen") or unicodedata.normalize("NFC", c.decode()) == c.decode())]
            rt = [i for i in valid if bytes.fromhex(zc[i]["decoded_hex"]) != cases[i]]
            check(not rt, f"{name}: decode(encode(text)) == text on {len(valid)} valid UTF-8 cases")
        check((z["info"]["prefix"], z["info"]["suffix"]) == (specials[0], specials[1]),
              f"{name}: BOS/EOS added {z['info']['prefix']} ... {z['info']['suffix']} == "
              f"Python's {specials[0]} ... {specials[1]}")
        check(z["info"]["vocab_size"] == vocab, f"{name}: vocab size {z['info']['vocab_size']} == {vocab}")

    # 3. token files
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               XDG_CACHE_HOME=os.path.join(work, "cache"))
    a, b = os.path.join(work, "a.txt"), os.path.join(work, "b.txt")
    open(a, "wb").write(cases[5] + b"\r\n" + cases[7])
    open(b, "wb").write(open(os.path.join(work, "train.txt"), "rb").read()[:20000])
    # 6.6 MB, a line of 4.4 MB among them (issue 36 class 6): text-to-tokens reads it in pieces cut at a newline
    # before a letter or digit, or in a long line at a space before a letter, where the
    # tokenizer's encode is additive there; the ids must still be those of the whole file.
    c = os.path.join(work, "c.txt")
    shakespeare = open(os.path.join(work, "train.txt"), "rb").read()
    open(c, "wb").write(shakespeare * 10 + b" ".join(shakespeare.split() * 20) + b"\n" + shakespeare[:5000])
    # The cuts: at newlines (byte-level gpt2; SentencePiece, whose normalizer turns a newline
    # into a space and strips the ends of each text), at spaces with the space left to the '▁'
    # the tokenizer writes before every text (tinyllama's Prepend normalizer: a vocabulary with
    # no '▁' inside a token), none (metaspace: tokens such as 'e▁').
    ways = {"tinyllama": "cut at a space before a letter, the space left", "spm_bpe": "cut at a newline",
            "gpt2": "cut at a newline", "metaspace": "each file read whole"}
    for name in ("tinyllama", "spm_bpe", "gpt2", "metaspace"):
        if name not in info:
            continue
        out = os.path.join(work, f"{name}.h5")
        p = subprocess.run([zt, "convert", "text-to-tokens", "--tokenizer", os.path.join(work, name), a, b, c, out],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=120)
        check(p.returncode == 0, f"{name}: zt convert text-to-tokens --tokenizer (exit {p.returncode})")
        if p.returncode != 0:
            print(p.stdout)
            continue
        check(ways[name] in p.stdout, f"{name}: text-to-tokens says '{ways[name]}'")
        zi = info[name]
        folder = os.path.join(work, name)
        if name.startswith("spm"):
            sp = spm.SentencePieceProcessor(model_file=os.path.join(folder, "tokenizer.model"))
            enc = lambda t: sp.encode(t)  # noqa: E731
        else:
            tok = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
            enc = lambda t: tok.encode(t.decode("utf-8", errors="replace"), add_special_tokens=False).ids  # noqa: E731
        want, starts = [], []
        for path in (a, b, c):
            starts.append(len(want))
            doc = zi["prefix"] + enc(open(path, "rb").read()) + zi["suffix"]
            if not doc or doc[-1] != zi["eos"]:
                doc.append(zi["eos"])
            want += doc
        with h5py.File(out, "r") as f:
            got = f["tokens"][:].tolist()
            doc_starts = f["doc_starts"][:].tolist()
            attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        check(got == want, f"{name}: token file = prefix + Python's ids + suffix + EOS per document "
                           f"({len(got)} tokens)")
        check(doc_starts == starts, f"{name}: doc_starts {doc_starts} == {starts}")
        check(attrs.get("tokenizer") == zi["name"] and int(attrs.get("vocab_size", -1)) == zi["vocab_size"]
              and attrs.get("tokenizer_hash") == zi["hash"],
              f"{name}: attributes tokenizer={attrs.get('tokenizer')!r} vocab_size={attrs.get('vocab_size')} "
              f"tokenizer_hash={attrs.get('tokenizer_hash')!r}")
        if name in ("tinyllama", "spm_bpe"):  # instruction data: tests/data/tokenizers/sft_check.py
            check_sft(zt, work, name, folder, enc, zi["prefix"][0] if zi["prefix"] else None, zi["eos"],
                      env, check, h5py)
        if name == "tinyllama":  # zt train refuses a model vocabulary other than the file's
            for vocab in (256, 4096):
                p = subprocess.run([zt, "train", "--set", f"data.path={out}", "--set", f"model.vocab={vocab}",
                                    "--set", "train.steps=1", "--set", "train.threads=1"],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                   timeout=120, cwd=work)
                check(p.returncode == 2 and zi["name"] in p.stdout and str(zi["vocab_size"]) in p.stdout
                      and f"model.vocab {vocab}" in p.stdout,
                      f"{name}: zt train with model.vocab={vocab} exits 2 naming both (exit {p.returncode})")
                if p.returncode != 2:
                    print(p.stdout[-2000:])
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
