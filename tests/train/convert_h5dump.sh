#!/bin/sh
# convert_h5dump.sh WORKDIR ZT
# `zt convert text-to-tokens` output read back by h5dump (HDF5's own tool, independent
# of zt's reader): dtype, ids, attributes; no intermediate file left.
set -u
work=$1
zt=$2
command -v h5dump >/dev/null || { echo "SKIPPED: h5dump not installed (apt-get install hdf5-tools)"; exit 77; }
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }
rm -rf "$work"
mkdir -p "$work"
printf 'ROMEO:\nHi' > "$work/in.txt"
out=$("$zt" convert text-to-tokens "$work/in.txt" "$work/out.h5" 2>&1) || fail "convert: $out"
printf '%s\n' "$out"
printf '%s\n' "$out" | grep -q "9 tokens" || fail "summary does not say 9 tokens"
ls "$work" | grep -q 'out\.h5\.tmp' && fail "a staging file out.h5.tmp* left behind"
d=$(h5dump -d /tokens "$work/out.h5") || fail "h5dump -d /tokens"
printf '%s\n' "$d"
printf '%s\n' "$d" | grep -q "H5T_STD_U16LE" || fail "/tokens is not uint16"
printf '%s\n' "$d" | tr -d ' \n' | grep -q "(0):82,79,77,69,79,58,10,72,105" || fail "ids differ from the bytes of 'ROMEO:\\nHi'"
a=$(h5dump -a /vocab_size "$work/out.h5") || fail "no /vocab_size attribute"
printf '%s\n' "$a" | grep -q "(0): 256" || fail "vocab_size is not 256"
t=$(h5dump -a /tokenizer "$work/out.h5") || fail "no /tokenizer attribute"
printf '%s\n' "$t" | grep -q '"bytes"' || fail "tokenizer is not \"bytes\""
echo "ok"
