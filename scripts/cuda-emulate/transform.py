#!/usr/bin/env python3
"""Rewrites a CUDA source for emu.hpp's CPU emulation: kernel<<<cfg>>>(args); becomes
emu::launch([&] { kernel(args); }, cfg); the dynamic shared array becomes emu's buffer;
the private headers are included from the emulation folder.
usage: transform.py SRC DST SRC_DIR WORK_DIR"""
import re
import sys

src, dst, src_dir, work = sys.argv[1:5]
s = open(src).read()
s = s.replace("extern __shared__ float smem[];", "float* smem = emu::dyn_smem.data();")
s = re.sub(r"([\w:]+(?:<[\w, ]*>)?)\s*<<<(.*?)>>>\s*\((.*?)\);",
           lambda m: "emu::launch([&] { %s(%s); }, %s);" % (m.group(1), m.group(3), m.group(2)),
           s, flags=re.S)
s = s.replace('#include "common.cuh"', '#include "%s/common.cuh"' % src_dir)
s = s.replace('#include "gated_delta_block.cuh"', '#include "%s/gated_delta_block.cuh"' % work)
open(dst, "w").write(s)
