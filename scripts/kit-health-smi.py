#!/usr/bin/env python3
"""zt check's NVML readings (report.json) against nvidia-smi's, for every GPU.

  kit-health-smi.py REPORT_JSON BEFORE_CSV AFTER_CSV
  kit-health-smi.py --fields      the --query-gpu fields, for the two nvidia-smi reads

BEFORE_CSV and AFTER_CSV: `nvidia-smi --query-gpu=FIELDS --format=csv,noheader,nounits`
(FIELDS below) just before and just after the zt check run. zt read each value between the
two: the maximum clocks, PCIe generation and width, current width and the ECC counters must
equal nvidia-smi's (both reads, or a change between them: the value zt reports is one of
them); the temperature, current clocks and PCIe generation move, so zt's must lie between
the two reads (3 C, 10% of the maximum clock). Exit 0: every GPU agrees; 1: a mismatch
(each named); 2: bad input. The GPU kit's health line runs it (scripts/gpu-kit.sh).
"""
import csv
import json
import sys

FIELDS = ("index,temperature.gpu,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,pcie.link.gen.current,"
          "pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,"
          "ecc.errors.uncorrected.volatile.total,ecc.errors.uncorrected.aggregate.total")
# nvidia-smi field -> (zt check, number in report.json, tolerance: None exact, else the slack
# around the range of the two reads, "clock" for 10% of the maximum clock).
COMPARE = {
    "temperature.gpu": ("gpu.temperature", "celsius", 3),
    "clocks.sm": ("gpu.clocks", "sm_mhz", "clock"),
    "clocks.max.sm": ("gpu.clocks", "sm_max_mhz", None),
    "clocks.mem": ("gpu.clocks", "mem_mhz", "clock"),
    "clocks.max.mem": ("gpu.clocks", "mem_max_mhz", None),
    "pcie.link.gen.current": ("gpu.pcie", "gen", 0),
    "pcie.link.gen.max": ("gpu.pcie", "gen_max", None),
    "pcie.link.width.current": ("gpu.pcie", "width", None),
    "pcie.link.width.max": ("gpu.pcie", "width_max", None),
    "ecc.errors.uncorrected.volatile.total": ("gpu.ecc", "volatile_uncorrected", None),
    "ecc.errors.uncorrected.aggregate.total": ("gpu.ecc", "aggregate_uncorrected", None),
}


def smi(path):
    rows = {}
    with open(path) as f:
        for r in csv.reader(f):
            if r:
                row = dict(zip(FIELDS.split(","), (x.strip() for x in r)))
                rows[int(row["index"])] = row
    return rows


def report_numbers(path):
    """{(gpu index, check): numbers} of every per-GPU health check (subject "GPU i (...)")."""
    out = {}

    def walk(x):
        if isinstance(x, dict):
            s = x.get("subject")
            if isinstance(s, str) and s.startswith("GPU ") and "numbers" in x:
                out[(int(s.split()[1]), x["name"])] = x["numbers"]
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    with open(path) as f:
        walk(json.load(f))
    return out


def main():
    if sys.argv[1:] == ["--fields"]:
        print(FIELDS)
        return 0
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    numbers, before, after = report_numbers(sys.argv[1]), smi(sys.argv[2]), smi(sys.argv[3])
    bad, compared = [], 0
    if not before or set(before) != set(after):
        print("kit-health-smi: nvidia-smi listed GPUs %s, then %s" % (sorted(before), sorted(after)))
        return 1
    for gpu in sorted(before):
        for field, (check, key, tol) in COMPARE.items():
            b, a = before[gpu][field], after[gpu][field]
            got = numbers.get((gpu, check), {}).get(key)
            if b in ("[N/A]", "N/A", "[Not Supported]") and got is None:
                continue  # neither can read it
            if got is None:
                bad.append("GPU %d %s: nvidia-smi %s, no %s.%s in the report" % (gpu, field, b, check, key))
                continue
            try:
                lo, hi = sorted((float(b), float(a)))
            except ValueError:
                bad.append("GPU %d %s: nvidia-smi says %r, zt %s" % (gpu, field, b, got))
                continue
            slack = 0 if tol is None else 0.1 * float(before[gpu]["clocks.max." + field.split(".")[1]]) \
                if tol == "clock" else tol
            ok = (got in (lo, hi)) if tol is None else lo - slack <= got <= hi + slack
            compared += 1
            if not ok:
                bad.append("GPU %d %s: zt %s.%s %g, nvidia-smi %s before and %s after"
                           % (gpu, field, check, key, got, b, a))
    print("kit-health-smi: %d values of %d GPUs compared with nvidia-smi; %d mismatches%s"
          % (compared, len(before), len(bad), ": " + "; ".join(bad) if bad else ""))
    return 1 if bad or compared == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
