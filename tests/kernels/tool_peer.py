"""The harness of a kernel peer test that drives a zt tool (test helper; stdlib only).

A tool reads a header and arrays as little-endian float64 from IN and writes float64 to OUT:
`tool MODE IN OUT`. ToolPeer runs it and keeps the verdicts.
"""
import array
import os
import subprocess
import sys


class ToolPeer:
    def __init__(self, doc):
        """From `script TOOL WORKDIR` (else the usage and exit 2)."""
        if len(sys.argv) != 3:
            print(doc)
            sys.exit(2)
        self.tool, self.work = sys.argv[1], sys.argv[2]
        os.makedirs(self.work, exist_ok=True)
        self.failures = []

    def run(self, mode, header, *arrays):
        """The tool's output as a flat float64 array (numpy); arrays: numpy arrays or tensors."""
        import numpy as np  # a peer of the calling test, required there first
        src, dst = os.path.join(self.work, mode + ".in"), os.path.join(self.work, mode + ".out")
        with open(src, "wb") as f:
            f.write(array.array("d", [float(x) for x in header]).tobytes())
            for a in arrays:
                a = a.detach().numpy() if hasattr(a, "detach") else a
                f.write(np.ascontiguousarray(a, np.float64).tobytes())
        subprocess.run([self.tool, mode, src, dst], check=True)
        return np.fromfile(dst, np.float64)

    def close(self, what, ours, theirs, bound):
        """max |ours - theirs| / max |theirs| <= bound, printed; a failure is kept."""
        import numpy as np
        theirs = theirs.detach().numpy() if hasattr(theirs, "detach") else theirs
        ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
        assert ours.shape == theirs.shape, (what, ours.shape, theirs.shape)
        err = float(np.max(np.abs(ours - theirs))) / max(float(np.max(np.abs(theirs))), 1e-300)
        ok = err <= bound
        print("  %-38s max diff / max |theirs| %.3e (bound %.0e) %s" % (
            what, err, bound, "ok" if ok else "FAIL"))
        if not ok:
            self.failures.append(what)

    def finish(self):
        """Exit 1 naming the failures, else print PASS."""
        if self.failures:
            print("FAIL: " + ", ".join(self.failures))
            sys.exit(1)
        print("PASS")
