"""The pinned versions of the tests' Python peers (scripts/python-peers.txt, the list
scripts/install-deps.sh installs from), and the check of an imported peer against its pin
(hf_common.require calls it for every peer it imports).
"""
import importlib.metadata
import os
import sys

PINS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "scripts",
                         "python-peers.txt")


def pinned_versions():
    """{name: version} of scripts/python-peers.txt (`name==version` lines), the pins that
    scripts/install-deps.sh installs; a file that cannot be read fails the test."""
    pins = {}
    try:
        with open(PINS_FILE) as f:
            for line in f:
                line = line.split("#")[0].strip()
                if line:
                    name, _, version = line.partition("==")
                    pins[name.strip().lower()] = version.strip()
    except OSError as e:
        print(f"FAIL: cannot read the pinned peer versions {PINS_FILE} ({e}); restore it from git", flush=True)
        os._exit(1)
    return pins


def check_pin(name, mod):
    """The imported peer `mod` against its pin: under ZT_REQUIRE_PEERS=1 another version
    fails naming both (CI runs the versions the comparisons were written against); without
    it a note. A local build label (torch's 2.15.0+cpu) is not part of the version."""
    pin = pinned_versions().get(name.lower())
    if pin is None:
        return
    have = getattr(mod, "__version__", None) or getattr(mod, "VERSION", None)
    if not isinstance(have, str):
        try:
            have = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            have = "unknown"
    if have.split("+")[0] == pin:
        return
    what = (f"python module '{name}' is version {have}, not the pinned {pin} "
            f"(scripts/python-peers.txt) for {sys.executable}")
    if os.environ.get("ZT_REQUIRE_PEERS") == "1":
        print(f"FAIL: {what}; ZT_REQUIRE_PEERS=1 (CI) requires the pinned versions "
              f"(pip install {name}=={pin}, or scripts/install-deps.sh)", flush=True)
        os._exit(1)
    print(f"note: {what}", flush=True)
