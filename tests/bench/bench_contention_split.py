#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The CPU view's split under CPU contention, against the split the target measures itself.

    PYRSPROF=$PWD/build/release/pyrsprof /usr/bin/python3 tests/bench/bench_contention_split.py
        [--runs N] [--perf] [--spinners N] [--unpinned]
        [--targets syscall_split,cpu_split_rs,cpu_split] [--modes ptrace,preload]

Each target runs beside --spinners spinning threads (build/targets/busy), all pinned to one CPU
as test_native_cpu's contention test does (--unpinned: not pinned, on a machine that other work
keeps busy), so it waits for a CPU most of the time. pyrsprof records it in each mode at 200 Hz
for 3 s; the CPU view's shares of hot_a, hot_b and the rest (the clock reads between them: ~0 of
the truth) are compared with the split the target prints (syscall_split, cpu_split, cpu_split_rs).
The error is the points of the CPU view in the wrong place: half the sum of the three shares'
differences. Each line also gives the CPU view's total over rate x the CPU time the target used.

--perf adds perf record -e cpu-clock of the same command as an oracle (hot_a's share of hot_a +
hot_b only: its samples are of all the spinners too). Prints a line per run, then the mean and
the largest error per target and mode.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGETS = os.path.join(ROOT, "build", "targets")
RATE = 200
SECONDS = 3


def truth(out):
    m = re.search(r"^split hot_a=([0-9.]+) hot_b=([0-9.]+)$", out, re.M)
    c = re.search(r"^cpu_s hot_a=([0-9.]+) hot_b=([0-9.]+)$", out, re.M)
    return float(m.group(1)), float(c.group(1)) + float(c.group(2))


def is_fn(frame, name):
    return frame == name or frame.endswith("::" + name)  # (C, Rust)


def share(folded_lines):
    a = b = n = 0
    for line in folded_lines:
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        k = int(count)
        n += k
        frames = stack.split(";")
        if any(is_fn(f, "hot_a") for f in frames):
            a += k
        elif any(is_fn(f, "hot_b") for f in frames):
            b += k
    return a, b, n


SPINNERS = 1
PIN = True


def misplaced(truth_a, a, b, n):
    """Points of the CPU view in the wrong place: half the sum of the differences of hot_a's,
    hot_b's and the rest's shares from the truth's (the rest: ~0, the clock reads between)."""
    if not n:
        return float("nan")
    return 50 * (abs(a / n - truth_a) + abs(b / n - (1 - truth_a)) + (n - a - b) / n)


def script(target):
    """The target beside SPINNERS spinning threads, all pinned to one CPU (PIN) or not."""
    pin = f"taskset -c {max(os.sched_getaffinity(0))} " if PIN else ""
    return (f"{pin}'{TARGETS}/busy' threads {SPINNERS} {SECONDS + 0.5} >/dev/null & "
            f"exec {pin}'{TARGETS}/{target}' {SECONDS}")


def run_prs(prs, target, mode, d):
    r = subprocess.run([prs, "run", "--mode", mode, "-r", str(RATE), "-o", d, "--", "sh", "-c",
                        script(target)], capture_output=True, text=True, timeout=120)
    t, cpu_s = truth(r.stdout)
    ex = subprocess.run([prs, "export", os.path.join(d, "profile.pyrs"), "--format", "folded",
                         "--view", "cpu"], capture_output=True, text=True, check=True)
    a, b, n = share(ex.stdout.splitlines())
    return t, cpu_s, a, b, n


def run_perf(target, d):
    os.makedirs(d, exist_ok=True)
    data = os.path.join(d, "perf.data")
    r = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(RATE), "-g", "-o", data,
                        "--", "sh", "-c", script(target)], capture_output=True, text=True, timeout=120)
    t, cpu_s = truth(r.stdout)
    rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "-g", "none",
                          "--comm", target[:15], "--sort", "sym", "-F", "overhead,sym"],
                         capture_output=True, text=True)
    a = b = 0.0
    for line in rep.stdout.splitlines():
        m = re.match(r"\s*([0-9.]+)%\s+\[\.\]\s+(\S+)", line)
        if m and "hot_a" in m.group(2):
            a += float(m.group(1))
        elif m and "hot_b" in m.group(2):
            b += float(m.group(1))
    return t, cpu_s, a, b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--perf", action="store_true")
    ap.add_argument("--targets", default="syscall_split,cpu_split_rs,cpu_split")
    ap.add_argument("--modes", default="ptrace,preload")
    ap.add_argument("--spinners", type=int, default=1)
    ap.add_argument("--unpinned", action="store_true")
    o = ap.parse_args()
    global SPINNERS, PIN
    SPINNERS, PIN = o.spinners, not o.unpinned
    prs = os.environ.get("PYRSPROF", os.path.join(ROOT, "build", "release", "pyrsprof"))
    errs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for target in o.targets.split(","):
            for i in range(o.runs):
                for mode in o.modes.split(","):
                    d = os.path.join(tmp, f"{target}-{mode}-{i}")
                    t, cpu_s, a, b, n = run_prs(prs, target, mode, d)
                    got = a / n if n else float("nan")
                    errs.setdefault((target, mode), []).append(misplaced(t, a, b, n))
                    print(f"{target:14} {mode:8} truth hot_a {t:.3f} cpu {got:.3f} "
                          f"({a}+{b} of {n}; {n / (RATE * cpu_s):.2f} x cpu_s x rate, "
                          f"cpu_s {cpu_s:.2f}) load {os.getloadavg()[0]:.1f}", flush=True)
                if o.perf:
                    t, cpu_s, a, b = run_perf(target, os.path.join(tmp, "perf"))
                    got = a / (a + b) if a + b else float("nan")
                    # (perf's shares are of all its samples, the spinners' too: hot_a's share
                    # of hot_a + hot_b only)
                    errs.setdefault((target, "perf"), []).append(abs(got - t) * 100)
                    print(f"{target:14} perf     truth hot_a {t:.3f} cpu {got:.3f} "
                          f"({a:.1f}%+{b:.1f}%) load {os.getloadavg()[0]:.1f}", flush=True)
    for (target, mode), e in errs.items():
        print(f"{target:14} {mode:8} mean |error| {sum(e) / len(e):.1f} points "
              f"(max {max(e):.1f}, {len(e)} runs)")


if __name__ == "__main__":
    sys.exit(main())
