#!/usr/bin/env bash
# No host-blocking CUDA wait outside the polled device wait (zt/comm/device_wait.hpp,
# src/comm/device_wait_cuda.cpp): a bare cudaStreamSynchronize, cudaEventSynchronize or
# cudaDeviceSynchronize anywhere else in zt's sources (src/, include/) would block forever
# on compute waiting for a collective of a dead peer. Comments do not count.
# Usage: device_waits_check.sh SOURCE_DIR
set -uo pipefail
root="$1"
hits="$(grep -rnE '\bcuda(Stream|Event|Device)Synchronize[[:space:]]*\(' \
          "$root/src" "$root/include" \
          --include='*.cpp' --include='*.hpp' --include='*.cu' --include='*.cuh' --include='*.h' |
        grep -v '^[^:]*/src/comm/device_wait_cuda\.cpp:' |
        grep -vE '^[^:]*:[0-9]+:[[:space:]]*//')"
if [[ -n "$hits" ]]; then
  echo "FAIL: host-blocking CUDA waits outside comm::wait_stream / wait_event:"
  echo "$hits"
  echo "HINT: wait through comm::wait_stream(stream, what) or comm::wait_event(event, what)"
  exit 1
fi
[[ -f "$root/src/comm/device_wait_cuda.cpp" ]] || { echo "FAIL: $root/src/comm/device_wait_cuda.cpp is missing"; exit 1; }
echo "PASS: no bare cudaStreamSynchronize / cudaEventSynchronize / cudaDeviceSynchronize in src/ or include/ outside src/comm/device_wait_cuda.cpp"
