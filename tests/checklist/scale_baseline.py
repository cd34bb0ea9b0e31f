#!/usr/bin/env python3
"""Writes a copy of a `zt check` report.json with every bandwidth multiplied by FACTOR
(results' alg_bw / bus_bw, the pairs' slowest_gbs) and every time divided by it: the
report of a cluster FACTOR times faster than the one measured. A run on the measured
cluster gated against it must fail.

Usage: scale_baseline.py IN OUT FACTOR
"""
import json
import sys


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    src, dst, factor = sys.argv[1], sys.argv[2], float(sys.argv[3])
    with open(src) as f:
        report = json.load(f)
    scaled = 0
    for row in report["results"]:
        for place in ("out_of_place", "in_place"):
            r = row.get(place)
            if not r:
                continue
            for k in ("alg_bw", "bus_bw"):
                r[k] *= factor
                scaled += 1
            for k in ("time", "slowest_time"):
                if k in r:
                    r[k] /= factor
    pairs = report.get("pairs")
    if isinstance(pairs, dict) and "slowest_gbs" in pairs:
        pairs["slowest_gbs"] *= factor
        scaled += 1
    if scaled == 0:
        print(f"scale_baseline: {src} holds no bandwidth to scale")
        return 1
    with open(dst, "w") as f:
        json.dump(report, f, indent=1)
    print(f"scale_baseline: {scaled} bandwidths x {factor} -> {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
