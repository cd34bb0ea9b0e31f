#!/usr/bin/env python3
"""Bus bandwidth of `zt check` beside Intel MPI Benchmarks: all_reduce (IMB-MPI1 Allreduce)
or, with --op all_to_all, all_to_all (IMB-MPI1 Alltoall).

Both run in the same session, interleaved round by round (zt, IMB, zt, IMB, ...), on the
same ranks, sizes and iteration counts; the table gives the median busbw of each per size
and their ratio. busbw uses nccl-tests' definition for both: algbw = bytes / time,
busbw = algbw * factor (all_reduce 2 (n-1) / n, all_to_all (n-1) / n), time = the average
over ranks of the per-iteration time (IMB's t_avg; zt's reported time). Sizes are zt's S:
the bytes each rank sends in all (IMB's Alltoall size is the bytes to each rank, S / n).

IMB is built from its public source outside this repository, e.g.
  git clone <intel/mpi-benchmarks> /work/peers/imb && make -C /work/peers/imb CC=mpicc \
      CXX="mpicxx -DOMPI_SKIP_MPICXX=1" IMB-MPI1

Usage: bench/imb/compare_allreduce.py --imb /work/peers/imb/IMB-MPI1 [--np 4] [--rounds 5]
       [--out bench/results/allreduce-zt-vs-imb.md]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def mpirun(np_):
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(np_)]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


def run(cmd):
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"command failed ({res.returncode}): {' '.join(cmd)}\n{res.stdout}\n{res.stderr}")
    return res.stdout


# zt op -> IMB benchmark, bus factor, the MPI call both time (zt with blocking collectives).
OPS = {
    "all_reduce": ("Allreduce", lambda n: 2.0 * (n - 1) / n, "2(n-1)/n", "MPI_Allreduce"),
    "all_to_all": ("Alltoall", lambda n: (n - 1) / n, "(n-1)/n", "MPI_Alltoall"),
}


def bus_factor(op, n):
    return OPS[op][1](n)


def imb_part(op, np_):
    """IMB's size for zt's S: all_to_all's is per destination rank."""
    return np_ if op == "all_to_all" else 1


def zt_round(op, zt, np_, iters, warmup, min_b, max_b, collectives, lead_in):
    with tempfile.TemporaryDirectory() as d:
        cmd = mpirun(np_) + [zt, "check", "--ops", op, "--mpi-collectives", collectives,
                             "--min-bytes", str(min_b >> lead_in),
                             "--max-bytes", str(max_b), "--iters", str(iters),
                             "--warmup", str(warmup), "--report", d]
        run(cmd)
        report = json.loads(Path(d, "report.json").read_text())
    out = {}
    for row in zt_rows(report, op):
        size = int(row["size"])
        if size < min_b:
            continue
        t_us = float(row["out_of_place"]["time"])
        out[size] = size / (t_us * 1e-6) * bus_factor(op, np_) / 1e9
    return out, " ".join(cmd[:-1] + ["DIR"])


def zt_rows(report, op):
    """The rows of `op` in a zt check report.json."""
    rows = [r for r in report["results"] if r["op"] == op]
    if not rows:
        sys.exit(f"report.json has no {op} results")
    return rows


def imb_round(op, imb, np_, iters, min_b, max_b, sync, lead_in):
    part = imb_part(op, np_)
    lo, hi = (min_b // part).bit_length() - 1 - lead_in, (max_b // part).bit_length() - 1
    cmd = mpirun(np_) + [imb, OPS[op][0], "-npmin", str(np_), "-msglog", f"{lo}:{hi}",
                         "-iter", str(iters), "-iter_policy", "off", "-mem", "4",
                         "-time", "1000", "-sync", str(sync)]
    text = run(cmd)
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 5 and parts[0].isdigit() and int(parts[0]) * part >= min_b:
            size, t_avg = int(parts[0]) * part, float(parts[4])
            out[size] = size / (t_avg * 1e-6) * bus_factor(op, np_) / 1e9
    return out, " ".join(cmd)


def imb_warmup(iters):
    """The untimed calls IMB-MPI1 makes before each size (IMB_warm_up: a tenth of the
    timed iterations, at least 10 or all of them), so zt can be given the same number."""
    return iters // 10 if iters // 10 >= 10 else min(10, iters)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--imb", required=True)
    ap.add_argument("--op", choices=sorted(OPS), default="all_reduce")
    ap.add_argument("--zt", default=str(ROOT / "build/src/apps/zt"))
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=None,
                    help="zt's untimed calls per size (default: as many as IMB makes for --iters)")
    # A run that has just ended can still be giving back its memory and shared-memory
    # segments when the next starts: the next one's first sizes read low (seen: IMB's
    # 1-2 MiB at 2/3 of its usual busbw right after zt). Pause between runs.
    ap.add_argument("--settle-s", type=float, default=3.0)
    # The first size a process measures also pays what it does once: shared-memory
    # connections set up on first use, the other ranks still starting. Both sweeps
    # start this many sizes (each half the next) below --min-bytes; the table leaves
    # them out.
    ap.add_argument("--lead-in", type=int, default=1)
    ap.add_argument("--min-bytes", type=int, default=1 << 20)
    ap.add_argument("--max-bytes", type=int, default=256 << 20)
    ap.add_argument("--out", default=None, help="default bench/results/<op without _>-zt-vs-imb.md")
    # IMB times each call alone and, with -sync 1 (its default), puts a barrier between
    # calls outside the timed region; nccl-tests and zt time back-to-back calls. -sync 0
    # makes IMB's per-iteration time comparable to theirs.
    ap.add_argument("--imb-sync", type=int, choices=[0, 1], default=0)
    # zt check times MPI_Allreduce by default, the call IMB times (Open MPI's coll/tuned);
    # --mpi-collectives nonblocking times MPI_Iallreduce + wait (libnbc), another code path
    # with its own algorithms. "ring" pins both components to their ring algorithm.
    ap.add_argument("--mpi-collectives", choices=["blocking", "nonblocking"], default="blocking")
    ap.add_argument("--algorithm", choices=["default", "ring"], default="default")
    # Open MPI's large all_reduce allocates a temporary buffer per call. glibc serves it
    # from the heap or from a fresh mmap (page faults on every call) by a threshold that
    # moves with the process's history of frees, so two programs making the same call
    # can differ by 10% (seen at 32 MiB). A fixed threshold for both removes that, but a
    # fixed mmap threshold also fixes glibc's trim threshold at 128 KiB (heap returned and
    # faulted in again on every call): with --malloc-mmap-threshold both are set, the trim
    # threshold to 1 GiB. 0 (default) leaves glibc's dynamic thresholds.
    ap.add_argument("--malloc-mmap-threshold", type=int, default=0)
    # The other way to give both the same allocator behaviour: keep a large free top on
    # glibc's heap (MALLOC_TOP_PAD_), so the per-call temporary buffers of Open MPI's
    # all_reduce come from the heap and are reused, faulted in once instead of on every
    # call (seen at 32 MiB, 4 ranks: ~6,500 page faults per call per rank in both
    # programs with glibc's defaults, none after the first call with a 512 MiB pad).
    # Then both time MPI's reduction rather than the kernel's page zeroing. 0: not set.
    ap.add_argument("--malloc-top-pad", type=int, default=0)
    a = ap.parse_args()
    if a.out is None:
        a.out = str(ROOT / f"bench/results/{a.op.replace('_', '')}-zt-vs-imb.md")
    if a.op != "all_reduce" and a.algorithm != "default":
        sys.exit("--algorithm ring pins all_reduce's algorithm only")
    if a.min_bytes % imb_part(a.op, a.np) or (imb_part(a.op, a.np) & (imb_part(a.op, a.np) - 1)):
        sys.exit("--op all_to_all needs a power-of-two --np that divides --min-bytes")
    if a.malloc_top_pad > 0:
        os.environ["MALLOC_TOP_PAD_"] = str(a.malloc_top_pad)
    if a.warmup is None:
        a.warmup = imb_warmup(a.iters)

    if a.malloc_mmap_threshold > 0:
        os.environ["MALLOC_MMAP_THRESHOLD_"] = str(a.malloc_mmap_threshold)
        os.environ["MALLOC_TRIM_THRESHOLD_"] = str(1 << 30)

    if a.algorithm == "ring":
        os.environ["OMPI_MCA_coll_libnbc_iallreduce_algorithm"] = "1"  # ring
        os.environ["OMPI_MCA_coll_tuned_use_dynamic_rules"] = "1"
        os.environ["OMPI_MCA_coll_tuned_allreduce_algorithm"] = "4"    # ring
    start_load = " ".join(open("/proc/loadavg").read().split()[:3])
    zt_runs, imb_runs = [], []
    for r in range(a.rounds):
        # Odd rounds zt first, even rounds IMB first: whatever one run leaves behind
        # (freed pages, caches) falls on both equally.
        def run_zt():
            time.sleep(a.settle_s)
            return zt_round(a.op, a.zt, a.np, a.iters, a.warmup, a.min_bytes, a.max_bytes, a.mpi_collectives, a.lead_in)

        def run_imb():
            time.sleep(a.settle_s)
            return imb_round(a.op, a.imb, a.np, a.iters, a.min_bytes, a.max_bytes, a.imb_sync, a.lead_in)

        if r % 2 == 0:
            z, zt_cmd = run_zt()
            i, imb_cmd = run_imb()
        else:
            i, imb_cmd = run_imb()
            z, zt_cmd = run_zt()
        zt_runs.append(z)
        imb_runs.append(i)
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)

    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    mpi = run(["mpirun", "--version"]).splitlines()[0]
    lines = [
        f"# {a.op} busbw: zt check vs Intel MPI Benchmarks",
        "",
        f"- machine: {platform.node()}, {cpu}, {os.cpu_count()} cores; {mpi}",
        f"- commit: {commit}",
        f"- ranks: {a.np} on one host (oversubscribed, shared memory transport); {a.rounds} rounds, "
        f"interleaved (zt first in odd rounds, IMB first in even ones), {a.settle_s:g} s pause before each run; "
        f"{a.iters} timed and {a.warmup} untimed calls per size for both (IMB -iter_policy off makes "
        f"{imb_warmup(a.iters)} warm-up calls for -iter {a.iters}), float{', sum' if a.op == 'all_reduce' else ''}; both sweeps start {a.lead_in} "
        f"size(s) below the table's first (lead-in, left out)",
        f"- zt: `{zt_cmd}`",
        f"- peer: `{imb_cmd}` (IMB-MPI1 built from intel/mpi-benchmarks outside this repository)",
        f"- load average at the start: {start_load}, at the end: {' '.join(open('/proc/loadavg').read().split()[:3])}",
        f"- reproduce: `python3 bench/imb/compare_allreduce.py --op {a.op} --imb PATH/IMB-MPI1 --np {a.np} --rounds {a.rounds} "
        f"--imb-sync {a.imb_sync} --mpi-collectives {a.mpi_collectives} --algorithm {a.algorithm} "
        f"--malloc-mmap-threshold {a.malloc_mmap_threshold} --malloc-top-pad {a.malloc_top_pad} --warmup {a.warmup} --settle-s {a.settle_s:g} --lead-in {a.lead_in} "
        f"--iters {a.iters} --min-bytes {a.min_bytes} --max-bytes {a.max_bytes}`",
        (f"- both run with MALLOC_MMAP_THRESHOLD_={a.malloc_mmap_threshold} MALLOC_TRIM_THRESHOLD_={1 << 30} "
         "(glibc's thresholds fixed, not moved by each process's history)" if a.malloc_mmap_threshold > 0 else
         f"- both run with MALLOC_TOP_PAD_={a.malloc_top_pad} (glibc keeps that much free heap: MPI's "
         "temporary buffers are reused, not faulted in on every call)" if a.malloc_top_pad > 0 else
         "- glibc's dynamic mmap threshold (not fixed)"),
        f"- busbw = bytes / t_avg * {OPS[a.op][2]} in GB/s (1e9 B/s); bytes = what each rank sends in all; medians over rounds",
        (f"- calls: zt {OPS[a.op][3] + ' (coll/tuned), the same call as IMB' if a.mpi_collectives == 'blocking' else OPS[a.op][3].replace('MPI_', 'MPI_I') + ' + wait (libnbc)'}; "
         f"IMB {OPS[a.op][3]} (coll/tuned)"),
        ("- algorithm: Open MPI's defaults (each component chooses by size)"
         if a.algorithm == "default" else
         "- algorithm: ring for both (OMPI_MCA_coll_libnbc_iallreduce_algorithm=1; OMPI_MCA_coll_tuned_use_dynamic_rules=1, "
         "OMPI_MCA_coll_tuned_allreduce_algorithm=4)"),
        f"- IMB -sync {a.imb_sync}: " + ("no barrier between timed calls, as zt and nccl-tests time back-to-back calls"
                                          if a.imb_sync == 0 else
                                          "IMB's default, a barrier between calls outside the timed region"),
        "",
        "| size (B) | zt busbw | IMB busbw | zt / IMB | within 5% |",
        "|---:|---:|---:|---:|:---:|",
    ]
    worst = 0.0
    for size in sorted(zt_runs[0]):
        if size not in imb_runs[0]:
            continue
        z = statistics.median(run_[size] for run_ in zt_runs)
        i = statistics.median(run_[size] for run_ in imb_runs)
        ratio = z / i
        worst = max(worst, abs(ratio - 1))
        lines.append(f"| {size} | {z:.3f} | {i:.3f} | {ratio:.3f} | {'yes' if abs(ratio - 1) <= 0.05 else 'no'} |")
    within = sum(1 for size in sorted(zt_runs[0]) if size in imb_runs[0] and
                 abs(statistics.median(x[size] for x in zt_runs) / statistics.median(x[size] for x in imb_runs) - 1) <= 0.05)
    lines += ["", f"Largest deviation: {worst * 100:.1f}%; {within} of {len(zt_runs[0])} sizes within 5%.", ""]
    lines.append("Per-round busbw (GB/s), zt then IMB:")
    lines.append("")
    for k, (z, i) in enumerate(zip(zt_runs, imb_runs)):
        lines.append(f"- round {k + 1}: zt " + ", ".join(f"{z[s]:.3f}" for s in sorted(z)) +
                     " | IMB " + ", ".join(f"{i[s]:.3f}" for s in sorted(i)))
    Path(a.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
