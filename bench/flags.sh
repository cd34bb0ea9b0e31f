# Sourced by the bench scripts: bench_flags USAGE_RANGE "$@" parses `--name VALUE` pairs
# into the shell variables named after the flags (dashes become underscores). Only names
# the script already set (its defaults) are flags; anything else prints the script's
# usage (the sed range USAGE_RANGE of its header, e.g. 2,14p) and exits 2.
bench_flags() {
  local usage=$1
  shift
  while (($#)); do
    local name=${1#--}
    name=${name//-/_}
    if [[ $1 != --* || -z ${!name+x} || $# -lt 2 ]]; then
      sed -n "$usage" "$0" | sed 's/^# \{0,1\}//' >&2
      exit 2
    fi
    printf -v "$name" '%s' "$2"
    shift 2
  done
}
