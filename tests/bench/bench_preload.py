# SPDX-License-Identifier: MIT
"""--mode preload against vm and ptrace: the target's slowdown at 100 and 1000 Hz, and the agent's
handler cost per sample (run by tests/bench/run.py, or alone):

    PYRSPROF=$PWD/build/release/pyrsprof /usr/bin/python3 tests/bench/bench_preload.py [--quick]
    ... bench_preload.py --handler 3.9,3.12,3.13 [--runs N]   (the handler's cost alone, per CPython:
                                                              median, p90, p99 per sample of each run)
    ... bench_preload.py --base OLD/pyrsprof [--modes preload,preload-nok] [--pairs N]
                                              (this build against another, runs interleaved)

Targets: a Python loop 20 frames deep over a native stack of about 37 frames on 3.12 (every
third call goes through map(): C frames between the Python ones, as extensions and callbacks
make; eu-stack counts 36-38 at the leaf), a fixed-time spin counting its iterations, printed with
its thread CPU time, on pyenv's 3.12; and build/targets/cpu_split_rs (Rust, "iterations N" in
fixed time, its CPU time from its "cpu_s" line). Each configuration is run as ABBA pairs with
the unprofiled program (A); the slowdown is 1 - B/A of the iterations per wall second (what the
program loses, pyrsprof's own CPU on the same cores included) and per second of its own CPU time
(what it loses while it runs: the handler runs on its CPU, a ptrace stop does not count as its
CPU). Medians over the pairs, [min, max]. vm mode reads Python only: not run on Rust.

preload-nok: preload with --no-kernel-stacks (no kernel-stack perf events: what their second timer
interrupt per sample costs, next to the preload row).

pyrsprof CPU: its own CPU time over the sampling loop (stats.json loop_cpu_s, user + system), in
ms per second of the run: on a 2-CPU machine it takes a core the program could use when the
machine is busy (the wall column), not the program's own CPU time.

floor: the same program with tests/bench/uhb/uhb_floor.c preloaded instead of pyrsprof: the
agent's clock (a perf task-clock event signalling the thread at the period) and a handler that
does nothing. No in-process sampler on that clock costs less on this machine; "preload over the
floor" is the agent's own share (its handler, pyrsprof's kernel-stack events, pyrsprof beside it).
The floor is also measured within one process (uhb_floor as a program: 40 ms phases with the clock
on and off), which other processes' load does not move as much.

The handler's cost is the agent's own clock around its work (stats.json stop_us in preload
mode): registers, the stack copy (SP to the thread's first frame), and the Python walk.
Goals (issue 12): <= 1 % at 100 Hz and <= 3 % at 1000 Hz in preload mode; handler <= 5 us for a
30-frame native stack with 20 Python frames.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "targets" / "py"))
import pyrs_testlib as T  # noqa: E402

PY_LOOP = r"""
import sys, time
SECS = float(sys.argv[1])
def rec(d):
    if d == 0:
        s = 0
        for i in range(200):
            s += i * i
        return s
    if d % 3 == 0:
        return list(map(rec, (d - 1,)))[0]
    return rec(d - 1)
end = time.monotonic() + SECS
c0 = time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID)
n = 0
while time.monotonic() < end:
    rec(18)
    n += 1
print("iterations", n, "cpu_s", time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID) - c0)
"""


def build_floor(tmp):
    """uhb_floor.c as a preloaded library and as a program, built into tmp; (None, None) without
    a C compiler."""
    src = REPO / "tests" / "bench" / "uhb" / "uhb_floor.c"
    lib, prog = tmp / "uhb_floor.so", tmp / "uhb_floor"
    cc = os.environ.get("CC", "cc")
    try:
        subprocess.run([cc, "-O2", "-shared", "-fPIC", "-DUHB_FLOOR_LIB", "-o", str(lib), str(src)],
                       check=True, capture_output=True)
        subprocess.run([cc, "-O2", "-o", str(prog), str(src)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"(floor not built: {e})")
        return None, None
    return lib, prog


def run_target(argv, prs, mode, rate, outdir, floor_lib=None):
    """(iterations, cpu_s or None, stats or None) of one run, profiled when mode is set (mode
    "floor": under the floor library, no pyrsprof)."""
    cmd, env = list(argv), None
    if mode == "floor":
        env = dict(os.environ, LD_PRELOAD=str(floor_lib), UHB_FLOOR_NS=str(10**9 // rate))
    elif mode:
        extra = ["--no-kernel-stacks"] if mode == "preload-nok" else []
        cmd = [prs, "run", "--mode", mode.split("-")[0], "-r", str(rate), "--no-classify", *extra,
               "-o", outdir, "--", *argv]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd}: exit {p.returncode}\n{p.stderr[-2000:]}")
    lines = p.stdout.splitlines()
    words = [l.split() for l in lines if l.startswith("iterations ")][0]
    iters = int(words[1])
    cpu = float(words[3]) if len(words) > 3 and words[2] == "cpu_s" else None
    # cpu_split_rs: "cpu_s hot_a=X hot_b=Y", its thread CPU time in its two functions (all of it
    # but the loop's own few instructions)
    for l in lines:
        if cpu is None and l.startswith("cpu_s hot_a="):
            cpu = sum(float(w.split("=")[1]) for w in l.split()[1:])
    stats = json.loads((Path(outdir) / "stats.json").read_text()) if mode and mode != "floor" else None
    return iters, cpu, stats


def pct(xs):
    if not xs:
        return "n/a"
    return f"{statistics.median(xs):+.1f} % [{min(xs):+.1f}, {max(xs):+.1f}]"


def handler_cost(prs, script, versions, runs, secs, tmp):
    """The handler's cost alone: preload at 100 Hz (each sample finds the handler's memory cold)
    and 1000 Hz on the 20-frame loop, per CPython version, median / p90 / p99 per sample of each
    run (the agent's clock around its work)."""
    print(f"\n## preload handler cost per sample, 20 Python frames over ~37 native ones ({runs} "
          f"run(s) of {secs:g} s; load {os.getloadavg()[0]:.1f})\n")
    print("| python | rate | run | samples | median us | p90 us | p99 us |")
    print("|---|---|---|---|---|---|---|")
    for v in versions:
        py = T.pyenv_python(v)
        if not py:
            print(f"| {v} | | - | not installed | | | |")
            continue
        for rate in (100, 1000):
            for k in range(runs):
                out = tmp / f"h{v}-{rate}-{k}"
                _, _, st = run_target([py, str(script), str(secs)], prs, "preload", rate, out)
                s = st["stop_us"]
                print(f"| {v} | {rate} Hz | {k} | {s['n']} | {s['median']:.1f} | {s['p90']:.1f} | "
                      f"{s.get('p99', float('nan')):.1f} |")
    print(f"\n(load after: {os.getloadavg()[0]:.1f})")


def own_cpu_ms_per_s(st):
    """pyrsprof's CPU over its sampling loop, ms per second of the run (None before loop_cpu_s)."""
    loop = st.get("loop_cpu_s")
    if not loop or not st.get("duration_s"):
        return None
    return 1000.0 * (loop["user"] + loop["sys"]) / st["duration_s"]


def slowdowns(argv, prs, mode, rate, pairs, tmp, tag, floor_lib, base=None):
    """Per-pair slowdowns (wall, per CPU s) of mode against the program alone (base: against
    the program under the pyrsprof at base in the same mode), the handler/stop costs (median,
    p90) of its runs and pyrsprof's CPU per second of each (base: and of base's runs, own_a)."""
    wall, cpu, cost, own = [], [], [], []
    own_a, cost_a = [], []
    for k in range(pairs):
        order = ("A", "B", "B", "A") if k % 2 == 0 else ("B", "A", "A", "B")
        res = {"A": [], "B": []}
        for j, which in enumerate(order):
            out = tmp / f"{tag}-{mode}{rate}-{k}-{j}"
            if which == "A" and base:
                res[which].append(run_target(argv, base, mode, rate, out, floor_lib))
            else:
                res[which].append(run_target(argv, prs, mode if which == "B" else None, rate, out,
                                             floor_lib))
        ia = statistics.mean(r[0] for r in res["A"])
        ib = statistics.mean(r[0] for r in res["B"])
        wall.append(100.0 * (1 - ib / ia))
        if all(r[1] for r in res["A"] + res["B"]):
            ca = statistics.mean(r[0] / r[1] for r in res["A"])
            cb = statistics.mean(r[0] / r[1] for r in res["B"])
            cpu.append(100.0 * (1 - cb / ca))
        for r in res["B"]:
            if not r[2]:
                continue
            st = r[2]["stop_us"] if mode in ("preload", "preload-nok", "ptrace") else r[2]["sample_cost_us"]
            if st["n"]:
                cost.append((st["median"], st["p90"]))
            if own_cpu_ms_per_s(r[2]) is not None:
                own.append(own_cpu_ms_per_s(r[2]))
        own_a += [own_cpu_ms_per_s(r[2]) for r in res["A"] if r[2] and own_cpu_ms_per_s(r[2]) is not None]
        cost_a += [(r[2]["stop_us"]["median"], r[2]["stop_us"]["p90"]) for r in res["A"]
                   if r[2] and r[2]["stop_us"]["n"]]
    if base:
        return wall, cpu, (cost_a, cost), own, own_a
    return wall, cpu, cost, own


def against_base(prs, base, script, a, tmp):
    """--base: this build (B) against another (A), in the same modes, pairs interleaved."""
    pairs = a.pairs or (1 if a.quick else 3)
    modes = a.modes.split(",") if a.modes else ["preload"]
    py = T.pyenv_python("3.12") or "/usr/bin/python3"
    targets = [("Python 3.12 (20 frames)", [py, str(script), str(a.secs)]),
               ("Rust cpu_split_rs", [str(REPO / "build" / "targets" / "cpu_split_rs"), str(a.secs)])]
    print(f"\n## {prs} (B) against {base} (A), same mode ({pairs} ABBA pair(s) of {a.secs:g} s "
          f"each; load {os.getloadavg()[0]:.1f})\n")
    print("| target | mode | rate | B's slowdown against A (wall) | (per CPU s) | handler median us "
          "(p90), A | B | pyrsprof CPU ms/s, A | B |")
    print("|---|---|---|---|---|---|---|---|---|")
    for ti, (name, argv) in enumerate(targets):
        for mode in modes:
            for rate in (100, 1000):
                wall, cpu, costs, own, own_a = slowdowns(argv, prs, mode, rate, pairs, tmp,
                                                         f"b{ti}", None, base)
                c = [f"{statistics.median(x for x, _ in v):.1f} ({statistics.median(y for _, y in v):.1f})"
                     if v else "n/a" for v in costs]
                o = [f"{statistics.median(v):.1f} [{min(v):.1f}, {max(v):.1f}]" if v else "n/a"
                     for v in (own_a, own)]
                print(f"| {name} | {mode} | {rate} Hz | {pct(wall)} | {pct(cpu)} | {c[0]} | {c[1]} | "
                      f"{o[0]} | {o[1]} |")
    print(f"\n(load after: {os.getloadavg()[0]:.1f})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--secs", type=float, default=2.0)
    ap.add_argument("--handler", metavar="VERSIONS",
                    help="only the handler's cost, on these CPythons (e.g. 3.9,3.12,3.13)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--pairs", type=int, help="ABBA pairs per row (default 3, --quick 1)")
    ap.add_argument("--modes", help="only these modes (e.g. preload,preload-nok,floor)")
    ap.add_argument("--base", metavar="PYRSPROF",
                    help="another build's pyrsprof (with its agent beside it): each row runs it and "
                         "this one in turn (ABBA), in the same mode: this build's slowdown against "
                         "it, and both pyrsprof CPUs")
    a = ap.parse_args()
    prs = os.environ.get("PYRSPROF") or str(REPO / "build" / "release" / "pyrsprof")
    tmp = Path(tempfile.mkdtemp(prefix="bench-preload-"))
    script = tmp / "loop20.py"
    script.write_text(PY_LOOP)
    if a.handler:
        handler_cost(prs, script, a.handler.split(","), a.runs, a.secs, tmp)
        return
    if a.base:
        against_base(prs, a.base, script, a, tmp)
        return
    pairs = a.pairs or (1 if a.quick else 3)
    py = T.pyenv_python("3.12") or "/usr/bin/python3"
    floor_lib, floor_prog = build_floor(tmp)
    floor = ("floor",) if floor_lib else ()
    targets = [("Python 3.12 (20 frames)", [py, str(script), str(a.secs)], ("preload", "preload-nok", *floor, "vm", "ptrace")),
               ("Rust cpu_split_rs", [str(REPO / "build" / "targets" / "cpu_split_rs"), str(a.secs)],
                ("preload", "preload-nok", *floor, "ptrace"))]
    print(f"\n## preload vs vm vs ptrace: target slowdown ({pairs} ABBA pair(s) of {a.secs:g} s each; "
          f"load {os.getloadavg()[0]:.1f})\n")
    print("| target | mode | rate | slowdown (wall) | slowdown (per CPU s) | handler/stop median us (p90) "
          "| pyrsprof CPU ms/s |")
    print("|---|---|---|---|---|---|---|")
    med = {}
    for ti, (name, argv, modes) in enumerate(targets):
        for mode in modes:
            if a.modes and mode not in a.modes.split(","):
                continue
            for rate in (100, 1000):
                wall, cpu, cost, own = slowdowns(argv, prs, mode, rate, pairs, tmp, f"t{ti}", floor_lib)
                med[(name, mode, rate)] = (statistics.median(wall) if wall else None,
                                           statistics.median(cpu) if cpu else None)
                c = (f"{statistics.median(x for x, _ in cost):.1f} ({statistics.median(y for _, y in cost):.1f})"
                     if cost else "n/a")
                label = "floor (no-op handler)" if mode == "floor" else mode
                o = f"{statistics.median(own):.1f} [{min(own):.1f}, {max(own):.1f}]" if own else "n/a"
                print(f"| {name} | {label} | {rate} Hz | {pct(wall)} | {pct(cpu)} | {c} | {o} |")
    print("\n(handler: the agent's time in its signal handler per sample, preload; stop: the ptrace "
          "stop window; vm: the Python read's share per thread-sample; pyrsprof CPU: its user + "
          "system time over the sampling loop per second of the run)")
    if floor_lib:
        print(f"\npreload over the floor, medians (wall; per CPU s), load {os.getloadavg()[0]:.1f}:")
        for name, _, _ in targets:
            for rate in (100, 1000):
                if (name, "preload", rate) not in med or (name, "floor", rate) not in med:
                    continue
                p, f = med[(name, "preload", rate)], med[(name, "floor", rate)]
                d = ["n/a" if x is None or y is None else f"{x - y:+.1f}" for x, y in zip(p, f)]
                print(f"- {name}, {rate} Hz: {d[0]} points; {d[1]} points")
    if floor_prog:
        secs = 2 if a.quick else 6
        print(f"\nthe floor within one process (tests/bench/uhb/uhb_floor.c, {secs} s each; "
              f"load {os.getloadavg()[0]:.1f}):")
        for kind, period in (("perf", 1000000), ("hrtimer", 1000000), ("perf", 10000000)):
            p = subprocess.run([str(floor_prog), str(secs), str(period), kind], capture_output=True,
                               text=True, timeout=120)
            print(f"- {p.stdout.strip() or p.stderr.strip()}")
        print("(perf: the agent's clock and its signal; hrtimer: the same event without the "
              "signal, its timer interrupts alone)")


if __name__ == "__main__":
    main()
