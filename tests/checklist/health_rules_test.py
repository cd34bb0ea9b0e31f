#!/usr/bin/env python3
"""Every node-health rule, one scenario each, through the NVML test double.

  health_rules_test.py ZT FAKE_NVML_LIBRARY SYSFS_ROOT SOURCE_DIR WORKDIR

The rules are read off the code: every verdict in checklist/src/gpu_checks.cpp carries a
`// rule: NAME` tag, and every Xid of xid_action (checklist/src/gpu_health.cpp) is a rule
`xid_N` (its default `xid_other`). ROWS below hold one scenario or more per rule: the
double's state for GPU 2 (tests/checklist/fake_nvml.cpp, fields over a healthy H100), the
check and the verdict and action expected (docs/checklist.md's "Node health" table, and
NVIDIA's values for the throttle bits and Xids), and each row's exit code under
`--exit-codes nagios` follows from its verdict. A rule without a row fails the test, and
so does a row naming no rule. Each row runs `zt check --tier quick` and reads report.json;
the other checks must say what they say on the healthy double.
"""
import concurrent.futures
import json
import os
import re
import subprocess
import sys

P, W, F, S, U = "PASS", "WARN", "FAIL", "SKIP", "UNKNOWN"
MON, RST, RBT, DRN = "MONITOR", "RESET_GPU", "REBOOT", "DRAIN"
# NVIDIA's return codes and clocks-throttle-reason bits (nvml.h).
NOT_SUPPORTED, GPU_IS_LOST, RESET_REQUIRED, UNKNOWN_ERROR = 3, 15, 16, 999
HW_SLOWDOWN, HW_THERMAL, HW_POWER_BRAKE, SW_THERMAL, SW_POWER_CAP, GPU_IDLE = 0x8, 0x40, 0x80, 0x20, 0x4, 0x1

# (rule, GPU 2's state in the double, check, status, action); the healthy H100 has ECC on,
# slowdown at 87 C, a 700 W limit, gen5 x16, 18 NVLinks.
ROWS = [
    ("nvml_not_supported", {"error": {"nvmlDeviceGetPersistenceMode": NOT_SUPPORTED}}, "gpu.persistence", S, None),
    ("nvml_gpu_lost", {"error": {"nvmlDeviceGetPowerUsage": GPU_IS_LOST}}, "gpu.power", F, RBT),
    ("nvml_reset_required", {"error": {"nvmlDeviceGetPowerUsage": RESET_REQUIRED}}, "gpu.power", F, RST),
    ("nvml_error", {"error": {"nvmlDeviceGetPowerUsage": UNKNOWN_ERROR}}, "gpu.power", U, None),
    ("ecc_off", {"ecc_mode": 0, "ecc_pending": 0}, "gpu.ecc", W, MON),
    ("ecc_volatile", {"volatile_uncorrected": 1, "aggregate_uncorrected": 1}, "gpu.ecc", F, RST),
    ("ecc_aggregate", {"aggregate_uncorrected": 3}, "gpu.ecc", W, MON),
    ("ecc_mode_pending", {"ecc_pending": 0}, "gpu.ecc", W, RBT),
    ("retired_pending", {"retired_supported": True, "retired_pending": 1}, "gpu.retired_pages", F, RST),
    ("retired_60", {"retired_supported": True, "retired_sbe": 59, "retired_dbe": 1}, "gpu.retired_pages", F, DRN),
    ("retired_60", {"retired_supported": True, "retired_sbe": 59}, "gpu.retired_pages", P, None),
    ("retired_double_bit", {"retired_supported": True, "retired_dbe": 1}, "gpu.retired_pages", W, MON),
    ("remap_failure", {"remap_failure": 1}, "gpu.row_remap", F, DRN),
    ("remap_pending", {"remap_uncorrected": 1, "remap_pending": 1}, "gpu.row_remap", F, RST),
    ("clocks_hw_slowdown", {"throttle": HW_SLOWDOWN}, "gpu.clocks", F, DRN),
    ("clocks_hw_thermal", {"throttle": HW_THERMAL}, "gpu.clocks", F, DRN),
    ("clocks_hw_power_brake", {"throttle": HW_POWER_BRAKE}, "gpu.clocks", F, DRN),
    ("clocks_sw_thermal", {"throttle": SW_THERMAL}, "gpu.clocks", W, MON),
    ("clocks_sw_power_cap", {"throttle": SW_POWER_CAP}, "gpu.clocks", P, None),
    ("clocks_idle", {"throttle": GPU_IDLE}, "gpu.clocks", P, None),
    ("temperature_slowdown", {"temp": 87}, "gpu.temperature", F, DRN),
    ("temperature_near_slowdown", {"temp": 82}, "gpu.temperature", W, MON),
    ("temperature_near_slowdown", {"temp": 81}, "gpu.temperature", P, None),  # 6 C below
    ("power_over_cap", {"power_mw": 735001}, "gpu.power", W, MON),
    ("power_over_cap", {"power_mw": 735000}, "gpu.power", P, None),  # exactly 5% above
    ("pcie_narrow", {"width": 8}, "gpu.pcie", F, DRN),
    ("pcie_generation", {"gen": 4}, "gpu.pcie", W, MON),
    ("nvlink_none", {"nvlinks": 0}, "gpu.nvlink", S, None),
    ("nvlink_down", {"nvlink_down": [3]}, "gpu.nvlink", F, RST),
    ("nvlink_recovery_crc_data", {"nvlink_recovery": 1}, "gpu.nvlink", W, MON),
    ("nvlink_recovery_crc_data", {"nvlink_crc_data": 1}, "gpu.nvlink", W, MON),
    ("nvlink_unjudged", {"nvlink_replay": 7}, "gpu.nvlink", P, None),  # counted, not judged
    ("nvlink_unjudged", {"nvlink_crc_flit": 7}, "gpu.nvlink", P, None),
    ("persistence_off", {"persistence": 0}, "gpu.persistence", W, MON),
]
# Xid events (NVIDIA's Xid catalog, docs/checklist.md): xid -> (status, action).
XIDS = {79: (F, RBT), 119: (F, RBT), 120: (F, RBT), 48: (F, RST), 63: (F, RST), 64: (F, RST), 74: (F, RST),
        94: (F, RST), 95: (F, RST), 92: (F, MON)}
ROWS += [("xid_%d" % x, {"xids": [x]}, "gpu.xid", s, a) for x, (s, a) in XIDS.items()]
ROWS += [("xid_other", {"xids": [13]}, "gpu.xid", W, MON), ("xid_other", {"xids": [31]}, "gpu.xid", W, MON)]
UNJUDGED = {"nvlink_unjudged"}  # rows that show a counter is read but not judged


def code_rules(src):
    """The rules the code has: the tags of gpu_checks.cpp, and xid_N per case of xid_action."""
    with open(os.path.join(src, "checklist", "src", "gpu_checks.cpp")) as f:
        tags = re.findall(r"// rule: (\w+)", f.read())
    dup = sorted({t for t in tags if tags.count(t) > 1})
    with open(os.path.join(src, "checklist", "src", "gpu_health.cpp")) as f:
        body = re.search(r"HealthAction xid_action\(.*?\n}\n", f.read(), re.S)
    if not tags or body is None:
        print("FAIL: no `// rule:` tags in gpu_checks.cpp or no xid_action in gpu_health.cpp")
        sys.exit(1)
    xids = ["xid_%s" % n for n in re.findall(r"case (\d+):", body.group(0))]
    return set(tags) | set(xids) | ({"xid_other"} if "default:" in body.group(0) else set()), dup


def checks(report):
    """Every health check in report.json: {(name, subject): check}."""
    out = {}

    def walk(x):
        if isinstance(x, dict):
            if "name" in x and "subject" in x and "status" in x:
                out[(x["name"], x["subject"])] = x
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(report)
    return out


def main():
    zt, fake, sysfs, src, work = (os.path.abspath(a) for a in sys.argv[1:6])
    os.makedirs(work, exist_ok=True)
    rules, dup = code_rules(src)
    have = {r[0] for r in ROWS}
    failures = ["rule %s is tagged twice in gpu_checks.cpp" % d for d in dup]
    failures += ["rule %s has no row in ROWS: add its scenario" % r for r in sorted(rules - have)]
    failures += ["row %s names no rule of the code" % r for r in sorted(have - rules - UNJUDGED)]

    def run(i, gpu2):
        d = os.path.join(work, "row%02d" % i)
        subprocess.run(["rm", "-rf", d])
        os.makedirs(d)
        with open(os.path.join(d, "scenario.json"), "w") as f:
            json.dump({"gpus": 8, "gpu": {"2": gpu2}}, f)
        env = dict(os.environ, ZT_NVML_LIBRARY=fake, ZT_FAKE_NVML_SCENARIO=os.path.join(d, "scenario.json"),
                   OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
        p = subprocess.run([zt, "check", "--tier", "quick", "--exit-codes", "nagios", "--gpus-per-node", "8",
                            "--burn-seconds", "0", "--sysfs-root", sysfs, "--report", os.path.join(d, "report")],
                           env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        try:
            with open(os.path.join(d, "report", "report.json")) as f:
                return p.returncode, checks(json.load(f)), p.stdout + p.stderr
        except (OSError, ValueError) as e:
            return p.returncode, {}, "%s\n%s" % (e, (p.stdout + p.stderr)[-2000:])

    base_rc, base, out = run(99, {})
    gpu_checks = {k: v for k, v in base.items() if k[0].startswith("gpu.")}
    if base_rc not in (0, 1) or len(gpu_checks) < 9 * 8 or any(v["status"] not in (P, S) for v in gpu_checks.values()):
        print("FAIL: the healthy double is not healthy (exit %d, %d gpu checks):\n%s" % (base_rc, len(gpu_checks), out))
        sys.exit(1)
    nagios = {F: 2, U: 3, W: 1, P: base_rc, S: base_rc}  # base_rc: this host's environment (memlock WARN: 1)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda ir: run(ir[0], ir[1][1]), enumerate(ROWS)))
    for (rule, gpu2, name, status, action), (rc, got, out) in zip(ROWS, results):
        subject = "node" if name == "gpu.xid" else next((k[1] for k in got if k[0] == name and
                                                          k[1].startswith("GPU 2 ")), None)
        c = got.get((name, subject))
        what = "%s %s" % (rule, json.dumps(gpu2))
        if c is None:
            failures.append("%s: no check %s for GPU 2 in report.json\n%s" % (what, name, out[-1500:]))
            continue
        if (c["status"], c["action"], rc) != (status, action, nagios[status]):
            failures.append("%s: %s %s [%s], exit %d; expected %s [%s], exit %d: %s"
                            % (what, name, c["status"], c["action"], rc, status, action, nagios[status], c["message"]))
        others = [k for k, v in got.items() if k != (name, subject) and k in base and
                  (v["status"], v["action"]) != (base[k]["status"], base[k]["action"])]
        if others:
            failures.append("%s: other checks changed too: %s" % (what, others))
    print("health_rules_test: %d rules in the code, %d rows (exit %d on the healthy double)"
          % (len(rules), len(ROWS), base_rc))
    for f in failures:
        print("FAIL: " + f)
    if failures:
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
