#!/usr/bin/env python3
"""zt's NVMe store (bench_nvme: NvmeFile sequential write/read, Store::update pass)
beside fio (io_uring engine, direct I/O, same block size, queue depth, file system and
size), interleaved round by round. Prints JSON lines and a markdown table.
  python3 bench/offload/run_nvme.py --build build-offload --dir /tmp/zt-nvme-bench --size 1G --rounds 3
"""
import argparse, json, os, statistics, subprocess

ap = argparse.ArgumentParser()
ap.add_argument("--build", default="build")
ap.add_argument("--dir", default="/tmp/zt-nvme-bench")
ap.add_argument("--size", default="1G")
ap.add_argument("--bs", default="1M")
ap.add_argument("--qd", type=int, default=32)
ap.add_argument("--rounds", type=int, default=3)
a = ap.parse_args()
os.makedirs(a.dir, exist_ok=True)
zt = os.path.join(a.build, "bench/offload/bench_nvme")
fio_file = os.path.join(a.dir, "fio.bin")

def fio(rw):
    cmd = ["fio", "--name=zt", "--ioengine=io_uring", "--direct=1", "--rw=" + rw, "--bs=" + a.bs,
           "--iodepth=%d" % a.qd, "--size=" + a.size, "--filename=" + fio_file, "--output-format=json"]
    j = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)["jobs"][0]
    bytes_ = j["read"]["io_bytes"] + j["write"]["io_bytes"]
    secs = max(j["read"]["runtime"], j["write"]["runtime"]) / 1000.0
    r = {"impl": "fio", "mode": rw, "bytes": bytes_, "seconds": secs, "MBps": bytes_ / secs / 1e6}
    print(json.dumps(r), flush=True)
    return r

def ztrun(mode):
    cmd = [zt, "--dir", a.dir, "--size", a.size, "--bs", a.bs, "--qd", str(a.qd), "--mode", mode]
    r = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()[-1])
    print(json.dumps(r), flush=True)
    return r

fio("write")  # lay the fio file out once
res = {}
pairs = [("write", "write"), ("read", "read"), ("pass", "rw")]
for rnd in range(a.rounds):
    for zmode, fmode in pairs:
        res.setdefault(("fio", zmode), []).append(fio(fmode))
        res.setdefault(("zt", zmode), []).append(ztrun(zmode))
os.remove(fio_file)
print("\n| workload | fio (MB/s, median) | zt (MB/s, median) | zt / fio | rounds fio | rounds zt |")
print("|---|---|---|---|---|---|")
names = {"write": "sequential write", "read": "sequential read", "pass": "store update pass (read + write) vs fio rw=rw"}
for zmode, _ in pairs:
    f = statistics.median(r["MBps"] for r in res[("fio", zmode)])
    z = statistics.median(r["MBps"] for r in res[("zt", zmode)])
    print("| %s | %.0f | %.0f | %.2f | %s | %s |" % (names[zmode], f, z, z / f,
          ", ".join("%.0f" % r["MBps"] for r in res[("fio", zmode)]),
          ", ".join("%.0f" % r["MBps"] for r in res[("zt", zmode)])))
