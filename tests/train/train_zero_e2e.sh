#!/bin/sh
# train_zero_e2e.sh WORKDIR LAUNCHER... ZT
# `zt train` at ZeRO stage 3 with hpZ, qwZ and qgZ on 2 simulated nodes of 2 ranks
# (launcher at np 4): it trains (the loss falls), every step line and metrics object
# carries intra- and inter-node bytes (both nonzero: the job spans two nodes) and the
# engine's memory, evaluation and the sample (collective at stage 3) run on every rank.
set -u
work=$1
shift
rm -rf "$work"
mkdir -p "$work"
export XDG_CACHE_HOME="$work/cache"
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }

out=$("$@" train --ranks-per-node 2 --set zero.stage=3 --set zero.hpz_partition_size=2 \
  --set zero.quantize_weights=true --set zero.quantize_grads=true \
  --set train.steps=8 --set train.seq_len=32 --set train.micro_batch=2 \
  --set train.global_batch=16 --set train.warmup=2 --set eval.every=4 --set eval.batches=1 \
  --set sample.tokens=20 --set "log.metrics=$work/metrics.jsonl" --set "ckpt.dir=$work/ck" \
  --set log.verbose=true 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" = 0 ] || fail "exit $rc"
printf '%s\n' "$out" | grep -Eq "zero: stage 3, 2 nodes x 2 ranks \(simulated on one host" || fail "no zero header"
for s in 1 2 3 4 5 6 7 8; do
  printf '%s\n' "$out" | grep -Eq "^step +$s/8 \| .* \| comm intra [0-9.]+ [kMG]?B inter [0-9.]+ [kMG]?B \| states [0-9.]+ MiB \+ work [0-9.]+ MiB \(peak [0-9.]+ MiB\)" ||
    fail "no log line for step $s"
done
printf '%s\n' "$out" | grep -Eq "^step +[0-9]+/8 .* inter 0 B" && fail "a step moved no inter-node bytes"
printf '%s\n' "$out" | grep -Eq "^eval  step 8 \| eval loss [0-9.]+" || fail "no eval at step 8"
printf '%s\n' "$out" | grep -q "^ROMEO:" || fail "no sample"

m="$work/metrics.jsonl"
[ "$(grep -c '"loss":' "$m")" = 8 ] || fail "$m does not have 8 step records"
# The metrics and the falling-loss check need python3 (scripts/install-deps.sh installs it).
command -v python3 >/dev/null || fail "python3 not found: the metrics and falling-loss checks need it (scripts/install-deps.sh installs it)"
python3 - "$m" <<'PY' || fail "metrics check"
import json, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "loss" in r]
for r in rows:
    assert r["comm_intra_node_bytes"] > 0 and r["comm_inter_node_bytes"] > 0, r
    g = r["comm_bytes"]
    assert g["cross"] > 0 and g["node"] > 0 and g["hpz"] > 0, g
    mem = r["memory"]
    assert mem["full_params"] == 0 and mem["param_shards"] > 0 and mem["secondary_shards"] > 0, mem
    assert mem["peak_total"] >= mem["total"] > 0, mem
# Every step moves the same bytes; the evaluation's own gathers are not counted, but the
# step after one (step 5) differs: the evaluation's primary gathers already filled the
# hpZ secondaries, so its forward gathers within the hpZ group (fp32, not qwZ).
for k in ("comm_intra_node_bytes", "comm_inter_node_bytes"):
    assert len({r[k] for r in rows if r["step"] != 5}) == 1, [r[k] for r in rows]
assert rows[4]["comm_inter_node_bytes"] < rows[3]["comm_inter_node_bytes"], rows[4]
assert rows[-1]["loss"] < rows[0]["loss"] - 0.3, (rows[0]["loss"], rows[-1]["loss"])
print("metrics ok: loss %.4f -> %.4f, step 8 intra %d B inter %d B" % (
    rows[0]["loss"], rows[-1]["loss"], rows[-1]["comm_intra_node_bytes"],
    rows[-1]["comm_inter_node_bytes"]))
PY
echo "ok"
