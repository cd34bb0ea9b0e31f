#!/usr/bin/env bash
# Installs the Debian packages zt needs. Idempotent: installs only what is missing.
# Usage: scripts/install-deps.sh [--slurm]   (--slurm adds slurm-wlm + munge for the Slurm job
# tests and iproute2 (ip netns, tc) for the simulated multi-node tests)
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  openmpi-bin libopenmpi-dev               # MPI (mpirun; PMIx for srun --mpi=pmix)
  libhdf5-openmpi-dev hdf5-tools           # parallel HDF5 + h5dump
  libeigen3-dev                            # CPU kernels
  libfabric-dev libfabric-bin              # fabric providers (fi_getinfo, fi_info)
  libhwloc-dev hwloc                       # topology and affinity
  libcli11-dev libtomlplusplus-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  liburing-dev                             # NVMe offload (io_uring)
  clang libclang-rt-dev libomp-dev         # fuzz targets (libFuzzer, ASan, UBSan; fuzz preset)
  gnuplot-nox                              # zt check plots (optional at run time)
  python3
  bc procps                                # test scripts: elapsed-time arithmetic (bc), pgrep / pkill
  python3-numpy python3-h5py python3-pip   # checkpoint tests (tests/ckpt/hf) read files with h5py
)
if [[ "${1:-}" == "--slurm" ]]; then
  packages+=(slurm-wlm munge slurm-wlm-basic-plugins iproute2)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python's safetensors package (not in Debian 12), for the Hugging Face conversion tests.
if ! python3 -c "import safetensors" 2>/dev/null; then
  echo "install-deps: pip install safetensors"
  $SUDO python3 -m pip install --quiet --break-system-packages safetensors
fi
