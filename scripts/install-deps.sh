#!/usr/bin/env bash
# Installs the Debian packages zt needs, and the Python packages its default tests need
# (numpy, h5py, safetensors, xxhash) for the `python3` on PATH, the interpreter the tests
# run. Idempotent: installs only what is missing. Python packages are pinned
# (scripts/python-peers.txt).
# Usage: scripts/install-deps.sh [--slurm] [--hf-peers]
#   --slurm     adds slurm-wlm + munge for the Slurm job tests and iproute2 (ip netns, tc)
#               for the simulated multi-node tests
#   --hf-peers  adds the peers of the tests labelled hf-torch: PyPI's torch (CPU use) and
#               transformers (ckpt.hf.peer_transformers*, ckpt.hf.hf_roundtrip.bf16 and
#               .transformers, the FSDP2 bench), bitsandbytes (the NF4 peer,
#               kernels.nf4_peer_bnb, model.hf.lora_export_qlora), tokenizers +
#               sentencepiece (data.hf.tokenizer_parity*, bench/tokenizer), jinja2
#               (data.hf.chat_template, data.hf.generate_export) and peft (the LoRA peer,
#               model.hf.lora_peer, model.hf.lora_export*) and trl + datasets (the DPO /
#               ORPO peer, train.hf.preference_peer)
set -euo pipefail
slurm=0 hf_peers=0
for arg in "$@"; do
  case "$arg" in
    --slurm) slurm=1 ;;
    --hf-peers) hf_peers=1 ;;
    *) echo "install-deps: unknown option '$arg' (--slurm, --hf-peers)" >&2; exit 2 ;;
  esac
done

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
  libxxhash-dev                            # checkpoint checksums (XXH3, src/core/checksum.cpp)
  clang libclang-rt-dev libomp-dev         # fuzz targets (libFuzzer, ASan, UBSan; fuzz preset)
  gnuplot-nox                              # zt check plots (optional at run time)
  qemu-user                                # kit.portable_march: the kernels on an emulated AVX2-only CPU
  python3
  bc procps                                # test scripts: elapsed-time arithmetic (bc), pgrep / pkill
  python3-numpy python3-h5py python3-pip   # checkpoint tests (tests/ckpt/hf) read files with h5py
  libpcre2-dev                             # tokenizer.json pre-tokenizer regexes (src/data)
  libsentencepiece-dev                     # SentencePiece tokenizer.model (src/data)
  libutf8proc-dev                          # tokenizer.json Unicode normalizers (NFC: Qwen2)
)
if ((slurm)); then
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

# Python packages, for the one interpreter the tests run: the `python3` on PATH (CMake
# records it when it configures: tests/CMakeLists.txt), whichever it is (Debian's, pyenv's,
# a venv's). Each pinned package is pip-installed for it where its module does not import
# (Debian's python3-numpy / python3-h5py above serve when that python3 is Debian's).
# The default test set needs numpy, h5py (checkpoints read by an outside reader),
# safetensors (the HF conversion tests) and xxhash (the independent check of zt-xxh3).
py=$(python3 -c 'import sys; print(sys.executable)')
pip=("$py" -m pip install --quiet --break-system-packages)
if ! "$py" -c 'import os, sys, sysconfig; sys.exit(0 if os.access(sysconfig.get_paths()["purelib"], os.W_OK) else 1)'; then
  pip=($SUDO "${pip[@]}")
fi
"$py" -m pip --version >/dev/null 2>&1 || $SUDO "$py" -m ensurepip --upgrade
# The pins: scripts/python-peers.txt, the one list both this script and the tests read.
pins_file="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/python-peers.txt"
declare -A PIN=()  # name -> "name==version"; an unpinned name is an unbound variable (set -u)
while read -r line || [[ -n $line ]]; do
  line=${line%%#*}
  line=${line//[[:space:]]/}
  [[ -z $line ]] && continue
  if [[ $line != *==?* ]]; then
    echo "install-deps: $pins_file: '$line' is not a name==version line" >&2
    exit 2
  fi
  PIN[${line%%==*}]=$line
done < "$pins_file"
need() {  # MODULE PIP-ARGS...: pip install PIP-ARGS for $py where MODULE does not import
  local mod=$1
  shift
  "$py" -c "import $mod" 2>/dev/null && return 0
  echo "install-deps: pip install $* (for $py)"
  "${pip[@]}" "$@"
}
need numpy "${PIN[numpy]}"
need h5py "${PIN[h5py]}"
need safetensors "${PIN[safetensors]}"
need xxhash "${PIN[xxhash]}"
# NVIDIA's nvml.h (PyPI's nvidia-nvml-dev, a header only): the test checklist_health.nvml_abi
# compares zt's NVML declarations (checklist/src/nvml_abi.hpp) with it.
if ! "$py" -c "import glob, os, sys; sys.exit(0 if any(glob.glob(os.path.join(p, 'nvidia', '*', 'include', 'nvml.h')) for p in sys.path) else 1)"; then
  echo "install-deps: pip install ${PIN[nvidia-nvml-dev]} (nvml.h, for checklist_health.nvml_abi)"
  "${pip[@]}" --no-deps "${PIN[nvidia-nvml-dev]}"
fi

# The cuDNN frontend's C++ headers (header-only, PyPI's nvidia-cudnn-frontend) for CUDA
# builds: zt's attention then runs on cuDNN's fused SDPA (src/kernels/cuda/CMakeLists.txt
# finds the package's include/). --no-deps: only the headers are used; cuDNN itself comes
# with the CUDA toolkit (or nvidia-cudnn-cu13) and is loaded at run time. Without it the
# build falls back to zt's own attention kernel.
if command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then
  if "$py" -c "import importlib.util as u, os, sys; s = u.find_spec('cudnn'); sys.exit(0 if s and s.origin and os.path.exists(os.path.join(os.path.dirname(os.path.dirname(s.origin)), 'include', 'cudnn_frontend.h')) else 1)" 2>/dev/null; then
    echo "install-deps: nvidia-cudnn-frontend present"
  else
    echo "install-deps: pip install nvidia-cudnn-frontend (cuDNN frontend headers, for the CUDA build)"
    "${pip[@]}" --no-deps "${PIN[nvidia-cudnn-frontend]}"
  fi
fi

# Python's tokenizers and sentencepiece (--hf-peers): the peers of the tokenizer parity test.
# Python's sentencepiece must be of the series of the libsentencepiece zt links: 0.2.x breaks
# unigram ties differently from 0.1.x (another segmentation of equal score). Debian 12 has
# 0.1.97, which PyPI has no wheel of for this Python; 0.1.99 encodes the same.
if ((hf_peers)); then
  need tokenizers "${PIN[tokenizers]}"
  spm_lib=$(pkg-config --modversion sentencepiece)
  case "$spm_lib" in 0.1.*) spm_py=0.1.99 ;; *) spm_py=$spm_lib ;; esac
  if ! "$py" -c "import sentencepiece as s; assert s.__version__.rsplit('.', 1)[0] == '${spm_py%.*}'" 2>/dev/null; then
    echo "install-deps: pip install sentencepiece==$spm_py (libsentencepiece $spm_lib)"
    "${pip[@]}" "sentencepiece==$spm_py"
  fi
fi

# torch + transformers from PyPI (--hf-peers). PyPI has no CPU-only torch; its Linux wheel
# requires about 3 GB of nvidia-* CUDA wheels. Where the machine already has a CUDA 13
# toolkit (this project's machines: /usr/local/cuda, for the CUDA build), torch loads its
# CUDA libraries from there, and only the four that toolkit lacks or has too old (cuFile,
# cuSPARSELt, NVSHMEM, NCCL; ~450 MB) come from PyPI: torch --no-deps plus those plus its
# pure-Python dependencies. If that torch does not import, the full `pip install torch`.
# Skipped when both import already.
if ((hf_peers)); then
  if "$py" -c "import torch, transformers" 2>/dev/null; then
    echo "install-deps: torch and transformers present"
  else
    start=$SECONDS
    if ! "$py" -c "import torch" 2>/dev/null; then
      echo "install-deps: pip install torch (CPU use: --no-deps + the CUDA libraries the toolkit lacks)"
      "${pip[@]}" --no-deps "${PIN[torch]}"
      "${pip[@]}" --no-deps "${PIN[nvidia-cufile]}" "${PIN[nvidia-cusparselt-cu13]}" \
        "${PIN[nvidia-nvshmem-cu13]}" "${PIN[nvidia-nccl-cu13]}"
      "${pip[@]}" filelock "typing-extensions>=4.13" "sympy>=1.13.3" "networkx>=2.5.1" "${PIN[jinja2]}" "fsspec>=0.8.5"
      if ! "$py" -c "import torch; torch.ones(2) @ torch.ones(2)" 2>/dev/null; then
        echo "install-deps: torch without its CUDA wheels does not import here; pip install torch (with them)"
        "${pip[@]}" "${PIN[torch]}"
      fi
    fi
    need transformers "${PIN[transformers]}"  # pinned beside peft (the versions the peer tests ran)
    echo "install-deps: torch + transformers in $((SECONDS - start)) s"
  fi
  # jinja2 (a dependency of torch's, installed above) renders transformers' chat templates:
  # data.hf.chat_template, data.hf.generate_export.
  need jinja2 "${PIN[jinja2]}"
  # bitsandbytes (42 MB; its dependencies torch, numpy, packaging are the ones above): the
  # NF4 peer of kernels.nf4_peer_bnb and model.hf.lora_export_qlora (its CPU functions, no GPU needed).
  need bitsandbytes --no-deps "${PIN[bitsandbytes]}"
  # peft (the LoRA peer of model.hf.lora_peer: init, parameter counts, forward with
  # adapters). Its dependencies are the ones above plus accelerate (pure Python; its own
  # torch, numpy, pyyaml, huggingface_hub and safetensors are above too) and psutil.
  "$py" -c "import peft" 2>/dev/null || {
    echo "install-deps: pip install peft (+ accelerate, psutil)"
    "${pip[@]}" psutil pyyaml
    "${pip[@]}" --no-deps "${PIN[accelerate]}" "${PIN[peft]}"
  }
  # TRL (the DPO / ORPO peer, label hf-torch): trl 1.16.0 (transformers >= 4.56.2, accelerate
  # >= 1.10.1: the ones above) without its dependencies, so pip does not re-resolve torch;
  # what it imports besides those: datasets (with pandas, pyarrow, dill, multiprocess).
  need datasets "${PIN[datasets]}"
  need trl --no-deps "${PIN[trl]}"
fi
