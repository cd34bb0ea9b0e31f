#!/usr/bin/env bash
# bare_root.sh CMD...: run CMD in a minimal Debian root (debootstrap --variant=minbase
# bookworm + python3; no Open MPI, HDF5 or -dev packages), as the lent GPU machine is bare:
# the checkout bound at its own path, /usr/local/cuda bound in (the device has its toolkit),
# /proc, /dev, /sys, a fresh /dev/shm and /tmp; the variables ZT_KIT_* and OUT pass in, no
# others. The root is made once and cached as a tarball in
# ZT_KIT_CACHE (default ~/.cache/zt-kit; making it needs network and debootstrap), unpacked
# there once; each call runs on a fresh overlay of it (nothing written reaches the cache). Exit 77 (SKIPPED) when it cannot be made here (not root, no
# debootstrap, no network).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${ZT_KIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/zt-kit}
tarball=$cache/bookworm-minbase-python3.tar.gz
skip() { echo "SKIPPED: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "the bare root needs root (chroot, mounts)"
command -v unshare >/dev/null || skip "no unshare (util-linux)"
if [ ! -f "$tarball" ]; then
  command -v debootstrap >/dev/null || skip "no debootstrap to make the bare root (apt-get install debootstrap)"
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/root.XXXXXX")
  echo "bare_root: making the root once (debootstrap --variant=minbase --include=python3 bookworm)" >&2
  debootstrap --variant=minbase --include=python3 bookworm "$tmp" http://deb.debian.org/debian \
    >"$cache/debootstrap.log" 2>&1 || { rm -rf "$tmp"; skip "debootstrap failed (no network?): $cache/debootstrap.log"; }
  tar -C "$tmp" -czf "$tarball.part" . && mv "$tarball.part" "$tarball"
  rm -rf "$tmp"
fi
lower=$cache/root
if [ ! -x "$lower/usr/bin/python3" ]; then
  rm -rf "$lower" "$lower.part" && mkdir -p "$lower.part" && tar -C "$lower.part" -xzf "$tarball" &&
    mv "$lower.part" "$lower"
fi
run=$(mktemp -d "${TMPDIR:-/tmp}/zt-bare.XXXXXX")
trap 'rm -rf --one-file-system "$run"' EXIT
mkdir -p "$run/upper" "$run/work" "$run/root"
root=$run/root
cuda=$(readlink -f /usr/local/cuda)
export ROOT=$root REPO=$repo CUDA=$cuda LOWER=$lower RUN=$run
# a private mount namespace: the mounts vanish with it
unshare -m --propagation private -- bash -c '
  set -e
  mount -t overlay overlay -o "lowerdir=$LOWER,upperdir=$RUN/upper,workdir=$RUN/work" "$ROOT"
  mount -t proc proc "$ROOT/proc"
  mount --rbind /dev "$ROOT/dev"
  mount --rbind /sys "$ROOT/sys"
  mount -t tmpfs -o size=4g tmpfs "$ROOT/dev/shm"
  mount -t tmpfs -o size=8g tmpfs "$ROOT/tmp"
  mkdir -p "$ROOT$REPO" "$ROOT/usr/local/cuda"
  mount --bind "$REPO" "$ROOT$REPO"
  [ -d "$CUDA" ] && mount --bind -o ro "$CUDA" "$ROOT/usr/local/cuda"
  cp /etc/hosts /etc/resolv.conf "$ROOT/etc/" 2>/dev/null || true
  pass=()
  for v in $(compgen -e); do case "$v" in ZT_KIT_*|OUT) pass+=("$v=${!v}") ;; esac; done
  exec chroot "$ROOT" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root \
    TERM=dumb LANG=C.UTF-8 "${pass[@]}" bash -c "cd \"$REPO\" && $*"
' bare_root "$@"
