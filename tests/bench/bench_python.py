# SPDX-License-Identifier: MIT
"""Benchmark of the CPython reader (issue 3, item 7); prints tables, asserts nothing.

1. Cost of one sample of a 50-frame Python stack: vm mode (tools/pystacks --bench: memory reads
   only), and merged mode (pyrsprof attach --stats: sample_cost_us of stats.json, when the CLI
   merges Python frames).
2. Slowdown of a pure-Python CPU workload (tests/targets/py/cpuwork.py, which times itself) at
   100 Hz and 1000 Hz: vm mode (pystacks -r) and merged mode (pyrsprof run -r).
Goals: vm <= 15 us/sample, merged <= 60 us; slowdown at 100 Hz <= 1 % (vm), <= 3 % (merged).

Usage: PYRSPROF=build/release/pyrsprof /usr/bin/python3 tests/bench/bench_python.py [--quick]
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "targets" / "py"))
import pyrs_testlib as T  # noqa: E402

QUICK = "--quick" in sys.argv
PRS = os.environ.get("PYRSPROF", str(REPO / "bin" / "pyrsprof"))


def vm_cost(py):
    t = T.Target(py, "recurse.py", 49, 60)  # rec x49 + <module> = 50 frames
    try:
        r = subprocess.run([str(T.pystacks_path()), "--bench", "2000", str(t.pid)], capture_output=True,
                           text=True, timeout=60)
        w = r.stdout.split()
        d = dict(zip(w[1::2], w[2::2]))
        return float(d["median_us"]), float(d["p90_us"])
    finally:
        t.stop()


def merged_cost(py):
    t = T.Target(py, "recurse.py", 49, 60)
    try:
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([PRS, "attach", str(t.pid), "-r", "200", "-d", "2", "-o", d, "--stats"],
                               capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                return None
            st = json.load(open(os.path.join(d, "stats.json")))
            c = st.get("sample_cost_us", {})
            return c.get("median"), c.get("p90")
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None
    finally:
        t.stop()


def run_work(py, sampler=None, hz=0):
    """Runs cpuwork.py once; with sampler "vm" or "merged" at hz. Returns (wall, cpu) seconds."""
    n = 1500000 if QUICK else 4000000
    if sampler == "merged":
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([PRS, "run", "-r", str(hz), "-o", d, "--", str(py),
                                str(T.HERE / "cpuwork.py"), str(n)], capture_output=True, text=True,
                               timeout=300)
            out = r.stdout
    else:
        t = T.Target(py, "cpuwork.py", n)
        s = None
        if sampler == "vm":
            s = subprocess.Popen([str(T.pystacks_path()), "-r", str(hz), "-d", "300", str(t.pid)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out = t.rest(timeout=300)
        if s:
            s.wait(timeout=30)
    for line in out.splitlines():
        if line.startswith("elapsed "):
            w = line.split()
            return float(w[1]), float(w[3])
    return None


def slowdown(py, sampler, hz, reps):
    # interleaved pairs, median of the per-pair ratios: the machine is shared and noisy (±10 %)
    wall, cpu = [], []
    for _ in range(reps):
        b = run_work(py)
        s = run_work(py, sampler, hz)
        if b is None or s is None:
            return None
        wall.append(s[0] / b[0])
        cpu.append(s[1] / b[1])
    return 100.0 * (statistics.median(wall) - 1.0), 100.0 * (statistics.median(cpu) - 1.0)


def main():
    vers = ["3.12"] if QUICK else ["3.10", "3.11", "3.12", "3.13"]
    print("## cost of one sample, 50-frame Python stack (us, median / p90)\n")
    print("| python | vm (pystacks) | merged (pyrsprof attach) |")
    print("|---|---|---|")
    for v in vers:
        py = T.pyenv_python(v)
        if not py:
            print("| %s | not installed | |" % v)
            continue
        vm = vm_cost(py)
        mg = merged_cost(py)
        print("| %s | %.1f / %.1f | %s |" % (v, vm[0], vm[1],
                                            "%.1f / %.1f" % mg if mg and mg[0] is not None else "n/a"))
    print("\n## slowdown of a pure-Python CPU workload (%%, median of %d interleaved pairs; wall / target CPU;"
          " negative = noise; load average %.1f)\n" % (5 if QUICK else 9, os.getloadavg()[0]))
    print("| python | mode | 100 Hz | 1000 Hz |")
    print("|---|---|---|---|")
    reps = 5 if QUICK else 9
    for v in vers[-1:] if QUICK else ["3.12", "3.10"]:
        py = T.pyenv_python(v)
        if not py:
            continue
        for mode in ("vm", "merged"):
            cells = []
            for hz in (100, 1000):
                s = slowdown(py, mode, hz, reps)
                cells.append("%.1f / %.1f" % s if s is not None else "n/a")
            print("| %s | %s | %s | %s |" % (v, mode, cells[0], cells[1]))


main()
