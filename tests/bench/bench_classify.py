#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The classifier's collection must not slow sampling (issue 11, item 11): the target's slowdown
at 100 Hz with the collection on (default: counters, /proc snapshots, taskstats, the exit hook,
switch records, kernel stacks where permitted) and off (--no-classify --no-kernel-stacks), side
by side. Goal: the two within 0.5 points. A third column, "on, no kstacks" (--no-kernel-stacks),
shows what the kernel stacks (perf cpu-clock samples in the target's threads: 1 per tick of CPU
time until the first taken in the kernel, then 2; 1 per 8 ticks once a thread's last 16 at 1 per
tick, or 32 at 2, were in user mode: src/sample/kstack_rate-internal.h) cost on their own, and
"kstack samples" their rate (perf samples per thread-sample of the fixed work, stats.json
kernel_stacks: deep30 computes in user space, so all but its first 160 ms of CPU time are at the
lowered rate; a work run under load may be little longer than that).

    PYRSPROF=$PWD/build/release/pyrsprof /usr/bin/python3 tests/bench/bench_classify.py [--quick] [--rt] [--rounds N]

Two measures, each in interleaved rounds (unprofiled, on, off, nok, nok, off, on, unprofiled) so drift of
a noisy VM falls on both sides alike:
1. fixed work (build/targets/deep30 work N, ~1 s, timing itself): per-round % slowdown of wall
   and thread CPU time against the unprofiled runs of the same round;
2. the gap detector (deep30 gaps: a clock_gettime spin counting every gap > 1.5 us as lost
   target time): lost % per configuration. This resolves far less than 1 % where wall-time A/B
   cannot (notes/limits.md section 2);
   "short gaps" is the time lost in gaps under 1 ms only (interrupts, the sampler's stops): with
   --rt (root: the profiler and its target under chrt -f 10, so other programs cannot take the
   target's CPU in slices) it measures the collection even on a machine other work keeps busy;
3. the sampler's own cost per thread-sample (stats.json sample_cost_us, median of the runs'
   medians): the collection must leave it alone.
On a machine other work keeps busy, wall time and gaps measure the contention; the thread CPU
time of the fixed work and the sample cost are the columns that still compare.

The medians of two sets of runs differ by +-0.7 point from one set to the next on this VM, more
than the goal: so on - off is also taken pair by pair (the on and off runs next to each other in
a round: positions 2-3 and 6-7, and for the kernel stacks alone on and "on, no kstacks", 2-4 and
5-7), and printed as the mean of the pairs' differences with its 95 % confidence interval
(Student's t): the goal is shown met when the whole interval is under 0.5 point, missed when it
is all above, unresolved otherwise (more --rounds narrow it).

Under load (6-9 on 2 CPUs) those intervals stay +-1-2 points wide with 16 pairs: the runs
cannot resolve 0.5 point there. So the same difference is also measured within one process
(tests/bench/kcost.c, built by `make bench`; root), where the load falls on the phases with and
without alike: each per-thread perf event the collection opens on the target's threads (kernel
stacks, switch records, task-clock counter) in 40 ms phases on and off in one thread switched out
as pyrsprof's stops do. What the collection adds to the target is its kernel-stack samples (a
timer interrupt each: their cost measured at the full rate for 100 Hz and at 4 kHz, where it is
resolved, the larger, times the perf samples per CPU second of the profiled work runs above,
stats.json kernel_stacks) and its three events' work at each switch (measured at 1000 switch-outs a second, scaled to 100): "on - off within one
process", with its 95 % interval. The rest of the collection (the /proc and taskstats snapshots at
the start and end, the once-a-second taskstats drain) is pyrsprof's work, outside the tick: it
takes none of the target's time but a CPU.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEEP30 = REPO / "build" / "targets" / "deep30"
GOAL_PP = 0.5
KCOST = REPO / "build" / "release" / "bench" / "kcost"
# Student's t, two-sided 95 %, by degrees of freedom (1.96 beyond)
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
       10: 2.23, 11: 2.20, 12: 2.18, 13: 2.16, 14: 2.14, 15: 2.13, 16: 2.12, 17: 2.11, 18: 2.10,
       19: 2.09, 20: 2.09, 22: 2.07, 24: 2.06, 26: 2.06, 28: 2.05, 30: 2.04}


def run(prs, args, mode, d, rt=False):
    """deep30 ARGS unprofiled (mode None), or profiled at 100 Hz with collection on/off; under
    SCHED_FIFO with rt."""
    cmd = [str(DEEP30), *map(str, args)]
    if mode is not None:
        extra = {"on": [], "off": ["--no-classify", "--no-kernel-stacks"],
                 "nok": ["--no-kernel-stacks"]}[mode]
        cmd = [str(prs), "run", "-r", "100", "-o", str(d), *extra, "--", *cmd]
    if rt:
        cmd = ["chrt", "-f", "10", *cmd]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        sys.exit(f"bench_classify: {' '.join(cmd)} failed ({p.returncode}): {p.stderr[-1000:]}")
    return p.stdout


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def spread(xs):
    xs = sorted(xs)
    return f"[{xs[0]:+.1f}, {xs[-1]:+.1f}]" if xs else "n/a"


def mean_ci(xs):
    """(mean, half-width of its 95 % confidence interval) of paired differences."""
    if len(xs) < 2:
        return (xs[0] if xs else float("nan")), float("inf")
    df = len(xs) - 1
    t = T95.get(df) or next((T95[d] for d in sorted(T95) if d >= df), 1.96)
    return statistics.mean(xs), t * statistics.stdev(xs) / len(xs) ** 0.5


def verdict(lo, hi):
    """The goal against a difference's 95 % interval [lo, hi], in points."""
    if hi <= GOAL_PP and lo >= -GOAL_PP:
        return "ok"
    if lo > GOAL_PP or hi < -GOAL_PP:
        return "MISSED"
    return "unresolved"


def kcost(secs, hz, parts):
    """tests/bench/kcost.c with its switch-outs at hz: (its table, {part: (median %, CI low,
    CI high, perf samples per second)}), or (a note, {})."""
    if not KCOST.exists():
        return "(build/release/bench/kcost missing: `make bench` builds it)", {}
    p = subprocess.run([str(KCOST), "-t", str(hz), str(secs), *parts], capture_output=True,
                       text=True, timeout=600)
    rows = {}
    for line in p.stdout.splitlines():
        m = re.match(r"(\S+)\s+([-+][0-9.]+)\s+\[([-+][0-9.]+), ([-+][0-9.]+)\]\s+\[[^]]*\]\s+\d+\s+"
                     r"([0-9]+)", line)
        if m:
            rows[m.group(1)] = tuple(float(g) for g in m.groups()[1:])
    return p.stdout.strip(), rows


def within_one_process(secs, kcpu):
    """The collection's cost to the target within one process (kcost): its kernel-stack samples
    (the profiled work runs' perf samples per CPU second, kcpu, each costing what one costs in
    kcost: at 100 Hz, or at 4 kHz where it is resolved; the larger) plus its three events'
    switches (at 1 kHz, scaled to 100 Hz)."""
    t1, ks = kcost(secs, 100, ["kstack", "kstack-fast"])
    t2, sw = kcost(secs, 1000, ["kstack-idle", "switch", "counter"])
    print("\n" + t1 + "\n" + t2)
    if len(ks) < 2 or len(sw) < 3 or not kcpu:
        print("(kcost gave no estimate)")
        return
    # us per sample (median, CI): a sample at 100 Hz has measured up to twice one at 4 kHz
    per = max(([x / 100 / r[3] * 1e6 for x in r[:3]] for r in ks.values() if r[3] > 0),
              key=lambda p: p[0])
    kk = [med(kcpu) * us / 1e4 for us in per]        # % of the target's time
    ev = [sum(r[i] for r in sw.values()) / 10 for i in range(3)]
    tot = [k + e for k, e in zip(kk, ev)]
    print(f"on - off within one process: kernel stacks {med(kcpu):.1f} perf samples per CPU second "
          f"(the profiled work runs) x {per[0]:.1f} us [{per[1]:.1f}, {per[2]:.1f}] = {kk[0]:+.3f} pp, "
          f"the three events' switches at 100 Hz {ev[0]:+.3f} pp [{ev[1]:+.3f}, {ev[2]:+.3f}]: "
          f"{tot[0]:+.2f} pp [{tot[1]:+.2f}, {tot[2]:+.2f}], goal <= {GOAL_PP} pp: "
          f"{verdict(tot[1], tot[2])}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=0, help="rounds (default 8, 2 with --quick)")
    ap.add_argument("--rt", action="store_true",
                    help="run profiler and target under chrt -f 10 (root): see the docstring")
    args = ap.parse_args()
    if args.rt and os.geteuid() != 0:
        sys.exit("bench_classify: --rt needs root (chrt -f)")
    prs = Path(os.environ.get("PYRSPROF", REPO / "bin" / "pyrsprof")).resolve()
    if not DEEP30.exists():
        sys.exit("bench_classify: build/targets/deep30 missing: run `make targets`")
    tmp = Path(tempfile.mkdtemp(prefix="pyrsprof-bench-classify-"))
    rounds = args.rounds or (2 if args.quick else 8)
    load0 = os.getloadavg()[0]
    out = run(prs, ["work", 500], None, None)
    wall = float(re.search(r"wall_s=([0-9.]+)", out).group(1))
    units = max(50, int(500 * (0.5 if args.quick else 1.0) / max(wall, 1e-3)))
    slow = {"on": [], "off": [], "nok": []}
    cpu = {"on": [], "off": [], "nok": []}
    gaps = {None: [], "on": [], "off": [], "nok": []}
    short = {None: [], "on": [], "off": [], "nok": []}
    cost = {"on": [], "off": [], "nok": []}
    kps = {"on": [], "off": [], "nok": []}
    kcpu = []  # perf samples per CPU second of the work runs with kernel stacks
    # paired differences: column -> list, for on - off and on - nok
    pairs = {"off": {k: [] for k in ("wall", "cpu", "gap", "short")},
             "nok": {k: [] for k in ("wall", "cpu", "gap", "short")}}
    order = (None, "on", "off", "nok", "nok", "off", "on", None)
    pair_at = {"off": ((1, 2), (6, 5)), "nok": ((1, 3), (6, 4))}
    n = 0
    for _ in range(rounds):
        base_w, base_c, res, at = [], [], {}, []
        for mode in order:
            n += 1
            o = run(prs, ["work", units], mode, tmp / f"w{n}", args.rt)
            if mode is not None:
                st = json.loads((tmp / f"w{n}" / "stats.json").read_text())
                cost[mode].append(st["sample_cost_us"]["median"])
                ks = st.get("kernel_stacks", {}).get("perf_samples")
                if ks is not None:
                    kps[mode].append(ks / max(1, st["thread_samples"]))
            w, c = map(float, re.search(r"wall_s=([0-9.]+) cpu_s=([0-9.]+)", o).groups())
            if mode == "on" and ks is not None:
                kcpu.append(ks / c)
            if mode is None:
                base_w.append(w)
                base_c.append(c)
            else:
                res.setdefault(mode, []).append((w, c))
            o = run(prs, ["gaps", 1 if args.quick else 2, 1.5], mode, tmp / f"g{n}", args.rt)
            gaps[mode].append(float(re.search(r"lost_pct=([0-9.]+)", o).group(1)))
            short[mode].append(float(re.search(r"short_pct=([0-9.]+)", o).group(1)))
            at.append((w, c, gaps[mode][-1], short[mode][-1]))
        bw, bc = med(base_w), med(base_c)
        for mode, xs in res.items():
            for w, c in xs:
                slow[mode].append(100 * (w / bw - 1))
                cpu[mode].append(100 * (c / bc - 1))
        for other, ps in pair_at.items():
            for i, j in ps:
                (wi, ci, gi, si), (wj, cj, gj, sj) = at[i], at[j]
                pairs[other]["wall"].append(100 * (wi - wj) / bw)
                pairs[other]["cpu"].append(100 * (ci - cj) / bc)
                pairs[other]["gap"].append(gi - gj)
                pairs[other]["short"].append(si - sj)
    print(f"classifier collection cost at 100 Hz, deep30 work {units} units (~1 s) and gaps, "
          f"{rounds} rounds{', under chrt -f 10' if args.rt else ''}; load {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    hdr = ["collection", "runs", "wall slowdown med %", "spread", "thread-cpu med %", "gap lost % med",
           "short gaps % med", "sample cost med us", "kstack samples"]
    rows = []
    for mode in ("on", "off", "nok"):
        rows.append([{"nok": "on, no kstacks"}.get(mode, mode), str(len(slow[mode])), f"{med(slow[mode]):+.1f}", spread(slow[mode]),
                     f"{med(cpu[mode]):+.1f}", f"{med(gaps[mode]):.2f}", f"{med(short[mode]):.2f}",
                     f"{med(cost[mode]):.1f}",
                     f"{med(kps[mode]):.2f}"])
    rows.append(["unprofiled", str(len(gaps[None])), "", "", "", f"{med(gaps[None]):.2f}",
                 f"{med(short[None]):.2f}", "", ""])
    widths = [max(len(r[i]) for r in [hdr, *rows]) for i in range(len(hdr))]
    print("  ".join(h.ljust(w) for h, w in zip(hdr, widths)))
    print("-" * (sum(widths) + 2 * len(widths)))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    d_wall = med(slow["on"]) - med(slow["off"])
    d_cpu = med(cpu["on"]) - med(cpu["off"])
    d_gap = med(gaps["on"]) - med(gaps["off"])
    d_short = med(short["on"]) - med(short["off"])
    busy = os.getloadavg()[0] > 0.5 * (os.cpu_count() or 1)
    print(f"on - off: wall {d_wall:+.2f} pp, thread CPU {d_cpu:+.2f} pp, gap-detector lost time "
          f"{d_gap:+.2f} pp, short gaps {d_short:+.2f} pp, sample cost "
          f"{med(cost['on']) - med(cost['off']):+.1f} us; goal <= {GOAL_PP} pp apart: "
          f"{'ok' if abs(d_gap) <= GOAL_PP else 'MISSED'} (gap detector), "
          f"{'ok' if abs(d_short) <= GOAL_PP else 'MISSED'} (short gaps)"
          f"{'; the machine is busy: wall and gaps measure the contention' if busy else ''}")
    print(f"kernel stacks alone (on - on, no kstacks): wall "
          f"{med(slow['on']) - med(slow['nok']):+.2f} pp, thread CPU {med(cpu['on']) - med(cpu['nok']):+.2f} pp, "
          f"gap-detector lost time {med(gaps['on']) - med(gaps['nok']):+.2f} pp, short gaps "
          f"{med(short['on']) - med(short['nok']):+.2f} pp")
    for other, label in (("off", "on - off"), ("nok", "kernel stacks alone (on - on, no kstacks)")):
        cols = []
        for key, name in (("wall", "wall"), ("cpu", "thread CPU"), ("gap", "gap detector"),
                          ("short", "short gaps")):
            m, h = mean_ci(pairs[other][key])
            cols.append(f"{name} {m:+.2f} +- {h:.2f} pp ({verdict(m - h, m + h)})")
        print(f"{label}, paired ({len(pairs[other]['gap'])} pairs, mean +- 95 % CI): "
              + ", ".join(cols))
    if os.geteuid() == 0:
        within_one_process(4 if args.quick else 12, kcpu)
    subprocess.run(["rm", "-rf", str(tmp)])


if __name__ == "__main__":
    main()
