#!/usr/bin/env bash
# Issue 36, class 6, memory that follows the work, measured by GNU time's peak RSS:
# 1. text-to-tokens --tokenizer of a 50 MB one-line file (a byte-level tokenizer.json):
#    read and encoded in pieces cut at spaces, peak RSS under 1,000 MB (main's binary:
#    1,611 MB, reading it whole: 33 bytes per byte); one token per byte + EOS (the
#    tokenizer has no merges; tokenizer_parity compares the ids of pieces with Python's).
# 2. sft-to-tokens keeps --seq-len + 1 tokens of an example, so memory and
# time follow the row, not the example. A 30 MB response with --seq-len 64: peak RSS (GNU
# time) under 600 MB (main's binary: 997 MB, 3.8 s; 33 bytes per byte), and the row
# written equals the row of the same example with its response cut to 2,000 bytes (which
# is encoded whole, the path tokenizer_parity compares with Python's tokenizers), read
# back by h5py.
# 3. Where memory would not suffice (here: ulimit -v 2000000, a 300 MB input), both
#    converters exit 2 before reading, naming the file, the bytes needed (the documented
#    estimate, computed here: text-to-tokens 12 bytes per input byte + 96 MiB with the byte
#    tokenizer; sft-to-tokens 10 per byte + 64 MiB) and the bytes available, with a hint;
#    no output is written.
# Usage: convert_memory_test.sh ZT_BINARY TOKENIZER_DIR
set -uo pipefail
zt="$(realpath "$1")"
tok="$(realpath "$2")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
py=/usr/bin/python3  # Debian's, with h5py (the independent reader)
[[ -x /usr/bin/time ]] || { echo "SKIPPED: GNU time (/usr/bin/time) is not installed"; exit 77; }
$py - <<'PY'
import json
line = "All the world's a stage, and all the men and women merely players. "
big = line * (30_000_000 // len(line))
with open("big.jsonl", "w") as f:
    f.write(json.dumps({"prompt": "Say it:", "response": big}) + "\n")
    f.write(json.dumps({"prompt": "Hi", "response": "there"}) + "\n")
with open("cut.jsonl", "w") as f:
    f.write(json.dumps({"prompt": "Say it:", "response": big[:2000]}) + "\n")
    f.write(json.dumps({"prompt": "Hi", "response": "there"}) + "\n")
PY
$py -c '
line = "All the world is a stage, and all the men and women merely players. "
open("one.txt", "w").write(line * (50_000_000 // len(line)))'
/usr/bin/time -f "maxrss_kb %M" "$zt" convert text-to-tokens --tokenizer "$tok" one.txt one.h5 >one.log 2>&1 ||
  { cat one.log; echo "FAIL: text-to-tokens of the 50 MB line"; exit 1; }
rss=$(grep -o 'maxrss_kb [0-9]*' one.log | cut -d' ' -f2)
[[ $rss -lt 1000000 ]] || { echo "FAIL: peak RSS $rss KB for a 50 MB line (bound 1000000 KB)"; exit 1; }
$py - <<'PY' || exit 1
import h5py, os, sys
n = h5py.File("one.h5", "r")["tokens"].shape[0]
if n != os.path.getsize("one.txt") + 1:
    sys.exit(f"FAIL: {n} tokens, expected one per byte + EOS")
PY
echo "ok: text-to-tokens --tokenizer of a 50 MB line: exit 0, peak RSS $rss KB (bound 1000000), one token per byte + EOS"

run() { /usr/bin/time -f "maxrss_kb %M" "$zt" convert sft-to-tokens --tokenizer "$tok" --format prompt-response \
  --seq-len 64 "$1" "$2" >"$2.log" 2>&1; }
run big.jsonl big.h5 || { cat big.h5.log; echo "FAIL: sft-to-tokens of the 30 MB example exited $?"; exit 1; }
run cut.jsonl cut.h5 || { cat cut.h5.log; echo "FAIL: sft-to-tokens of the cut example"; exit 1; }
rss=$(grep -o 'maxrss_kb [0-9]*' big.h5.log | cut -d' ' -f2)
grep -q "1 truncated to a row" big.h5.log || { cat big.h5.log; echo "FAIL: the long example was not truncated"; exit 1; }
[[ $rss -lt 600000 ]] || { echo "FAIL: peak RSS $rss KB for a 30 MB example with --seq-len 64 (bound 600000 KB)"; exit 1; }
$py - <<'PY' || exit 1
import h5py, sys
a, b = h5py.File("big.h5", "r"), h5py.File("cut.h5", "r")
for k in ("tokens", "loss_mask", "doc_starts"):
    if not (a[k][:] == b[k][:]).all() or a[k].shape != b[k].shape:
        sys.exit(f"FAIL: /{k} of the 30 MB example differs from the cut example's")
print(f"ok: rows equal the cut example's ({a['tokens'].shape[0]} tokens)")
PY
echo "ok: sft-to-tokens of a 30 MB response, --seq-len 64: exit 0, peak RSS $rss KB (bound 600000)"

# 3. Refusals by bytes, before anything is read (sparse 300 MB inputs).
truncate -s 300000000 huge.txt huge.jsonl
refused() {  # NAME EXPECTED_BYTES ARGS...
  local name=$1 need=$2
  shift 2
  bash -c 'ulimit -v 2000000; exec "$0" "$@"' "$zt" convert "$@" >"$name.log" 2>&1
  local rc=$?
  [[ $rc -eq 2 ]] || { cat "$name.log"; echo "FAIL: $name under ulimit -v 2000000 exited $rc, expected 2"; exit 1; }
  grep -q "ERROR: $name of 'huge\.[a-z]*' (300000000 bytes) needs about $need bytes (.*); .*left under the address-space limit (ulimit -v" "$name.log" &&
    grep -q "HINT: convert the input in smaller files" "$name.log" ||
    { cat "$name.log"; echo "FAIL: $name's refusal does not name the file, $need bytes and the room"; exit 1; }
  [[ ! -e "$name.h5" ]] || { echo "FAIL: $name wrote its output"; exit 1; }
  echo "ok: $name of a 300 MB file under ulimit -v 2000000: exit 2, $(grep -o 'needs about [0-9]* bytes' "$name.log")"
}
refused text-to-tokens $((12 * 300000000 + 96 * 1048576)) text-to-tokens huge.txt text-to-tokens.h5
refused sft-to-tokens $((10 * 300000000 + 64 * 1048576)) sft-to-tokens --tokenizer "$tok" --format chat --seq-len 64 huge.jsonl sft-to-tokens.h5
