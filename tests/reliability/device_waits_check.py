#!/usr/bin/env python3
"""The device path's host waits are the polled ones only (docs/reliability.md, "Faults").

A host call that blocks on the device never reaches comm::wait_ready, so behind a collective
of a dead peer (the compute stream waits on it) it hangs instead of ending the job within
comm.timeout. This scan of zt's sources (src/ and include/, the training path; comments
and strings do not count) fails on each such call outside the allow-list below, where every entry says
why it cannot wait on a collective:

  sync      cudaStreamSynchronize / cudaEventSynchronize / cudaDeviceSynchronize
  memcpy    cudaMemcpy( (and 2D / 3D / ToSymbol / FromSymbol): blocking
  memset    cudaMemset( (and 2D / 3D): on the legacy stream, which the compute stream follows
  pageable  cudaMemcpyAsync with a host side (any kind but cudaMemcpyDeviceToDevice): a
            pageable host side blocks (CUDA's documented behaviour); the host side must be
            comm::HostStage (src/comm/host_stage_cuda.cpp) or memory pinned by construction
  free      cudaFree( : waits for the whole device
  buffer    DeviceBuffer's blocking upload( / download( / fill_bytes( / to_host(): allowed
            only at construction, i.e. while an object is built or bound, before the first
            pass queues work behind a collective (a constructor, a bind)

Usage: device_waits_check.py SOURCE_DIR     the scan (exit 1 with each hit, file:line)
       device_waits_check.py --self-test    plants each pattern in a temporary tree and
                                            checks the scan catches it (and the allowed not)
"""
import os
import re
import sys
import tempfile

EXT = (".cpp", ".hpp", ".cu", ".cuh", ".h")
ROOTS = ("src", "include")

RULES = {
    "sync": re.compile(r"\bcuda(Stream|Event|Device)Synchronize\s*\("),
    "memcpy": re.compile(r"\bcudaMemcpy(2D|3D|ToSymbol|FromSymbol)?\s*\("),
    "memset": re.compile(r"\bcudaMemset(2D|3D)?\s*\("),
    "pageable": re.compile(r"\bcudaMemcpyAsync\s*\("),
    "free": re.compile(r"\bcudaFree\s*\("),
    "buffer": re.compile(r"\.\s*(upload|download|fill_bytes)\s*\(|\.\s*to_host\s*\(\s*\)"),
}
HINTS = {
    "sync": "wait through comm::wait_stream(stream, what) or comm::wait_event(event, what)",
    "memcpy": "queue cudaMemcpyAsync on the stream; a host side goes through comm::HostStage",
    "memset": "cudaMemsetAsync on the stream",
    "pageable": "copy through comm::HostStage (to_host / to_device), or into a kc::PinnedBuffer "
                "and allow-list it here with the reason",
    "free": "free at teardown after a polled wait (or allow-list it here with the reason)",
    "buffer": "copy through comm::HostStage on the stream; DeviceBuffer's blocking calls are "
              "for construction only",
}

# (path, rule, text the statement contains, why it cannot hang on a collective)
ALLOW = [
    ("src/comm/host_stage_cuda.cpp", "pageable", "cudaMemcpyAsync",
     "the stage itself: pinned buffers or a host side checked pinned, then the polled wait"),
    ("include/zt/kernels/cuda/buffer.hpp", "memcpy", "cudaMemcpy(",
     "DeviceBuffer's definition; its call sites are checked (rule buffer)"),
    ("include/zt/kernels/cuda/buffer.hpp", "memset", "cudaMemset(",
     "DeviceBuffer's definition; its call sites are checked (rule buffer)"),
    ("include/zt/kernels/cuda/buffer.hpp", "free", "cudaFree(ptr_)",
     "DeviceBuffer's destructor and move: teardown or a regrown workspace"),
    ("src/zero/memory_cuda.cpp", "free", "cudaFree(p)",
     "release: after a polled wait for the compute stream, skipped after an abort"),
    ("src/comm/nccl_comm.cpp", "free", "cudaFree(barrier_word)",
     "the NCCL context's teardown, skipped after an abort"),
    ("src/model/cuda/device_model_impl.hpp", "buffer", "cos.upload(cs)",
     "construction: the RoPE tables, in the model's constructor"),
    ("src/model/cuda/device_model_impl.hpp", "buffer", "sin.upload(sn)",
     "construction: the RoPE tables, in the model's constructor"),
    ("src/model/cuda/device_lora.cpp", "buffer", "d.upload(v)",
     "construction: bind_lora's tables, before the first pass"),
    ("src/model/cuda/device_moe.cpp", "pageable", "moe_host.",
     "moe_host is pinned (kc::PinnedBuffer), read after a polled wait"),
    ("src/model/cuda/device_moe_ep.cpp", "pageable", "ep_stage_",
     "ep_stage_send / ep_stage_recv are pinned (kc::PinnedBuffer)"),
    ("src/model/cuda/device_moe_ep.cpp", "pageable", "ep_counts_h",
     "ep_counts_h is pinned (kc::PinnedBuffer)"),
    ("src/model/cuda/device_moe_ep.cpp", "pageable", "ep_plan_h",
     "ep_plan_h is pinned (kc::PinnedBuffer)"),
    ("src/kernels/cuda/moe.cu", "pageable", "host_offsets",
     "the caller's moe_host.offsets, pinned (kc::PinnedBuffer)"),
    ("src/zero/offload_copy_cuda.cpp", "pageable", "cudaMemcpyAsync(dst, src, bytes",
     "the copier's host side is a slot of the pinned pool (offload/pinned_pool.hpp; pageable "
     "only where cudaHostAlloc failed, with a warning)"),
    ("src/kernels/cuda/stress.cpp", "pageable", "cudaMemcpyAsync",
     "zt check's GPU stress: its streams wait on no collective (and it polls with a bound)"),
]


def strip(text):
    """text with comments and string/char literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else "")); i = j + 1
        else:
            out.append(c); i += 1
    return "".join(out)


def statement(code, at):
    """The call starting at `at` up to its closing parenthesis (or the next ';')."""
    depth, j = 0, code.find("(", at)
    while 0 <= j < len(code):
        if code[j] == "(":
            depth += 1
        elif code[j] == ")":
            depth -= 1
            if depth == 0:
                return code[at:j + 1]
        j += 1
    end = code.find(";", at)
    return code[at:end if end >= 0 else len(code)]


def scan(root, used=None):
    hits = []
    for top in ROOTS:
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(x for x in dirs if not x.startswith("."))
            for f in sorted(files):
                if not f.endswith(EXT):
                    continue
                path = os.path.join(d, f)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    code = strip(fh.read())
                for rule, rx in RULES.items():
                    for m in rx.finditer(code):
                        st = " ".join(statement(code, m.start()).split())
                        # (what an entry names may start before the match: its line)
                        ctx = code[code.rfind("\n", 0, m.start()) + 1:m.start()].strip() + st
                        if rule == "pageable" and "cudaMemcpyDeviceToDevice" in st:
                            continue
                        ok = [i for i, (p, r, needle, _) in enumerate(ALLOW)
                              if p == rel and r == rule and needle in ctx]
                        if ok:
                            if used is not None:
                                used.update(ok)
                            continue
                        line = code.count("\n", 0, m.start()) + 1
                        hits.append(f"{rel}:{line}: [{rule}] {st[:160]}\n  HINT: {HINTS[rule]}")
    return hits


def main_scan(root):
    if not os.path.isfile(os.path.join(root, "src/comm/host_stage_cuda.cpp")):
        print(f"FAIL: {root}/src/comm/host_stage_cuda.cpp (the pinned stage) is missing")
        return 1
    used = set()
    hits = scan(root, used)
    hits += [f"allow-list entry {p} [{r}] '{needle}' matches nothing: remove it"
             for i, (p, r, needle, _) in enumerate(ALLOW) if i not in used]
    if hits:
        print("FAIL: host calls that block on the device outside the polled waits:")
        print("\n".join(hits))
        return 1
    print(f"PASS: no blocking device wait, blocking or pageable copy, cudaFree or blocking "
          f"DeviceBuffer call outside the allow-list ({len(ALLOW)} entries) in "
          f"{', '.join(ROOTS)}")
    return 0


# One plant per rule (each must be caught), and what must not be (comments, strings, a
# device-to-device copy, an allow-listed entry).
PLANTS = {
    "sync": "void f(cudaStream_t s) { cudaStreamSynchronize(s); }",
    "memcpy": "void f(void* d, const void* h) { cudaMemcpy(d, h, 4, cudaMemcpyHostToDevice); }",
    "memset": "void f(void* d) { cudaMemset(d, 0, 4); }",
    "pageable": "void f(int* d, cudaStream_t s) { std::vector<int> v(4);\n"
                "  cudaMemcpyAsync(v.data(), d, 16,\n      cudaMemcpyDeviceToHost, s); }",
    "free": "void f(void* p) { cudaFree(p); }",
    "buffer": "void f(kc::DeviceBuffer<float>& b, std::vector<float>& v) { b.download(v); }",
}
CLEAN = ("// cudaStreamSynchronize(s); cudaMemcpy(d, h, 4, k);\n"
         "/* cudaFree(p); b.upload(v); */\n"
         "const char* m = \"cudaMemset(d, 0, 4)\";\n"
         "void f(void* a, const void* b, cudaStream_t s) {\n"
         "  cudaMemcpyAsync(a, b, 4, cudaMemcpyDeviceToDevice, s); space_.to_host(a, b, 4); }\n")


def self_test():
    bad = 0
    with tempfile.TemporaryDirectory() as t:
        os.makedirs(os.path.join(t, "src/comm"))
        open(os.path.join(t, "src/comm/host_stage_cuda.cpp"), "w").write(
            "void g(void* a, const void* b, cudaStream_t s) {\n"
            "  cudaMemcpyAsync(a, b, 4, cudaMemcpyDeviceToHost, s); }\n")
        open(os.path.join(t, "src/comm/clean.cpp"), "w").write(CLEAN)
        if scan(t):
            print("self-test FAIL: the clean tree is flagged:\n" + "\n".join(scan(t))); bad = 1
        for rule, code in PLANTS.items():
            p = os.path.join(t, "src/zero/planted_cuda.cpp")
            os.makedirs(os.path.dirname(p), exist_ok=True)
            open(p, "w").write(code + "\n")
            got = [h for h in scan(t) if f"[{rule}]" in h and "planted_cuda.cpp" in h]
            print(f"self-test {'ok' if got else 'FAIL'} {rule}: {got[0].splitlines()[0] if got else 'not caught'}")
            bad |= not got
            os.remove(p)
    print("self-test PASS" if not bad else "self-test FAIL")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__.split("Usage:")[1]); sys.exit(2)
    sys.exit(self_test() if sys.argv[1] == "--self-test" else main_scan(sys.argv[1]))
