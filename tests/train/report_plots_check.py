"""The run report's plots against the numbers they must draw (report_test.py on a real run,
report_hostile_test.py on hostile keys). Reads only plots.gp and run<i>.dat, which are
written with or without gnuplot, so the check never depends on gnuplot being installed:

- loss.png's "train loss" line is the steps' loss, its "eval loss" line their eval_loss;
- lr.png's "lr" line is the lr;
- grad_norm.png's "grad norm" line is the grad_norm, and its "clipped" marks sit on the
  grad_norm of exactly the steps with clip_coef < 1 (as many as report.json's
  summary clipped_steps, when given).
"""
import math
import os
import re


def plot_lines(folder):
    """{png: {title: (data file, using expression)}} of FOLDER/plots.gp."""
    out = {}
    text = open(os.path.join(folder, "plots.gp"), encoding="utf-8", errors="replace").read()
    for block in text.split("reset\n"):
        m = re.search(r"^set output '([^']*)'$", block, re.M)
        if not m:
            continue
        lines = {}
        for d, using, title in re.findall(r"'(run[0-9]+\.dat)' using (.+?) with .*? title '((?:[^'\\]|\\.)*)'", block):
            lines[re.sub(r"^run [0-9]+: ", "", title)] = (d, using)
        out[m.group(1)] = lines
    return out


def data_columns(folder, name):
    """The rows of FOLDER/NAME (run<i>.dat) as lists of floats (NaN kept)."""
    with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
        return [[float(x) for x in line.split()] for line in f if line.strip() and not line.startswith("#")]


def same(got, want):
    """Equal as %.9g prints them (1e-8 relative); NaN for a step without the key."""
    if want is None or (isinstance(want, float) and not math.isfinite(want)):
        return math.isnan(got)
    return abs(got - want) <= 1e-8 * max(abs(want), 1e-30)


def check_plot_columns(check, folder, series, summaries=None):
    """`series`: per run<i>.dat, its step records (dicts, in step order); `summaries`: the
    report.json summaries of those series (for clipped_steps), or None."""
    lines = plot_lines(folder)
    for i, steps in enumerate(series):
        tag = f"{folder}/run{i}.dat"

        def values(png, title, key):
            """The column that plots.gp draws as `title` in png (using 1:N), against `key`."""
            d, using = lines.get(png, {}).get(title, (None, ""))
            m = re.fullmatch(r"1:([0-9]+)", using)
            rows = data_columns(folder, f"run{i}.dat")
            got = [r[int(m.group(1)) - 1] for r in rows] if m else []
            ok = len(got) == len(steps) and all(same(g, s.get(key)) for g, s in zip(got, steps))
            check(ok, f"{tag}: {png} draws '{title}' from the column of {key} (using {using or 'none'})")

        values("loss.png", "train loss", "loss")
        if any("eval_loss" in s for s in steps):
            values("loss.png", "eval loss", "eval_loss")
        values("lr.png", "lr", "lr")
        values("grad_norm.png", "grad norm", "grad_norm")
        _, using = lines.get("grad_norm.png", {}).get("clipped", (None, ""))
        m = re.fullmatch(r"1:\(column\(([0-9]+)\) < 1 \? column\(([0-9]+)\) : 1/0\)", using)
        rows = data_columns(folder, f"run{i}.dat")
        marked = [(int(r[0]), r[int(m.group(2)) - 1]) for r in rows if r[int(m.group(1)) - 1] < 1] if m else None
        want = [(s["step"], s["grad_norm"]) for s in steps if s["clip_coef"] < 1]
        ok = marked is not None and len(marked) == len(want) and all(
            a == b and same(g, n) for (a, g), (b, n) in zip(marked, want))
        if summaries is not None:
            ok = ok and len(want) == summaries[i]["clipped_steps"]
        check(ok and bool(want), f"{tag}: grad_norm.png marks the {len(want)} steps with clip_coef < 1 on their grad norm "
                           f"(using {using or 'none'}; marked {[a for a, _ in marked or []]})")
