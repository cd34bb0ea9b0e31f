#!/usr/bin/env python3
"""After `ctest`: fail when a label CI is meant to run ran nothing (every test with it
skipped, not run or absent), or when the log is older than the tests' binaries, and list
every skipped test with its reason.

Usage: scripts/ci-label-check.py BUILD_DIR LABEL...   (.ci/run: build-ci unit mpi slurm multinode hf hf-torch)

A LastTest.log older than any program the tests run (their commands' files inside
BUILD_DIR) is the log of an earlier run: the build was redone and the tests were not (a
stage that failed to start, on a reused machine), so the check refuses it (exit 1).

CTest's Testing/Temporary/LastTest.log writes "Test Passed." for a skipped test too, so a
skip is recognised from the log: "Skip regular expression found in output" (gtest tests:
gtest_discover_tests sets "[  SKIPPED ]"), or the test has a SKIP_RETURN_CODE and its
output holds a line starting with "SKIPPED" (every exit-77 path in tests/ prints one,
tests/mpi_main.cpp included). A test that prints such a line and still passes is counted
as skipped: the check errs towards failing.
Exit 0: every label ran at least one test; 1: a label ran nothing, or the log is stale;
2: bad usage or no log.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time


def parse_log(path):
    """{test name: (status line, output)} from LastTest.log."""
    with open(path, errors="replace") as f:
        text = f.read()
    out = {}
    for m in re.finditer(r"^\d+/\d+ Testing: (.+?)\n(.*?)^\"\1\" end time", text, re.M | re.S):
        name, body = m.group(1), m.group(2)
        o = re.search(r"^Output:\n-+\n(.*?)<end of output>", body, re.M | re.S)
        s = re.search(r"^(Test (?:Passed|Failed|Not Run|Pass Reason|Fail Reason)[^\n]*)", body, re.M)
        status = s.group(1) if s else "?"
        # a test with PASS_REGULAR_EXPRESSION logs "Test Pass Reason:" instead of "Test Passed."
        if status.startswith("Test Pass Reason"):
            status = "Test Passed."
        if re.search(r"^Skip regular expression found in output", body, re.M):
            status = "Skipped (regular expression)"
        out[name] = (status, o.group(1) if o else "")
    return out


def test_properties(build):
    """{test name: {property: value}} from ctest --show-only=json-v1 (it rewrites LastTest.log,
    so the caller has read the log first and puts it back)."""
    r = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"ci-label-check: ctest --show-only failed: {r.stderr.strip()}")
    tests = {}
    for t in json.loads(r.stdout)["tests"]:
        tests[t["name"]] = {p["name"]: p["value"] for p in t.get("properties", [])}
        tests[t["name"]]["COMMAND"] = t.get("command", [])
    return tests


def newest_program(build, props):
    """(mtime, path) of the newest file inside BUILD that a test's command names."""
    root = os.path.realpath(build) + os.sep
    newest = (0.0, None)
    for p in props.values():
        for arg in p.get("COMMAND", []):
            path = os.path.realpath(arg)
            if path.startswith(root) and os.path.isfile(path):
                newest = max(newest, (os.path.getmtime(path), path))
    return newest


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    build, labels = sys.argv[1], sys.argv[2:]
    log = os.path.join(build, "Testing", "Temporary", "LastTest.log")
    if not os.path.exists(log):
        print(f"ci-label-check: {log} not found: run ctest first")
        return 2
    results = parse_log(log)
    keep = log + ".ci-label-check"
    shutil.copy2(log, keep)  # copy2 keeps the log's time, which the staleness check reads
    try:
        props = test_properties(build)
    finally:
        shutil.move(keep, log)
    log_time = os.path.getmtime(log)
    built, program = newest_program(build, props)
    if built > log_time:
        print(f"ci-label-check: FAIL: {log} ({time.ctime(log_time)}) is older than {program} "
              f"({time.ctime(built)}): the tests did not run after the last build")
        return 1

    skipped, ran = {}, set()
    for name, (status, output) in results.items():
        p = props.get(name, {})
        lines = [ln for ln in output.splitlines() if ln.startswith("SKIPPED")]
        if status.startswith("Skipped"):
            # gtest prints "FILE:LINE: Skipped" and then the GTEST_SKIP message
            out_lines = output.splitlines()
            reasons = [out_lines[i + 1].strip() for i, ln in enumerate(out_lines[:-1]) if ln.endswith(": Skipped")]
            skipped[name] = "; ".join(r for r in reasons if r) or "skip expression matched"
        elif status != "Test Passed.":
            continue
        elif "SKIP_RETURN_CODE" in p and lines:
            skipped[name] = lines[-1].strip()
        else:
            ran.add(name)

    if skipped:
        print(f"ci-label-check: {len(skipped)} skipped test(s):")
        for name in sorted(skipped):
            print(f"  {name}: {skipped[name]}")
    bad = []
    for label in labels:
        members = [n for n, p in props.items() if label in (p.get("LABELS") or [])]
        n_ran = sum(1 for n in members if n in ran)
        n_skip = sum(1 for n in members if n in skipped)
        n_other = len(members) - n_ran - n_skip
        print(f"ci-label-check: label {label}: {len(members)} tests, {n_ran} ran and passed, "
              f"{n_skip} skipped, {n_other} failed or not run")
        if n_ran == 0:
            bad.append(label)
    if bad:
        print(f"ci-label-check: FAIL: label(s) {', '.join(bad)} ran nothing (see the skips above)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
