#!/usr/bin/env bash
# The GPU kit (issue 33, docs/gpu-verification.md): everything the GPU lines need, built and
# packed here, run in ONE device call on a bare CUDA machine (no network, no Open MPI/HDF5).
#
#   scripts/gpu-kit.sh pack     here: build zt + the GPU test binaries for sm_90 (build-kit/,
#                               or ZT_KIT_BUILD=<build dir>), strip them, pack them with the
#                               Debian libraries they link (not glibc/libstdc++/libgcc_s, not
#                               CUDA's), a relocated Open MPI launcher (orterun + PMIx, from an
#                               unpacked folder via OPAL_* / PMIX_* variables) into
#                               .carry/gpu-kit/kit.tar.gz; prints its size against 64 MiB
#   scripts/gpu-kit.sh run      on the device (carry [".carry/gpu-kit"]): unpack, find the CUDA
#                               libraries, print versions + nvidia-smi, refuse if one is missing,
#                               then every GPU line under its own timeout, one
#                               `PASS|FAIL|SKIP <line>: figures` each; logs + summary to $OUT
#   scripts/gpu-kit.sh exec CMD...   CMD with the kit unpacked and its environment
#   scripts/gpu-kit.sh lines [LINE...]  the lines alone (all, or those named), with zt and the
#                               test binaries of ZT_KIT_ZT / ZT_KIT_TESTS and the mpirun on PATH
#                               (tests/train/engine_on_device.sh runs its build's this way)
# Environment: ZT_KIT_DEVICE=cpu runs every engine line with the device replaced by the CPU
# (cuda->cpu, nccl->mpi, bf16->fp32): the dry run of issue 35 item 6. ZT_KIT_LIB_DIRS replaces
# the CUDA library search path (tests hide a library with it). ZT_KIT_DROP (pack): a regex of
# libraries to leave out of the kit, to plant a failure. ZT_KIT_LINES: the lines to run.
# ZT_KIT_BUDGET: seconds for all lines (480); ZT_KIT_SLOW: a factor on each line's limit
# (the dry run on a loaded 2-core machine: the CPU references of 4 ranks take longer).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
self=$repo/scripts/gpu-kit.sh
kitdir=${ZT_KIT_DIR:-$repo/.carry/gpu-kit}
cmd=${1:-}
[ $# -gt 0 ] && shift
limit=$((64 * 1024 * 1024))

# Libraries that the device has of its own (newer there) or that come from CUDA: never packed.
keep_out='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnccl|libcudnn|libnvidia|libnvrtc|libnvJitLink)\.'
# Open MPI / PMIx plugins for networks a single host does not use (and their heavy libraries).
net_libs='libfabric|libucp|libucs|libuct|libucm|libibverbs|librdmacm|libpsm|libpmi\.|libpmi2|libhcoll|libnl-'

die() { echo "gpu-kit: $*" >&2; exit 2; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
# (the device and the bare root have coreutils, awk, tar, gzip and ldd; not bc, procps or git)

# deps FILE...: the resolved paths of the libraries FILEs link (transitively), minus keep_out.
deps() {
  ldd "$@" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u |
    while read -r name path; do
      [[ $name =~ $keep_out ]] && continue
      echo "$name $path"
    done
}

do_pack() {
  local build=${ZT_KIT_BUILD:-$repo/build-kit}
  local targets=(zt test_kernels_cuda test_comm_nccl test_device_moe_ep device_stuck_main)
  if command -v ccache >/dev/null; then  # a rebuild of the kit reuses what ccache holds
    export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
    export CMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER:-ccache}
    export CMAKE_CUDA_COMPILER_LAUNCHER=${CMAKE_CUDA_COMPILER_LAUNCHER:-ccache}
  fi
  if [ ! -f "$build/CMakeCache.txt" ]; then
    mkdir -p "$build"
    cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DZT_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DZT_WERROR=ON -DZT_BUILD_BENCH=OFF >"$build/kit-configure.log" 2>&1 ||
      { tail -20 "$build/kit-configure.log"; die "configure of $build failed (log $build/kit-configure.log)"; }
  fi
  grep -qE '^ZT_NCCL_LIBRARY:FILEPATH=/' "$build/CMakeCache.txt" || die "$build is not a CUDA build (no NCCL found at configure: -DZT_CUDA=ON needs nvcc and NCCL)"
  cmake --build "$build" --target "${targets[@]}" -j"$(nproc)" >"$build/kit-build.log" 2>&1 ||
    { tail -30 "$build/kit-build.log"; die "build failed (log $build/kit-build.log)"; }
  echo "pack: built ${targets[*]} in $build (CUDA archs $(grep -o 'CMAKE_CUDA_ARCHITECTURES:[A-Z]*=.*' "$build/CMakeCache.txt" | cut -d= -f2))"

  local st
  st=$(mktemp -d)
  trap 'rm -rf "$st"' RETURN
  local k=$st/zt-kit
  mkdir -p "$k"/{bin,lib/openmpi3,lib/pmix,share,etc}
  cp "$build/src/apps/zt" "$build/tests/kernels_cuda/test_kernels_cuda" \
     "$build/tests/kernels_cuda/test_device_moe_ep" \
     "$build/tests/comm/test_comm_nccl" "$build/tests/reliability/device_stuck_main" "$k/bin/" ||
    die "a binary is missing in $build"
  # the launcher: orterun (mpirun) and orted (forked by a singleton MPI_Init)
  cp "$(readlink -f "$(command -v orterun)")" "$k/bin/mpirun" || die "no orterun (Open MPI) here"
  cp "$(readlink -f "$(command -v orted)")" "$k/bin/orted" || die "no orted (Open MPI) here"
  local ompi_pkglib
  ompi_pkglib=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
  [ -d "$ompi_pkglib" ] || die "cannot find Open MPI's plugin folder (ompi_info --path pkglibdir)"
  local c
  for c in "$ompi_pkglib"/*.so; do
    # (not grep -q: under pipefail its early exit makes ldd die of SIGPIPE, and the plugin slip in)
    ldd "$c" 2>&1 | grep -E "$net_libs|not found" >/dev/null && continue
    cp "$c" "$k/lib/openmpi3/"
  done
  local pmix_lib pmix_plugins
  pmix_lib=$(ldd "$(command -v orterun)" "$ompi_pkglib/mca_pmix_ext3x.so" | awk '/libpmix\.so/ { print $3; exit }')
  pmix_plugins=$(dirname "$(readlink -f "$pmix_lib")")/pmix
  [ -d "$pmix_plugins" ] && cp "$pmix_plugins"/*.so "$k/lib/pmix/"
  cp -r /usr/share/openmpi "$k/share/openmpi"
  [ -d "$pmix_plugins/../../share/pmix" ] && cp -r "$pmix_plugins/../../share/pmix" "$k/share/pmix"
  cat >"$k/etc/openmpi-mca-params.conf" <<'EOF'
# zt GPU kit: one host, shared memory and TCP only (no fabric plugins are packed)
btl = self,vader,tcp
pml = ob1
plm = isolated
btl_vader_single_copy_mechanism = none
# yield while waiting: ranks sharing cores (B: 4 ranks; the dry run on 2 cores) otherwise spin
mpi_yield_when_idle = 1
rmaps_base_oversubscribe = 1
orte_allowed_exit_without_sync = 0
EOF
  # every Debian library the binaries, the launcher and the plugins link
  local n=0 name path
  while read -r name path; do
    if [ -n "${ZT_KIT_DROP:-}" ] && [[ $name =~ ${ZT_KIT_DROP} ]]; then
      echo "pack: leaving out $name (ZT_KIT_DROP)"; continue
    fi
    cp -L "$path" "$k/lib/$name" && n=$((n + 1))
  done < <(deps "$k"/bin/* "$k"/lib/openmpi3/*.so "$k"/lib/pmix/*.so 2>/dev/null)
  strip --strip-unneeded "$k"/bin/* "$k"/lib/*.so* "$k"/lib/openmpi3/*.so "$k"/lib/pmix/*.so 2>/dev/null
  git -C "$repo" rev-parse --short HEAD >"$k/commit" 2>/dev/null
  # the -march the CPU code was built for: `run` checks the device host's CPU has it
  sed -n 's/^ZT_MARCH:[A-Z]*=//p' "$build/CMakeCache.txt" >"$k/march"
  [ "$(cat "$k/march")" != native ] ||
    echo "pack: WARNING: built with ZT_MARCH=native: the kit may die with SIGILL on the device host's CPU"
  echo "pack: $n libraries, $(ls "$k/lib/openmpi3" | wc -l) Open MPI plugins, $(ls "$k/lib/pmix" | wc -l) PMIx plugins"
  mkdir -p "$kitdir"
  rm -f "$kitdir"/kit.tar.gz
  tar -C "$st" -czf "$kitdir/kit.tar.gz" zt-kit || die "tar failed"
  local kit tree
  kit=$(stat -c %s "$kitdir/kit.tar.gz")
  tree=$(cd "$repo" && git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
  printf 'pack: %s (%.1f MiB) + tree %.1f MiB = %.1f MiB of %d MiB\n' "$kitdir/kit.tar.gz" \
    "$(mib "$kit")" "$(mib "$tree")" "$(mib $((kit + tree)))" $((limit / 1048576))
  [ $((kit + tree)) -le $limit ] || die "kit + tree exceed 64 MiB: the device call would be refused"
}

# --- run: on the device ------------------------------------------------------------------

# The CUDA library folders: the toolkit's, the system's, and the Python environments'
# nvidia/*/lib (pip's nvidia-cublas, nvidia-cudnn-cu13, nvidia-nccl-cu13 ...).
lib_dirs() {
  if [ -n "${ZT_KIT_LIB_DIRS:-}" ]; then tr ':' '\n' <<<"$ZT_KIT_LIB_DIRS"; return; fi
  local d py
  for d in ${CUDA_HOME:-} /usr/local/cuda /usr/local/cuda-*; do
    for s in lib64 lib targets/x86_64-linux/lib; do [ -d "$d/$s" ] && echo "$d/$s"; done
  done
  for py in python3 /opt/torch/.venv/bin/python3; do
    command -v "$py" >/dev/null || continue
    "$py" - <<'EOF' 2>/dev/null
import glob, os, sys
for p in sys.path:
    for d in sorted(glob.glob(os.path.join(p, "nvidia", "*", "lib"))):
        print(d)
EOF
  done
  for d in /usr/lib/x86_64-linux-gnu /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do [ -d "$d" ] && echo "$d"; done
}

# find_lib SONAME: the first folder of lib_dirs holding it
find_lib() {
  local d
  while read -r d; do [ -e "$d/$1" ] && { echo "$d"; return 0; }; done < <(lib_dirs | awk '!seen[$0]++')
  return 1
}

kit_env() {  # KIT: the environment that makes the unpacked kit work from its folder
  local K=$1
  export OPAL_PREFIX=$K OPAL_EXEC_PREFIX=$K OPAL_BINDIR=$K/bin OPAL_SBINDIR=$K/bin \
    OPAL_LIBEXECDIR=$K/bin OPAL_LIBDIR=$K/lib OPAL_PKGLIBDIR=$K/lib/openmpi3 \
    OPAL_DATAROOTDIR=$K/share OPAL_DATADIR=$K/share OPAL_PKGDATADIR=$K/share/openmpi \
    OPAL_SYSCONFDIR=$K/etc
  export PMIX_INSTALL_PREFIX=$K PMIX_PREFIX=$K PMIX_MCA_mca_base_component_path=$K/lib/pmix
  export OMPI_MCA_mca_base_param_files=$K/etc/openmpi-mca-params.conf
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export PATH=$K/bin:$PATH ZT_DATA_DIR=$repo/data
}

do_unpack() {
  local K=${ZT_KIT_HOME:-/tmp/zt-kit}
  [ -f "$kitdir/kit.tar.gz" ] || die "no kit at $kitdir/kit.tar.gz: run scripts/gpu-kit.sh pack first (with network), then carry [\".carry/gpu-kit\"]"
  rm -rf "$K" && mkdir -p "$K" && tar -C "$K" --strip-components=1 -xzf "$kitdir/kit.tar.gz" ||
    die "cannot unpack $kitdir/kit.tar.gz into $K"
  echo "$K"
}

# cpu_check KIT: print the host's CPU and the -march the kit was built for; refuse (exit 2,
# one line) when the CPU lacks an instruction set of that level, before a binary dies of
# SIGILL. ZT_KIT_CPUINFO: another /proc/cpuinfo (the test's CPU without AVX2).
cpu_check() {
  local march info model flags need="" f lacking=""
  march=$(cat "$1/march" 2>/dev/null || echo unknown)
  info=${ZT_KIT_CPUINFO:-/proc/cpuinfo}
  model=$(awk -F': *' '/^model name/ { print $2; exit }' "$info")
  flags=" $(awk -F': *' '/^flags/ { print $2; exit }' "$info") "
  echo "cpu: ${model:-unknown} ($(grep -c '^processor' "$info") logical); kit built for -march=$march"
  case $march in  # GCC's levels, in /proc/cpuinfo's names (lzcnt is abm there)
    x86-64-v4) need="avx512f avx512bw avx512cd avx512dq avx512vl " ;&
    x86-64-v3) need+="avx avx2 bmi1 bmi2 f16c fma abm movbe xsave " ;&
    x86-64-v2) need+="cx16 lahf_lm popcnt sse4_1 sse4_2 ssse3" ;;
    native) echo "note: the kit was built for its build host's CPU (ZT_MARCH=native): not checked here" ;;
  esac
  for f in $need; do [[ $flags == *" $f "* ]] || lacking+="$f "; done
  [ -z "$lacking" ] || {
    echo "REFUSED: this host's CPU (${model:-unknown}) lacks ${lacking% } of -march=$march, the level the kit was built for; pack it again with -DZT_MARCH=<a lower level> in ZT_KIT_BUILD's configure"
    return 2
  }
}

# discover: print the GPU, the CUDA libraries and their versions; set LD_LIBRARY_PATH; refuse
# (exit 2, one line) when a library the binaries link is missing or lacks a symbol they use.
discover() {
  local K=$1 d so dirs=() missing undefined
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader |
      sed 's/^/gpu: /'
    gpu=1
  else
    echo "gpu: none visible (nvidia-smi $(command -v nvidia-smi >/dev/null && echo 'lists none' || echo 'absent'))"
    gpu=0
  fi
  local absent=""
  for so in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2 libcudnn.so.9; do
    if d=$(find_lib "$so"); then
      echo "lib: $so $(basename "$(readlink -f "$d/$so")") ($(stat -L -c %s "$d/$so") B) in $d"
      [[ " ${dirs[*]} " == *" $d "* ]] || dirs+=("$d")
    else
      echo "lib: $so not found"
      [ "$so" = libcudnn.so.9 ] || absent+="$so "
    fi
  done
  command -v nvcc >/dev/null && echo "nvcc: $(nvcc --version | grep -o 'release [0-9.]*')"
  local IFS=:
  export LD_LIBRARY_PATH="$K/lib:${dirs[*]}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  unset IFS
  # the binaries' RUNPATH (the build's /usr/local/cuda/lib) could hide a missing library from
  # ldd: what discovery did not find is missing too
  missing=$( (printf '%s\n' $absent; ldd "$K"/bin/* 2>/dev/null | awk '/not found/ && $1 != "libcuda.so.1" { print $1 }') |
    grep . | sort -u | tr '\n' ' ')
  [ -z "$missing" ] || {
    echo "REFUSED: missing ${missing% } (searched the kit's lib and: $(lib_dirs | awk '!seen[$0]++' | tr '\n' ' ')); install it or set ZT_KIT_LIB_DIRS"
    return 2
  }
  undefined=$(ldd -r "$K"/bin/zt "$K"/bin/test_kernels_cuda "$K"/bin/test_comm_nccl "$K"/bin/test_device_moe_ep \
    "$K"/bin/device_stuck_main 2>&1 |
    awk '/undefined symbol/ { print $3 }' | grep -v '^cu[A-Z]' | sort -u | head -5 | tr '\n' ' ')
  [ -z "$undefined" ] || {
    echo "REFUSED: the libraries found are too old: undefined symbol(s) ${undefined% } (LD_LIBRARY_PATH=$LD_LIBRARY_PATH)"
    return 2
  }
  find_lib libcudnn.so.9 >/dev/null || echo "note: no libcudnn.so.9: the attention runs zt's kernel for every shape"
  echo "discovery ok: LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
}

do_run() {
  local K out log rc=0
  out=${OUT:-$repo/gpu-logs}
  mkdir -p "$out"
  log=$out/run.log
  {
    echo "gpu-kit run: $(date -u +%FT%TZ) on $(uname -n), checkout $(git -C "$repo" rev-parse --short HEAD 2>/dev/null), kit $(tar -xzOf "$kitdir/kit.tar.gz" zt-kit/commit 2>/dev/null)"
    K=$(do_unpack) || exit 2
    kit_env "$K"
    cpu_check "$K" || { echo "summary: refused before the first line"; exit 2; }
    discover "$K" || { echo "summary: refused before the first line"; exit 2; }
    export ZT_KIT_GPU=$gpu ZT_KIT_ZT=$K/bin/zt ZT_KIT_TESTS=$K/bin
    do_lines ${ZT_KIT_LINES:-} || rc=$?
    exit "$rc"
  } 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  summary "$log" | tee -a "$log"
  grep -E '^(PASS|FAIL|SKIP|NOT RUN|REFUSED|gpu:|cpu:|lib:|summary:)' "$log" >"$out/summary.txt"
  return "$rc"
}

# --- the lines ---------------------------------------------------------------------------
# Each line runs in its own `timeout` (a process group: mpirun and its ranks go with it), so
# a hang costs that line's limit, not the call; and all of them share one budget
# (ZT_KIT_BUDGET, 480 s: a line gets at most what is left, the last ones are skipped when
# nothing is), so the call ends in time. Seconds per line, in order of value;
# docs/gpu-verification.md gives the expected times.
# The first call runs all_lines; their expected times on an H100 (expect_s, as
# docs/gpu-verification.md states them) fit the budget, and `plan` checks that. The rest
# (second_lines) is a second call: ZT_KIT_LINES="B D2 D3 D4 H dead_rank stuck_waits". A line the budget
# leaves out is NOT RUN, and the run fails: nothing unjudged reads as passed.
all_lines=(launcher cpu_train kernels nccl_comm check_nccl health speed A C D E L Q G P M attention)
second_lines=(B D2 D3 D4 H dead_rank stuck_waits)
declare -A expect_s=([launcher]=5 [cpu_train]=5 [kernels]=120 [nccl_comm]=10 [check_nccl]=20 [health]=12 [speed]=60
  [A]=10 [C]=10 [D]=30 [E]=20 [L]=30 [Q]=20 [G]=30 [P]=25 [M]=45 [attention]=10 [B]=20 [D2]=30 [D3]=15 [D4]=40 [H]=25 [dead_rank]=5 [stuck_waits]=40)
declare -A limit_s=([launcher]=40 [cpu_train]=40 [kernels]=150 [nccl_comm]=40 [check_nccl]=60 [health]=45 [A]=40 [B]=60 [C]=40 [D]=60
  [D2]=60 [D3]=40 [D4]=80 [E]=60 [L]=60 [Q]=60 [G]=90 [H]=90 [P]=60 [M]=120 [attention]=40 [speed]=120 [dead_rank]=60 [stuck_waits]=100)

wrk() { echo "${ZT_KIT_WORK:-${TMPDIR:-/tmp}/zt-kit-work}"; }
result() { echo "$1 $2: $3"; }  # STATUS LINE FIGURES
dry() { [ "${ZT_KIT_DEVICE:-}" = cpu ]; }
have_gpu() { [ "${ZT_KIT_GPU:-0}" = 1 ]; }

# dev ARGS...: the arguments of a GPU run, or with ZT_KIT_DEVICE=cpu those of its CPU twin
dev() {
  local a
  for a in "$@"; do
    if dry; then
      case "$a" in
        train.device=cuda) a=train.device=cpu ;;
        comm.backend=nccl) a=comm.backend=mpi ;;
        train.precision=bf16-*) a=train.precision=fp32 ;;
        train.share_gpu=true) a=train.share_gpu=false ;;
      esac
    fi
    printf '%s\n' "$a"
  done
}

common=(--set train.steps=10 --set train.seq_len=64 --set train.micro_batch=4
        --set train.global_batch=16 --set eval.every=0 --set eval.batches=1
        --set sample.tokens=0 --set ckpt.save_final=false --set train.peak_tflops=989)

# train NAME NP ARGS...: one run, metrics to NAME.jsonl, output to NAME.log in the work dir
train() {
  local name=$1 np=$2 w
  w=$(wrk)
  shift 2
  local args
  mapfile -t args < <(dev "$@")
  mpirun --oversubscribe -np "$np" "${ZT_KIT_ZT:?}" train "${common[@]}" --set "ckpt.dir=$w/$name.ckpt" \
    "${args[@]}" --set "log.metrics=$w/$name.jsonl" </dev/null >"$w/$name.log" 2>&1
}

losses() { grep -o '"loss":[-0-9.eE+]*' "$1" | cut -d: -f2; }

# compare LINE GOT REF TOL [LAST]: max relative loss difference per step (the last LAST
# steps of REF when given), PASS below TOL; the line's status is awk's exit.
compare() {
  local line=$1 got=$2 ref=$3 tol=$4 last=${5:-0} r
  if [ "$last" -gt 0 ]; then r=$(losses "$ref" | tail -n "$last"); else r=$(losses "$ref"); fi
  paste <(losses "$got") <(echo "$r") | awk -v line="$line" -v tol="$tol" -v dry="${ZT_KIT_DEVICE:-}" '
    { d = $1 - $2; if (d < 0) d = -d; s = $2 < 0 ? -$2 : $2; x = d / s; if (x > m) m = x; n++ }
    END { ok = n > 0 && m < tol
          printf "%s %s: %d steps, max rel loss diff %.2e (tol %s)%s\n", ok ? "PASS" : "FAIL", line, n, m, tol,
                 dry == "cpu" ? " [device replaced by the CPU]" : ""
          exit !ok }'
}

# half_up LINE METRICS: every step copied up half the bytes it copied down (bf16 parameters
# up, fp32 gradients down). With the device replaced by the CPU the engine copies nothing:
# then every step must report d2h_bytes = h2d_bytes = 0.
half_up() {
  local f=2
  dry && f=0
  # Step records only: a checkpoint record has a "stall_s" of its own (docs/training.md).
  paste <(grep '"loss"' "$2" | grep -o '"d2h_bytes":[0-9]*' | cut -d: -f2) \
        <(grep '"loss"' "$2" | grep -o '"h2d_bytes":[0-9]*' | cut -d: -f2) \
        <(grep '"loss"' "$2" | grep -o '"stall_s":[-0-9.eE+]*' | cut -d: -f2) | awk -v line="$1" -v f="$f" '
    { n++; s += $3
      if (f == 0) { if ($1 != 0 || $2 != 0) bad++ } else if ($1 == 0 || f * $2 != $1) bad++ }
    END { ok = n > 0 && bad == 0
          if (f == 0) printf "%s %s: no copies on the CPU (d2h = h2d = 0) in %d of %d steps [device replaced by the CPU]\n", ok ? "PASS" : "FAIL", line, n - bad, n
          else printf "%s %s: h2d = d2h / 2 in %d of %d steps, stall %.3f s in all\n", ok ? "PASS" : "FAIL", line, n - bad, n, s
          exit !ok }'
}

failed() {  # LINE NAME...: FAIL with the last lines of the runs' logs
  local line=$1 n w
  w=$(wrk)
  shift
  local tails=""
  for n in "$@"; do [ -f "$w/$n.log" ] && tails+="$n: $(tail -2 "$w/$n.log" | tr '\n' ' ') "; done
  result FAIL "$line" "${tails:-no log}"
  return 1
}

# no_gpu LINE NAME ARGS...: without a GPU, the line's first GPU run must refuse at once,
# naming the GPU (not crash or hang): SKIP with its message; anything else FAILs.
no_gpu() {
  local line=$1 name=$2 w rc
  w=$(wrk)
  shift 2
  mpirun -np 1 "${ZT_KIT_ZT:?}" train "${common[@]}" --set "ckpt.dir=$w/$name.ckpt" "$@" </dev/null >"$w/$name.log" 2>&1
  rc=$?
  local msg='sees no CUDA device|no GPU|no CUDA'
  if [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] && grep -qiE "$msg" "$w/$name.log"; then
    result SKIP "$line" "no GPU visible (zt exit $rc: $(grep -m1 -iE "$msg" "$w/$name.log" | cut -c1-140))"
    return 0
  fi
  failed "$line" "$name"
}

gpu_line_skip() {  # LINE: the lines that need a GPU whatever ZT_KIT_DEVICE says
  have_gpu && return 1
  return 0
}

# The CPU lines: the kit's launcher and zt itself, before any GPU line (seconds).
line_launcher() {  # zt check on the MPI backend at 2 and 4 ranks through the kit's mpirun
  local w np rc figs=""
  w=$(wrk)
  for np in 2 4; do
    mpirun --oversubscribe -np "$np" "${ZT_KIT_ZT:?}" check --backend mpi --ops all_reduce,all_gather \
      --min-bytes 8 --max-bytes 64K --iters 3 --warmup 1 --burn-seconds 0 --report "$w/check_mpi_np$np" \
      </dev/null >"$w/launcher_np$np.log" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] && [ -s "$w/check_mpi_np$np/report.json" ] || { failed launcher "launcher_np$np"; return 1; }
    figs+="np $np: zt check --backend mpi exit 0, report.json written; "
  done
  result PASS launcher "${figs%; }"
}

line_cpu_train() {  # a 2-step zt train on the CPU at 2 ranks, finite losses
  local w n
  w=$(wrk)
  mpirun --oversubscribe -np 2 "${ZT_KIT_ZT:?}" train "${common[@]}" --set "ckpt.dir=$w/cpu_train.ckpt" --set train.device=cpu --set train.steps=2 \
    --set zero.stage=3 --set "log.metrics=$w/cpu_train.jsonl" </dev/null >"$w/cpu_train.log" 2>&1 ||
    { failed cpu_train cpu_train; return 1; }
  n=$(losses "$w/cpu_train.jsonl" | awk '$1 == $1 + 0 && $1 > 0 && $1 < 1e30 { n++ } END { print n + 0 }')
  [ "$n" -eq 2 ] || { result FAIL cpu_train "$n of 2 finite losses in $w/cpu_train.jsonl"; return 1; }
  result PASS cpu_train "2 steps at 2 ranks, stage 3, losses $(losses "$w/cpu_train.jsonl" | tr '\n' ' ')"
}

line_kernels() {
  local t=${ZT_KIT_TESTS:?} w rc
  w=$(wrk)
  "$t/test_kernels_cuda" >"$w/kernels.log" 2>&1
  rc=$?
  local tests passed skipped errs
  tests=$(grep -oE '^\[==========\] [0-9]+ tests' "$w/kernels.log" | tail -1 | grep -oE '[0-9]+')
  passed=$(grep -oE '^\[  PASSED  \] [0-9]+' "$w/kernels.log" | grep -oE '[0-9]+$')
  skipped=$(grep -oE '^\[  SKIPPED \] [0-9]+' "$w/kernels.log" | grep -oE '[0-9]+$')
  errs=$(grep -c 'rel err' "$w/kernels.log")
  local figs="${tests:-?} tests, ${passed:-0} passed, ${skipped:-0} skipped, $errs compared buffers"
  if [ "$rc" -ne 0 ]; then
    result FAIL kernels "exit $rc, $figs; $(grep -E '^\[  FAILED  \]' "$w/kernels.log" | head -3 | tr '\n' ' ')"
  elif ! have_gpu; then
    result SKIP kernels "no GPU visible ($figs)"
  elif [ "${skipped:-0}" -gt 1 ]; then  # kernels_cuda_without_cudnn's path test skips by design
    result FAIL kernels "$figs: a GPU is visible but tests skipped"
  else
    result PASS kernels "$figs; worst: $(grep 'rel err' "$w/kernels.log" | awk '{ for (i = 1; i < NF; i++) if ($i == "err") print $(i + 1), $0 }' | sort -g | tail -1 | cut -d' ' -f2- | cut -c1-120)"
  fi
}

line_nccl_comm() {  # NcclComm's tests at 1 rank (and 2 where 2 GPUs are visible)
  local w rc np=1 gpus
  w=$(wrk)
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  [ "${gpus:-0}" -ge 2 ] && np=2
  mpirun -np "$np" "${ZT_KIT_TESTS:?}/test_comm_nccl" </dev/null >"$w/nccl_comm.log" 2>&1
  rc=$?
  local figs
  figs="np $np: $(grep -E '^\[  (PASSED|SKIPPED) \]' "$w/nccl_comm.log" | sort -u | tr -s ' ' | tr '\n' ' ')"
  if [ "$rc" -eq 77 ] && ! have_gpu; then result SKIP nccl_comm "no GPU visible (${figs% })"
  elif [ "$rc" -ne 0 ]; then result FAIL nccl_comm "exit $rc; $(grep -E 'FAILED|rror' "$w/nccl_comm.log" | head -2 | tr '\n' ' ')"
  elif ! have_gpu; then result FAIL nccl_comm "passed without a GPU? ${figs% }"
  else result PASS nccl_comm "${figs% }"; fi
}

line_check_nccl() {
  local w rc
  w=$(wrk)
  # (the GPU stress is the health line's: off here)
  mpirun -np 1 "${ZT_KIT_ZT:?}" check --backend nccl --burn-seconds 0 --report "$w/check_nccl" </dev/null >"$w/check_nccl.log" 2>&1
  rc=$?
  if have_gpu; then
    [ "$rc" -eq 0 ] && result PASS check_nccl "$(grep -iE 'all_reduce|verdict|PASS' "$w/check_nccl.log" | tail -2 | tr -s ' ' | tr '\n' ' ' | cut -c1-200)" ||
      failed check_nccl check_nccl
  elif [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ]; then
    result SKIP check_nccl "no GPU visible (zt check exit $rc: $(grep -m1 -iE 'nccl|gpu|cuda' "$w/check_nccl.log" | cut -c1-140))"
  else
    failed check_nccl check_nccl
  fi
}

# health: `zt check --tier quick` with the driver's own NVML (the tests use a double) and
# the GPU stress (5 s of cuBLASLt bf16 burn, then the HBM copy, on every GPU at once: the
# only rank of the node takes them all): PASS when
# NVML loaded and every GPU check gave a verdict (none UNKNOWN); the figures are each
# check's status, then the burn's TFLOP/s and the HBM GB/s with their fractions of
# data/gpus.csv; FAIL without a gpu.gemm result per GPU or with a gpu.gemm/gpu.hbm FAIL, and
# when the report's temperature, clocks, PCIe link and ECC counters differ from nvidia-smi's
# for any GPU (scripts/kit-health-smi.py).
# Without a GPU (or NVML): SKIP, as gpu.nvml says.
line_health() {
  local w rc statuses stress smi_rc
  w=$(wrk)
  local fields smi_check=""
  fields=$(python3 "$repo/scripts/kit-health-smi.py" --fields)
  nvidia-smi --query-gpu="$fields" --format=csv,noheader,nounits >"$w/smi-before.csv" 2>"$w/smi.err"
  mpirun -np 1 "${ZT_KIT_ZT:?}" check --tier quick --exit-codes nagios --report "$w/health" </dev/null >"$w/health.log" 2>&1
  rc=$?
  # zt's NVML readings against nvidia-smi's, read just before and after: every GPU, or FAIL.
  if nvidia-smi --query-gpu="$fields" --format=csv,noheader,nounits >"$w/smi-after.csv" 2>>"$w/smi.err" &&
     [ -f "$w/health/report.json" ]; then
    smi_check=$(python3 "$repo/scripts/kit-health-smi.py" "$w/health/report.json" "$w/smi-before.csv" "$w/smi-after.csv")
    smi_rc=$?
  else
    smi_check="no nvidia-smi reading or no report.json: $(head -c 200 "$w/smi.err")"
    smi_rc=1
  fi
  statuses=$(grep -E '^#   gpu\.[a-z_]+ ' "$w/health.log" | sed -E 's/^#   (gpu\.[a-z_]+) .* on [^:]*: ([A-Z]+( \[[A-Z_]+\])?).*/\1 \2/' |
             sort | uniq -c | sed -E 's/^ *([0-9]+) (.*)/\2 x\1/' | tr '\n' ',' | cut -c1-400)
  # per GPU: "gpu.gemm r0:d3 712.3 TFLOP/s 0.72" (the fraction of its gpus.csv row)
  stress=$(grep -E '^#   gpu\.(gemm|hbm) rank ' "$w/health.log" |
           sed -E 's/^#   (gpu\.[a-z]+) rank ([0-9]+), CUDA device ([0-9]+).* — ([0-9.]+ [A-Za-z/]+)[^,]*(, ([0-9.]+) of the [a-z0-9 ]+ [0-9]+)?.*/\1 r\2:d\3 \4 \6/' |
           tr '\n' ';' | cut -c1-600)
  if grep -qE 'gpu\.nvml node on [^:]*: SKIP' "$w/health.log"; then
    result SKIP health "no NVML here (exit $rc): $(grep -m1 -oE 'gpu\.nvml node on [^:]*: SKIP.*' "$w/health.log" | cut -c1-160)"
  elif [ "$rc" -eq 2 ] && [ "${ZT_KIT_HEALTH_EXPECT:-healthy}" != unhealthy ]; then
    # nagios 2: an unhealthy verdict, on a lent GPU not what the line expects
    result FAIL health "exit 2, an unhealthy verdict (ZT_KIT_HEALTH_EXPECT=unhealthy if the node is known bad): $statuses; $(grep -m2 -E '^# FAILED' "$w/health.log" | cut -c1-300 | tr '\n' ' ')"
    return 1
  elif [ "$rc" -le 3 ] && grep -q 'gpu\.count node on' "$w/health.log" && ! grep -qE '#   gpu\.[a-z_]+ .*: UNKNOWN' "$w/health.log" &&
       grep -qE '^#   gpu\.gemm rank ' "$w/health.log" && ! grep -qE '^#   gpu\.(gemm|hbm) rank .*: FAIL' "$w/health.log"; then
    if [ "$smi_rc" -ne 0 ]; then
      result FAIL health "exit $rc; zt and nvidia-smi disagree: $(echo "$smi_check" | cut -c1-500)"
      return 1
    fi
    result PASS health "exit $rc; $statuses; stress: $stress; $(echo "$smi_check" | cut -c1-120)"
  else
    # no stress on a GPU that NVML sees, or a stress FAIL (on a lent GPU more likely zt's bug than the GPU's)
    result FAIL health "exit $rc; $statuses; stress: ${stress:-none}; $(grep -m2 -E '^#   gpu\.(gemm|hbm) .*: (FAIL|UNKNOWN|SKIP)' "$w/health.log" | cut -c1-300 | tr '\n' ' ')"
    return 1
  fi
}

# The engine lines (bench/results/gpu-verification-plan.md, "What to run on a device (issue #17)").
line_A() {
  local w
  w=$(wrk)
  if ! have_gpu && ! dry; then no_gpu A a_gpu --set train.device=cuda --set zero.stage=0; return; fi
  train a_cpu 1 --set train.device=cpu --set zero.stage=0 && train a_gpu 1 --set train.device=cuda --set zero.stage=0 ||
    { failed A a_cpu a_gpu; return; }
  compare "A stage 0, 1 rank" "$w/a_gpu.jsonl" "$w/a_cpu.jsonl" 1e-5
}
line_B() {
  local w
  w=$(wrk)
  local g=(--ranks-per-node 2 --set train.device=cuda --set train.share_gpu=true --set comm.backend=mpi --set zero.stage=3)
  if ! have_gpu && ! dry; then no_gpu B b_gpu "${g[@]:2}"; return; fi
  # the dry run on a loaded 2-core machine: 4 CPU ranks take ~10 s a step, so 3 steps
  dry && g+=(--set train.steps=3)
  train b_cpu 4 --ranks-per-node 2 --set train.device=cpu --set zero.stage=3 "${g[@]:10}" && train b_gpu 4 "${g[@]}" ||
    { failed B b_cpu b_gpu; return; }
  compare "B stage 3 + hpZ, 4 ranks on one GPU, MPI" "$w/b_gpu.jsonl" "$w/b_cpu.jsonl" 1e-5
}
line_C() {
  local w
  w=$(wrk)
  local g=(--set train.device=cuda --set comm.backend=nccl --set zero.stage=3)
  if ! have_gpu && ! dry; then no_gpu C c_gpu "${g[@]}"; return; fi
  train c_cpu 1 --set train.device=cpu --set zero.stage=3 && train c_gpu 1 "${g[@]}" || { failed C c_cpu c_gpu; return; }
  compare "C stage 3, 1 rank, NCCL" "$w/c_gpu.jsonl" "$w/c_cpu.jsonl" 1e-5
}
d=(--set train.device=cuda --set comm.backend=nccl --set zero.stage=3 --set train.steps=50)
# D's bf16-mixed run is the reference of D2, D3 and D4: each line makes it if it is missing.
d_ref() { [ -s "$(wrk)/d_gpu.jsonl" ] || train d_gpu 1 "${d[@]}" --set train.precision=bf16-mixed; }
line_D() {
  local w
  w=$(wrk)
  if ! have_gpu && ! dry; then no_gpu D d_gpu "${d[@]}" --set train.precision=bf16-mixed; return; fi
  d_ref && train d_fp32 1 "${d[@]}" || { failed D d_gpu d_fp32; return; }
  compare "D bf16-mixed, stage 3 NCCL, 50 steps vs fp32" "$w/d_gpu.jsonl" "$w/d_fp32.jsonl" 2e-2
}
line_D2() {
  local w
  w=$(wrk)
  local g=("${d[@]}" --set train.precision=bf16-mixed --set offload.optimizer=cpu --set offload.params=cpu)
  if ! have_gpu && ! dry; then no_gpu D2 d2_gpu "${g[@]}"; return; fi
  ulimit -l unlimited 2>/dev/null
  d_ref && train d2_gpu 1 "${g[@]}" || { failed D2 d_gpu d2_gpu; return; }
  compare "D2 bf16-mixed + offload.optimizer=cpu + offload.params=cpu, 50 steps vs D" "$w/d2_gpu.jsonl" "$w/d_gpu.jsonl" 1e-2
}
line_D3() {
  local w
  w=$(wrk)
  if ! have_gpu && ! dry; then no_gpu D3 d3_gpu "${d[@]}" --set train.precision=bf16-true; return; fi
  d_ref && train d3_gpu 1 "${d[@]}" --set train.precision=bf16-true || { failed D3 d_gpu d3_gpu; return; }
  compare "D3 bf16-true, stage 3 NCCL, 50 steps vs bf16-mixed" "$w/d3_gpu.jsonl" "$w/d_gpu.jsonl" 2e-2
}
line_D4() {
  local w st rc=0
  w=$(wrk)
  if ! have_gpu && ! dry; then no_gpu D4 d4_gpu "${d[@]}" --set train.precision=bf16-mixed --set offload.optimizer=cpu; return; fi
  ulimit -l unlimited 2>/dev/null
  d_ref || { failed D4 d_gpu; return; }
  for st in 2 3; do
    if train "d4_s${st}_gpu" 1 "${d[@]}" --set zero.stage="$st" --set train.precision=bf16-mixed --set offload.optimizer=cpu; then
      compare "D4 bf16-mixed + offload.optimizer=cpu, stage $st, 50 steps vs D" "$w/d4_s${st}_gpu.jsonl" "$w/d_gpu.jsonl" 1e-2 || rc=1
      half_up "D4 stage $st bf16 copy up" "$w/d4_s${st}_gpu.jsonl" || rc=1
    else
      failed D4 "d4_s${st}_gpu"; rc=1
    fi
  done
  return "$rc"
}
line_E() {
  local w
  w=$(wrk)
  local e=(--set zero.stage=3 --set train.steps=20)
  if ! have_gpu && ! dry; then no_gpu E e_gpu --set train.device=cuda "${e[@]}"; return; fi
  rm -rf "$w/e_ckpt"
  train e_gpu 1 --set train.device=cuda "${e[@]}" --set ckpt.stop_after=10 --set "ckpt.dir=$w/e_ckpt" &&
    train e_cpu 1 --set train.device=cpu "${e[@]}" --set ckpt.resume=auto --set "ckpt.dir=$w/e_ckpt" &&
    train e_ref 1 --set train.device=cpu "${e[@]}" || { failed E e_gpu e_cpu e_ref; return; }
  compare "E GPU checkpoint resumed on the CPU, steps 11-20" "$w/e_cpu.jsonl" "$w/e_ref.jsonl" 1e-4 10
}
line_L() {
  local w m rc=0
  w=$(wrk)
  # shellcheck disable=SC2054  # the commas are lora.targets's list
  local lora=(--set zero.stage=3 --set lora.targets=q,k,v,o,gate,up,down,lm_head --set lora.dropout=0.1)
  if ! have_gpu && ! dry; then no_gpu L l_gpu --set train.device=cuda --set comm.backend=nccl --set finetune.method=lora "${lora[@]}"; return; fi
  for m in lora qlora; do
    if train "l_${m}_cpu" 1 --set train.device=cpu --set finetune.method=$m "${lora[@]}" &&
       train "l_${m}_gpu" 1 --set train.device=cuda --set comm.backend=nccl --set finetune.method=$m "${lora[@]}"; then
      compare "L $m, stage 3, 1 rank, NCCL" "$w/l_${m}_gpu.jsonl" "$w/l_${m}_cpu.jsonl" 1e-5 || rc=1
    else
      failed L "l_${m}_cpu" "l_${m}_gpu"; rc=1
    fi
  done
  return "$rc"
}

# twin LINE NAME TOL ARGS...: NAME_cpu (train.device=cpu) and NAME_gpu (train.device=cuda)
# with the same ARGS at 1 rank, their losses compared within TOL (LINE: the result's label).
twin() {
  local line=$1 name=$2 tol=$3 w
  w=$(wrk)
  shift 3
  if train "${name}_cpu" 1 --set train.device=cpu "$@" && train "${name}_gpu" 1 --set train.device=cuda "$@"; then
    compare "$line" "$w/${name}_gpu.jsonl" "$w/${name}_cpu.jsonl" "$tol"
  else
    failed "${line%% *}" "${name}_cpu" "${name}_gpu"
  fi
}

# Model families (issue 38): qwen2 (q/k/v biases) and qwen3 (per-head q/k RMSNorm, head_dim
# 48 != hidden / heads 32, attention_bias's q/k/v/o biases) on the tiny preset, GPU vs CPU.
line_Q() {
  local rc=0
  local q3=(--set model.family=qwen3 --set model.head_dim=48 --set model.attention_bias=true)
  if ! have_gpu && ! dry; then no_gpu Q q_qwen3_gpu --set train.device=cuda --set zero.stage=0 "${q3[@]}"; return; fi
  twin "Q qwen2, stage 0, 1 rank" q_qwen2 1e-5 --set zero.stage=0 --set model.family=qwen2 || rc=1
  twin "Q qwen3, stage 0, 1 rank" q_qwen3 1e-5 --set zero.stage=0 "${q3[@]}" || rc=1
  return "$rc"
}

# The models of 2026 (issue 55): tiny as gemma3_text ((1 + w) sandwich norms, GeGLU, the
# embedding scale, q/k norms, query_pre_attn_scalar 48 != head_dim 32, the final soft-cap 2,
# layers s f s f with window 16 and the sliding layers' own RoPE base) and as gpt_oss
# (attention biases and sinks, layers s f s f, yarn 4 over 32, the biased router's softmax
# over the top 2 of 4 logits, experts with biases and the clamped SwiGLU), 10 steps, stage
# 0, GPU vs CPU; gemma3_text again with Gemma 3 1b's head dim 256 and the attention
# soft-cap 5; and gpt_oss with moe.expert_parallel = 2 at 2 ranks on one GPU
# (comm.backend = mpi, train.share_gpu, stage 1) vs the CPU run of EP 1.
line_G() {
  local w rc=0
  w=$(wrk)
  local gm=(--set model.family=gemma3_text --set model.layer_types=sfsf --set model.sliding_window=16
            --set model.rope_theta=1000000 --set model.rope_local_theta=10000
            --set model.query_pre_attn_scalar=48 --set model.final_logit_softcap=2)
  local go=(--set model.family=gpt_oss --set model.attention_bias=true --set model.layer_types=sfsf
            --set model.sliding_window=16 --set model.rope_theta=150000 --set model.rope_type=yarn
            --set model.rope_factor=4 --set model.rope_original_context=32 --set model.rope_truncate=false
            --set model.experts=4 --set model.experts_per_token=2 --set model.swiglu_limit=7)
  if ! have_gpu && ! dry; then no_gpu G g_gemma_gpu --set train.device=cuda --set zero.stage=0 "${gm[@]}"; return; fi
  twin "G gemma3_text, stage 0, 1 rank" g_gemma 1e-5 --set zero.stage=0 "${gm[@]}" || rc=1
  twin "G gemma3_text head dim 256, attention soft-cap 5, stage 0, 1 rank" g_gemma256 1e-5 \
    --set zero.stage=0 "${gm[@]}" --set model.head_dim=256 --set model.attn_logit_softcap=5 || rc=1
  twin "G gpt_oss, stage 0, 1 rank" g_gptoss 1e-4 --set zero.stage=0 "${go[@]}" || rc=1
  if train g_gptoss_ep2_gpu 2 --set train.device=cuda --set train.share_gpu=true --set comm.backend=mpi \
       --set zero.stage=1 --set moe.expert_parallel=2 "${go[@]}"; then
    compare "G gpt_oss, expert_parallel 2, stage 1, 2 ranks on one GPU, MPI" "$w/g_gptoss_ep2_gpu.jsonl" \
      "$w/g_gptoss_cpu.jsonl" 1e-4 || rc=1
  else
    failed G g_gptoss_ep2_gpu; rc=1
  fi
  return "$rc"
}

# Qwen3.5's hybrids (issue 56): tiny as qwen3_5_text (layers l l l f: three Gated DeltaNet
# layers with 2 key heads and 4 value heads of 32 and conv kernel 4, then full attention
# with the output gate, q/k norms and partial RoPE 0.25) on rows of 150 tokens (two chunks
# of 64 and a partial one), and as qwen3_5_moe_text (the same layers, 4 experts of width 64,
# top 2 renormalised, the shared expert and its gate, the aux loss in the loss), 10 steps,
# stage 0, GPU vs CPU.
line_H() {
  local rc=0
  local q=(--set model.family=qwen3_5_text --set model.layer_types=lllf --set model.partial_rotary_factor=0.25
           --set model.linear_key_heads=2 --set model.linear_value_heads=4 --set model.linear_key_dim=32
           --set model.linear_value_dim=32 --set model.linear_conv_kernel=4 --set train.seq_len=150)
  local qm=(--set model.family=qwen3_5_moe_text --set model.experts=4 --set model.experts_per_token=2
            --set model.intermediate=64 --set model.moe_intermediate=64 --set model.shared_expert_intermediate=64
            --set model.norm_topk_prob=true --set model.router_aux_loss=true)
  if ! have_gpu && ! dry; then no_gpu H h_qwen35_gpu --set train.device=cuda --set zero.stage=0 "${q[@]}"; return; fi
  twin "H qwen3_5_text, stage 0, 1 rank" h_qwen35 1e-4 --set zero.stage=0 "${q[@]}" || rc=1
  twin "H qwen3_5_moe_text, stage 0, 1 rank" h_qwen35_moe 1e-4 --set zero.stage=0 "${q[@]}" "${qm[@]}" || rc=1
  return "$rc"
}

# Preference objectives (issue 40): DPO with LoRA (reference: the base, adapters off) and
# ORPO on full weights, on the shipped pairs (examples/dpo-cpu.sh's data), GPU vs CPU.
line_P() {
  local w rc=0
  w=$(wrk)
  "${ZT_KIT_ZT:?}" convert pairs-to-tokens --force --tokenizer "$repo/examples/tokenizer-bytes" --seq-len 63 \
    "$repo/data/preferences-small.jsonl" "$w/prefs.h5" </dev/null >"$w/p_convert.log" 2>&1 || { failed P p_convert; return; }
  local p=(--set model.vocab=257 --set "data.path=$w/prefs.h5" --set train.seq_len=63 --set train.micro_batch=8
           --set train.global_batch=8 --set train.steps=5 --set zero.stage=0 --set train.lr=3e-3)
  # shellcheck disable=SC2054  # the commas are lora.targets's list
  local dpo=(--set finetune.objective=dpo --set finetune.method=lora --set lora.targets=q,k,v,o,gate,up,down)
  if ! have_gpu && ! dry; then no_gpu P p_dpo_gpu --set train.device=cuda "${p[@]}" "${dpo[@]}"; return; fi
  twin "P dpo lora, stage 0, 1 rank" p_dpo 1e-5 "${p[@]}" "${dpo[@]}" || rc=1
  # (orpo.nll = sequence, the default: the chosen rows' prompt targets are context targets)
  twin "P orpo full, stage 0, 1 rank" p_orpo 1e-5 "${p[@]}" --set finetune.objective=orpo || rc=1
  return "$rc"
}

# Mixture of experts (issue 41): tiny Mixtral (4 experts, 2 per token, the load-balancing loss
# in the loss) GPU vs CPU at stage 0, and at stage 3 over NCCL (the block's polled plan wait
# with the gathers in flight) vs the same CPU run; the router's aux loss of each step too.
# Expert parallelism on the GPU: test_device_moe_ep at 2 ranks sharing the GPU (MPI group;
# its NCCL tests where 2 GPUs are visible), and moe.expert_parallel = 2 at 2 ranks on one
# GPU (comm.backend = mpi, train.share_gpu) vs the CPU run of EP 1. Qwen's blocks: tiny
# qwen2_moe (the shared expert and its gate, experts 96 wide against the dense 512, layers 0
# and 2 dense, the top-k not renormalised, the aux loss in the loss) GPU vs CPU at stage 0.
line_M() {
  local w rc=0
  w=$(wrk)
  local m=(--set model.family=mixtral --set model.experts=4 --set model.experts_per_token=2
           --set model.router_aux_loss=true --set model.router_aux_loss_coef=0.02)
  if ! have_gpu && ! dry; then no_gpu M m_gpu --set train.device=cuda --set zero.stage=0 "${m[@]}"; return; fi
  twin "M mixtral, stage 0, 1 rank" m 1e-4 --set zero.stage=0 "${m[@]}" || rc=1
  local q=(--set model.family=qwen2_moe --set model.experts=4 --set model.experts_per_token=2
           --set model.moe_intermediate=96 --set model.shared_expert_intermediate=80
           --set model.norm_topk_prob=false --set model.decoder_sparse_step=2
           --set model.router_aux_loss=true --set model.router_aux_loss_coef=0.02)
  twin "M qwen2_moe (shared expert, dense layers), stage 0, 1 rank" mq 1e-4 --set zero.stage=0 "${q[@]}" || rc=1
  if train m_s3_gpu 1 --set train.device=cuda --set comm.backend=nccl --set zero.stage=3 "${m[@]}"; then
    compare "M mixtral, stage 3, 1 rank, NCCL" "$w/m_s3_gpu.jsonl" "$w/m_cpu.jsonl" 1e-4 || rc=1
  else
    failed M m_s3_gpu; rc=1
  fi
  if have_gpu; then
    mpirun --oversubscribe -np 2 "${ZT_KIT_TESTS:?}/test_device_moe_ep" </dev/null >"$w/m_ep_test.log" 2>&1
    local ep_rc=$? ep_figs
    ep_figs="$(grep -cE '^\[device ep\]' "$w/m_ep_test.log") compared runs, $(grep -E '^\[  (PASSED|SKIPPED|FAILED) +\]' "$w/m_ep_test.log" | sort -u | tr -s ' ' | tr '\n' ' ')"
    if [ "$ep_rc" -eq 0 ]; then result PASS "M device expert parallelism" "test_device_moe_ep np 2: ${ep_figs% }"
    else result FAIL "M device expert parallelism" "test_device_moe_ep np 2 exit $ep_rc: ${ep_figs% }"; rc=1; fi
  fi
  if train m_ep2_gpu 2 --set train.device=cuda --set train.share_gpu=true --set comm.backend=mpi \
       --set zero.stage=1 --set moe.expert_parallel=2 "${m[@]}"; then
    compare "M mixtral, expert_parallel 2, stage 1, 2 ranks on one GPU, MPI" "$w/m_ep2_gpu.jsonl" "$w/m_cpu.jsonl" 1e-4 || rc=1
  else
    failed M m_ep2_gpu; rc=1
  fi
  # the aux loss of every step (the metrics' router.aux_loss), GPU vs CPU
  paste <(grep -o '"aux_loss":[-0-9.eE+]*' "$w/m_gpu.jsonl" | cut -d: -f2) \
        <(grep -o '"aux_loss":[-0-9.eE+]*' "$w/m_cpu.jsonl" | cut -d: -f2) | awk -v dry="${ZT_KIT_DEVICE:-}" '
    { d = $1 - $2; if (d < 0) d = -d; x = d / $2; if (x > m) m = x; n++ }
    END { ok = n > 0 && m < 1e-4
          printf "%s M mixtral router aux_loss: %d steps, max rel diff %.2e (tol 1e-4)%s\n", ok ? "PASS" : "FAIL", n, m,
                 dry == "cpu" ? " [device replaced by the CPU]" : ""
          exit !ok }' || rc=1
  return "$rc"
}

line_attention() {  # cuDNN's fused attention against zt's kernel at tinyllama's shape
  local w rc
  w=$(wrk)
  "${ZT_KIT_TESTS:?}/test_kernels_cuda" --gtest_filter='AttentionPaths.ChosenPerShape:AttentionTest.TimingReportTinyllamaShape' \
    >"$w/attention.log" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ]; then failed attention attention
  elif ! have_gpu; then result SKIP attention "no GPU visible ($(grep -m1 -o 'attention backend: [^(]*' "$w/attention.log"))"
  elif ! grep -q '^\[timing\]' "$w/attention.log"; then result FAIL attention "no [timing] line"
  else result PASS attention "$(grep '^\[timing\]' "$w/attention.log" | tr -s ' ' | tr '\n' ';' | cut -c1-300)"; fi
}

line_speed() {  # tinyllama-1.1b, seq 2048, bf16-mixed: tokens/s, MFU, peak memory vs zt estimate
  local w name=speed
  w=$(wrk)
  local s=(--set model.preset=tinyllama-1.1b --set train.seq_len=2048 --set train.precision=bf16-mixed
           --set train.micro_batch=2 --set train.global_batch=2 --set zero.stage=3)
  if ! have_gpu; then
    result SKIP speed "no GPU visible (the CPU trains fp32 only; estimate: $("$ZT_KIT_ZT" estimate "${s[@]}" --gpu h100-sxm 2>&1 | grep -m1 '^step ' | cut -c1-120))"
    return 0
  fi
  "$ZT_KIT_ZT" estimate "${s[@]}" --gpu h100-sxm >"$w/speed_estimate.txt" 2>&1
  mpirun -np 1 "$ZT_KIT_ZT" train "${common[@]}" --set "ckpt.dir=$w/speed.ckpt" "${s[@]}" --set train.device=cuda --set comm.backend=nccl \
    --set train.steps=8 --set train.warmup=1 --set log.every=1 --set "log.metrics=$w/$name.jsonl" </dev/null >"$w/$name.log" 2>&1 ||
    { failed speed speed; return; }
  grep '"loss"' "$w/$name.jsonl" | tail -n 4 | awk -v est="$(grep -m1 '^step ' "$w/speed_estimate.txt" | cut -c1-160)" '
    { match($0, /"tokens_per_s":[-0-9.eE+]*/); t += substr($0, RSTART + 15, RLENGTH - 15)
      match($0, /"mfu":[-0-9.eE+]*/); m += substr($0, RSTART + 6, RLENGTH - 6)
      if (match($0, /"peak_total":[0-9.eE+]*/)) p = substr($0, RSTART + 13, RLENGTH - 13); n++ }
    END { e = est; sub(/^.*: /, "", e); e += 0  # the estimate'"'"'s tokens/s ("...: 67307 tokens/s, ...")
          printf "PASS speed: tinyllama-1.1b seq 2048 bf16-mixed, last %d steps: %.0f tokens/s (%.2f of the estimate), MFU %.3f, engine peak %.2f GiB; estimate: %s\n", n, t / n, (e > 0 ? t / n / e : 0), m / n, p / 1073741824, est }'
}

# The dead-rank line (issue 44, branch gpu-fail): 2 ranks over NCCL, rank 1 killed after its
# second step; rank 0 must exit within comm.timeout + 15 s, naming rank 1 in its own words.
line_dead_rank() {
  local w gpus t0 pid victim="" waited=0 to=20
  w=$(wrk)
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  if ! dry && [ "${gpus:-0}" -lt 2 ]; then
    result SKIP dead_rank "needs 2 GPUs (NCCL refuses two ranks on one GPU), $gpus visible"
    return 0
  fi
  local args
  mapfile -t args < <(dev --set train.device=cuda --set comm.backend=nccl --set zero.stage=3)
  t0=$(date +%s)
  mpirun -np 2 "$ZT_KIT_ZT" train "${common[@]}" --set "ckpt.dir=$w/dead_rank.ckpt" "${args[@]}" --set train.steps=1000 --set comm.timeout=$to \
    --set log.every=1 --set "log.metrics=$w/dead_rank.jsonl" </dev/null >"$w/dead_rank.log" 2>&1 &
  pid=$!
  while [ "$(cat "$w/dead_rank.jsonl" 2>/dev/null | grep -c '"loss"')" -lt 2 ] && kill -0 "$pid" 2>/dev/null && [ $waited -lt 400 ]; do
    sleep 0.1; waited=$((waited + 1))
  done
  for p in /proc/[0-9]*; do  # rank 1 of this job: its command line names the metrics file
    tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep "log.metrics=$w/dead_rank.jsonl" >/dev/null || continue
    [ "$(readlink "$p/exe" 2>/dev/null)" = "$(readlink -f "$ZT_KIT_ZT")" ] || continue
    tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -x 'OMPI_COMM_WORLD_RANK=1' >/dev/null && victim=${p#/proc/}
  done
  [ -n "$victim" ] || { kill "$pid" 2>/dev/null; failed dead_rank dead_rank; return; }
  kill -9 "$victim"
  local t1 dt
  t1=$(date +%s)
  wait "$pid"
  dt=$(($(date +%s) - t1))
  local named
  named=$(grep -v 'mpirun noticed' "$w/dead_rank.log" | grep -ciE 'rank 1')
  if dry && [ "$dt" -le $((to + 15)) ]; then  # over MPI, Open MPI's runtime ends the job itself
    result PASS dead_rank "rank 1 killed at step 2; the job ended ${dt} s later (limit $((to + 15)) s); $named lines of zt name rank 1 [device replaced by the CPU: MPI backend, the launcher ends the job]"
  elif [ "$dt" -le $((to + 15)) ] && [ "$named" -gt 0 ]; then
    result PASS dead_rank "rank 1 killed at step 2; the job ended ${dt} s later (comm.timeout $to s), naming rank 1"
  else
    result FAIL dead_rank "job ended ${dt} s after the kill (limit $((to + 15)) s); rank 1 named by zt: $named lines"
  fi
}

# (issue 53) one GPU: a collective that never completes (a stuck event the compute stream
# waits on) at each host copy of the device path: each must end within the timeout naming rank 1.
line_stuck_waits() {
  local w rc
  w=$(wrk)
  bash "$repo/tests/reliability/device_wait_test.sh" "${ZT_KIT_TESTS:?}/device_stuck_main" 3000 gpu \
    </dev/null >"$w/stuck_waits.log" 2>&1
  rc=$?
  local figs
  figs=$(grep -E '^ok ' "$w/stuck_waits.log" | sed 's/^ok //; s/ (timeout 3000 ms)//' | tr '\n' ';')
  if [ "$rc" -eq 77 ] && ! have_gpu; then result SKIP stuck_waits "no GPU visible"
  elif [ "$rc" -ne 0 ]; then result FAIL stuck_waits "exit $rc; $(grep -E '^FAIL' "$w/stuck_waits.log" | head -1)"
  elif ! have_gpu; then result FAIL stuck_waits "passed without a GPU? $figs"
  else result PASS stuck_waits "timeout 3000 ms: ${figs%;}"; fi
}

# line NAME: one line, in the work dir (called under timeout by do_lines)
do_line() {
  local name=$1
  declare -F "line_$name" >/dev/null || die "no line $name (lines: ${all_lines[*]})"
  "line_$name"
}

# lines [NAME...]: each under its own timeout; exit 1 when any FAILs
do_lines() {
  local names=("$@") n rc any=0 t0 w start=$SECONDS budget=${ZT_KIT_BUDGET:-480}
  [ ${#names[@]} -gt 0 ] || names=("${all_lines[@]}")
  [ -n "${ZT_KIT_GPU:-}" ] || { nvidia-smi -L >/dev/null 2>&1 && export ZT_KIT_GPU=1 || export ZT_KIT_GPU=0; }
  : "${ZT_KIT_ZT:?ZT_KIT_ZT: the zt binary}" "${ZT_KIT_TESTS:=$(dirname "$ZT_KIT_ZT")}"
  export ZT_KIT_TESTS
  w=$(wrk)
  mkdir -p "$w" && rm -rf "$w"/*.jsonl "$w"/*.result "$w"/*.ckpt "$w"/e_ckpt  # an earlier run's metrics are no reference
  export ZT_KIT_WORK=$w XDG_CACHE_HOME=$w/cache OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
  for n in "${names[@]}"; do
    [ -n "${limit_s[$n]:-}" ] || die "no line $n (lines: ${all_lines[*]})"
    t0=$(date +%s.%N)
    local left=$((budget - (SECONDS - start))) lim=$((limit_s[$n] * ${ZT_KIT_SLOW:-1}))
    if [ "$left" -lt 15 ]; then
      echo "NOT RUN $n: out of the run's budget (ZT_KIT_BUDGET=$budget s): not judged"; any=1; continue
    fi
    [ "$lim" -gt "$left" ] && lim=$left
    timeout -k 10 "$lim" bash "$self" line "$n" >"$w/$n.result" 2>"$w/$n.err"
    rc=$?
    cat "$w/$n.result"
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
      echo "FAIL $n: timed out after $lim s (a hang; the other lines go on)"; any=1
    elif [ "$rc" -ne 0 ] || grep -q '^FAIL' "$w/$n.result" || ! grep -qE '^(PASS|SKIP)' "$w/$n.result"; then
      grep -qE '^(PASS|FAIL|SKIP)' "$w/$n.result" || echo "FAIL $n: exit $rc, no result line ($(tail -2 "$w/$n.err" | tr '\n' ' '))"
      any=1
    fi
    awk -v n="$n" -v a="$t0" -v b="$(date +%s.%N)" -v l="$lim" 'BEGIN { printf "  (%s: %.1f s of %d)\n", n, b - a, l }'
  done
  if [ -n "${OUT:-}" ] && [ "$(readlink -f "$w")" != "$(readlink -f "$OUT")" ]; then
    tar -C "$w" -czf "$OUT/logs.tar.gz" --exclude=cache --exclude='*_ckpt' --exclude='*.ckpt' . 2>/dev/null
  fi
  return "$any"
}

# plan: each call's expected time against the budget; exit 1 when one does not fit or a
# line lacks its limit, expected time or function
do_plan() {
  local budget=${ZT_KIT_BUDGET:-480} bad=0 n list sum
  for list in all_lines second_lines; do
    local -n names=$list
    sum=0
    for n in "${names[@]}"; do
      { [ -n "${limit_s[$n]:-}" ] && [ -n "${expect_s[$n]:-}" ] && declare -F "line_$n" >/dev/null; } ||
        { echo "plan: line $n lacks its limit, expected time or function"; bad=1; continue; }
      sum=$((sum + expect_s[$n]))
    done
    echo "plan: $list (${names[*]}): expected $sum s of the $budget s budget"
    [ "$sum" -le "$budget" ] || { echo "plan: $list does not fit the budget"; bad=1; }
  done
  return "$bad"
}

# summary LOG: the count of each outcome over the lines of a run's output (PASS counts only
# lines that ran and were judged; NOT RUN lines make the run fail)
summary() {
  awk '/^PASS /{p++} /^FAIL /{f++} /^SKIP /{s++} /^NOT RUN /{n++}
       END { printf "summary: %d PASS, %d FAIL, %d SKIP, %d NOT RUN\n", p, f, s, n }' "$1"
}

case "$cmd" in
  pack) do_pack ;;
  run) do_run ;;
  unpack) do_unpack ;;
  exec)  # exec CMD...: CMD with the kit unpacked and its environment (no discovery output)
    K=$(do_unpack) || exit 2
    kit_env "$K"
    cpu_check "$K" >/dev/null || { cpu_check "$K" | grep REFUSED; exit 2; }
    discover "$K" >/dev/null || { discover "$K" | grep REFUSED; exit 2; }
    exec "$@" ;;
  plan) do_plan ;;
  cpu-check) cpu_check "$1" ;;  # cpu-check DIR: the CPU check against DIR/march (the tests)
  lines) do_lines "$@" ;;
  line) do_line "$@" ;;
  *) echo "usage: $0 pack|run|lines [LINE...]" >&2; exit 2 ;;
esac
