#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What following a new thread costs the program (issue 10, point 2: a thread-per-request server
keeps >= 95 % of its throughput). tests/targets/py/spawnthreads.py starts and joins 1000 empty
threads per round under Debian's python3: untraced, under `pyrsprof run` in the default (ptrace)
mode at 1 Hz and 100 Hz, and in --mode vm. The cost per thread is the round's time over the
untraced one's, per thread. The same at 1 Hz and at 100 Hz means the cost is in following the
thread (ptrace's clone, first-stop and exit events, each a round trip through pyrsprof), not in
the ticks. The arms run in the default mode (the classifier on: its inherited counters cost every
new thread); one more, "ptrace --no-classify, 100 Hz", tells the classifier's share apart. Each
round also gives the target's CPU per thread (its own process_time: the kernel's work for it at
clone and exit included), steadier than its wall time when other work shares the CPUs. Usage: PYRSPROF=build/release/pyrsprof /usr/bin/python3 tests/bench/bench_clone.py [--quick]
[--passes N] [--builds NAME=PATH ...] (N passes over the arms, default 2; several pyrsprof binaries, e.g. before=... after=..., their arms alternating
in each of the two passes: last on the command line)
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "bench"))
from run import table  # noqa: E402  (the benchmarks' table format)

PRS = os.path.abspath(os.environ.get("PYRSPROF", str(REPO / "bin" / "pyrsprof")))
PY = "/usr/bin/python3"
TARGET = REPO / "tests" / "targets" / "py" / "spawnthreads.py"


def rounds_ms(prefix, n, tmp, k):
    """The rounds' (wall ms, CPU ms) of one run; prefix's "-o OUT" gets a folder of its own (run
    k)."""
    prefix = [f"{a}{k}" if a.startswith(tmp + "/") else a for a in prefix]
    out = subprocess.run([*prefix, PY, str(TARGET), str(n)], capture_output=True, text=True,
                         timeout=300, cwd=tmp).stdout
    return [(float(line.split()[1]), float(line.split()[3])) for line in out.splitlines()
            if line.startswith("round ")]


def arms_of(builds, tmp):
    """The arms: untraced, then for each build (NAME=PATH; one unnamed: PYRSPROF) ptrace at 1 and
    100 Hz and --mode vm at 100 Hz."""
    arms = [("untraced", [])]
    for k, (name, prs) in enumerate(builds):
        tag = f"{name}: " if name else ""
        arms += [(f"{tag}ptrace, 1 Hz", [prs, "run", "-r", "1", "-o", f"{tmp}/a{k}_", "--"]),
                 (f"{tag}ptrace, 100 Hz", [prs, "run", "-r", "100", "-o", f"{tmp}/b{k}_", "--"]),
                 (f"{tag}ptrace --no-classify, 100 Hz",
                  [prs, "run", "-r", "100", "--no-classify", "-o", f"{tmp}/d{k}_", "--"]),
                 (f"{tag}--mode vm, 100 Hz",
                  [prs, "run", "--mode", "vm", "-r", "100", "-o", f"{tmp}/c{k}_", "--"])]
    return arms


def main():
    n = 2 if "--quick" in sys.argv else 5
    builds = [tuple(a.split("=", 1)) for a in sys.argv[sys.argv.index("--builds") + 1:]
              if "=" in a] \
        if "--builds" in sys.argv else [("", PRS)]
    tmp = tempfile.mkdtemp(prefix="pyrsprof-clone-")  # (removed at the end)
    arms = arms_of(builds, tmp)
    got = {name: [] for name, _ in arms}
    passes = int(sys.argv[sys.argv.index("--passes") + 1]) if "--passes" in sys.argv else 2
    for k in range(passes):  # alternating (each pass runs every arm)
        for name, prefix in arms:
            got[name] += rounds_ms(prefix, n, tmp, k)
    shutil.rmtree(tmp, ignore_errors=True)
    base = statistics.median(w for w, _ in got["untraced"])
    cbase = statistics.median(c for _, c in got["untraced"])
    rows = []
    for name, v in got.items():
        w, c = [x[0] for x in v], [x[1] for x in v]
        rows.append((name, len(v), f"{statistics.median(w):.1f} [{min(w):.1f}-{max(w):.1f}]",
                     f"{(statistics.median(w) - base):.1f}" if name != "untraced" else "-",
                     f"{statistics.median(c):.1f} [{min(c):.1f}-{max(c):.1f}]",
                     f"{(statistics.median(c) - cbase):.1f}" if name != "untraced" else "-"))
    table(f"thread creation: 1000 threads started and joined per round (1-min load "
          f"{os.getloadavg()[0]:.1f})",
          ["arm", "rounds", "ms per 1000 threads, median [range]", "us more per thread",
           "target CPU ms per 1000 threads", "CPU us more per thread"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
