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
if ls "$XDG_CACHE_HOME"/zt/ | grep -q tmp; then fail "an intermediate .tmp file was left"; fi
for s in 1 2 3 4 5 6; do
  printf '%s\n' "$out" | grep -Eq "^step +$s/6 \| loss [0-9.]+ \| lr [0-9.e+-]+ \| grad norm +[0-9.]+.* tok/s \| MFU +[0-9.]+% \| mem [0-9.]+ MiB \(peak [0-9.]+ MiB\) \| comm intra [0-9.]+ [kMG]?B inter 0 B \| states [0-9.]+ MiB \+ work [0-9.]+ MiB \(peak [0-9.]+ MiB\)" ||
    fail "no log line for step $s"
done
printf '%s\n' "$out" | grep -Eq "^eval  step 3 \| eval loss [0-9.]+" || fail "no eval at step 3"
printf '%s\n' "$out" | grep -Eq "^eval  step 6 \| eval loss [0-9.]+" || fail "no eval at step 6"
printf '%s\n' "$out" | grep -q "^ROMEO:" || fail "no sample"

m="$work/metrics.jsonl"
[ "$(wc -l < "$m")" = 6 ] || fail "$m does not have 6 lines"
for f in '"step":' '"loss":' '"lr":' '"grad_norm":' '"tokens_per_s":' '"mfu":' '"rss_bytes":' \
         '"peak_rss_bytes":' '"step_time_s":' '"tokens":' '"comm_intra_node_bytes":' \
         '"comm_inter_node_bytes":' '"comm_bytes":' '"memory":' '"peak_total":' '"optimizer":'; do
  [ "$(grep -c "$f" "$m")" = 6 ] || fail "field $f is not on every line of $m"
done
[ "$(grep -c '"eval_loss":' "$m")" = 2 ] || fail "eval_loss is not on exactly 2 lines"
command -v python3 >/dev/null || fail "python3 not found: the JSON check of $m needs it (scripts/install-deps.sh installs it)"
python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$m" || fail "invalid JSON in $m"

out=$("$@" train --set train.steps=1 --set train.seq_len=32 --set train.micro_batch=4 \
  --set train.global_batch=8 --set sample.tokens=0 --set "ckpt.dir=$work/ck2" 2>&1)
rc=$?
[ "$rc" = 0 ] || { printf '%s\n' "$out"; fail "second run: exit $rc"; }
if printf '%s\n' "$out" | grep -q "converting"; then fail "second run converted again"; fi
echo "ok"
