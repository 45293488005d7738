#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What following a new thread costs the program (issue 10, point 2: a thread-per-request server
keeps >= 95 % of its throughput). tests/targets/py/spawnthreads.py starts and joins 1000 empty
threads per round under Debian's python3: untraced, under `pyrsprof run` in the default (ptrace)
mode at 1 Hz and 100 Hz, and in --mode vm. The cost per thread is the round's time over the
untraced one's, per thread. The same at 1 Hz and at 100 Hz means the cost is in following the
thread (ptrace's clone, first-stop and exit events, each a round trip through pyrsprof), not in
the ticks. Usage: PYRSPROF=build/release/pyrsprof /usr/bin/python3 tests/bench/bench_clone.py [--quick]
"""
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "bench"))
from run import table  # noqa: E402  (the benchmarks' table format)

PRS = os.environ.get("PYRSPROF", str(REPO / "bin" / "pyrsprof"))
PY = "/usr/bin/python3"
TARGET = REPO / "tests" / "targets" / "py" / "spawnthreads.py"


def rounds_ms(prefix, n, tmp, k):
    """The rounds' times of one run; prefix's "-o OUT" gets a folder of its own (run k)."""
    prefix = [f"{a}{k}" if a.startswith(tmp + "/") else a for a in prefix]
    out = subprocess.run([*prefix, PY, str(TARGET), str(n)], capture_output=True, text=True,
                         timeout=300, cwd=tmp).stdout
    return [float(line.split()[1]) for line in out.splitlines() if line.startswith("round ")]


def main():
    n = 2 if "--quick" in sys.argv else 5
    tmp = tempfile.mkdtemp(prefix="pyrsprof-clone-")
    arms = [("untraced", []),
            ("ptrace, 1 Hz", [PRS, "run", "-r", "1", "-o", f"{tmp}/a", "--"]),
            ("ptrace, 100 Hz", [PRS, "run", "-r", "100", "-o", f"{tmp}/b", "--"]),
            ("--mode vm, 100 Hz", [PRS, "run", "--mode", "vm", "-r", "100", "-o", f"{tmp}/c", "--"])]
    got = {name: [] for name, _ in arms}
    for k in range(2):  # alternating
        for name, prefix in arms:
            got[name] += rounds_ms(prefix, n, tmp, k)
    base = statistics.median(got["untraced"])
    rows = [(name, len(v), f"{statistics.median(v):.1f} [{min(v):.1f}-{max(v):.1f}]",
             f"{(statistics.median(v) - base):.1f}" if name != "untraced" else "-")
            for name, v in got.items()]
    table(f"thread creation: 1000 threads started and joined per round (1-min load "
          f"{os.getloadavg()[0]:.1f})",
          ["arm", "rounds", "ms per 1000 threads, median [range]", "us more per thread"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
