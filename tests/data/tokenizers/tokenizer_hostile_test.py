#!/usr/bin/env python3
"""Hostile tokenizer.json files: zt's ids against Python's `tokenizers`, or zt's exit code.

  tokenizer_hostile_test.py ZT_TOKENIZE ZT WORKDIR

Each tokenizer is built here with the `tokenizers` library (a small BPE with merges and an
unknown token) and saved; zt_tokenize encodes the corpus lines and the whole corpus, and
the ids must equal Tokenizer.from_file(...).encode(..., add_special_tokens=False).ids:
1. Split pre-tokenizers whose pattern can match the empty string (x*, \\s*, a lookahead,
   the empty regex) and an empty Split string, every behavior, invert or not.
2. Added tokens with one content twice, one whose content model.vocab holds, and declared
   ids out of order (Hugging Face's add_tokens assigns the ids: the existing one, else the
   next from the vocabulary's size on, in list order).
3. 5,000 added tokens (normal and special, prefixes of each other: longest match first;
   2,000 of Llama 3's reserved-token form; PCRE2 refused one pattern of them all).
4. A pattern with (*NO_JIT): the same ids as the pattern without it.
5. A pattern that backtracks past PCRE2's match limit on a line: `zt convert
   text-to-tokens` exits 2 naming the tokenizer file, the pattern's field, the pattern and
   the byte where the search began.
Exit 77 (CTest skip) without tokenizers.
"""
import json
import os
import shutil
import subprocess
import sys


CORPUS = [
    "ab xxc  d", "", " ", "x", "xxxx", "abab  xx\tcd", "  leading and trailing  ",
    "tok1tok12tok123 tok3999x tok40000 <s1><s12>", "a<dup>b<dup><dup>", "x<r>yc<r>", "<s3999>tok7<s7>", "<|reserved_special_token_1999|>x<|reserved_special_token_7|>",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "zyx wvu\n\nnew lines\n",
]


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    zt_tokenize, zt, work = sys.argv[1:4]
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "ckpt", "hf"))
    from hf_common import require  # a missing module: skip, or fail in CI (ZT_REQUIRE_PEERS=1)
    require("tokenizers")
    from tokenizers import AddedToken, Regex, Tokenizer, models, pre_tokenizers
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    corpus_path = os.path.join(work, "corpus.txt")
    open(corpus_path, "w").write("\n".join(CORPUS))
    lines = "\n".join(CORPUS).split("\n")  # zt_tokenize's cases: getline's lines, then the whole
    cases = (lines[:-1] if lines[-1] == "" else lines) + ["\n".join(CORPUS)]
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        if not ok:
            failures.append(what)

    alphabet = "abcdefghijklmnopqrstuvwxyz <>0123456789\t\n"
    vocab = {"<unk>": 0}
    for c in alphabet:
        vocab[c] = len(vocab)
    merges = [("a", "b"), ("x", "x"), ("xx", "c"), ("t", "o"), ("to", "k"), (" ", " ")]
    for a, b in merges:
        vocab[a + b] = len(vocab)

    def bpe():
        return Tokenizer(models.BPE(vocab=dict(vocab), merges=list(merges), unk_token="<unk>"))

    def save(name, tok=None, edit=None):
        folder = os.path.join(work, name)
        os.makedirs(folder)
        path = os.path.join(folder, "tokenizer.json")
        tok.save(path)
        if edit:
            j = json.load(open(path))
            edit(j)
            json.dump(j, open(path, "w"))
        return folder

    def zt_ids(folder):
        p = subprocess.run([zt_tokenize, folder, corpus_path], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
        if p.returncode != 0:
            return None, p.stderr.decode(errors="replace")
        return [c["ids"] for c in json.loads(p.stdout)["cases"]], ""

    def compare(name, folder, peer_json=None):
        """zt's ids on `folder` == tokenizers' ids on peer_json (default: the same file)."""
        hf = Tokenizer.from_file(peer_json or os.path.join(folder, "tokenizer.json"))
        want = [e.ids for e in hf.encode_batch(cases, add_special_tokens=False)]
        got, err = zt_ids(folder)
        if got is None:
            check(False, f"{name}: zt_tokenize failed: {err.strip()[-300:]}")
            return
        bad = [i for i in range(len(cases)) if got[i] != want[i]]
        for i in bad[:2]:
            print(f"  case {cases[i][:50]!r}\n    zt     {got[i][:30]}\n    python {want[i][:30]}")
        check(not bad, f"{name}: ids of {len(cases)} cases equal tokenizers' "
                       f"({sum(map(len, want))} tokens, {len(bad)} differ)")

    # 1. Split patterns that can match the empty string
    patterns = {"x-star": Regex("x*"), "space-star": Regex(r"\s*"), "lookahead": Regex("(?=a)"),
                "empty-regex": Regex(""), "empty-string": ""}
    for pname, pat in patterns.items():
        for behavior in ("isolated", "removed", "merged_with_previous", "merged_with_next"):
            for invert in (False, True):
                t = bpe()
                t.pre_tokenizer = pre_tokenizers.Split(pat, behavior, invert=invert)
                name = f"split-{pname}-{behavior}-{'invert' if invert else 'plain'}"
                compare(name, save(name, t))

    # 2. one content twice among the added tokens: the first id is the one encoded
    t = bpe()
    t.pre_tokenizer = pre_tokenizers.Split(Regex(r"\s+"), "isolated")
    t.add_tokens([AddedToken("<dup>", special=False)])
    n = t.get_vocab_size(with_added_tokens=True)

    def twice(j):
        first = j["added_tokens"][0]
        j["added_tokens"].append(dict(first, id=n))                    # <dup> again, later id
        j["added_tokens"].append(dict(first, id=n + 1, content="c"))   # a model.vocab content
        j["added_tokens"].insert(0, dict(first, id=n + 3, content="<r>"))  # listed first,
        j["added_tokens"].append(dict(first, id=n + 2, content="<r>"))     # lower id later
    folder = save("added-twice", t, twice)
    compare("added tokens with one content twice, or a model.vocab content", folder)
    zi = json.loads(subprocess.run([zt_tokenize, folder, corpus_path], stdout=subprocess.PIPE,
                                   check=True).stdout)["info"]
    hf = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    top = max(hf.get_vocab(with_added_tokens=True).values())
    check(zi["vocab_size"] == top + 1, f"added-twice: zt's vocab_size {zi['vocab_size']} is one past "
                                       f"tokenizers' largest id {top} (ids left out are not counted)")

    # 3. 5,000 added tokens, prefixes of each other (tok1, tok12, tok123), 3,000 special
    t = bpe()
    t.pre_tokenizer = pre_tokenizers.Split(Regex(r"\s+"), "isolated")
    t.add_tokens([f"tok{i}" for i in range(2000)])
    t.add_special_tokens([f"<s{i}>" for i in range(0, 4000, 4)])
    t.add_special_tokens([f"<|reserved_special_token_{i}|>" for i in range(2000)])  # as Llama 3's
    compare("5,000 added tokens", save("added-5000", t))

    # 4. (*NO_JIT): PCRE2 runs the interpreter; the ids are those of the plain pattern
    t = bpe()
    t.pre_tokenizer = pre_tokenizers.Split(Regex(r"\s+"), "isolated")
    peer = save("nojit-peer", t)

    def nojit(j):
        j["pre_tokenizer"]["pattern"]["Regex"] = r"(*NO_JIT)\s+"
    compare("(*NO_JIT) pattern", save("nojit", t, nojit), os.path.join(peer, "tokenizer.json"))

    # 5. catastrophic backtracking: exit 2 naming the file, the field, the pattern, the byte
    def backtrack(j):
        j["pre_tokenizer"]["pattern"]["Regex"] = "(a+)+$"
    t.add_special_tokens(["</s>"])  # text-to-tokens ends each document with EOS
    folder = save("backtrack", t, backtrack)
    json.dump({"eos_token": "</s>"}, open(os.path.join(folder, "tokenizer_config.json"), "w"))
    text = os.path.join(work, "backtrack.txt")
    open(text, "w").write("ab\n" + "a" * 40 + "b\n")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               XDG_CACHE_HOME=os.path.join(work, "cache"))
    p = subprocess.run([zt, "convert", "text-to-tokens", "--tokenizer", folder, text,
                        os.path.join(work, "backtrack.h5")], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, env=env, timeout=300)
    named = all(s in p.stdout for s in (folder, "pre_tokenizer.pattern.Regex", '"(a+)+$"', "at byte 0",
                                        "match limit"))
    check(p.returncode == 2 and named,
          f"backtracking pattern: exit {p.returncode} (want 2) naming tokenizer, field, pattern, byte")
    if p.returncode != 2 or not named:
        print(p.stdout[-2000:])
    check(not os.path.exists(os.path.join(work, "backtrack.h5")), "backtracking pattern: no output left")

    print(f"{len(failures)} check(s) failed" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
