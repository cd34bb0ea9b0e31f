#!/usr/bin/env python3
"""report_test.py WORKDIR ZT LAUNCHER...: the run report (issue 42, docs/training.md "Run report").

- A short run (2 ranks, 8 steps, a checkpoint every 4, gradients clipped) leaves
  ckpt.dir/report/ with report.md, report.json, report.csv and every plot, each a valid
  PNG (signature, IHDR) of 800 x 400 pixels.
- The summary figures equal those computed here from the log.metrics JSON, independently.
- Each plot draws its own key (run<i>.dat through plots.gp's `using`): loss.png the loss
  and eval loss, lr.png the lr, grad_norm.png the grad norm with exactly the clipped steps
  marked (report.json's clipped_steps); for the run's report and two series side by side.
- A resumed run's two files (ckpt.stop_after=4, then ckpt.resume=auto into another file)
  are joined by `zt report` without a gap or a duplicate step, their losses equal the
  straight run's; the run's own report (ckpt.dir/report) holds steps 1-8 once, resumed
  at 4. The straight run beside them: two series side by side.
- Without gnuplot (ZT_GNUPLOT at a missing program, or a PATH without it): report.md
  with the note and report.csv, exit 0, and a training run still exits 0 (a warning).
- log.report=false: no report folder; log.metrics naming the report's copy: exit 2.
- An objective's own keys (DPO's rewards/*, logps/*; nested objects): one plot per family.
"""
import csv
import json
import math
import os
import shutil
import statistics
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_plots_check import check_plot_columns  # noqa: E402

work, zt, launcher = sys.argv[1], sys.argv[2], sys.argv[3:]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chdir(work)
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


KEYS = ["train.steps=8", "train.seq_len=32", "train.micro_batch=2", "train.global_batch=8",
        "eval.every=3", "eval.batches=1", "sample.tokens=0", "train.grad_clip=1.0",
        "ckpt.every=4", "train.threads=1"]


def train(extra, env=None, name="run"):
    cmd = launcher + [zt, "train"]
    for kv in KEYS + extra:
        cmd += ["--set", kv]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)
    with open(name + ".log", "w") as f:
        f.write(p.stdout + p.stderr)
    if p.returncode != 0:
        print(p.stdout + p.stderr)
    return p


def report(files, out, env=None):
    p = subprocess.run([zt, "report"] + files + ["--out", out], capture_output=True, text=True,
                       env=env, timeout=120)
    if p.returncode != 0:
        print(p.stdout + p.stderr)
    return p


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


def steps_of(path):
    return [r for r in map(json.loads, open(path)) if "run" not in r and "checkpoint" not in r]


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


# --- 1. a short run: its report and plots -------------------------------------------------
p = train(["log.metrics=full.jsonl", "ckpt.dir=ck_full"], name="full")
check(p.returncode == 0, "the short run exits 0")
rep = "ck_full/report"
for name in ("report.md", "report.json", "report.csv", "metrics.jsonl"):
    check(os.path.isfile(os.path.join(rep, name)), f"{rep}/{name} written")
j = json.load(open(os.path.join(rep, "report.json")))
expected = {"loss.png", "lr.png", "grad_norm.png", "throughput.png", "memory.png", "comm.png"}
check(expected <= set(j["plots"]), f"every plot drawn: {sorted(j['plots'])}")
check(j["plot_note"] == "", f"no plot note: {j['plot_note']!r}")
md = open(os.path.join(rep, "report.md")).read()
for png in j["plots"]:
    size = png_size(os.path.join(rep, png))
    check(size == (800, 400), f"{png}: a PNG of 800 x 400 (got {size})")
    check(f"]({png})" in md, f"report.md shows {png}")
run = j["runs"][0]["run"]
check(run["model"] == "tiny" and run["ranks"] == 2 and run["steps"] == 8, "the run's facts (model, ranks, steps)")
for fact in ("- model: tiny", "- ranks: 2", "- zero: stage 0", "- tokenizer: bytes", "- device: device cpu"):
    check(fact in md, f"report.md lists '{fact}'")

# --- 2. the summary figures, computed here from the JSON ----------------------------------
recs = [json.loads(l) for l in open("full.jsonl")]
steps = steps_of("full.jsonl")
ckpts = [r["checkpoint"] for r in recs if "checkpoint" in r]
fin = lambda x: x is not None and math.isfinite(x)
ok = [s for s in steps if fin(s["loss"]) and fin(s["grad_norm"])]
evals = [(s["step"], s["eval_loss"]) for s in steps if "eval_loss" in s]
best = min(evals, key=lambda e: e[1])
ref = {
    "steps": len(steps), "last_step": steps[-1]["step"], "tokens": steps[-1]["tokens"],
    "final_loss": ok[-1]["loss"], "final_eval_loss": evals[-1][1], "best_eval_loss": best[1],
    "best_eval_step": best[0],
    "median_tokens_per_s": statistics.median(s["tokens_per_s"] for s in steps),
    "median_mfu": statistics.median(s["mfu"] for s in steps),
    "step_time_s_total": sum(s["step_time_s"] for s in steps),
    "skipped_steps": len(steps) - len(ok),
    "clipped_steps": sum(1 for s in steps if s["clip_coef"] < 1),
    "checkpoints": len(ckpts),
    "checkpoint_seconds_total": sum(c["seconds"] for c in ckpts),
    "checkpoint_seconds_max": max(c["seconds"] for c in ckpts),
}
summary = j["runs"][0]["summary"]
for k, v in ref.items():
    check(close(summary[k], v), f"summary {k}: report {summary[k]} == JSON {v}")
peak = {f"memory.{k}": max(s["memory"][k] for s in steps) for k in steps[0]["memory"]}
peak["peak_rss_bytes"] = max(s["peak_rss_bytes"] for s in steps)
check(summary["peak_memory_bytes"] == peak, "peak memory by category")
comm = {f"comm_bytes.{k}": sum(s["comm_bytes"][k] for s in steps) / len(steps) for k in steps[0]["comm_bytes"]}
for k in ("comm_intra_node_bytes", "comm_inter_node_bytes"):
    comm[k] = sum(s[k] for s in steps) / len(steps)
check(set(summary["comm_bytes_per_step"]) == set(comm) and
      all(close(summary["comm_bytes_per_step"][k], v) for k, v in comm.items()), "comm bytes per step")
check(ref["clipped_steps"] > 0, f"the run clipped ({ref['clipped_steps']} steps): grad_norm.png marks them")
check(len(ckpts) == 2 and [r["step"] for r in recs if "checkpoint" in r] == [4, 8], "checkpoint records at steps 4 and 8")
check(f"| final eval loss | {ref['final_eval_loss']:.4f} |" in md, "report.md's table: final eval loss")
check(f"| clipped steps | {ref['clipped_steps']} |" in md, "report.md's table: clipped steps")
# The plots' data and script: each plot draws its own key's column (report_plots_check.py).
check_plot_columns(check, rep, [steps], [summary])
rows = list(csv.DictReader(open(os.path.join(rep, "report.csv"))))
check([int(r["step"]) for r in rows] == list(range(1, 9)), "report.csv: a row per step")
check(all(close(float(r["loss"]), s["loss"]) for r, s in zip(rows, steps)), "report.csv: the losses")

# --- 3. a resumed run's two files, joined -------------------------------------------------
p1 = train(["log.metrics=piece1.jsonl", "ckpt.dir=ck_res", "ckpt.stop_after=4"], name="piece1")
p2 = train(["log.metrics=piece2.jsonl", "ckpt.dir=ck_res", "ckpt.resume=auto"], name="piece2")
check(p1.returncode == 0 and p2.returncode == 0, "the two pieces exit 0")
check([s["step"] for s in steps_of("piece2.jsonl")] == [5, 6, 7, 8], "the second piece holds steps 5-8")
q = report(["piece1.jsonl", "piece2.jsonl"], "joined")
check(q.returncode == 0, "zt report of the two pieces exits 0")
jj = json.load(open("joined/report.json"))
check(len(jj["runs"]) == 1 and jj["runs"][0]["resumed_at"] == [4], f"one series, resumed after step 4: {[(r['label'], r['resumed_at']) for r in jj['runs']]}")
rows = list(csv.DictReader(open("joined/report.csv")))
check([int(r["step"]) for r in rows] == list(range(1, 9)), f"joined: steps 1-8, no gap, no duplicate: {[r['step'] for r in rows]}")
check(all(abs(float(r["loss"]) - s["loss"]) <= 1e-6 * s["loss"] for r, s in zip(rows, steps)),
      "joined: the losses of the straight run")
own = json.load(open("ck_res/report/report.json"))["runs"]
own_steps = [int(r["step"]) for r in csv.DictReader(open("ck_res/report/report.csv"))]
check(len(own) == 1 and own_steps == list(range(1, 9)) and own[0]["resumed_at"] == [4],
      f"the run's own report: steps 1-8 once, resumed at 4 ({own_steps}, {own[0]['resumed_at']})")
q = report(["full.jsonl", "piece1.jsonl", "piece2.jsonl"], "side")
js = json.load(open("side/report.json"))
check(q.returncode == 0 and [r["label"] for r in js["runs"]] == ["full.jsonl", "piece1.jsonl + piece2.jsonl"],
      f"side by side: two series {[r['label'] for r in js['runs']]}")
check(all(png_size(os.path.join("side", png)) == (800, 400) for png in js["plots"]), "side by side: every plot a PNG")
check_plot_columns(check, "side", [steps, steps_of("piece1.jsonl") + steps_of("piece2.jsonl")],
                   [r["summary"] for r in js["runs"]])

# --- 4. without gnuplot -------------------------------------------------------------------
for tag, env in (("ZT_GNUPLOT", dict(os.environ, ZT_GNUPLOT=os.path.join(work, "no", "gnuplot"))),
                 ("PATH", dict(os.environ, PATH=os.path.join(work, "empty-path")))):
    out = "noplot-" + tag
    q = report(["full.jsonl"], out, env=env)
    check(q.returncode == 0, f"without gnuplot ({tag}): zt report exits 0")
    m = open(os.path.join(out, "report.md")).read()
    check("gnuplot not found" in m and "report.csv" in m, f"without gnuplot ({tag}): the note in report.md")
    check(len(list(csv.DictReader(open(os.path.join(out, "report.csv"))))) == 8, f"without gnuplot ({tag}): report.csv")
    check(not [f for f in os.listdir(out) if f.endswith(".png")], f"without gnuplot ({tag}): no PNG")
env = dict(os.environ, ZT_GNUPLOT=os.path.join(work, "no", "gnuplot"))
p = train(["ckpt.dir=ck_noplot", "train.steps=2"], env=env, name="noplot")
check(p.returncode == 0 and "WARNING: log.report: gnuplot not found" in p.stdout + p.stderr,
      "a run without gnuplot exits 0 with a warning")
check(os.path.isfile("ck_noplot/report/report.csv"), "a run without gnuplot: report.csv")

# --- 5. log.report=false ------------------------------------------------------------------
p = train(["ckpt.dir=ck_off", "train.steps=2", "log.report=false"], name="off")
check(p.returncode == 0 and not os.path.exists("ck_off/report"), "log.report=false: no report folder")

# log.metrics naming the report's own copy: both would write it, refused (exit 2).
p = train(["ckpt.dir=ck_same", "train.steps=2", "log.metrics=ck_same/report/metrics.jsonl"], name="same")
check(p.returncode == 2 and "lies in the report folder (log.report)" in p.stdout + p.stderr,
      "log.metrics = ckpt.dir/report/metrics.jsonl: exit 2 naming it")

# --- 6. an objective's own keys (DPO's rewards/* and logps/*): a plot per family --------
with open("dpo.jsonl", "w") as f:
    f.write(json.dumps({"step": 0, "run": {"model": "tiny"}}) + "\n")
    for s in range(1, 6):
        f.write(json.dumps({"step": s, "loss": 0.7 - 0.01 * s, "lr": 1e-4, "grad_norm": 1.0, "clip_coef": 1.0,
                            "rewards/chosen": 0.1 * s, "rewards/rejected": -0.1 * s,
                            "logps/chosen": -10.0 + s, "logps/rejected": -12.0 - s,
                            "offload": {"adam_s": 0.01 * s}}) + "\n")
q = report(["dpo.jsonl"], "dpo")
jd = json.load(open("dpo/report.json"))
for png in ("family_rewards.png", "family_logps.png", "family_offload.png", "loss.png"):
    check(q.returncode == 0 and png in jd["plots"] and png_size(os.path.join("dpo", png)) == (800, 400),
          f"objective keys: {png} drawn")
head = next(csv.reader(open("dpo/report.csv")))
check({"rewards/chosen", "logps/rejected", "offload.adam_s"} <= set(head), "objective keys: in report.csv")

print("FAIL: %d checks" % len(failures) if failures else "report_test: all checks passed")
sys.exit(1 if failures else 0)
