#!/bin/sh
# Runs a command and checks how it ended, for the CLI tests of `zt check`.
# Usage: expect.sh CODE REGEX [--clean DIR] [--file PATH]... -- COMMAND [ARGS...]
#   CODE   the exit code the command must return
#   REGEX  an extended regex its combined stdout+stderr must match ("" matches anything)
#   --clean DIR   remove DIR before running
#   --file PATH   PATH must exist, non-empty, afterwards
#   --contains PATH REGEX   PATH must exist afterwards and match the extended REGEX
set -u
want_code=$1
regex=$2
shift 2
files=""
contains=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    --clean) rm -rf "$2"; shift 2 ;;
    --file) files="$files $2"; shift 2 ;;
    --contains) contains="$contains$2|$3
"; shift 3 ;;
    *) echo "expect.sh: unknown option $1" >&2; exit 99 ;;
  esac
done
[ $# -gt 0 ] && shift  # the --
out=$("$@" 2>&1)
code=$?
status=0
if [ "$code" -ne "$want_code" ]; then
  echo "FAIL: exit code $code, wanted $want_code" >&2
  status=1
fi
if [ -n "$regex" ] && ! printf '%s\n' "$out" | grep -Eq -- "$regex"; then
  echo "FAIL: output does not match /$regex/" >&2
  status=1
fi
for f in $files; do
  if [ ! -s "$f" ]; then
    echo "FAIL: $f missing or empty" >&2
    status=1
  fi
done
while IFS='|' read -r path pattern; do
  [ -z "$path" ] && continue
  if ! grep -Eq -- "$pattern" "$path" 2>/dev/null; then
    echo "FAIL: $path does not match /$pattern/" >&2
    status=1
  fi
done <<END_OF_LIST
$contains
END_OF_LIST
if [ $status -ne 0 ]; then
  echo "---- command: $*" >&2
  printf '%s\n' "$out" | tail -n 40 >&2
fi
exit $status
