#!/usr/bin/env python3
"""Progress of `zt convert text-to-tokens` (issue 24) on a pseudo-terminal and in a pipe.

On a terminal the line is redrawn in place ("\\r" + line + "\\x1b[K"); in a pipe there is
never a carriage return or an escape code, only plain "progress: ..." lines and one end
line; --progress 0 prints none; a negative --progress is exit 2 naming the flag. The
results line on stdout is the same in every case.

usage: progress_pty_test.py ZT WORKDIR
"""
import os
import pty
import subprocess
import sys

zt, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
text = os.path.join(work, "big.txt")
with open(text, "wb") as f:  # 40 MB: three 16 MiB chunks
    line = b"the quick brown fox jumps over the lazy dog 0123456789\n"
    f.write(line * (40_000_000 // len(line)))
out_h5 = os.path.join(work, "out.h5")
failures = []


def check(cond, what, shown):
    if not cond:
        failures.append(f"{what}; got:\n{shown!r}")


def run_pipe(*flags):
    p = subprocess.run([zt, "convert", "text-to-tokens", "--force", *flags, text, out_h5],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def run_pty(*flags):
    """stderr on a pseudo-terminal, stdout in a pipe."""
    master, slave = pty.openpty()
    p = subprocess.Popen([zt, "convert", "text-to-tokens", "--force", *flags, text, out_h5],
                         stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    got = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        got += chunk
    os.close(master)
    stdout = p.stdout.read().decode()
    return p.wait(), stdout, got.decode()


# A pipe: plain lines only, ending with the total and the rate.
rc, out, err = run_pipe("--progress", "1")
check(rc == 0, "pipe: exit 0", err)
check("wrote " in out and "tokens (uint16)" in out, "pipe: the results line on stdout", out)
check("\r" not in err and "\x1b" not in err, "pipe: no carriage return or escape code", err)
lines = [l for l in err.splitlines() if l.startswith("progress: ")]
check(lines and lines[-1].startswith("progress: text-to-tokens done: 40.00 MB, 40.00M tokens in "),
      "pipe: an end line with the total", err)
check(lines and lines[-1].endswith(" MB/s"), "pipe: the end line carries the rate", err)
print("pipe stderr:\n" + err, end="")

# A terminal: the line redrawn in place, then a newline at the end.
rc, out, err = run_pty("--progress", "1")
check(rc == 0, "pty: exit 0", err)
check("wrote " in out, "pty: the results line on stdout", out)
check("\rprogress: text-to-tokens done: 40.00 MB" in err, "pty: the end line drawn with \\r", err)
check("\x1b[K" in err and err.endswith("\n"), "pty: clear to end of line, then a newline", err)
print("pty stderr: " + repr(err))

# Off: nothing, in a pipe and on a terminal.
rc, out, err = run_pipe("--progress", "0")
check(rc == 0 and "progress" not in err, "pipe, --progress 0: no progress output", err)
rc, out, err = run_pty("--progress", "0")
check(rc == 0 and "progress" not in err, "pty, --progress 0: no progress output", err)

# A negative interval: exit 2 naming the flag.
rc, out, err = run_pipe("--progress", "-1")
check(rc == 2 and "--progress" in err and "got -1" in err, "--progress -1: exit 2 naming the flag", err)

for f in failures:
    print("FAIL: " + f)
sys.exit(1 if failures else 0)
