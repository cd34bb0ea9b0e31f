#!/usr/bin/env python3
"""Hostile input over the whole command line (issue 20, class 8), table-driven.

  hostile_cli_test.py ZT WORKDIR [--list]

The table is generated, not hand-copied:
  - every key of `zt train`, from the schema as `zt train --help-config` prints it (key and
    type columns), each set alone to hostile values for any key (empty, wrong type, huge,
    negative, NaN, inf) and for its type, through `zt estimate --set` (the same validation
    as `zt train`, then the memory model) and once as a wrong TOML type through
    `zt estimate --config FILE`;
  - every option of every subcommand (check, train, estimate, generate, convert
    text-to-tokens, sft-to-tokens, kto-to-tokens, hf-to-h5, h5-to-hf, report), from its `--help`, with hostile values;
  - every path argument and path key (`--config`, `--report`, `--baseline`, `data.path`,
    `ckpt.dir`, `log.metrics`, the convert inputs and outputs, `zt report`'s files and
    `--out`, ...) set to a directory,
    /dev/zero, /dev/null, a FIFO, a symlink out of the work folder, a dangling symlink, a
    missing path, a read-only file outside the work folder, and an empty string.
Runs that are accepted do tiny work (1 training step of a small model, a one-size sweep).

Oracles on the outcome (issue 35 item 4, issue 36 class 10), from ONE rule with the limits
committed in hostile_cli_limits.py (one row per numeric key and option; a numeric key or
option of --help-config or a --help without a row, a row naming none, and limits printed
otherwise than the row fail the test):
  - every numeric key (int/float in `--help-config`) with NaN, +-inf, 1e400, one below its
    lower limit and one above its upper limit (its committed row) ends with exit 2 and a
    message naming the key;
  - every numeric option of every subcommand declares its range in its --help type text
    ("INT in [1, 1000000]", "FLOAT in [0, 1000]", "SIZE in [1, 1T]"; an option whose
    default or type is a number without one fails the test), and NaN, +-inf, 1e400, one
    below and one above its range end with exit 2 and a message naming the option;
  - the cases of issue 36 (class 10: `check --timeout 1e8`, `--report` into a folder where
    the report cannot go, `--max-bytes 1T`, `generate --temperature nan`, `--stop ''`,
    `--threads -1`, `--seed -1`, `--eos -1`/past the vocabulary, `--prompt-ids 1,,2`; class
    7: `lora.alpha=1e308`) with their exit code and message (EXPLICIT below).
Every run besides: exit code < 128 (no crash, no signal), ended within its timeout (no hang), and
no file outside the work folder changed: the folder `outside/` beside it (symlink and
read-only targets, compared by bytes, mode and type before and after) and the test's
own top folder. Independent truth: the expectations are properties of any exit, not zt's
messages; the victim files are compared with what this script wrote.
"""
import concurrent.futures
import hashlib
import os
import re
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostile_cli_limits import KEY_LIMITS, OPTION_LIMITS  # noqa: E402  (the committed limits)

TIMEOUT = 30          # seconds per run: a hang is a failure
PARALLEL = 16         # runs at once (a run is mostly start-up latency, ~0.25 s, not CPU)

# Any key: empty, huge (int and float), negative, NaN, wrong type; and one more by type.
# (The in-process test HostileKeys.EveryKeyIsAcceptedOrRefusedAsBadInput tries 17 values
# and each key's limits; this one runs the real program.)
HOSTILE = ["", "99999999999999999999", "1e400", "-1", "nan", "x"]
BY_TYPE = {"bool": ["2"], "int": ["-9223372036854775808"], "float": ["-inf"],
           "string": ["A" * 5000]}
# Any option of a subcommand: empty, wrong type, negative, huge.
OPTION_VALUES = ["", "x", "-1", "99999999999999999999"]

# A small model and a short run, for the runs that are accepted (no run report: gnuplot
# for each of ~100 accepted runs would double the test's time; zt report's own files and
# options are in the table, and the report has its own tests: report_test.py).
TINY = ["log.report=false", "model.hidden=32", "model.layers=1", "model.heads=2", "model.kv_heads=2",
        "model.intermediate=64", "model.context=32", "train.seq_len=16", "train.micro_batch=2",
        "train.global_batch=2", "train.steps=1", "sample.tokens=0", "eval.every=0",
        "data.eval_fraction=0", "train.peak_tflops=1", "train.threads=1"]
# A one-size sweep, for `zt check` runs that are accepted.
CHECK_FAST = {"--ops": "all_reduce", "--min-bytes": "8", "--max-bytes": "8", "--iters": "1",
              "--warmup": "0", "--straggler-iters": "1", "--straggler-bytes": "8",
              "--pair-iters": "1", "--pair-bytes": "8", "--io-bytes": "4K", "--copy-bytes": "4K"}


def sets(keys):
    out = []
    for k in keys:
        out += ["--set", k]
    return out


def snapshot(root):
    """Every entry under root: type, mode, bytes (a symlink: its target text)."""
    seen = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                what = "link:" + os.readlink(p)
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    what = hashlib.sha256(f.read()).hexdigest()
            else:
                what = "type %o" % stat.S_IFMT(st.st_mode)
            seen[os.path.relpath(p, root)] = (what, stat.S_IMODE(st.st_mode))
    return seen


def help_keys(zt):
    """(key, type) of every `zt train` key, from the schema's table."""
    out = subprocess.run([zt, "train", "--help-config"], capture_output=True, text=True).stdout
    keys = []
    for line in out.splitlines():
        m = re.match(r"^([a-z_]+\.[a-z_0-9.]+)\s+(int|float|bool|string)\s", line)
        if m:
            keys.append((m.group(1), m.group(2)))
    return keys


def help_options(zt, *sub):
    """The options of a subcommand, from its --help: (name, kind) where kind is the
    option's type word (TEXT, INT, FLOAT, SECONDS, ...) or FLAG."""
    out = subprocess.run([zt, *sub, "--help"], capture_output=True, text=True).stdout
    opts = []
    for line in out.splitlines():
        m = re.match(r"^\s+(?:-\w,)?(--[a-z][a-z0-9-]*)(?:\s+([A-Z]+))?", line)
        if m and m.group(1) != "--help":
            opts.append((m.group(1), m.group(2) or "FLAG"))
    return opts


NUMERIC_TYPES = {"INT", "UINT", "FLOAT", "NUMBER", "SIZE", "SECONDS"}


def help_ranges(zt):
    """(key, type, lo, hi, lo_exclusive) of every numeric `zt train` key, from the limits the
    --help-config table prints: "[a, b]", "(a, b]", "[>= a]", "[> a]", "[<= b]"."""
    out = subprocess.run([zt, "train", "--help-config"], capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"^([a-z_]+\.[a-z_0-9.]+)\s+(int|float)\s", line)
        if not m:
            continue
        lo = hi = None
        excl = False
        r = re.search(r"([\[(])(-?[0-9.e+]+), (-?[0-9.e+]+)\]$", line)
        if r:
            excl, lo, hi = r.group(1) == "(", float(r.group(2)), float(r.group(3))
        else:
            r = re.search(r"\[(>=|>|<=) (-?[0-9.e+]+)\]$", line)
            if r and r.group(1) == "<=":
                hi = float(r.group(2))
            elif r:
                excl, lo = r.group(1) == ">", float(r.group(2))
        rows.append((m.group(1), m.group(2), lo, hi, excl))
    return rows


def outside_values(typ, lo, hi, excl):
    """Values the one rule refuses: non-finite, overflowing, and just outside the limits."""
    vals = ["nan", "inf", "-inf", "1e400"] if typ != "SIZE" else ["-1", "1.5K", "x"]
    if typ in ("int", "INT", "UINT"):
        vals = ["nan", "inf", "-inf", "1e400", "99999999999999999999", "1.5"]
    if lo is not None:
        if typ in ("int", "INT", "UINT", "SIZE"):
            if lo > 0 or typ != "SIZE":
                vals.append(str(int(lo) - (0 if excl else 1)))
        else:
            vals.append(repr(lo) if excl else repr(lo - max(1.0, abs(lo))))
    if hi is not None:
        vals.append(str(int(hi) + 1) if typ in ("int", "INT", "UINT", "SIZE") else repr(hi + max(1.0, abs(hi))))
    return vals


def size_bytes(text):
    m = re.match(r"^(\d+)([KMGT]?)$", text)
    return int(m.group(1)) * 1024 ** " KMGT".index(m.group(2) or " ")


def option_ranges(zt, *sub):
    """(option, type word, lo, hi, problem) of every option of a subcommand whose --help
    type or default is numeric: the range from its "in [lo, hi]" text."""
    out = subprocess.run([zt, *sub, "--help"], capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"^\s+(?:-\w,)?(--[a-z][a-z0-9-]*)(?:\s+([A-Z]+)(?:\s+\.\.\.)?)?(.*)$", line)
        if not m or m.group(1) == "--help":
            continue
        opt, word, rest = m.group(1), m.group(2) or "FLAG", m.group(3)
        r = re.search(r"(SIZE |INT list )?in \[([^,\]]+), ([^\]]+)\]", rest)
        default = re.search(r"=(\S+)$", rest.strip().split("  ")[0])  # "INT:in [1, 9]=20"
        numeric_default = default and re.match(r"^-?\d+(\.\d+)?[KMGT]?$", default.group(1))
        if r:
            typ = {"SIZE ": "SIZE", "INT list ": "INT"}.get(r.group(1), word)
            conv = size_bytes if typ == "SIZE" else float
            rows.append((opt, typ, conv(r.group(2)), conv(r.group(3)), None))
        elif word in NUMERIC_TYPES or numeric_default:
            rows.append((opt, word, None, None, "a numeric option with no declared range in --help"))
    return rows


def main():
    zt, top = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    subprocess.run(["rm", "-rf", top])
    work, outside = os.path.join(top, "work"), os.path.join(top, "outside")
    os.makedirs(work)
    os.makedirs(outside)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_NUM_THREADS="1", XDG_CACHE_HOME=os.path.join(work, "cache"), ZT_GNUPLOT="/nonexistent")

    # What the path kinds point at.
    with open(os.path.join(outside, "victim.txt"), "w") as f:
        f.write("victim: zt must never write here\n")
    ro = os.path.join(outside, "readonly.txt")
    with open(ro, "w") as f:
        f.write("read-only victim\n")
    os.chmod(ro, 0o444)
    os.makedirs(os.path.join(work, "adir"))
    os.mkfifo(os.path.join(work, "fifo"))
    os.symlink(os.path.join(outside, "victim.txt"), os.path.join(work, "link"))
    os.symlink(os.path.join(outside, "missing"), os.path.join(work, "dangling"))
    with open(os.path.join(work, "in.txt"), "w") as f:
        f.write("ROMEO: a small text for the tokens.\n" * 40)
    tokens = os.path.join(work, "tokens.h5")
    subprocess.run([zt, "convert", "text-to-tokens", os.path.join(work, "in.txt"), tokens],
                   cwd=work, env=env, check=True, capture_output=True)
    # A checkpoint for `zt generate --weights` (one step of the small model).
    setup_ck = os.path.join(work, "setup-ck")
    subprocess.run([zt, "train"] + sets(TINY + ["data.path=" + tokens, "ckpt.dir=" + setup_ck]),
                   cwd=work, env=env, check=True, capture_output=True, timeout=120)
    setup_metrics = os.path.join(setup_ck, "report", "metrics.jsonl")  # log.report's copy
    generate_base = {"--weights": setup_ck, "--prompt": "ab", "--max-new-tokens": "2", "--threads": "1"}
    paths = {"dir": os.path.join(work, "adir"), "/dev/zero": "/dev/zero", "/dev/null": "/dev/null",
             "fifo": os.path.join(work, "fifo"), "symlink-out": os.path.join(work, "link"),
             "dangling": os.path.join(work, "dangling"), "missing": os.path.join(work, "no/such/file"),
             "read-only-outside": ro, "empty": ""}

    cases = []  # (what, argv)
    expect = {}  # what -> (exit code, regex the output must match): the oracles
    keys = help_keys(zt)
    printed = {k: (t, lo, hi, excl) for k, t, lo, hi, excl in help_ranges(zt)}
    table_problems = ["key %s: numeric in --help-config (%s) but no row in hostile_cli_limits.KEY_LIMITS"
                      % (k, v) for k, v in printed.items() if k not in KEY_LIMITS]
    table_problems += ["key %s: --help-config prints %s, KEY_LIMITS commits %s" % (k, v, KEY_LIMITS[k])
                       for k, v in printed.items() if k in KEY_LIMITS and KEY_LIMITS[k] != v]
    table_problems += ["KEY_LIMITS row %s: no such numeric key in --help-config" % k for k in KEY_LIMITS
                       if k not in printed]
    ranges = {k: KEY_LIMITS[k] for k in printed if k in KEY_LIMITS}
    if len(keys) < 50:
        print("FAIL: only %d keys read from `zt train --help-config`" % len(keys))
        sys.exit(1)
    # 1. Every key, alone, through the validation and the memory model.
    for key, typ in keys:
        refused = outside_values(*ranges[key]) if key in ranges else []
        for v in list(dict.fromkeys(HOSTILE + BY_TYPE[typ] + refused)):
            what = "estimate --set %s=%r" % (key, v[:20])
            cases.append((what, [zt, "estimate", "--set", "%s=%s" % (key, v)]))
            if v in refused:
                expect[what] = (2, re.escape(key))
        toml = os.path.join(work, "key-%s.toml" % key)
        section, name = key.rsplit(".", 1)
        with open(toml, "w") as f:
            f.write("[%s]\n%s = [[1], {a = 2}]\n" % (section, name))  # wrong type in TOML
        cases.append(("estimate --config (%s a table array)" % key, [zt, "estimate", "--config", toml]))
    # 2. Path keys of `zt train` (the string keys naming files and folders) x path kinds.
    path_keys = ["data.path", "ckpt.dir", "log.metrics", "ckpt.init_from", "ckpt.resume",
                 "offload.nvme_path"]
    for key in path_keys:
        if key not in dict(keys):
            print("FAIL: path key %s is not in the schema any more: update the table" % key)
            sys.exit(1)
        for kind, p in paths.items():
            extra = ["offload.optimizer=nvme", "zero.stage=1"] if key == "offload.nvme_path" else []
            cases.append(("train %s=<%s>" % (key, kind),
                          [zt, "train"] + sets(TINY + ["data.path=" + tokens, "ckpt.dir=" + os.path.join(work, "ck-" + kind)]
                                               + extra + ["%s=%s" % (key, p)])))
    # 3. Path arguments of every subcommand x path kinds.
    for kind, p in paths.items():
        cases += [
            ("train --config <%s>" % kind, [zt, "train", "--config", p] + sets(TINY + ["data.path=" + tokens])),
            ("estimate --config <%s>" % kind, [zt, "estimate", "--config", p]),
            ("convert text-to-tokens <%s> OUT" % kind,
             [zt, "convert", "text-to-tokens", p, os.path.join(work, "t2t-%s.h5" % kind)]),
            ("convert text-to-tokens IN <%s>" % kind, [zt, "convert", "text-to-tokens", os.path.join(work, "in.txt"), p]),
        ]
        # --force is the user's word to replace an output: not given for a file outside.
        if kind != "read-only-outside":
            cases += [
                ("convert text-to-tokens --force IN <%s>" % kind,
                 [zt, "convert", "text-to-tokens", "--force", os.path.join(work, "in.txt"), p]),
                ("convert hf-to-h5 --force DIR <%s>" % kind,
                 [zt, "convert", "hf-to-h5", "--force", os.path.join(work, "adir"), p]),
                ("convert h5-to-hf --force CKPT <%s>" % kind, [zt, "convert", "h5-to-hf", "--force", tokens, p])]
        cases += [
            ("convert hf-to-h5 <%s> OUT" % kind, [zt, "convert", "hf-to-h5", p, os.path.join(work, "hf-%s.h5" % kind)]),
            ("convert h5-to-hf <%s> OUT" % kind, [zt, "convert", "h5-to-hf", p, os.path.join(work, "hf-out-" + kind)]),
            ("convert h5-to-hf CKPT <%s>" % kind, [zt, "convert", "h5-to-hf", tokens, p]),
        ]
        cases += [("report <%s>" % kind, [zt, "report", p, "--out", os.path.join(work, "rep-" + kind)]),
                  ("report METRICS --out <%s>" % kind, [zt, "report", setup_metrics, "--out", p])]
        args = dict(generate_base)
        args["--weights"] = p
        cases.append(("generate --weights <%s>" % kind, [zt, "generate"] + [x for kv in args.items() for x in kv]))
        for opt in ("--report", "--baseline", "--thresholds", "--io-dir", "--nccl-log-dir"):
            args = dict(CHECK_FAST)
            args[opt] = p
            cases.append(("check %s <%s>" % (opt, kind), [zt, "check"] + [x for kv in args.items() for x in kv]))
    # 4. Every option of every subcommand with hostile values.
    subs = [("check",), ("estimate",), ("train",), ("generate",), ("convert", "text-to-tokens"),
            ("convert", "hf-to-h5"), ("convert", "h5-to-hf")]
    tail = {"check": [], "estimate": [], "generate": [], "train": sets(TINY + ["data.path=" + tokens]),
            "text-to-tokens": [os.path.join(work, "in.txt"), os.path.join(work, "opt.h5")],
            "hf-to-h5": [os.path.join(work, "adir"), os.path.join(work, "opt.h5")],
            "h5-to-hf": [tokens, os.path.join(work, "opt-hf")]}
    subs.append(("convert", "sft-to-tokens"))
    subs.append(("convert", "kto-to-tokens"))
    subs.append(("report",))
    tail["report"] = [setup_metrics]
    tail["sft-to-tokens"] = ["--tokenizer", os.path.join(work, "adir"), os.path.join(work, "in.txt"),
                             os.path.join(work, "sft.h5")]
    tail["kto-to-tokens"] = ["--tokenizer", os.path.join(work, "adir"), os.path.join(work, "in.txt"),
                             os.path.join(work, "kto.h5")]
    n_options = n_numeric = 0
    undeclared = []
    for sub in subs:
        numeric = {}
        name = " ".join(sub)
        for opt, typ, lo, hi, problem in option_ranges(zt, *sub):
            row = OPTION_LIMITS.get((name, opt))
            if problem:
                undeclared.append("%s %s: %s" % (name, opt, problem))
            elif row is None:
                table_problems.append("%s %s: numeric in --help (%s in [%s, %s]) but no row in "
                                      "hostile_cli_limits.OPTION_LIMITS" % (name, opt, typ, lo, hi))
            else:
                if row != (typ, lo, hi):
                    table_problems.append("%s %s: --help prints %s, OPTION_LIMITS commits %s"
                                          % (name, opt, (typ, lo, hi), row))
                numeric[opt] = outside_values(*row, False)
        table_problems += ["OPTION_LIMITS row %s %s: no such numeric option in --help" % (name, o)
                           for s_, o in OPTION_LIMITS if s_ == name and o not in numeric]
        n_numeric += len(numeric)
        for opt, kind in help_options(zt, *sub):
            if kind == "FLAG" or opt in ("--set",):
                continue
            n_options += 1
            refused = numeric.get(opt, [])
            for v in list(dict.fromkeys(OPTION_VALUES + refused)):
                if sub in (("check",), ("generate",)):  # options with values given: replace one
                    args = dict(CHECK_FAST if sub == ("check",) else generate_base)
                    args[opt] = v
                    argv = [zt, sub[0]] + [x for kv in args.items() for x in kv]
                else:
                    argv = [zt, *sub, opt, v] + tail[sub[-1]]
                what = "%s %s %r" % (" ".join(sub), opt, v)
                cases.append((what, argv))
                if v in refused:
                    expect[what] = (2, re.escape(opt))
    if n_numeric < 30:
        print("FAIL: only %d numeric options with a range read from the --help texts" % n_numeric)
        sys.exit(1)

    # 5. The cases of issue 36 (classes 7 and 10), each with its exit code and message.
    taken = os.path.join(work, "report-taken")
    os.makedirs(os.path.join(taken, "report.json"))
    gen = [zt, "generate"] + [x for kv in generate_base.items() for x in kv]

    def gen_with(opt, value):  # the small generation with one option replaced
        args = dict(generate_base)
        args[opt] = value
        return [zt, "generate"] + [x for kv in args.items() for x in kv]

    def chk(opt, value):  # the fast check with one option replaced
        args = dict(CHECK_FAST)
        args[opt] = value
        return [zt, "check"] + [x for kv in args.items() for x in kv]
    EXPLICIT = [
        ("36.10 check --timeout 1e8", chk("--timeout", "1e8"), 2, r"--timeout: must be a number in \[0\.001, 604800\], got 1e8"),
        ("36.10 check --report <report.json a folder>", chk("--report", taken), 2,
         r"holds a folder named report\.json"),
        ("36.10 check --report </proc/...>", chk("--report", "/proc/zt-report"), 2, r"cannot create report directory"),
        ("36.10 check --max-bytes 1T", chk("--max-bytes", "1T"), 2,
         r"--max-bytes 1(\.0)?T: the check holds two buffers of this size on each rank, more than this host's [\s\S]*HINT: lower --max-bytes"),
        ("36.10 check --max-bytes 2T", chk("--max-bytes", "2T"), 2, r"--max-bytes: must be a size in \[1, 1T\]"),
        ("36.10 generate --temperature nan", gen + ["--temperature", "nan"], 2, r"--temperature: must be a finite number"),
        ("36.10 generate --stop ''", gen + ["--stop", ""], 2, r"--stop: an empty value"),
        ("15 generate --threads 4096", gen_with("--threads", "4096"), 2, r"--threads 4096: more OpenMP threads"),
        ("15 generate --prompt ''", gen_with("--prompt", ""), 2, r"--prompt: an empty value"),
        ("36.10 generate --threads -1", gen + ["--threads", "-1"], 2, r"--threads: must be a whole number in \[0, 4096\], got -1"),
        ("36.10 generate --seed -1", gen + ["--seed", "-1"], 2, r"--seed: must be a whole number in \[0, 9223372036854775807\], got -1"),
        ("36.10 generate --eos -1", gen + ["--eos", "-1"], 2, r"--eos: must be a whole number in \[0, 2147483647\], got -1"),
        ("36.10 generate --eos past the vocabulary", gen + ["--eos", "100000"], 2,
         r"--eos: id 100000 is outside the vocabulary \[0, 256\)"),
        ("36.10 generate --prompt-ids 1,,2", [zt, "generate", "--weights", setup_ck, "--prompt-ids", "1,,2"], 2,
         r"--prompt-ids: must be a whole number in \[0, 2147483647\], got ''"),
        ("36.7 estimate lora.alpha=1e308", [zt, "estimate", "--set", "finetune.method=lora", "--set", "lora.alpha=1e308"], 2,
         r"config key 'lora\.alpha' \(in --set\) must be in \(0, 1000000\], got 1e\+?308"),
        ("36.7 train lora.alpha=1e308", [zt, "train"] + sets(TINY + ["data.path=" + tokens, "finetune.method=lora",
                                                                   "lora.alpha=1e308"]), 2,
         r"config key 'lora\.alpha' \(in --set\) must be in \(0, 1000000\]"),
    ]
    for what, argv, rc, pattern in EXPLICIT:
        cases.append((what, argv))
        expect[what] = (rc, pattern)

    if "--list" in sys.argv:
        for what, _ in cases:
            print(what)
        for p in table_problems:
            print("FAIL: " + p)
        sys.exit(1 if table_problems else 0)

    before_out, before_top = snapshot(outside), sorted(os.listdir(top))

    def one(case):
        what, argv = case
        t0 = time.time()
        try:
            p = subprocess.run(argv, cwd=work, env=env, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, errors="replace", timeout=TIMEOUT)
            return what, p.returncode, time.time() - t0, (p.stdout + p.stderr)[-2000:]
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"") + (e.stderr or b"")
            return what, None, time.time() - t0, out[-600:].decode(errors="replace") if isinstance(out, bytes) else out

    t_start = time.time()
    with concurrent.futures.ThreadPoolExecutor(PARALLEL) as pool:
        results = list(pool.map(one, cases))
    took = time.time() - t_start

    failures = []
    codes = {}
    failures += undeclared + table_problems
    for what, rc, secs, out in results:
        codes[rc] = codes.get(rc, 0) + 1
        if what in expect and rc is not None:
            want_rc, pattern = expect[what]
            if rc != want_rc or not re.search(pattern, out):
                failures.append("%s: exit %d, expected %d with /%s/\n%s" % (what, rc, want_rc, pattern, out))
        if rc is None:
            failures.append("%s: no exit within %d s (a hang)\n%s" % (what, TIMEOUT, out))
        elif rc < 0 or rc >= 128:
            failures.append("%s: exit %d (a crash or a signal)\n%s" % (what, rc, out))
        elif "internal error" in out.lower() or "terminate called" in out:
            failures.append("%s: exit %d with an internal error\n%s" % (what, rc, out))
    after_out, after_top = snapshot(outside), sorted(os.listdir(top))
    for name in sorted(set(before_out) | set(after_out)):
        if before_out.get(name) != after_out.get(name):
            failures.append("outside/%s changed: %s -> %s" % (name, before_out.get(name), after_out.get(name)))
    if before_top != after_top:
        failures.append("the test's top folder changed: %s -> %s" % (before_top, after_top))
    slowest = sorted(results, key=lambda r: -r[2])[:3]
    print("hostile_cli_test: %d runs with an expected outcome (exit code and message)" % len(expect))
    print("hostile_cli_test: %d runs (%d keys x %d-%d values, %d options, %d path kinds) in %.1f s; "
          "exit codes %s; slowest: %s"
          % (len(results), len(keys), len(HOSTILE) + 2, len(HOSTILE) + 3, n_options, len(paths), took,
             {("hang" if k is None else k): v for k, v in sorted(codes.items(), key=lambda kv: str(kv[0]))},
             "; ".join("%s %.1f s" % (w, s) for w, _, s, _ in slowest)))
    odd = sorted(w for w, rc, _, _ in results if rc not in (0, 2, None))
    if odd:
        print("exit codes other than 0 and 2 (allowed, < 128): %s" % "; ".join(odd))
    for f in failures[:40]:
        print("FAIL: " + f)
    if failures:
        print("%d failures" % len(failures))
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
