#!/usr/bin/env python3
"""The real `zt train` under mpiexec, interrupted (tests/ckpt/CMakeLists.txt runs it).

  signals_test.py preempt WORKDIR ZT LAUNCHER...   SIGUSR1 to one rank mid-run: all ranks
      agree at the next step boundary, a checkpoint appears, exit code 0; resuming with
      ckpt.resume=auto gives the losses of an uninterrupted run, bitwise (JSONL doubles).
  signals_test.py async WORKDIR ZT LAUNCHER...     ckpt.async saves while training: a stop
      and resume gives the losses of a synchronous uninterrupted run, bitwise.
  signals_test.py kill9 WORKDIR ZT LAUNCHER...     kill -9 of one rank while a checkpoint
      is being written (its .tmp exists, the file does not): the job dies, `latest` still
      names the previous complete checkpoint, and resuming from it works.
"""
import json
import os
import signal
import subprocess
import sys
import time

# Small and quick: tiny's shape cut down, short sequences, no eval or sample.
SMALL = ["model.hidden=64", "model.layers=2", "model.intermediate=160", "model.context=64",
         "train.seq_len=64", "train.micro_batch=4", "train.global_batch=8", "train.warmup=5",
         "eval.every=0", "data.eval_fraction=0", "sample.tokens=0", "train.peak_tflops=1",
         "log.every=1"]


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def cmd(zt, launcher, keys):
    args = list(launcher) + [zt, "train"]
    for k in keys:
        args += ["--set", k]
    return args


def run(zt, launcher, keys, what):
    p = subprocess.run(cmd(zt, launcher, keys), stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=300)
    print("---- %s (exit %d)\n%s%s" % (what, p.returncode, p.stdout[-3000:], p.stderr[-3000:]), flush=True)
    return p


def rank_pids(launcher_pid):
    """The ranks: processes whose parent is the launcher (mpiexec forks local ranks)."""
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(launcher_pid)], capture_output=True,
                         text=True).stdout
    return sorted(int(x) for x in out.split())


def losses(path):
    with open(path) as f:
        return {r["step"]: r["loss"] for r in map(json.loads, f)}


def latest(d):
    try:
        with open(os.path.join(d, "latest")) as f:
            return f.read().strip()
    except FileNotFoundError:
        return None


def preempt(work, zt, launcher):
    steps = 100
    straight = run(zt, launcher, SMALL + ["train.steps=%d" % steps, "ckpt.dir=%s/straight" % work,
                                          "log.metrics=%s/straight.jsonl" % work], "straight run")
    if straight.returncode != 0:
        fail("the straight run failed")
    d = "%s/pre" % work
    keys = SMALL + ["train.steps=%d" % steps, "ckpt.dir=" + d]
    p = subprocess.Popen(cmd(zt, launcher, keys + ["log.metrics=%s/first.jsonl" % work]),
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    metrics = "%s/first.jsonl" % work
    deadline = time.time() + 120
    while time.time() < deadline:
        if os.path.exists(metrics) and sum(1 for _ in open(metrics)) >= 5:
            break
        time.sleep(0.005)
    pids = rank_pids(p.pid)
    if len(pids) < 2:
        p.kill()
        fail("found ranks %s under the launcher" % pids)
    target = pids[-1]
    os.kill(target, signal.SIGUSR1)
    t_sig = time.time()
    out, _ = p.communicate(timeout=120)
    print("---- preempted run (SIGUSR1 to pid %d of ranks %s; exit %d after %.2f s)\n%s"
          % (target, pids, p.returncode, time.time() - t_sig, out[-3000:]), flush=True)
    if p.returncode != 0:
        fail("exit %d after SIGUSR1, expected 0" % p.returncode)
    import re
    m = re.search(r"preempted \(signal %d\) at step (\d+): checkpoint (\S+) written" % signal.SIGUSR1, out)
    if not m:
        fail("no 'preempted (signal 10) at step N: checkpoint ... written' line")
    n = int(m.group(1))
    if latest(d) != "step-%d.h5" % n:
        fail("latest names %s, expected step-%d.h5" % (latest(d), n))
    if n >= steps:
        fail("the run was not preempted before its end")
    resumed = run(zt, launcher, keys + ["ckpt.resume=auto", "log.metrics=%s/second.jsonl" % work],
                  "resumed run")
    if resumed.returncode != 0:
        fail("the resumed run failed")
    if "resumed from %s/step-%d.h5 at step %d" % (d, n, n) not in resumed.stdout + resumed.stderr:
        fail("no 'resumed from ... at step %d' line" % n)
    ref, got = losses("%s/straight.jsonl" % work), losses("%s/second.jsonl" % work)
    if sorted(got) != list(range(n + 1, steps + 1)):
        fail("the resumed run logged steps %s" % sorted(got))
    diff = [s for s in got if got[s] != ref[s]]
    if diff:
        fail("losses differ from the straight run at steps %s" % diff)
    print("PASS: SIGUSR1 to one rank -> preempted at step %d, checkpoint step-%d.h5, exit 0; "
          "resumed steps %d-%d: losses bitwise equal to the straight run (last %.9g)"
          % (n, n, n + 1, steps, got[steps]))


def kill9(work, zt, launcher):
    d = "%s/ck" % work
    # A model whose checkpoint takes a while to write: a 16384-token vocabulary (the data
    # is bytes, any larger vocabulary fits), ~9.6 M parameters, ~115 MB of state.
    keys = SMALL + ["model.vocab=16384", "model.hidden=256", "model.intermediate=512",
                    "train.micro_batch=1", "train.global_batch=2", "train.seq_len=16",
                    "train.steps=8", "ckpt.every=3", "ckpt.dir=" + d]
    p = subprocess.Popen(cmd(zt, launcher, keys), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    tmp, final = os.path.join(d, "step-6.h5.tmp"), os.path.join(d, "step-6.h5")
    deadline = time.time() + 240
    hit = False
    while time.time() < deadline and p.poll() is None:
        # Wait until the collective write is under way (HDF5 has put bytes in the .tmp).
        if latest(d) == "step-3.h5" and os.path.exists(tmp) and not os.path.exists(final) \
                and os.path.getsize(tmp) > (1 << 20):
            pids = rank_pids(p.pid)
            os.kill(pids[-1], signal.SIGKILL)
            hit = not os.path.exists(final)
            print("kill -9 of pid %d (ranks %s) while %s existed (%d bytes so far)"
                  % (pids[-1], pids, tmp, os.path.getsize(tmp) if os.path.exists(tmp) else -1), flush=True)
            break
        time.sleep(0.001)
    out, _ = p.communicate(timeout=120)
    print("---- killed run (exit %d)\n%s" % (p.returncode, out[-2500:]), flush=True)
    if not hit:
        fail("did not catch the step-6 save in progress")
    if p.returncode == 0:
        fail("the job survived kill -9 of a rank")
    if latest(d) != "step-3.h5":
        fail("latest names %s after the kill, expected step-3.h5" % latest(d))
    if os.path.exists(final):
        fail("step-6.h5 exists although its save was killed")
    resumed = run(zt, launcher, keys + ["ckpt.resume=auto"], "resumed run")
    if resumed.returncode != 0:
        fail("resuming after the kill failed")
    if "resumed from %s at step 3" % os.path.join(d, "step-3.h5") not in resumed.stdout + resumed.stderr:
        fail("no 'resumed from .../step-3.h5 at step 3' line")
    if latest(d) != "step-8.h5" or os.path.exists(tmp):
        fail("after the resumed run latest = %s, stale tmp %s" % (latest(d), os.path.exists(tmp)))
    print("PASS: kill -9 during the step-6 save: exit %d, latest still step-3.h5, no step-6.h5; "
          "resumed from step 3 to 8 (latest step-8.h5, the stale .tmp removed)" % p.returncode)


def async_resume(work, zt, launcher):
    """ckpt.async: saves every 10 steps from a snapshot while training goes on; stop at 20,
    resume (also async) to 40: losses bitwise those of a synchronous uninterrupted run."""
    steps = 40
    straight = run(zt, launcher, SMALL + ["train.steps=%d" % steps, "ckpt.dir=%s/straight" % work,
                                          "log.metrics=%s/straight.jsonl" % work], "straight run (sync)")
    if straight.returncode != 0:
        fail("the straight run failed")
    keys = SMALL + ["train.steps=%d" % steps, "ckpt.dir=%s/async" % work, "ckpt.async=true",
                    "ckpt.every=10"]
    first = run(zt, launcher, keys + ["ckpt.stop_after=20", "log.metrics=%s/first.jsonl" % work],
                "async run, stopped after step 20")
    if first.returncode != 0:
        fail("the async run failed")
    text = first.stdout + first.stderr
    for s in (10, 20):
        if "ckpt: step %d snapshot taken, writing in the background" % s not in text:
            fail("no background save at step %d" % s)
        if "ckpt: step %d -> %s/async/step-%d.h5 written in the background" % (s, work, s) not in text:
            fail("the background save of step %d was not reported complete" % s)
    if latest("%s/async" % work) != "step-20.h5":
        fail("latest names %s" % latest("%s/async" % work))
    second = run(zt, launcher, keys + ["ckpt.resume=auto", "log.metrics=%s/second.jsonl" % work],
                 "async run resumed")
    if second.returncode != 0:
        fail("the resumed async run failed")
    ref, got = losses("%s/straight.jsonl" % work), losses("%s/second.jsonl" % work)
    diff = [s for s in got if got[s] != ref[s]]
    if sorted(got) != list(range(21, steps + 1)) or diff:
        fail("resumed steps %s, differing %s" % (sorted(got), diff))
    stalls = [float(x) for x in __import__("re").findall(r"training stalled ([0-9.]+) s", text)]
    print("PASS: ckpt.async saves at 10, 20 (stalls %s s), resumed from step 20: steps "
          "21-40 losses bitwise equal to a synchronous straight run" % stalls)


def main():
    mode, work, zt, launcher = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    subprocess.run(["rm", "-rf", work])
    os.makedirs(work)
    {"preempt": preempt, "kill9": kill9, "async": async_resume}[mode](work, zt, launcher)


if __name__ == "__main__":
    main()
