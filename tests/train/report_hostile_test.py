#!/usr/bin/env python3
"""report_hostile_test.py WORKDIR ZT: `zt report` on careless and hostile input (no MPI).

- User text (metrics keys, run facts, file names) holding newlines, quotes, backslashes,
  , = | < ; and invalid UTF-8 reaches plots.gp, run0.dat, report.csv, report.md and
  report.json escaped: a key "\\n!touch FILE" run through the real gnuplot creates no
  file; report.csv parsed by Python's csv module has every value under its key's name and
  no cell starting with =; report.md has no heading or HTML of the user's; report.json
  parses.
- The plots draw the right columns: loss.png the loss, lr.png the lr, clipped steps the
  grad norm where clip_coef < 1 (read from run0.dat through the script's `using`).
- The reader: a cut last line is dropped with a note, a bad middle line is exit 2 naming
  FILE and line, a gap between files is noted.
- Joins: two continuations of one parent and a piece of another model are drawn side by
  side with a note, a true resume is joined.
- A relative ZT_GNUPLOT works; 3,000 keys draw a capped number of plots, with the note.
- Plots only when complete (a gnuplot writing a truncated PNG: left out, noted); a
  rerun removes the earlier report's plots it does not have; SIGTERM kills gnuplot and
  leaves no staging folder; a second `zt report` on a locked folder: exit 2.
- A full disk (a small tmpfs, root only): exit non-zero, the earlier report intact.
"""
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_plots_check import check_plot_columns  # noqa: E402

work, zt = sys.argv[1], os.path.abspath(sys.argv[2])
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chdir(work)
failures = []
GNUPLOT = shutil.which("gnuplot")


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def write(path, records, tail=b""):
    with open(path, "wb") as f:
        for r in records:
            f.write(json.dumps(r).encode() + b"\n")
        f.write(tail)


def report(files, out, env=None, **kw):
    return subprocess.run([zt, "report"] + files + ["--out", out], capture_output=True, env=env,
                          timeout=120, **kw)


def steps(first, last, extra=lambda s: {}):
    return [dict({"step": s, "loss": 3.0 - 0.1 * s, "lr": 1e-4 * s, "grad_norm": 0.5 + s,
                  "clip_coef": 0.5 if s % 3 == 0 else 1.0}, **extra(s)) for s in range(first, last + 1)]


RUN = {"model": "tiny", "data": "d.bin"}
# ---- 1. user text in every generated format ----------------------------------------
pwned = os.path.abspath("PWNED")
hostile_keys = ["x\n!touch " + pwned + "\n", "a,b", "=HYPERLINK(1)", "q'\"\\z", "p|q", "<b>h</b>",
                "s;t", "+1", "-2", "@3", "tab\tk", "fam.dot\n!touch " + pwned + "\n"]
facts = dict(RUN, note="m\n# Heading <script>x</script> | cell", path="C:\\dir\\'q'\"")
name = b"run\n# Head,=x|<i>\xff.metrics"
recs = [{"step": 0, "run": facts}] + steps(1, 6, lambda s: {k: s * 10 + i for i, k in enumerate(hostile_keys)})
write(name, recs)
p = report([name.decode("utf-8", "surrogateescape")], "r1")
check(p.returncode == 0, "hostile keys: zt report exit 0 (got %d: %s)" % (p.returncode, p.stderr[-300:]))
check(not os.path.exists(pwned), "a key '\\n!touch FILE' run through gnuplot creates no file")
gp = open("r1/plots.gp", "rb").read().decode("utf-8", "replace")
check(not any(line.startswith("!") for line in gp.split("\n")), "plots.gp: no line starts with !")
if GNUPLOT:
    rj = json.load(open("r1/report.json"))
    check(rj["plot_note"] == "" and len(rj["plots"]) >= 4, "gnuplot drew every plot: %r" % rj["plot_note"])
for line in open("r1/run0.dat", "rb").read().split(b"\n"):
    check(line == b"" or line.startswith(b"#") or re.fullmatch(rb"[0-9 .eE+-Na]+", line) is not None,
          "run0.dat line is a comment or numbers: %r" % line[:60])
rows = list(csv.reader(open("r1/report.csv", newline="", encoding="utf-8", errors="surrogateescape")))
head = rows[0]
check(all(len(r) == len(head) for r in rows), "report.csv: every row has as many cells as the header")
check(not any(c.startswith(("=", "+", "-", "@")) and not re.fullmatch(r"-?[0-9.e+-]+", c)
              for r in rows for c in r), "report.csv: no text cell starts with = + - @")
names = [h[1:] if h.startswith("'") and h[1:2] in "=+-@\t" else h for h in head]
for i, k in enumerate(hostile_keys):
    col = names.index(k) if k in names else -1
    check(col >= 0 and [float(r[col]) for r in rows[1:]] == [s * 10 + i for s in range(1, 7)],
          "report.csv: column %r holds its own values" % k)
md = open("r1/report.md", "rb").read().decode("utf-8", "replace")
check([l for l in md.split("\n") if l.startswith("# ")] == ["# zt train: run report"], "report.md: no heading of the user's")
check("<script" not in md and "<b>" not in md and "<i>" not in md, "report.md: no raw HTML")
table = [l for l in md.split("\n") if l.startswith("| ")]
cells = {len(re.findall(r"(?<!\\)\|", l)) for l in table}
check(len(cells) == 1, "report.md: every summary row has the same number of cells %s" % cells)
rj = json.load(open("r1/report.json", encoding="utf-8"))
check(rj["runs"][0]["run"]["note"] == facts["note"], "report.json keeps the fact exactly")
# ---- 2. the plots' columns (report_plots_check.py; plots.gp and run0.dat need no gnuplot)
check_plot_columns(check, "r1", [recs[1:]])
# ---- 3. the reader -------------------------------------------------------------------
write("cut.metrics", [{"step": 0, "run": RUN}] + steps(1, 3), b'{"step": 4, "lo')
p = report(["cut.metrics"], "r3")
check(p.returncode == 0 and b"cut short" in p.stderr, "a cut last line: exit 0 with a note")
r3 = json.load(open("r3/report.json")) if p.returncode == 0 else {"runs": [{"notes": []}]}
check(any("cut.metrics: its last line (5) is cut short" in n for n in r3["runs"][0]["notes"]) and
      [int(r["step"]) for r in csv.DictReader(open("r3/report.csv"))] == [1, 2, 3],
      "  the note in report.json names the file and line; steps 1-3 kept, the cut one left out")
write("bad.metrics", [{"step": 0, "run": RUN}] + steps(1, 2), b'not json\n' + json.dumps(steps(3, 3)[0]).encode() + b"\n")
p = report(["bad.metrics"], "r3b")
check(p.returncode == 2 and b"bad.metrics" in p.stderr and b"line 4" in p.stderr,
      "a bad middle line: exit 2 naming the file and line (%s)" % p.stderr[-200:])
write("gap1.metrics", [{"step": 0, "run": RUN}] + steps(1, 3))
write("gap2.metrics", [{"step": 9, "run": RUN}] + steps(10, 12))
p = report(["gap1.metrics", "gap2.metrics"], "r3c")
check(p.returncode == 0 and b"after a gap" in p.stderr and len(json.load(open("r3c/report.json"))["runs"]) == 2,
      "a gap between files: two series, noted")
r3c = json.load(open("r3c/report.json"))["runs"] if p.returncode == 0 else []
check(len(r3c) == 2 and any("gap2.metrics starts at step 10, after a gap" in n for r in r3c for n in r["notes"]),
      "  the gap's note in report.json: %s" % [r["notes"] for r in r3c])
# ---- 4. joins --------------------------------------------------------------------------
ck = lambda s: {"step": s, "checkpoint": {"seconds": 0.1}}
write("a.metrics", [{"step": 0, "run": RUN}] + steps(1, 4) + [ck(4)] + steps(5, 8) + [ck(8)])
write("b.metrics", [{"step": 8, "run": RUN}] + steps(9, 12) + [ck(12)])
write("c.metrics", [{"step": 8, "run": RUN}] + steps(9, 10))
write("o.metrics", [{"step": 12, "run": dict(RUN, model="other")}] + steps(13, 14))
p = report(["a.metrics", "b.metrics", "c.metrics"], "r4")
runs = json.load(open("r4/report.json"))["runs"] if p.returncode == 0 else []
check([r["label"] for r in runs] == ["a.metrics + b.metrics", "c.metrics"],
      "a true resume joins; a second continuation of one parent is drawn beside it: %s" % [r["label"] for r in runs])
check(b"another continuation" in p.stderr, "  with a note")
p = report(["a.metrics", "b.metrics", "o.metrics"], "r4b")
runs = json.load(open("r4b/report.json"))["runs"] if p.returncode == 0 else []
check(len(runs) == 2 and b"model" in p.stderr, "a piece of another model is not joined, noted")
# ---- 5. ZT_GNUPLOT relative, many keys -------------------------------------------------
if GNUPLOT:
    os.makedirs("bin", exist_ok=True)
    with open("bin/gp", "w") as f:
        f.write("#!/bin/sh\nexec %s \"$@\"\n" % GNUPLOT)
    os.chmod("bin/gp", 0o755)
    p = report(["a.metrics"], "r5", env=dict(os.environ, ZT_GNUPLOT="bin/gp"))
    check(p.returncode == 0 and json.load(open("r5/report.json"))["plot_note"] == "",
          "a relative ZT_GNUPLOT draws the plots (%s)" % p.stderr[-200:])
write("many.metrics", [{"step": 0, "run": RUN}] + steps(1, 2, lambda s: {"k%d.v" % i: i for i in range(3000)}))
t = time.time()
p = report(["many.metrics"], "r5b")
rj = json.load(open("r5b/report.json")) if p.returncode == 0 else {"plots": list(range(999)), "plot_note": ""}
check(len(rj["plots"]) <= 40 and "not drawn" in rj["plot_note"], "3,000 keys: the plots capped, noted (%d)" % len(rj["plots"]))
check("not drawn" in open("r5b/report.md").read() if p.returncode == 0 else False, "  and said in report.md")
check(len(next(csv.reader(open("r5b/report.csv")))) == 3000 + 6, "  report.csv holds every key")


# ---- 6. plots that lie -----------------------------------------------------------------
def fake(name, body):
    path = os.path.abspath(name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o755)
    return dict(os.environ, ZT_GNUPLOT=path)


trunc = fake("trunc.sh", "for f in loss lr grad_norm throughput; do printf '\\211PNG\\r\\n\\032\\n' > $f.png; done\n")
p = report(["a.metrics"], "r6", env=trunc)
rj = json.load(open("r6/report.json"))
check(p.returncode == 0 and rj["plots"] == [] and "incomplete" in rj["plot_note"] and not os.path.exists("r6/loss.png"),
      "truncated PNGs are not plots: left out, noted")
if GNUPLOT:
    write("fam.metrics", [{"step": 0, "run": RUN}] + steps(1, 3, lambda s: {"zz.a": s}))
    report(["fam.metrics"], "r6b")
    had = os.path.exists("r6b/family_zz.png")
    p = report(["gap1.metrics"], "r6b")
    check(had and not os.path.exists("r6b/family_zz.png"), "a rerun removes the earlier report's plots it lacks")
pidfile = os.path.abspath("gp.pid")
slow = fake("slow.sh", "echo $$ > %s\nexec sleep 60\n" % pidfile)
z = subprocess.Popen([zt, "report", "a.metrics", "--out", "r6c"], env=slow, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
for _ in range(200):
    if os.path.exists(pidfile) and open(pidfile).read().strip():
        break
    time.sleep(0.05)
second = report(["a.metrics"], "r6c")
check(second.returncode == 2 and b"in use" in second.stderr, "a second zt report on the folder: exit 2 (%s)" % second.stderr[-200:])
z.send_signal(signal.SIGTERM)
z.wait(timeout=30)
gp_pid = int(open(pidfile).read())
time.sleep(0.5)
alive = os.path.exists("/proc/%d" % gp_pid) and "Z" not in open("/proc/%d/stat" % gp_pid).read().split()[2]
check(not alive, "SIGTERM: gnuplot dies with zt")
check(not [n for n in os.listdir("r6c") if n.startswith(".zt-stage") or n.startswith(".plots")],
      "SIGTERM: no staging folder left")
if alive:
    os.kill(gp_pid, signal.SIGKILL)
# ---- 7. a full disk ------------------------------------------------------------------------
if os.geteuid() == 0 and GNUPLOT:
    os.makedirs("tiny", exist_ok=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", "tiny"]).returncode == 0:
        try:
            p = report(["a.metrics"], "tiny/r")
            before = {n: open("tiny/r/" + n, "rb").read() for n in os.listdir("tiny/r")}
            with open("tiny/fill", "wb") as f:
                try:
                    f.write(b"\0" * (1 << 20))
                except OSError:
                    pass
            p = report(["a.metrics"], "tiny/r")
            after = {n: open("tiny/r/" + n, "rb").read() for n in os.listdir("tiny/r") if n != "zt.lock"}
            check(p.returncode != 0, "a full disk: zt report fails (exit %d)" % p.returncode)
            check(before == after, "a full disk: the earlier report is intact")
        finally:
            subprocess.run(["umount", "tiny"])
    else:
        print("skip: no tmpfs")
else:
    print("skip: the full disk case needs root and gnuplot")
# ---- 8. zt train's own JSON writers: a run fact of invalid UTF-8 ------------------------
# The data path (a link named with the byte 0xff) reaches the run record of log.metrics and
# of the report's metrics.jsonl: written as valid JSON (U+FFFD), never a crash.
corpus = os.path.join(os.path.dirname(zt), "..", "..", "..", "data", "tinyshakespeare.txt")
if os.path.exists(corpus):
    link = os.path.join(os.fsencode(work), b"t\xff.h5")
    subprocess.run([zt, "convert", "text-to-tokens", corpus, link], capture_output=True, timeout=120)
    p = subprocess.run([zt, "train", "--set", "train.steps=2", "--set", "train.micro_batch=2",
                        "--set", "train.global_batch=2", "--set", "eval.every=0", "--set", "sample.tokens=0",
                        "--set", b"data.path=" + link, "--set", "ckpt.dir=ck8", "--set", "log.metrics=m8.jsonl"],
                       capture_output=True, timeout=240)
    check(p.returncode == 0, "zt train with a data path of invalid UTF-8: exit %d %s" % (p.returncode, p.stderr[-300:]))
    for path in ("m8.jsonl", "ck8/report/metrics.jsonl"):
        try:
            records = [json.loads(line) for line in open(path, "rb")]
            run = [r for r in records if "run" in r]
            check(bool(run) and "\ufffd" in json.dumps(run[0], ensure_ascii=False),
                  "%s: valid JSON lines, the run record's path with U+FFFD" % path)
        except (OSError, ValueError) as e:
            check(False, "%s: %s" % (path, e))
else:
    print("skip: no corpus at " + corpus)
if failures:
    print("%d FAILED" % len(failures))
    sys.exit(1)
print("all passed")
