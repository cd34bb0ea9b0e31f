#!/usr/bin/env bash
# `zt generate`'s memory follows the work, not the declared context (issue 36, class 6).
# A 1-layer model (hidden 64, 2 key/value heads of 32) declaring model.context = 4194304,
# every run under an address-space limit of 2 GB (ulimit -v 2000000):
#  1. 3 new tokens after a 2-byte prompt: exit 0, 3 tokens, peak RSS (/usr/bin/time -v)
#     under 400 MB. A cache sized by the context (2 x 4 bytes x 64 x 4194304 = 2.0 GiB,
#     before this fix) cannot be allocated under the limit.
#  2. a 20,000-byte prompt, 1 new token: exit 0. One decode of the whole prompt keeps
#     [heads, T, T] fp32 scores (2 x 4 x 20000^2 = 3.2 GB, before this fix); the prefill
#     runs in chunks (train::kPrefillChunk).
#  3. --max-new-tokens 3000000: refused before allocating, exit 2, naming the bytes of the
#     cache computed here (2 x 4 bytes x attention layers x key/value dims x (prompt + new
#     tokens)) and the limit.
# Usage: generate_memory_test.sh ZT_BINARY
set -uo pipefail
zt="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
log="$work/log"
fail() { echo "FAIL: $*"; echo "---- output ----"; cat "$log"; exit 1; }
[[ -x /usr/bin/time ]] || { echo "SKIPPED: /usr/bin/time (GNU time) is missing"; exit 77; }

python3 -c "print('ROMEO: a small text for the tokens.\n' * 40, end='')" > "$work/in.txt"
"$zt" convert text-to-tokens "$work/in.txt" "$work/tokens.h5" >"$log" 2>&1 || fail "text-to-tokens"
"$zt" train --set model.hidden=64 --set model.layers=1 --set model.heads=2 --set model.kv_heads=2 \
  --set model.intermediate=64 --set model.context=4194304 --set train.seq_len=16 \
  --set train.micro_batch=2 --set train.global_batch=2 --set train.steps=1 --set sample.tokens=0 \
  --set eval.every=0 --set data.eval_fraction=0 --set train.peak_tflops=1 --set train.threads=1 \
  --set "data.path=$work/tokens.h5" --set "ckpt.dir=$work/ck" >"$log" 2>&1 || fail "zt train"

gen() {  # gen ARGS...: zt generate under the limit, GNU time's report in $work/time
  /usr/bin/time -v -o "$work/time" bash -c 'ulimit -v 2000000; exec "$0" "$@"' "$zt" generate \
    --weights "$work/ck" --threads 1 --temperature 0 --json "$@" >"$log" 2>&1
}

gen --prompt ab --max-new-tokens 3
rc=$?
rss_kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time")
echo "generate_memory (3 tokens, context 4194304): exit $rc, peak RSS ${rss_kb} kB"
[[ $rc -eq 0 ]] || fail "exit $rc, expected 0"
python3 -c "import json,sys; j=json.loads(next(l for l in open(sys.argv[1]) if l.startswith('{'))); sys.exit(len(j['ids']) != 3)" "$log" ||
  fail "not 3 tokens"
[[ -n "$rss_kb" && "$rss_kb" -lt 400000 ]] || fail "peak RSS ${rss_kb} kB, expected < 400000"

gen --prompt "$(python3 -c "print('ab' * 10000, end='')")" --max-new-tokens 1
rc=$?
rss_kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time")
echo "generate_memory (20000-token prompt): exit $rc, peak RSS ${rss_kb} kB"
[[ $rc -eq 0 ]] || fail "exit $rc, expected 0"

gen --prompt ab --max-new-tokens 3000000
rc=$?
echo "generate_memory (3000000 tokens): exit $rc"
[[ $rc -eq 2 ]] || fail "exit $rc, expected 2"
cache=$((2 * 4 * 1 * 64 * (2 + 3000000)))
grep -q "ERROR: generating 3000000 new tokens after a 2-token prompt needs about [0-9]* bytes (.*a key/value cache of 3000002 positions x 1 attention layers x 64 key/value dims, $cache bytes.*ulimit -v" "$log" ||
  fail "no refusal naming the cache ($cache bytes) and the limit"
grep -q "HINT: generate fewer tokens (--max-new-tokens)" "$log" || fail "no hint"
grep -m1 "needs about" "$log"
echo "PASS"
