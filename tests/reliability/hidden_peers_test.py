#!/usr/bin/env python3
"""Every Python test with each of its Python peers hidden: a skip or a FAIL naming the peer,
never a traceback, and before any work.

Usage: hidden_peers_test.py CTEST BUILD_DIR [TEST_REGEX]

The tests come from CTest (`ctest --show-only=json-v1`: each test's exact command line,
environment and working folder); every test whose command runs a .py file under tests/ is
taken. The peers a script imports are read from its source (ast): every import in the
script, the module-level imports of the local helper modules it imports, the imports inside
the helper functions it uses (and the helpers those call), and the modules named in
require(...) / torch_peers(...) calls (peer_start and CausalLMPeer: torch, transformers).
Each such peer is hidden in turn by a package of its name first on PYTHONPATH whose
__init__ raises ImportError, and the test runs:
  - without ZT_REQUIRE_PEERS: exit 77 and a `SKIPPED` line naming the peer;
  - with ZT_REQUIRE_PEERS=1 (the first peer of each test): exit 1 and a `FAIL` line naming it;
  - with ZT_REQUIRE_PEERS=1 and a pinned peer (one no other peer imports) importing as
    version 0.0.1: exit 1 and a `FAIL` line naming both versions;
  - no Python traceback, and exit within LIMIT_S (a test that trains or converts before it
    notices a missing peer is killed there).
A line may name another peer instead where that one does not import here either.
OPTIONAL lists the peers a test's mode does not need (it runs without them): not hidden.
"""
import ast
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TESTS, "ckpt", "hf"))
from hf_common import PEERS, pinned_versions  # noqa: E402  (stdlib only)

LIMIT_S = 90
FAKE_VERSION = "0.0.1"
DEPENDED_ON = {"numpy", "torch"}  # other peers import them: a fake one breaks those first
# CTest name -> the peers its mode runs without (the script imports them for other modes).
OPTIONAL = {
    "model.hf.lora_export": {"bitsandbytes"},             # the qlora mode's peer
    "ckpt.hf.hf_roundtrip.f32-f16": {"torch", "transformers"},  # the bf16 / transformers groups'
    "ckpt.hf.hf_roundtrip.bf16": {"transformers"},
    "kernels.nf4_peer": {"torch", "bitsandbytes"},        # the bitsandbytes half's
    "data.hf.tokenizer_parity_unigram": {"h5py", "numpy", "tokenizers", "transformers"},  # --unigram-ids: sentencepiece
}
PEER_NAMES = set(PEERS) | {n for n in pinned_versions() if re.fullmatch(r"[a-z0-9_]+", n)}
IMPLIES = {"torch_peers": ("torch", "transformers"), "peer_start": ("torch", "transformers"),
           "CausalLMPeer": ("torch", "transformers")}


def helper_file(name):
    """The .py file under tests/ of a local helper module `name`, or None."""
    for d, _, files in os.walk(TESTS):
        if name + ".py" in files:
            return os.path.join(d, name + ".py")
    return None


def names_in(node):
    """Top-level module names a node imports or requires, and the names it calls."""
    mods, calls = set(), set()
    for n in ast.walk(node):
        if isinstance(n, ast.Import):
            mods |= {a.name.split(".")[0] for a in n.names}
        elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
            mods.add(n.module.split(".")[0])
        elif isinstance(n, ast.Call):
            f = n.func.id if isinstance(n.func, ast.Name) else getattr(n.func, "attr", None)
            if f:
                calls.add(f)
            if f == "require" or f in IMPLIES:
                mods |= {a.value.split(".")[0] for a in n.args
                         if isinstance(a, ast.Constant) and isinstance(a.value, str)}
                mods |= set(IMPLIES.get(f, ()))
    return mods, calls


def peers_of(path, used=None, seen=None):
    """Peers the file imports: all of it (used None: the script), or its module level and
    the functions / classes in `used` and those they call (a helper)."""
    seen = set() if seen is None else seen
    key = (path, None if used is None else frozenset(used))
    if key in seen:
        return set()
    seen.add(key)
    tree = ast.parse(open(path).read(), path)
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    if used is None:
        nodes = [tree]
    else:
        nodes = [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        todo, done = list(used), set()
        while todo:
            name = todo.pop()
            if name in done or name not in defs:
                continue
            done.add(name)
            nodes.append(defs[name])
            todo += names_in(defs[name])[1]
    out = set()
    for node in nodes:
        mods, _ = names_in(node)
        out |= mods & PEER_NAMES
        for n in ast.walk(node):
            if isinstance(n, ast.Import):
                helpers = [(a.name, None) for a in n.names]
            elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
                helpers = [(n.module, {a.name for a in n.names})]
            else:
                continue
            for mod, names in helpers:
                f = helper_file(mod) if mod not in PEER_NAMES else None
                if f and os.path.abspath(f) != os.path.abspath(path):
                    if names is None:  # `import helper`: the helper.NAME the file uses
                        names = {a.attr for a in ast.walk(tree) if isinstance(a, ast.Attribute)
                                 and isinstance(a.value, ast.Name) and a.value.id == mod}
                    out |= peers_of(f, names, seen)
    return out


def shadow(root, peer, kind):
    """A folder whose package `peer` raises ImportError on import (kind "hidden"), or
    imports as version 0.0.1 (kind "version")."""
    d = os.path.join(root, kind, peer)
    os.makedirs(os.path.join(d, peer), exist_ok=True)
    with open(os.path.join(d, peer, "__init__.py"), "w") as f:
        f.write(f"__version__ = '{FAKE_VERSION}'\n" if kind == "version" else
                f"raise ImportError(\"No module named '{peer}' (hidden by hidden_peers_test.py)\")\n")
    return d


_imports = {}


def imports_here(python, peer):
    """Whether `peer` imports in python without hiding (cached)."""
    if (python, peer) not in _imports:
        p = subprocess.run([python, "-c", f"import {peer}"], capture_output=True, timeout=300)
        _imports[(python, peer)] = p.returncode == 0
    return _imports[(python, peer)]


def run_case(test, peer, kind, root):
    env = dict(os.environ)
    env.pop("ZT_REQUIRE_PEERS", None)
    for kv in test["env"]:
        k, _, v = kv.partition("=")
        env[k] = v
    strict = kind != "skip"
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(root, "version" if kind == "version" else "hidden", peer)] + [p for p in [env.get("PYTHONPATH")] if p])
    if strict:
        env["ZT_REQUIRE_PEERS"] = "1"
    try:
        p = subprocess.run(test["command"], cwd=test["cwd"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=LIMIT_S)
        rc, out = p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return f"still running after {LIMIT_S} s: it works before checking its peers\n{out[-1500:]}"
    word, want = ("FAIL", 1) if strict else ("SKIPPED", 77)
    lines = [l for l in out.splitlines() if l.startswith(word)]
    python = test["command"][0]
    if kind == "version":
        pin = pinned_versions()[peer]
        named = [l for l in lines if f"'{peer}' is version {FAKE_VERSION}, not the pinned {pin}" in l]
    else:
        named = [l for l in lines if re.search(rf"\b{peer}\b", l)
             or any(re.search(rf"'{q}'", l) and not imports_here(python, q) for q in PEER_NAMES)]
    if "Traceback (most recent call last)" in out:
        return f"a traceback (exit {rc})\n{out[-1500:]}"
    if rc != want or not named:
        return f"exit {rc} (want {want}) and no {word} line naming {peer}\n{out[-1500:]}"
    return None


def python_tests(ctest, build, regex):
    # ctest writes Testing/Temporary/LastTest.log in the folder it reads, even with
    # --show-only: run on the build folder, it would replace the log of the very run this
    # test is part of (scripts/ci-label-check.py reads that log). So it reads a copy of the
    # CTestTestfile.cmake tree, which names everything else by absolute path.
    with tempfile.TemporaryDirectory() as mirror:
        for d, _, files in os.walk(build):
            if "CTestTestfile.cmake" in files:
                into = os.path.join(mirror, os.path.relpath(d, build))
                os.makedirs(into, exist_ok=True)
                shutil.copy(os.path.join(d, "CTestTestfile.cmake"), into)
        shown = subprocess.run([ctest, "--test-dir", mirror, "--show-only=json-v1"], capture_output=True,
                               text=True, check=True)
    out = []
    for t in json.loads(shown.stdout)["tests"]:
        cmd = t.get("command") or []
        scripts = [c for c in cmd if c.endswith(".py") and os.path.abspath(c).startswith(TESTS + os.sep)]
        if not scripts or os.path.abspath(scripts[0]) == os.path.abspath(__file__):
            continue
        if regex and not re.search(regex, t["name"]):
            continue
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        cwd = props.get("WORKING_DIRECTORY", build)
        if os.path.commonpath([cwd, mirror]) == mirror:  # the test's own folder, in the copy
            cwd = os.path.join(build, os.path.relpath(cwd, mirror))
        out.append({"name": t["name"], "command": cmd, "script": scripts[0], "skip": props.get("SKIP_RETURN_CODE"),
                    "env": props.get("ENVIRONMENT", []), "cwd": cwd})
    return out


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__)
        return 2
    tests = python_tests(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else None)
    cases, fails = [], 0
    for t in tests:
        peers = sorted(peers_of(t["script"]) - OPTIONAL.get(t["name"], set()))
        print(f"{t['name']}: {os.path.relpath(t['script'], TESTS)} imports {', '.join(peers) or 'no peer'}")
        if peers and t["skip"] != 77:
            print(f"FAIL  {t['name']}: no SKIP_RETURN_CODE 77, so its skip without a peer reads as a failure")
            fails += 1
        cases += [(t, p, "skip") for p in peers] + [(t, p, "strict") for p in peers[:1]]
        pinned = sorted((p for p in peers if p in pinned_versions()), key=lambda p: (p in DEPENDED_ON, p))
        cases += [(t, p, "version") for p in pinned[:1]]
    if not cases:
        print("FAIL: no Python test with a peer found: a test that checks nothing must not pass")
        return 1
    with tempfile.TemporaryDirectory() as root, concurrent.futures.ThreadPoolExecutor(4) as pool:
        for _, peer, kind in cases:
            shadow(root, peer, "version" if kind == "version" else "hidden")
        # One test's cases one after another (they share its work folder), tests side by side.
        by_test = {}
        for t, p, kind in cases:
            by_test.setdefault(t["name"], []).append((t, p, kind))

        def run_test(its_cases):
            return [(t["name"], p, kind, run_case(t, p, kind, root)) for t, p, kind in its_cases]

        for f in concurrent.futures.as_completed([pool.submit(run_test, c) for c in by_test.values()]):
            for name, peer, kind, err in f.result():
                what = {"skip": f"without {peer}", "strict": f"without {peer}, ZT_REQUIRE_PEERS=1",
                        "version": f"with {peer} {FAKE_VERSION}, ZT_REQUIRE_PEERS=1"}[kind]
                print(f"{'FAIL ' if err else 'ok   '} {name} {what}" + (f": {err}" if err else ""),
                      flush=True)
                fails += bool(err)
    print(f"{fails} failed of {len(cases)} cases: each peer of {len(tests)} Python tests hidden in turn")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
