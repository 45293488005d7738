# SPDX-License-Identifier: MIT
"""Benchmark of the CPython reader (issue 3, item 7); prints tables, asserts nothing.

1. Cost of one sample of a 50-frame Python stack, on two targets: one blocked in time.sleep
   (tests/targets/py/recurse.py) and one running pure Python, holding the GIL (cpuwork.py). The
   sleeping one twice: "sleeping" read at every tick (PYRSPROF_READ_IDLE=1: the cost of reading a
   50-frame stack), and "sleeping, kept" as pyrsprof samples it by default (a thread that has not
   run since its last sample is not read or stopped again: one schedstat read):
   - warm: tools/pystacks --bench, samples back to back: the reader's own work on hot caches;
   - vm and merged: sample_cost_us of what pyrsprof attach records (--mode vm; and the default
     ptrace mode, which merges the Python frames into the native stacks) at 100 Hz (the default
     rate) and 1000 Hz. For vm also its parts at 100 Hz: the Python read, the thread's state read
     from /proc. For merged also its parts: check (the thread's schedstat, read before the stop),
     warm up (the Python read done once before the stops, prs_py_warm), stop (the target is
     stopped: waiting for the stop, registers, stack copy, the Python read, continue), the Python
     read alone, the unwind.
   The warm figure is what the reader's own work costs on hot caches, not the cost of a real
   sample: between ticks the profiler sleeps, and on the 2-vCPU dev VM the first process_vm_readv
   after 10 ms costs 15-25 us by itself (kernel code and page tables gone from the caches), and
   stopping a thread blocked in a sleep costs 90-130 us (its idle vCPU must be woken). So each rated
   figure is printed with the platform's floor at the same rate on the same target, measured by
   tools/floor: for vm one 64-byte process_vm_readv, for merged stopping the thread, reading its
   registers and letting it go (a stop later than pyrsprof's 50 us poll timed from the stop, as
   pyrsprof times a late thread: a wait for a CPU is neither's cost); "over" = figure - floor, the
   part pyrsprof's code adds.
   Each figure is the median over ROUNDS runs (3 with --quick, else 5) of each run's median, with
   the range of those medians; every round starts a fresh target and runs all columns once.
2. Slowdown of a pure-Python CPU workload (tests/targets/py/cpuwork.py, which times itself) at
   100 Hz and 1000 Hz: vm mode (pystacks -r) and merged mode (pyrsprof run -r).
Goals: vm <= 15 us/sample, merged <= 60 us; slowdown at 100 Hz <= 1 % (vm), <= 3 % (merged).

The profiler runs on CPU 0 and the target on CPU 1 (as in tests/bench/run.py and notes/limits.md)
when the machine has 2+ CPUs and is idle (1-min load < 1): unpinned, the scheduler may put the
target on the profiler's CPU, where it waits for the profiler, and that wait is not the cost of a
sample. --pin forces it, --no-pin disables it.

Usage: PYRSPROF=build/release/pyrsprof /usr/bin/python3 tests/bench/bench_python.py [--quick]
       [--pin | --no-pin] [--versions 3.11,3.12] [--kinds sleeping,running] [--no-slowdown]
--kinds: the targets measured (sleeping also selects "sleeping, kept"), all three by default.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "targets" / "py"))
import pyrs_testlib as T  # noqa: E402

QUICK = "--quick" in sys.argv
PRS = os.environ.get("PYRSPROF", str(REPO / "bin" / "pyrsprof"))
ROUNDS = 3 if QUICK else 5
_PIN = True if "--pin" in sys.argv else False if "--no-pin" in sys.argv else os.getloadavg()[0] < 1.0
PIN = _PIN and len(os.sched_getaffinity(0)) >= 2 and shutil.which("taskset") is not None
PROF_CPU = ["taskset", "-c", "0"] if PIN else []
TARGET_CPU = ["taskset", "-c", "1"] if PIN else []


def option(name):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv[:-1] else None


KINDS = [k for k in ("sleeping", "sleeping, kept", "running")
         if not option("--kinds") or k.split(",")[0] in option("--kinds").split(",")]


def target(py, script, *args):
    t = T.Target(py, script, *args)
    if PIN:
        os.sched_setaffinity(t.pid, {1})  # the targets are single-threaded
    return t


def warm_cost(pid):
    r = subprocess.run(PROF_CPU + [str(T.pystacks_path()), "--bench", "2000", str(pid)], capture_output=True,
                       text=True, timeout=60)
    w = r.stdout.split()
    d = dict(zip(w[1::2], w[2::2]))
    return float(d["median_us"]) if "median_us" in d else None


def attach_cost(pid, mode, hz, read_idle=False):
    """The medians of one pyrsprof attach run's stats.json: {sample_cost_us: .., stop_us: ..}.
    read_idle: PYRSPROF_READ_IDLE=1, a sleeping thread is read at every tick like a running one."""
    env = dict(os.environ, PYRSPROF_READ_IDLE="1") if read_idle else None
    with tempfile.TemporaryDirectory() as d:
        try:
            r = subprocess.run(PROF_CPU + [PRS, "attach", str(pid), "--mode", mode, "-r", str(hz), "-d", "2",
                                           "-o", d, "--stats"], capture_output=True, text=True, timeout=60,
                               env=env)
            if r.returncode != 0:
                return {}
            st = json.load(open(os.path.join(d, "stats.json")))
        except (OSError, ValueError, subprocess.TimeoutExpired):
            return {}
    return {k: v["median"] for k, v in st.items() if k.endswith("_us") and isinstance(v, dict) and v.get("n")}


def floor_cost(pid, mode, hz):
    """The median cost of the platform's part of a sample at hz (tools/floor vm|stop), or None."""
    n = 300 if hz <= 100 else 1000
    r = subprocess.run(PROF_CPU + [str(T.pystacks_path().parent / "floor"), mode, str(pid), str(1e6 / hz), str(n)],
                       capture_output=True, text=True, timeout=60)
    w = r.stdout.split()
    return float(w[3]) if r.returncode == 0 and len(w) >= 4 else None


VM_COLS = ["warm", "100 Hz", "floor 100", "over 100", "python", "state", "1000 Hz", "floor 1000", "over 1000"]
MERGED_COLS = ["100 Hz", "floor 100", "over 100", "check", "warm up", "stop", "python", "unwind", "1000 Hz",
               "floor 1000", "over 1000"]


def sample_costs(py, kind):
    """({vm column: [value of each round]}, {merged column: [...]}) for one target kind:
    "sleeping" (read at every tick, PYRSPROF_READ_IDLE=1), "sleeping, kept" (the default: its
    last sample recorded again while it has not run) or "running"."""
    vm = {c: [] for c in VM_COLS}
    mg = {c: [] for c in MERGED_COLS}
    read_idle = kind == "sleeping"
    for _ in range(ROUNDS):
        t = target(py, "recurse.py", 49, 3600) if kind.startswith("sleeping") else \
            target(py, "cpuwork.py", 10 ** 10, 49)  # down x48 + work + <module> = 50 frames
        try:
            vm["warm"].append(warm_cost(t.pid))
            for hz in (100, 1000):
                v = attach_cost(t.pid, "vm", hz, read_idle)
                a = v.get("sample_cost_us")
                # the floors are those of a sample that reads or stops: not of a kept one
                f = floor_cost(t.pid, "vm", hz) if kind != "sleeping, kept" else None
                vm["%d Hz" % hz].append(a)
                vm["floor %d" % hz].append(f)
                vm["over %d" % hz].append(a - f if a is not None and f is not None else None)
                if hz == 100:
                    vm["python"].append(v.get("python_us") if kind != "sleeping, kept" else None)
                    vm["state"].append(v.get("state_us") if kind != "sleeping, kept" else None)
                m = attach_cost(t.pid, "ptrace", hz, read_idle)
                a = m.get("sample_cost_us")
                f = floor_cost(t.pid, "stop", hz) if kind != "sleeping, kept" else None
                mg["%d Hz" % hz].append(a)
                mg["floor %d" % hz].append(f)
                mg["over %d" % hz].append(a - f if a is not None and f is not None else None)
                if hz == 100:
                    # (a kept sample has no stop: these would be of the first tick's only)
                    for k, key in (("check", "check"), ("warm up", "warm"), ("stop", "stop"), ("python", "python"),
                                   ("unwind", "unwind")):
                        mg[k].append(m.get(key + "_us") if kind != "sleeping, kept" else None)
        finally:
            t.stop()
    return vm, mg


def cell(v):
    v = [x for x in v if x is not None]
    if not v:
        return "n/a"
    return "%.1f [%.1f-%.1f]" % (statistics.median(v), min(v), max(v))


def run_work(py, sampler=None, hz=0):
    """Runs cpuwork.py once; with sampler "vm" or "merged" at hz. Returns (wall, cpu) seconds."""
    n = 1500000 if QUICK else 4000000
    if sampler == "merged":
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run(PROF_CPU + [PRS, "run", "-r", str(hz), "-o", d, "--"] + TARGET_CPU +
                               [str(py), str(T.HERE / "cpuwork.py"), str(n)], capture_output=True, text=True,
                               timeout=300)
            out = r.stdout
    else:
        t = target(py, "cpuwork.py", n)
        s = None
        if sampler == "vm":
            s = subprocess.Popen(PROF_CPU + [str(T.pystacks_path()), "-r", str(hz), "-d", "300", str(t.pid)],
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
    vers = (option("--versions") or ("3.12" if QUICK else "3.10,3.11,3.12,3.13")).split(",")
    print("## cost of one sample, 50-frame Python stack (us: median of %d runs' medians [range])\n" % ROUNDS)
    print("load average %.1f; %s\n" % (os.getloadavg()[0], "profiler on CPU 0, target on CPU 1" if PIN
                                          else "not pinned"))
    rows_vm, rows_mg = [], []
    for v in vers:
        py = T.pyenv_python(v)
        if not py:
            rows_vm.append("| %s | not installed |%s" % (v, " |" * len(VM_COLS)))
            rows_mg.append("| %s | not installed |%s" % (v, " |" * len(MERGED_COLS)))
            continue
        for kind in KINDS:
            vm, mg = sample_costs(py, kind)
            rows_vm.append("| %s | %s | %s |" % (v, kind, " | ".join(cell(vm[c]) for c in VM_COLS)))
            rows_mg.append("| %s | %s | %s |" % (v, kind, " | ".join(cell(mg[c]) for c in MERGED_COLS)))
    print("### vm mode (goal <= 15 us)\n")
    print("| python | target | " + " | ".join(VM_COLS) + " |")
    print("|---|---|" + "---|" * len(VM_COLS))
    print("\n".join(rows_vm))
    print("\n### merged mode (goal <= 60 us)\n")
    print("| python | target | " + " | ".join(MERGED_COLS) + " |")
    print("|---|---|" + "---|" * len(MERGED_COLS))
    print("\n".join(rows_mg))
    print("\nwarm: back to back (pystacks --bench); N Hz: pyrsprof attach at N Hz, sample_cost_us;"
          " floor N: what the platform charges any sampler at N Hz before it reads anything (tools/floor:"
          " vm, one 64-byte process_vm_readv; merged, stopping the thread, its registers and letting it go);"
          " over N: N Hz - floor N, the part pyrsprof's code adds; vm python, state: the parts of vm 100 Hz (the"
          " Python read of the tick, the thread's state from /proc: ~0 when the read saw the GIL holder run);"
          " merged check, warm up, stop, python, unwind:"
          " the parts of merged 100 Hz (its schedstat before the stop; the Python read warmed up before the stops,"
          " per tick; stop includes python)")
    if "--no-slowdown" in sys.argv:
        return
    reps = 5 if QUICK else 9
    print("\n## slowdown of a pure-Python CPU workload (%%, median of %d interleaved pairs; wall / target CPU;"
          " negative = noise; load average %.1f)\n" % (reps, os.getloadavg()[0]))
    print("| python | mode | 100 Hz | 1000 Hz |")
    print("|---|---|---|---|")
    for v in vers[-1:] if QUICK else ["3.12", "3.10"]:
        py = T.pyenv_python(v)
        if not py:
            continue
        for mode in ("vm", "merged"):
            cells = []
            for hz in (100, 1000):
                s = slowdown(py, mode, hz, reps)
                cells.append("%.1f / %.1f" % s if s is not None else "n/a")
            print("| %s | %s | %s | %s |" % (v, mode, cells[0], cells[1]), flush=True)


main()
