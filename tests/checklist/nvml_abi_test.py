#!/usr/bin/env python3
"""zt's NVML declarations (checklist/src/nvml_abi.hpp) against NVIDIA's own nvml.h.

  nvml_abi_test.py CXX ABI_HEADER WORKDIR

zt never includes nvml.h (the CUDA toolkit ships none), and its test double
(tests/checklist/fake_nvml.cpp) includes zt's header, so a wrong constant there would pass
every other test. This test reads every constant, typedef and struct nvml_abi.hpp declares,
writes one probe that prints each one's value, size, alignment and field offsets, and
compiles it twice: against zt's header and against NVIDIA's (the same names; a zt name
that NVIDIA spells otherwise is in NVIDIA_NAME below). Any difference, and any declaration
the probe does not cover, fails.

NVIDIA's nvml.h comes from PyPI's nvidia-nvml-dev (scripts/python-peers.txt; install-deps.sh
installs it), found in this Python's site-packages, or $ZT_NVML_HEADER. Without it: SKIPPED
and exit 77 (CTest: skipped), a FAIL under ZT_REQUIRE_PEERS=1 (CI).
"""
import glob
import os
import re
import subprocess
import sys

# zt's own names for NVIDIA's constants (nvml.h has these as macros).
NVIDIA_NAME = {
    "kThrottleGpuIdle": "nvmlClocksThrottleReasonGpuIdle",
    "kThrottleSwPowerCap": "nvmlClocksThrottleReasonSwPowerCap",
    "kThrottleHwSlowdown": "nvmlClocksThrottleReasonHwSlowdown",
    "kThrottleSwThermal": "nvmlClocksThrottleReasonSwThermalSlowdown",
    "kThrottleHwThermal": "nvmlClocksThrottleReasonHwThermalSlowdown",
    "kThrottleHwPowerBrake": "nvmlClocksThrottleReasonHwPowerBrakeSlowdown",
    "kNvmlEventTypeXidCriticalError": "nvmlEventTypeXidCriticalError",
}


def find_header():
    env = os.environ.get("ZT_NVML_HEADER")
    if env:
        return env if os.path.isfile(env) else None
    for p in sys.path + ["/usr/local/cuda/include", "/usr/include"]:
        for cand in [os.path.join(p, "nvml.h")] + sorted(glob.glob(os.path.join(p, "nvidia", "*", "include", "nvml.h"))):
            if os.path.isfile(cand):
                return cand
    return None


def declarations(text):
    """(constants, typedefs, structs) of zt's header: constant names; typedef names;
    {struct name: [field names]}."""
    text = re.sub(r"//[^\n]*", "", text)
    constants, typedefs, structs = [], [], {}
    for body in re.findall(r"enum\s*:\s*int\s*\{([^}]*)\}", text):
        constants += re.findall(r"(\w+)\s*=", body)
    constants += re.findall(r"constexpr\s+[\w\s]+?\s(\w+)\s*=", text)
    for body, name in re.findall(r"typedef\s+struct\s*\{([^}]*)\}\s*(\w+)\s*;", text):
        structs[name] = re.findall(r"(\w+)\s*;", body)
    typedefs = [t for t in re.findall(r"typedef\s+[^;{}]*?(\w+)\s*;", text) if t not in structs]
    return constants, typedefs, structs


def probe(constants, typedefs, structs, nvidia):
    lines = ["#include <cstddef>", "#include <cstdio>",
             '#include "%s"' % nvidia if nvidia else '#include "nvml_abi.hpp"', "int main() {"]
    for c in constants:
        src = NVIDIA_NAME.get(c, c) if nvidia else c
        lines.append('  std::printf("constant %s %%lld\\n", (long long)(%s));' % (c, src))
    for t in typedefs + list(structs):
        lines.append('  std::printf("sizeof %s %%zu alignof %%zu\\n", sizeof(%s), alignof(%s));' % (t, t, t))
    for s, fields in structs.items():
        for f in fields:
            lines.append('  std::printf("offsetof %s.%s %%zu size %%zu\\n", offsetof(%s, %s), sizeof(%s::%s));'
                         % (s, f, s, f, s, f))
    lines += ["  return 0;", "}"]
    return "\n".join(lines) + "\n"


def build_and_run(cxx, source, include_dir, work, tag):
    src, exe = os.path.join(work, "probe_%s.cpp" % tag), os.path.join(work, "probe_%s" % tag)
    with open(src, "w") as f:
        f.write(source)
    r = subprocess.run([cxx, "-std=c++20", "-I", include_dir, src, "-o", exe], capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL: the %s probe does not compile (a name zt declares that the header lacks?):\n%s"
              % (tag, r.stderr[-4000:]))
        sys.exit(1)
    return subprocess.run([exe], capture_output=True, text=True, check=True).stdout.splitlines()


def main():
    cxx, abi, work = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    header = find_header()
    if header is None:
        why = ("NVIDIA's nvml.h not found (pip install nvidia-nvml-dev, pinned in scripts/python-peers.txt, "
               "or set ZT_NVML_HEADER)")
        if os.environ.get("ZT_REQUIRE_PEERS") == "1":
            print("FAIL: %s; ZT_REQUIRE_PEERS=1 (CI) requires it" % why)
            sys.exit(1)
        print("SKIPPED: " + why)
        sys.exit(77)
    os.makedirs(work, exist_ok=True)
    with open(abi) as f:
        text = f.read()
    constants, typedefs, structs = declarations(text)
    # Every declaration is covered: a name the parser missed would go unchecked.
    declared = set(re.findall(r"(?:constexpr[\w\s]+?|typedef[^;{}]*?|\}\s*)\b(\w+)\s*[=;]", re.sub(r"//[^\n]*", "", text)))
    declared |= {n for body in re.findall(r"enum\s*:\s*int\s*\{([^}]*)\}", text) for n in re.findall(r"(\w+)\s*=", body)}
    missed = sorted(declared - set(constants) - set(typedefs) - set(structs))
    if missed or len(constants) < 30 or not structs:
        print("FAIL: the probe does not cover %s (%d constants, %d structs read)" % (missed, len(constants), len(structs)))
        sys.exit(1)
    ours = build_and_run(cxx, probe(constants, typedefs, structs, None), os.path.dirname(abi), work, "zt")
    theirs = build_and_run(cxx, probe(constants, typedefs, structs, header), os.path.dirname(header), work, "nvidia")
    bad = ["zt: %s\n  nvml.h: %s" % (a, b) for a, b in zip(ours, theirs) if a != b]
    print("nvml_abi_test: %d constants, %d typedefs, %d structs (%d fields) of %s against %s"
          % (len(constants), len(typedefs), len(structs), sum(len(f) for f in structs.values()), abi, header))
    for b in bad:
        print("FAIL: " + b)
    if bad or len(ours) != len(theirs):
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
