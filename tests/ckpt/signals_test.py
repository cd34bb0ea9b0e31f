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
  signals_test.py stops WORKDIR ZT LAUNCHER...     every stop request is honoured, saved
      once, exit 0 (issue 20, class 6): SIGINT mid-run; SIGTERM during the start-up (before
      the first step); a second SIGTERM while the checkpoint is being written; SIGTERM
      during the final sample (ends at the next token, not after the whole sample); SIGTERM
      the moment a rank first catches it.
  signals_test.py requeue WORKDIR ZT LAUNCHER...   a finished job run again exits 0 with
      "nothing is left to train" (slurm/train.sbatch requeues); a fresh run into a folder
      with another run's checkpoints is refused (exit 2, the folder and the choices named),
      also with resume=auto and `latest` missing; ckpt.overwrite = true lets it; log.metrics
      is continued on resume (lines past the checkpoint dropped, earlier kept).
"""
import threading
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
        return {r["step"]: r["loss"] for r in map(json.loads, f) if "loss" in r}


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
    final = os.path.join(d, "step-6.h5")
    deadline = time.time() + 240
    hit = False
    while time.time() < deadline and p.poll() is None:
        # Wait until the collective write is under way (HDF5 has put bytes in the .tmp).
        # The staging file: step-6.h5.tmp.<host>.<pid> (unique to the run).
        tmps = [os.path.join(d, n) for n in (os.listdir(d) if os.path.isdir(d) else [])
                if n.startswith("step-6.h5.tmp")]
        tmp = tmps[0] if tmps else None
        if latest(d) == "step-3.h5" and tmp and os.path.exists(tmp) and not os.path.exists(final) \
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
        if ("ckpt: step %d in place (no snapshot), writing in the background" % s not in text
                and "ckpt: step %d snapshot taken, writing in the background" % s not in text):
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


class Job:
    """A zt train job whose output is collected line by line (a thread reads the pipe)."""

    def __init__(self, zt, launcher, keys):
        self.p = subprocess.Popen(cmd(zt, launcher, keys), stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.append(line)

    def text(self):
        return "".join(self.lines)

    def wait_for(self, pred, what, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline and self.p.poll() is None:
            if pred():
                return
            time.sleep(0.002)
        self.p.kill()
        self.finish(what)
        fail("never saw " + what)

    def signal_ranks(self, sig):
        pids = rank_pids(self.p.pid)
        for pid in pids:
            os.kill(pid, sig)
        return pids

    def finish(self, what, timeout=120):
        t0 = time.time()
        rc = self.p.wait(timeout=timeout)
        self.reader.join(timeout=10)
        print("---- %s (exit %d, %.2f s after the signal)\n%s" % (what, rc, time.time() - t0,
                                                               self.text()[-2500:]), flush=True)
        return rc, time.time() - t0


def stops(work, zt, launcher):
    import re
    # The kill9 model: a ~115 MB state, so the start-up and each save take a while.
    big = SMALL + ["model.vocab=16384", "model.hidden=256", "model.intermediate=512",
                   "train.micro_batch=1", "train.global_batch=2", "train.seq_len=16"]
    results = []

    def expect_stop(job, what, sig):
        rc, took = job.finish(what)
        text = job.text()
        if rc != 0:
            fail("%s: exit %d, expected 0" % (what, rc))
        m = re.search(r"preempted \(signal %d\) at step (\d+): checkpoint (\S+) written" % sig, text)
        if not m:
            fail("%s: no 'preempted (signal %d) at step N: checkpoint ... written' line" % (what, sig))
        saves = len(re.findall(r"ckpt: step \d+ -> ", text))
        if saves != 1:
            fail("%s: %d checkpoint saves, expected exactly one" % (what, saves))
        results.append("%s: exit 0 at step %s after %.2f s, one save" % (what, m.group(1), took))
        return int(m.group(1))

    # 1. SIGINT (Ctrl-C) to every rank mid-run.
    d = "%s/int" % work
    job = Job(zt, launcher, SMALL + ["train.steps=100000", "ckpt.dir=" + d])
    job.wait_for(lambda: re.search(r"step +5/", job.text()), "step 5")
    job.signal_ranks(signal.SIGINT)
    expect_stop(job, "SIGINT mid-run", signal.SIGINT)

    # 2. SIGTERM during the start-up: once the banner is out, before the first step.
    d = "%s/early" % work
    job = Job(zt, launcher, big + ["train.steps=100000", "ckpt.dir=" + d])
    job.wait_for(lambda: "zt train: model" in job.text(), "the start-up banner")
    job.signal_ranks(signal.SIGTERM)
    expect_stop(job, "SIGTERM during the start-up", signal.SIGTERM)

    # 3. A second SIGTERM while the checkpoint of the first is being written.
    d = "%s/twice" % work
    job = Job(zt, launcher, big + ["train.steps=100000", "ckpt.dir=" + d])
    job.wait_for(lambda: re.search(r"step +3/", job.text()), "step 3")
    job.signal_ranks(signal.SIGTERM)
    job.wait_for(lambda: any(".h5.tmp" in n for n in (os.listdir(d) if os.path.isdir(d) else [])),
                 "the checkpoint's .tmp")
    job.signal_ranks(signal.SIGTERM)
    expect_stop(job, "a second SIGTERM during the save", signal.SIGTERM)

    # 4. SIGTERM during the final sample (a long one): it ends at the next token.
    d = "%s/sample" % work
    keys = [k for k in SMALL if not k.startswith("sample.tokens")]
    job = Job(zt, launcher, keys + ["train.steps=3", "sample.tokens=1000000", "ckpt.dir=" + d])
    job.wait_for(lambda: "ckpt: step 3 -> " in job.text(), "the final checkpoint")
    time.sleep(0.2)  # into the sample
    job.signal_ranks(signal.SIGTERM)
    rc, took = job.finish("SIGTERM during the sample")
    if rc != 0 or "a stop request came during the sample" not in job.text():
        fail("SIGTERM during the sample: exit %d, or no line saying the sample ended early" % rc)
    if took > 30:
        fail("SIGTERM during the sample took %.1f s to end the job" % took)
    results.append("SIGTERM during the sample: exit 0 after %.2f s" % took)
    # 5. SIGTERM the moment a rank catches it (SIGTERM's bit in /proc/PID/status SigCgt):
    # the first handler a zt process installs must be zt's. (Linked libfabric brought in
    # libinfinipath, whose constructor caught SIGTERM for 0.1-0.4 s before main and ended
    # the rank with exit 1 and no message.) One rank started directly (MPI's singleton
    # start), so its pid is known at once and polled without a launcher in between.
    d = "%s/first" % work
    job = Job(zt, [], big + ["train.steps=100000", "ckpt.dir=" + d])
    deadline = time.time() + 60
    while not catches(job.p.pid, signal.SIGTERM):
        if time.time() > deadline or job.p.poll() is not None:
            job.p.kill()
            job.finish("SIGTERM the moment the rank catches it")
            fail("never saw the rank catch SIGTERM")
        time.sleep(0.0002)
    job.p.send_signal(signal.SIGTERM)
    expect_stop(job, "SIGTERM the moment the rank catches it", signal.SIGTERM)
    print("PASS: " + "; ".join(results))


def catches(pid, sig):
    """Whether process pid has a handler for sig (its SigCgt mask), False once it is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return (int(line.split()[1], 16) >> (int(sig) - 1)) & 1 == 1
    except OSError:
        pass
    return False


def requeue(work, zt, launcher):
    d = "%s/ck" % work
    metrics = "%s/metrics.jsonl" % work
    keys = SMALL + ["ckpt.dir=" + d, "log.metrics=" + metrics]
    first = run(zt, launcher, keys + ["train.steps=6", "ckpt.every=2", "ckpt.keep=0"], "first run")
    if first.returncode != 0:
        fail("the first run failed")
    # A requeued finished job: exit 0, nothing trained, nothing saved, metrics untouched.
    before = open(metrics).read()
    again = run(zt, launcher, keys + ["train.steps=6", "ckpt.resume=auto"], "the finished job again")
    out = again.stdout + again.stderr
    if again.returncode != 0 or "nothing is left to train" not in out:
        fail("a finished job run again: exit %d, expected 0 with 'nothing is left to train'"
             % again.returncode)
    if open(metrics).read() != before or latest(d) != "step-6.h5":
        fail("the finished job run again changed the metrics or latest")
    # A fresh run over it: refused, naming the folder and the three ways out.
    fresh = run(zt, launcher, keys + ["train.steps=6"], "a fresh run into the folder")
    out = fresh.stdout + fresh.stderr
    for want in ("ckpt.dir = '%s'" % d, "ckpt.resume=auto", "another folder", "ckpt.overwrite = true"):
        if want not in out:
            fail("the refusal of a fresh run does not say %r" % want)
    if fresh.returncode != 2 or latest(d) != "step-6.h5":
        fail("a fresh run over another run's checkpoints: exit %d (expected 2), latest %s"
             % (fresh.returncode, latest(d)))
    # `latest` lost: resume=auto must not start fresh over step-*.h5 either.
    os.rename(os.path.join(d, "latest"), os.path.join(work, "latest.saved"))
    auto = run(zt, launcher, keys + ["train.steps=6", "ckpt.resume=auto"], "resume=auto without latest")
    if auto.returncode != 2 or "no 'latest' to resume from" not in auto.stdout + auto.stderr:
        fail("resume=auto over step-*.h5 without latest: exit %d, expected 2" % auto.returncode)
    os.rename(os.path.join(work, "latest.saved"), os.path.join(d, "latest"))
    # Resume from step 4 (as a requeue after a preemption would): the metrics file keeps
    # steps 1-4 of the first run and continues with 5-8; nothing is truncated.
    with open(os.path.join(d, "latest"), "w") as f:
        f.write("step-4.h5\n")
    old = losses(metrics)
    with open(metrics, "a") as f:
        f.write('{"step": 7, "loss"')  # a line cut short by a kill
    cont = run(zt, launcher, keys + ["train.steps=8", "ckpt.resume=auto"], "resumed at step 4")
    if cont.returncode != 0:
        fail("the resumed run failed")
    records = [json.loads(line) for line in open(metrics)]
    got = [r["step"] for r in records if "loss" in r]
    if got != list(range(1, 9)):
        fail("the metrics file after the resume holds steps %s, expected 1-8" % got)
    if [r["step"] for r in records if "run" in r][-1:] != [4]:
        fail("the resumed piece did not start with its run record at step 4 (report.hpp)")
    now = losses(metrics)
    if any(now[s] != old[s] for s in range(1, 5)):
        fail("the resume rewrote the lines of steps 1-4")
    # ckpt.overwrite = true: a fresh run may replace them (and the metrics file).
    over = run(zt, launcher, keys + ["train.steps=2", "ckpt.overwrite=true"], "ckpt.overwrite=true")
    if over.returncode != 0 or latest(d) != "step-2.h5":
        fail("ckpt.overwrite=true: exit %d, latest %s" % (over.returncode, latest(d)))
    if sorted(losses(metrics)) != [1, 2]:
        fail("ckpt.overwrite=true: the metrics file holds steps %s" % sorted(losses(metrics)))
    print("PASS: finished job again: exit 0 'nothing is left to train'; fresh run over "
          "checkpoints: exit 2 naming the folder and choices (also resume=auto without latest); "
          "resumed at 4: metrics steps 1-8, 1-4 kept bitwise; ckpt.overwrite=true: fresh run "
          "replaces them")


def main():
    mode, work, zt, launcher = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    subprocess.run(["rm", "-rf", work])
    os.makedirs(work)
    {"preempt": preempt, "kill9": kill9, "async": async_resume, "stops": stops,
     "requeue": requeue}[mode](work, zt, launcher)


if __name__ == "__main__":
    main()
