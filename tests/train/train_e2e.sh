#!/bin/sh
# train_e2e.sh WORKDIR LAUNCHER... ZT
# A short end-to-end `zt train` of tiny (np given by the launcher): the shipped corpus is
# converted into a fresh cache, every step prints its log line, the metrics JSONL has one
# object per step with the documented fields, eval runs on schedule, a sample is printed;
# a second run finds the cache and does not convert again.
set -u
work=$1
shift
rm -rf "$work"
mkdir -p "$work"
export XDG_CACHE_HOME="$work/cache"
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }

out=$("$@" train --set train.steps=6 --set train.seq_len=32 --set train.micro_batch=4 \
  --set train.global_batch=8 --set eval.every=3 --set eval.batches=1 --set sample.tokens=40 \
  --set log.every=1 --set "log.metrics=$work/metrics.jsonl" --set "ckpt.dir=$work/ck" 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" = 0 ] || fail "exit $rc"
printf '%s\n' "$out" | grep -q "converting .*tinyshakespeare.txt" || fail "no first-use conversion"
ls "$XDG_CACHE_HOME"/zt/tinyshakespeare-bytes-*.h5 >/dev/null || fail "no cache file"
# The banner names device, precision, backend and NCCL (train.device = auto: cpu here).
printf '%s\n' "$out" | grep -Eq "^  device cpu, precision fp32, comm mpi \((NCCL not built in|NCCL [0-9.]+)\)" ||
  fail "no device line in the banner"
if ls "$XDG_CACHE_HOME"/zt/ | grep -q tmp; then fail "an intermediate .tmp file was left"; fi
# The default step line: the essentials in about 100 columns (log.verbose: the full one,
# train_zero_e2e.sh).
for s in 1 2 3 4 5 6; do
  line=$(printf '%s\n' "$out" | grep -E "^step +$s/6 \| loss [0-9.]+ \| lr [0-9.e+-]+ \| gnorm +[0-9.]+( clip)? \| +[0-9]+ tok/s \| MFU +[0-9.]+% \| [0-9.]+ s$") ||
    fail "no log line for step $s"
  [ "${#line}" -le 110 ] || fail "the step line of step $s has ${#line} columns: $line"
done
printf '%s\n' "$out" | grep -Eq "^eval  step 3 \| eval loss [0-9.]+" || fail "no eval at step 3"
printf '%s\n' "$out" | grep -Eq "^eval  step 6 \| eval loss [0-9.]+" || fail "no eval at step 6"
printf '%s\n' "$out" | grep -q "^ROMEO:" || fail "no sample"

m="$work/metrics.jsonl"
command -v python3 >/dev/null || fail "python3 not found: the JSON check of $m needs it (scripts/install-deps.sh installs it)"
# One run record first, then a record per step with the documented fields (and a
# checkpoint record after the final save): train/report.hpp, docs/training.md.
python3 - "$m" <<'PY' || fail "metrics check of $m"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert "run" in recs[0] and recs[0]["step"] == 0, recs[0]
assert recs[0]["run"]["model"] == "tiny" and recs[0]["run"]["ranks"] >= 1, recs[0]
steps = [r for r in recs if "run" not in r and "checkpoint" not in r]
assert [r["step"] for r in steps] == [1, 2, 3, 4, 5, 6], [r["step"] for r in steps]
for r in steps:
    for k in ("loss", "lr", "grad_norm", "tokens_per_s", "mfu", "rss_bytes", "peak_rss_bytes",
              "step_time_s", "tokens", "comm_intra_node_bytes", "comm_inter_node_bytes",
              "comm_bytes", "memory"):
        assert k in r, (k, r)
    assert "peak_total" in r["memory"] and "optimizer" in r["memory"], r["memory"]
assert [r["step"] for r in steps if "eval_loss" in r] == [3, 6], steps
ck = [r for r in recs if "checkpoint" in r]
assert [c["step"] for c in ck] == [6] and ck[0]["checkpoint"]["seconds"] >= 0, ck
PY

out=$("$@" train --set train.steps=1 --set train.seq_len=32 --set train.micro_batch=4 \
  --set train.global_batch=8 --set sample.tokens=0 --set "ckpt.dir=$work/ck2" 2>&1)
rc=$?
[ "$rc" = 0 ] || { printf '%s\n' "$out"; fail "second run: exit $rc"; }
if printf '%s\n' "$out" | grep -q "converting"; then fail "second run converted again"; fi
echo "ok"
