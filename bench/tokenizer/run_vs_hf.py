#!/usr/bin/env python3
"""zt's batch encode beside Hugging Face's `tokenizers` (encode_batch) and `sentencepiece`
(encode of a list with num_threads) on the same corpus, tokenizers and threads; writes
bench/results/tokenizer-vs-hf.md (machine, commit, command, versions, medians, ratios).

  bench/tokenizer/run_vs_hf.py [--build build-cpu] [--threads 1,2] [--runs 5] [--copies 4]

The tokenizers are those of the parity test (tests/data/tokenizers/make_tokenizers.py,
trained on the shipped corpus). The corpus is data/tinyshakespeare.txt repeated --copies
times, cut into documents at blank lines. Each side is a fresh process per run that
loads the tokenizer, encodes everything once (warm-up), then once more timed; zt and the
peer alternate, so both see the same load. Both sides hash their ids the same way and
the hashes must agree (the comparison is of equal work).
zt's side is `zt_tokenize --bench` (tests/data/tokenizers/zt_tokenize.cpp, the parity
test's tool). Needs: cmake --build BUILD --target zt_tokenize, python3 with tokenizers and
sentencepiece (scripts/install-deps.sh --hf-peers).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NAMES = ["gpt2", "llama3", "tinyllama", "metaspace", "spm_bpe", "spm_unigram"]


def fnv1a(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def peer(folder, corpus_path, threads, fast):
    """One timed run of the Python peer (a child process: RAYON_NUM_THREADS is set before
    import). Timed: the batch call alone (encode_batch returns Encoding objects; their ids
    are read after the clock stops). fast: encode_batch_fast (no offsets; tokenizers >= 0.21)."""
    corpus = open(corpus_path, "rb").read()
    docs = corpus.split(b"\n\n")
    texts = [d.decode("utf-8", errors="replace") for d in docs]
    if os.path.exists(os.path.join(folder, "tokenizer.model")):
        import sentencepiece as spm
        sp = spm.SentencePieceProcessor(model_file=os.path.join(folder, "tokenizer.model"))
        run = lambda: sp.encode(texts, num_threads=threads)  # noqa: E731
        ids_of = lambda out: out  # noqa: E731
    else:
        import tokenizers
        tok = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        batch = tok.encode_batch_fast if fast else tok.encode_batch
        run = lambda: batch(texts, add_special_tokens=False)  # noqa: E731
        ids_of = lambda out: [e.ids for e in out]  # noqa: E731
    run()
    t0 = time.perf_counter()
    out = run()
    seconds = time.perf_counter() - t0
    ids = ids_of(out)
    text = "\n".join(" ".join(map(str, x)) for x in ids).encode()
    print(json.dumps({"seconds": [seconds], "docs": len(docs), "bytes": len(corpus),
                      "tokens": sum(len(x) for x in ids), "ids_hash": fnv1a(text)}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build-cpu"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--copies", type=int, default=4)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "tokenizer-vs-hf.md"))
    ap.add_argument("--peer", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.peer:
        peer(a.peer[0], a.peer[1], int(a.peer[2]), a.peer[3] == "fast")
        return 0
    import sentencepiece
    import tokenizers
    zt_bench = os.path.join(a.build, "tests", "data", "zt_tokenize")
    if not os.access(zt_bench, os.X_OK):
        print(f"run_vs_hf.py: {zt_bench} not found. HINT: cmake --build {a.build} --target zt_tokenize")
        return 2
    threads = [int(t) for t in a.threads.split(",")]
    tmp = tempfile.mkdtemp(prefix="zt-tok-bench-")
    shipped = os.path.join(ROOT, "data", "tinyshakespeare.txt")
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "data", "tokenizers", "make_tokenizers.py"),
                    tmp, shipped], check=True)
    corpus = os.path.join(tmp, "bench-corpus.txt")
    open(corpus, "wb").write(open(shipped, "rb").read() * a.copies)
    load_before = os.getloadavg()
    rows, all_runs = [], []
    for name in NAMES:
        folder = os.path.join(tmp, name)
        for t in threads:
            fast_too = not name.startswith("spm") and hasattr(tokenizers.Tokenizer, "encode_batch_fast")
            zs, ps, fs, info = [], [], [], None
            for _ in range(a.runs):
                z = json.loads(subprocess.run([zt_bench, "--bench", folder, corpus, str(t), "1"], check=True,
                                              stdout=subprocess.PIPE).stdout)
                info = z
                for mode, into in (("batch", ps), ("fast", fs)):
                    if mode == "fast" and not fast_too:
                        continue
                    p = json.loads(subprocess.run([sys.executable, __file__, "--peer", folder, corpus, str(t), mode],
                                                  check=True, stdout=subprocess.PIPE,
                                                  env=dict(os.environ, RAYON_NUM_THREADS=str(t),
                                                           TOKENIZERS_PARALLELISM="true")).stdout)
                    if (z["tokens"], z["ids_hash"]) != (p["tokens"], p["ids_hash"]):
                        print(f"{name}: zt and the peer ({mode}) encode differently: {z} vs {p}")
                        return 1
                    into.append(p["seconds"][0])
                zs.append(z["seconds"][0])
            mb = info["bytes"] / 1e6
            zm, pm = statistics.median(zs), statistics.median(ps)
            fm = statistics.median(fs) if fs else None
            rows.append((name, t, mb / zm, mb / pm, pm / zm, mb / fm if fm else None, fm / zm if fm else None,
                         info["tokens"] / zm / 1e6))
            all_runs.append((name, t, zs, ps, fs))
            print(f"{name} threads {t}: zt {mb / zm:.2f} MB/s, peer {mb / pm:.2f} MB/s, ratio {pm / zm:.2f}"
                  + (f", fast {mb / fm:.2f} MB/s ratio {fm / zm:.2f}" if fm else ""), flush=True)
    load_after = os.getloadavg()
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"], stdout=subprocess.PIPE,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           stdout=subprocess.PIPE, text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
               platform.processor())
    lines = [
        "# Tokenizer batch encode: zt vs Hugging Face tokenizers and sentencepiece", "",
        f"Corpus: data/tinyshakespeare.txt x {a.copies} = {info['bytes'] / 1e6:.2f} MB, {info['docs']} documents "
        "(cut at blank lines). Tokenizers: tests/data/tokenizers/make_tokenizers.py, trained on the shipped "
        "corpus (gpt2 800 ids, llama3 900, tinyllama and metaspace 959, spm_bpe and spm_unigram 600).",
        f"zt: `zt_tokenize --bench` (zt::data::encode_batch, C++ threads; PCRE2 JIT, libsentencepiece). Peers: "
        f"tokenizers {tokenizers.__version__} `Tokenizer.encode_batch(add_special_tokens=False)` "
        f"(RAYON_NUM_THREADS=threads), sentencepiece {sentencepiece.__version__} `encode(list, num_threads=threads)`. "
        "Both sides produce the same ids (hash checked every run).", "",
        f"- Machine: {cpu}, {os.cpu_count()} cores (`nproc`)",
        f"- Commit: {commit}{' (with uncommitted changes)' if dirty else ''}",
        f"- Command: `bench/tokenizer/run_vs_hf.py --threads {a.threads} --runs {a.runs} --copies {a.copies}`",
        f"- Load average (1/5/15 min) before: {' '.join(f'{x:.2f}' for x in load_before)}, after: "
        f"{' '.join(f'{x:.2f}' for x in load_after)} (the machine is shared; zt and the peer alternate)",
        f"- Runs: {a.runs} per side, tokenizer and thread count, each a fresh process (load, warm-up, one timed "
        "encode of the whole corpus); figures are medians", "",
        "Speed is the inverse of the median wall time of one encode of the whole corpus; "
        "`zt / peer` is how many times faster zt is (peer time / zt time). The peer's "
        "`encode_batch` returns Encoding objects with offsets (what transformers' fast tokenizers call); "
        "`encode_batch_fast` skips the offsets. For sentencepiece the peer is `encode(list, num_threads)`.", "",
        "| tokenizer | threads | zt MB/s | peer MB/s (encode_batch / sentencepiece) | zt / peer | "
        "peer encode_batch_fast MB/s | zt / fast | zt Mtokens/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, t, z, p, r, f, rf, tok in rows:
        lines.append(f"| {name} | {t} | {z:.2f} | {p:.2f} | {r:.2f} | {f'{f:.2f}' if f else '-'} | "
                     f"{f'{rf:.2f}' if rf else '-'} | {tok:.2f} |")
    lines += ["", "All runs (seconds):", ""]
    for name, t, zs, ps, fs in all_runs:
        lines.append(f"- {name}, {t} thread(s): zt [{', '.join(f'{x:.3f}' for x in zs)}]; "
                     f"peer [{', '.join(f'{x:.3f}' for x in ps)}]"
                     + (f"; peer fast [{', '.join(f'{x:.3f}' for x in fs)}]" if fs else ""))
    open(a.out, "w").write("\n".join(lines) + "\n")
    print("wrote " + a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
