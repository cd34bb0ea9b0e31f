#!/usr/bin/env bash
# What to run on a lent GPU machine for the CUDA kernels (docs/gpu-verification.md), in
# stages so each fits one device call:
#   tests/kernels_cuda/run_on_device.sh prepare    (on the machine WITH network, before the
#                                                  device calls) copy the cuDNN frontend
#                                                  headers into .carry/ (git-ignored; pass
#                                                  carry [".carry"] to the device tool)
#   tests/kernels_cuda/run_on_device.sh build      configure build-gpu for the local GPU, build
#                                                  (and ZT_EXTRA_TARGETS, e.g. zt)
#   tests/kernels_cuda/run_on_device.sh test       the gpu tests, per-buffer errors to the log
#   tests/kernels_cuda/run_on_device.sh sanitize   compute-sanitizer memcheck, racecheck, synccheck
#   tests/kernels_cuda/run_on_device.sh all        the three in order
# Logs go to $OUT (the device tool's folder) or ./gpu-logs. A short summary is printed last.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
stage=${1:-all}
logs=${OUT:-$PWD/gpu-logs}
mkdir -p "$logs"
build=${ZT_GPU_BUILD:-build-gpu}  # another build folder: the dry run (tests/kit)
bin=$build/tests/kernels_cuda/test_kernels_cuda
jobs=$(nproc)
fe=.carry/cudnn-frontend/include  # cuDNN frontend headers (prepare), for cuDNN's attention

arch() {  # compute capability of GPU 0 as "90", or 90 when nvidia-smi cannot say
  local cc
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  echo "${cc:-90}"
}

do_prepare() {
  local inc
  inc=$(python3 -c "import importlib.util as u, os; s = u.find_spec('cudnn'); print(os.path.join(os.path.dirname(os.path.dirname(s.origin)), 'include') if s and s.origin else '')" 2>/dev/null)
  if [[ -z $inc || ! -f $inc/cudnn_frontend.h ]]; then
    echo "prepare: no cuDNN frontend headers here (python3 -m pip install nvidia-cudnn-frontend)" >&2
    return 1
  fi
  mkdir -p "$fe" && cp -r "$inc"/. "$fe"/ && echo "prepare: cuDNN frontend headers in $fe ($(du -sh "$fe" | cut -f1))"
}

do_build() {
  local cudnn=()
  if [[ -f $fe/cudnn_frontend.h ]]; then cudnn=(-DZT_CUDNN_FRONTEND_INCLUDE="$PWD/$fe"); fi
  {
    nvidia-smi
    ls /usr/local/cuda/lib64/libcudnn.so* /usr/lib/x86_64-linux-gnu/libcudnn.so* 2>/dev/null
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DZT_CUDA=ON \
          -DCMAKE_CUDA_ARCHITECTURES="$(arch)" -DZT_WERROR=ON -DZT_BUILD_BENCH=OFF "${cudnn[@]}" &&
      cmake --build "$build" --target test_kernels_cuda test_comm_nccl ${ZT_EXTRA_TARGETS:-} -j"$jobs"
  } >"$logs/build.log" 2>&1 || { tail -40 "$logs/build.log"; return 1; }
  echo "build ok (sm_$(arch)); $(grep -o 'cuDNN fused attention [A-Z]*' "$logs/build.log" | head -1)"
}

do_test() {
  "$bin" >"$logs/test.log" 2>&1
  local rc=$?
  (cd "$build" && ctest -L gpu --output-on-failure -j1) >"$logs/ctest.log" 2>&1
  grep -m1 "attention backend" "$logs/test.log"
  grep "^\[timing\]" "$logs/test.log"
  grep -E "\[gpu vs cpu\]|loss rel diff" "$logs/test.log" | awk '{ if ($0 ~ /rel err/) print }' | sort -k2 | tail -60
  echo "test_kernels_cuda exit $rc"
  grep -E "tests passed|Total Test" "$logs/ctest.log"
  grep -E "^\[  FAILED" "$logs/test.log" | head -20
  return "$rc"
}

do_sanitize() {
  local rc=0 log="$logs/sanitize.log"
  : >"$log"
  run_tool() {  # tool filter
    echo "=== compute-sanitizer --tool $1 ($2)" >>"$log"
    compute-sanitizer --tool "$1" "$bin" --gtest_filter="$2" >>"$log" 2>&1 || rc=1
    echo "$1: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1)"
  }
  run_tool memcheck '-DeviceModelTest.TinyLlama*:DeviceModelTest.Tiny50*'
  run_tool racecheck 'Attention*:Pointwise*:LossOptim*:Optim*:Packed*'
  run_tool synccheck 'Attention*:Pointwise*:LossOptim*:Packed*'
  run_tool initcheck 'Attention*:Pointwise*:LossOptim*:Optim*:Packed*:DropoutGpu*'
  return "$rc"
}

case "$stage" in
  prepare) do_prepare ;;
  build) do_build ;;
  test) do_test ;;
  sanitize) do_sanitize ;;
  all) do_build && { do_test; do_sanitize; } ;;
  *) echo "usage: $0 prepare|build|test|sanitize|all" >&2; exit 2 ;;
esac
