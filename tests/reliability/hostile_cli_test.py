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
    text-to-tokens, hf-to-h5, h5-to-hf), from its `--help`, with hostile values;
  - every path argument and path key (`--config`, `--report`, `--baseline`, `data.path`,
    `ckpt.dir`, `log.metrics`, the convert inputs and outputs, ...) set to a directory,
    /dev/zero, /dev/null, a FIFO, a symlink out of the work folder, a dangling symlink, a
    missing path, a read-only file outside the work folder, and an empty string.
Runs that are accepted do tiny work (1 training step of a small model, a one-size sweep).

Each run: exit code < 128 (no crash, no signal), ended within its timeout (no hang), and
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

# A small model and a short run, for the runs that are accepted.
TINY = ["model.hidden=32", "model.layers=1", "model.heads=2", "model.kv_heads=2",
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
    generate_base = {"--weights": setup_ck, "--prompt": "ab", "--max-new-tokens": "2", "--threads": "1"}
    paths = {"dir": os.path.join(work, "adir"), "/dev/zero": "/dev/zero", "/dev/null": "/dev/null",
             "fifo": os.path.join(work, "fifo"), "symlink-out": os.path.join(work, "link"),
             "dangling": os.path.join(work, "dangling"), "missing": os.path.join(work, "no/such/file"),
             "read-only-outside": ro, "empty": ""}

    cases = []  # (what, argv)
    keys = help_keys(zt)
    if len(keys) < 50:
        print("FAIL: only %d keys read from `zt train --help-config`" % len(keys))
        sys.exit(1)
    # 1. Every key, alone, through the validation and the memory model.
    for key, typ in keys:
        for v in HOSTILE + BY_TYPE[typ]:
            cases.append(("estimate --set %s=%r" % (key, v[:20]), [zt, "estimate", "--set", "%s=%s" % (key, v)]))
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
    n_options = 0
    for sub in subs:
        for opt, kind in help_options(zt, *sub):
            if kind == "FLAG" or opt in ("--set",):
                continue
            n_options += 1
            for v in OPTION_VALUES:
                if sub in (("check",), ("generate",)):  # options with values given: replace one
                    args = dict(CHECK_FAST if sub == ("check",) else generate_base)
                    args[opt] = v
                    argv = [zt, sub[0]] + [x for kv in args.items() for x in kv]
                else:
                    argv = [zt, *sub, opt, v] + tail[sub[-1]]
                cases.append(("%s %s %r" % (" ".join(sub), opt, v), argv))

    if "--list" in sys.argv:
        for what, _ in cases:
            print(what)
        return

    before_out, before_top = snapshot(outside), sorted(os.listdir(top))

    def one(case):
        what, argv = case
        t0 = time.time()
        try:
            p = subprocess.run(argv, cwd=work, env=env, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, errors="replace", timeout=TIMEOUT)
            return what, p.returncode, time.time() - t0, (p.stdout + p.stderr)[-600:]
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"") + (e.stderr or b"")
            return what, None, time.time() - t0, out[-600:].decode(errors="replace") if isinstance(out, bytes) else out

    t_start = time.time()
    with concurrent.futures.ThreadPoolExecutor(PARALLEL) as pool:
        results = list(pool.map(one, cases))
    took = time.time() - t_start

    failures = []
    codes = {}
    for what, rc, secs, out in results:
        codes[rc] = codes.get(rc, 0) + 1
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
