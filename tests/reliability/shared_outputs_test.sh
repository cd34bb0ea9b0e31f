#!/usr/bin/env bash
# Issue 36, classes 1, 3, 4 and 8: outputs two processes share, long paths, partial
# outputs, files that are not files. Each case has its expected exit code and message, and
# an oracle on the outcome (the files left, their bytes read back by h5py):
#  1. two runs, one ckpt.dir: the second is refused (exit 2) naming the holder's host and
#     pid; a lock left by a run killed with SIGKILL is taken over, saying so; two
#     text-to-tokens into one output: exactly one exits 0 with its own tokens, the other
#     exits 2 naming the holder (OUT.lock); a killed conversion's lock is taken over;
#     hf-to-h5 and sft-to-tokens into a held OUT: exit 2 naming the holder.
#  3. a ckpt.dir path of 264 characters: saves (mpirun -np 2, parallel HDF5) and resumes.
#  4. a folder holding shards of two exports is refused by hf-to-h5 (exit 2); the staging
#     file of a dead process is removed (and said), one of another host reported and kept;
#     SIGTERM to an export leaves no staging file.
#  8. `latest` a FIFO: generate, h5-to-hf and train ckpt.resume=auto exit 2 within 20 s;
#     ckpt.dir=/ and /usr/../etc, h5-to-hf into /: exit 2.
# Usage: shared_outputs_test.sh ZT_BINARY
set -uo pipefail
zt="$(realpath "$1")"
work="$(mktemp -d)"
trap 'kill -9 ${bg:-} 2>/dev/null; rm -rf "$work"' EXIT
cd "$work" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
py=/usr/bin/python3  # Debian's, with h5py (the independent reader)
log="$work/log"
fail() { echo "FAIL: $*"; echo "---- output ----"; cat "$log" 2>/dev/null; exit 1; }
expect() {  # RC REGEX WHAT: the last command's exit code and a line of its output
  [[ $rc -eq $1 ]] || fail "$3: exit $rc, expected $1"
  grep -Eq -- "$2" "$log" || fail "$3: no message matching /$2/"
  echo "ok: $3: exit $rc, $(grep -Em1 -o -- "$2" "$log")"
}
TINY=(--set model.hidden=32 --set model.layers=1 --set model.heads=2 --set model.kv_heads=2
      --set model.intermediate=64 --set model.context=32 --set train.seq_len=16
      --set train.micro_batch=2 --set train.global_batch=2 --set sample.tokens=0
      --set eval.every=0 --set data.eval_fraction=0 --set train.peak_tflops=1 --set train.threads=1)
for i in $(seq 1 60); do echo "ROMEO: a small text for the tokens, line $i."; done >in.txt
"$zt" convert text-to-tokens in.txt tokens.h5 >"$log" 2>&1 || fail "text-to-tokens"
train() { "$zt" train "${TINY[@]}" --set data.path=tokens.h5 "$@" </dev/null >"$log" 2>&1; }

# ---- 1. two runs, one ckpt.dir ------------------------------------------------------
"$zt" train "${TINY[@]}" --set data.path=tokens.h5 --set train.steps=1000000 --set ckpt.dir=race \
  </dev/null >long.log 2>&1 &
bg=$!
for _ in $(seq 1 200); do [[ -s race/zt.lock ]] && break; sleep 0.1; done
[[ -s race/zt.lock ]] || { log=long.log; fail "the long run took no lock on race/"; }
train --set train.steps=1 --set ckpt.dir=race
rc=$?
expect 2 "ckpt.dir 'race' is in use by another zt process: zt on host [^ ]+, pid $bg, started" \
  "a second run in the ckpt.dir of a live one"
grep -q "^step " "$log" && fail "the refused run trained"
kill -9 "$bg"; wait "$bg" 2>/dev/null; bg=
grep -q "pid" race/zt.lock || fail "the killed run's lock file is gone (the take-over is not tested)"
train --set train.steps=1 --set ckpt.dir=race --set ckpt.overwrite=true
rc=$?
expect 0 "took over the lock of a run that ended without releasing it \(zt on host [^ ]+, pid [0-9]+" \
  "a lock of a killed run"
[[ -e race/zt.lock ]] && fail "zt.lock left after a clean run"
ls race | grep -q '\.tmp' && fail "staging files left in race/: $(ls race)"

# Two text-to-tokens into one output, 6 rounds, started together (each input ~1 s of
# work, so they overlap): exactly one exits 0 and same.h5 holds its tokens (h5py), the
# other exits 2 naming the holder (the winner's pid) and the lock same.h5.lock; no lock
# or staging file is left.
head -c 15000000 /dev/urandom | base64 -w0 >a.txt
head -c 18000000 /dev/urandom | base64 -w0 >b.txt
for round in 1 2 3 4 5 6; do
  "$zt" convert text-to-tokens --force a.txt same.h5 >ta.log 2>&1 & pa=$!
  "$zt" convert text-to-tokens --force b.txt same.h5 >tb.log 2>&1 & pb=$!
  wait $pa; ra=$?; wait $pb; rb=$?
  got=$($py - <<'PY'
import h5py
a, b = open("a.txt", "rb").read(), open("b.txt", "rb").read()
t = bytes(h5py.File("same.h5", "r")["tokens"][:].astype("uint8"))
print("a" if t == a else "b" if t == b else "mixed")
PY
)
  if [[ $ra -eq 0 && $rb -eq 2 ]]; then win=a winpid=$pa log=tb.log
  elif [[ $rb -eq 0 && $ra -eq 2 ]]; then win=b winpid=$pb log=ta.log
  else log=ta.log; cat tb.log >>ta.log; fail "round $round: exits $ra (a) and $rb (b), expected one 0 and one 2"; fi
  [[ $got == "$win" ]] || fail "round $round: $win exited 0 but same.h5 holds '$got'"
  grep -Eq "output token file 'same.h5' is in use by another zt process: zt on host [^ ]+, pid $winpid, started [0-9-]+ [0-9:]+ UTC \(lock file 'same.h5.lock'\)" "$log" ||
    fail "round $round: the refused run does not name the holder (pid $winpid)"
  ls | grep -Eq 'same\.h5\.(tmp|lock)' && fail "round $round: staging or lock files left: $(ls | grep same)"
  echo "ok: round $round: $win exit 0 (its tokens in same.h5), the other exit 2, $(grep -Eo 'is in use by [^(]+' "$log")"
done
log="$work/log"
# A lock of a conversion killed with SIGKILL is taken over, saying so.
"$zt" convert text-to-tokens --force b.txt same.h5 >/dev/null 2>&1 & bg=$!
for _ in $(seq 1 200); do [[ -s same.h5.lock ]] && break; sleep 0.01; done
kill -9 $bg; wait $bg 2>/dev/null
[[ -e same.h5.lock ]] || fail "the killed conversion left no same.h5.lock to take over"
"$zt" convert text-to-tokens --force a.txt same.h5 >"$log" 2>&1
rc=$?
expect 0 "took over the lock of a run that ended without releasing it \(zt on host [^ ]+, pid $bg" \
  "text-to-tokens over the lock of a killed one"
[[ -e same.h5.lock ]] && fail "same.h5.lock left after a clean conversion"
rm -f same.h5.tmp.*

# ---- 3. long paths ------------------------------------------------------------------
long="$work/$(printf 'd%.0s' $(seq 1 120))/$(printf 'e%.0s' $(seq 1 120))/ck"
mkdir -p "$long"
np2() { mpirun -np 2 --oversubscribe --bind-to none "$zt" train "${TINY[@]}" --set data.path=tokens.h5 \
  --set train.global_batch=4 "$@" </dev/null >"$log" 2>&1; }
# Control: with Open MPI's lockedfile component back (a user's own OMPI_MCA_sharedfp wins),
# the first save aborts as in the issue: the case below is a real one.
OMPI_MCA_sharedfp=individual,sm,lockedfile np2 --set train.steps=1 --set ckpt.dir="$long/control"
rc=$?
[[ $rc -ne 0 ]] && grep -q "buffer overflow detected" "$log" ||
  fail "control: with the lockedfile component the long ckpt.dir did not abort (exit $rc)"
echo "ok: control: with OMPI_MCA_sharedfp=individual,sm,lockedfile: exit $rc, buffer overflow detected"
np2 --set train.steps=2 --set ckpt.dir="$long"
rc=$?
expect 0 "final loss" "ckpt.dir of ${#long} characters (mpirun -np 2)"
[[ -f "$long/step-2.h5" ]] || fail "no step-2.h5 in the long ckpt.dir"
np2 --set train.steps=3 --set ckpt.dir="$long" --set ckpt.resume=auto
rc=$?
expect 0 "resum" "resume from the long ckpt.dir"
[[ -f "$long/step-3.h5" ]] || fail "no step-3.h5 after resuming in the long ckpt.dir"

# ---- 4. partial outputs -------------------------------------------------------------
train --set train.steps=1 --set ckpt.dir=ckA || fail "train ckA"
train --set train.steps=1 --set ckpt.dir=ckB --set train.seed=7 || fail "train ckB"
"$zt" convert h5-to-hf --max-shard-size 4K ckA hfA >"$log" 2>&1 || fail "export A"
"$zt" convert h5-to-hf --max-shard-size 4K ckB hfB >"$log" 2>&1 || fail "export B"
[[ -f hfA/model.safetensors.index.json ]] || fail "export A is not sharded"
shard=$(ls hfA | grep -m1 -E 'model-[0-9]+-of-[0-9]+')
cp "hfB/$shard" "hfA/$shard"
"$zt" convert hf-to-h5 hfA mixed.h5 >"$log" 2>&1
rc=$?
expect 2 "shard '[^']*$shard' has zt_export_id [0-9a-f]+ but '[^']*' has [0-9a-f]+: the folder mixes files of two exports" \
  "hf-to-h5 of shards of two exports"
[[ -e mixed.h5 ]] && fail "mixed.h5 was written"
# A staging file of a process that is gone (this host), and one of another host.
sleep 0.1 & dead=$!; wait $dead
host=$(hostname)
head -c 4096 /dev/zero >"out.h5.tmp.$host.$dead"
head -c 4096 /dev/zero >"out.h5.tmp.otherhost.$$"
"$zt" convert hf-to-h5 hfB out.h5 >"$log" 2>&1
rc=$?
expect 0 "removed 'out.h5.tmp.$host.$dead', the staging file of a zt process \(pid $dead on this host\) that no longer runs" \
  "a dead process's staging file"
grep -q "out.h5.tmp.otherhost.$$' is the staging file of a zt process on host otherhost" "$log" ||
  fail "the other host's staging file was not reported"
[[ -e "out.h5.tmp.$host.$dead" ]] && fail "the dead process's staging file is still there"
[[ -e "out.h5.tmp.otherhost.$$" ]] || fail "the other host's staging file was removed"
# hf-to-h5 and sft-to-tokens take the same lock on their one output: held by another
# process (Python's POSIX lock, which the kernel sets against zt's OFD lock), both are
# refused with exit 2 naming the holder's text, before reading any input, and leave it.
$py -c 'import fcntl, sys, time
f = open("held.h5.lock", "w"); fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
f.write("zt on host elsewhere, pid 4242, started 2026-01-01 00:00:00 UTC\n"); f.flush(); time.sleep(60)' &
holder=$!
for _ in $(seq 1 200); do [[ -s held.h5.lock ]] && break; sleep 0.05; done
"$zt" convert hf-to-h5 hfB held.h5 >"$log" 2>&1
rc=$?
expect 2 "output file 'held.h5' is in use by another zt process: zt on host elsewhere, pid 4242, started 2026-01-01 00:00:00 UTC \(lock file 'held.h5.lock'\)" \
  "hf-to-h5 into an output another process holds"
"$zt" convert sft-to-tokens --tokenizer no-such-tokenizer --format alpaca --seq-len 16 in.txt held.h5 >"$log" 2>&1
rc=$?
expect 2 "output token file 'held.h5' is in use by another zt process: zt on host elsewhere, pid 4242" \
  "sft-to-tokens into an output another process holds"
kill $holder; wait $holder 2>/dev/null
[[ -e held.h5 ]] && fail "held.h5 was written"
grep -q 'pid 4242' held.h5.lock || fail "the holder's lock file was changed"
# SIGTERM during an export (a larger model, so that it is still writing): exit 143 and
# no staging file left; the folder is not loadable (visibly absent), never a mixture.
train --set train.steps=1 --set ckpt.dir=ckBig --set model.hidden=512 --set model.intermediate=2048 \
  --set model.layers=4 --set model.heads=8 --set model.kv_heads=8 || fail "train ckBig"
"$zt" convert h5-to-hf --force --max-shard-size 1M ckBig hfA >"$log" 2>&1 & pe=$!
for _ in $(seq 1 400); do ls hfA | grep -q '\.tmp\.' && break; sleep 0.005; done
kill -TERM $pe; wait $pe; rt=$?
ls hfA | grep -q '\.tmp' && fail "SIGTERM during h5-to-hf left staging files: $(ls hfA)"
if [[ $rt -ne 0 ]]; then
  [[ $rt -eq 143 ]] || fail "h5-to-hf after SIGTERM: exit $rt, expected 143 (or 0 when done first)"
  "$zt" convert hf-to-h5 --force hfA partial.h5 >"$log" 2>&1
  rc=$?
  [[ $rc -eq 2 ]] || fail "hf-to-h5 of an interrupted export: exit $rc, expected 2"
  echo "ok: SIGTERM during h5-to-hf: exit $rt, no staging file left ($(ls hfA | wc -l) files); hf-to-h5 of it: exit 2, $(grep -m1 -o 'ERROR: .*' "$log")"
else
  echo "ok: SIGTERM came after h5-to-hf finished (exit 0); no staging file left"
fi

# ---- 8. files that are not files ----------------------------------------------------
mkdir fifo-ck && cp ckA/step-1.h5 fifo-ck/ && mkfifo fifo-ck/latest
timeout 20 "$zt" generate --weights fifo-ck --prompt ab --max-new-tokens 2 --threads 1 </dev/null >"$log" 2>&1
rc=$?
expect 2 "'fifo-ck/latest' is a FIFO \(named pipe\), not a regular file" "generate with latest a FIFO"
timeout 20 "$zt" convert h5-to-hf fifo-ck hf-fifo </dev/null >"$log" 2>&1
rc=$?
expect 2 "'fifo-ck/latest' is a FIFO \(named pipe\), not a regular file" "h5-to-hf with latest a FIFO"
timeout 20 "$zt" train "${TINY[@]}" --set data.path=tokens.h5 --set train.steps=2 --set ckpt.dir=fifo-ck \
  --set ckpt.resume=auto </dev/null >"$log" 2>&1
rc=$?
expect 2 "'fifo-ck/latest' is a FIFO \(named pipe\), not a regular file" "train ckpt.resume=auto with latest a FIFO"
for d in / /usr/../etc; do
  train --set train.steps=1 --set ckpt.dir="$d"
  rc=$?
  expect 2 "ckpt.dir = '$d' is the system folder '/[a-z]*'" "ckpt.dir=$d"
done
"$zt" convert h5-to-hf ckA / >"$log" 2>&1
rc=$?
expect 2 "OUTDIR = '/' is the system folder '/'" "h5-to-hf into /"
echo "PASS"
