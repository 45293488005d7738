# SPDX-License-Identifier: MIT
"""--mode preload against vm and ptrace: the target's slowdown at 100 and 1000 Hz, and the agent's
handler cost per sample (run by tests/bench/run.py, or alone):

    PYRSPROF=$PWD/build/release/pyrsprof /usr/bin/python3 tests/bench/bench_preload.py [--quick]
    ... bench_preload.py --handler 3.9,3.12,3.13 [--runs N]   (the handler's cost alone, per CPython:
                                                              median, p90, p99 per sample of each run)

Targets: a Python loop 20 frames deep (a fixed-time spin counting its iterations, printed with
its thread CPU time) on pyenv's 3.12, and build/targets/cpu_split_rs (Rust, "iterations N" in
fixed time). Each configuration is run as ABBA pairs with the unprofiled program (A); the
slowdown is 1 - B/A of the iterations per wall second (what the program loses) and per second of
its own CPU time (what it loses while it runs: the handler runs on its CPU, a ptrace stop does
not count as its CPU). Medians over the pairs, [min, max]. vm mode reads Python only: not run on
Rust. The handler's cost is the agent's own clock around its work (stats.json stop_us in preload
mode): registers, the stack copy (up to 64 KiB from SP), and the Python walk.
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
    return rec(d - 1)
end = time.monotonic() + SECS
c0 = time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID)
n = 0
while time.monotonic() < end:
    rec(18)
    n += 1
print("iterations", n, "cpu_s", time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID) - c0)
"""


def run_target(argv, prs, mode, rate, outdir):
    """(iterations, cpu_s or None, stats or None) of one run, profiled when mode is set."""
    cmd = list(argv)
    if mode:
        cmd = [prs, "run", "--mode", mode, "-r", str(rate), "--no-classify", "-o", outdir, "--", *argv]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd}: exit {p.returncode}\n{p.stderr[-2000:]}")
    words = [l.split() for l in p.stdout.splitlines() if l.startswith("iterations ")][0]
    iters = int(words[1])
    cpu = float(words[3]) if len(words) > 3 and words[2] == "cpu_s" else None
    stats = json.loads((Path(outdir) / "stats.json").read_text()) if mode else None
    return iters, cpu, stats


def pct(xs):
    if not xs:
        return "n/a"
    return f"{statistics.median(xs):+.1f} % [{min(xs):+.1f}, {max(xs):+.1f}]"


def handler_cost(prs, script, versions, runs, secs, tmp):
    """The handler's cost alone: preload at 1000 Hz on the 20-frame loop, per CPython version,
    median / p90 / p99 per sample of each run (the agent's clock around its work)."""
    print(f"\n## preload handler cost per sample, 20 Python frames, 1000 Hz ({runs} run(s) of "
          f"{secs:g} s; load {os.getloadavg()[0]:.1f})\n")
    print("| python | run | samples | median us | p90 us | p99 us |")
    print("|---|---|---|---|---|---|")
    for v in versions:
        py = T.pyenv_python(v)
        if not py:
            print(f"| {v} | - | not installed | | | |")
            continue
        for k in range(runs):
            out = tmp / f"h{v}-{k}"
            _, _, st = run_target([py, str(script), str(secs)], prs, "preload", 1000, out)
            s = st["stop_us"]
            print(f"| {v} | {k} | {s['n']} | {s['median']:.1f} | {s['p90']:.1f} | {s.get('p99', float('nan')):.1f} |")
    print(f"\n(load after: {os.getloadavg()[0]:.1f})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--secs", type=float, default=2.0)
    ap.add_argument("--handler", metavar="VERSIONS",
                    help="only the handler's cost, on these CPythons (e.g. 3.9,3.12,3.13)")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    prs = os.environ.get("PYRSPROF") or str(REPO / "build" / "release" / "pyrsprof")
    if a.handler:
        tmp = Path(tempfile.mkdtemp(prefix="bench-preload-"))
        (tmp / "loop20.py").write_text(PY_LOOP)
        handler_cost(prs, tmp / "loop20.py", a.handler.split(","), a.runs, a.secs, tmp)
        return
    pairs = 1 if a.quick else 3
    py = T.pyenv_python("3.12") or "/usr/bin/python3"
    tmp = Path(tempfile.mkdtemp(prefix="bench-preload-"))
    script = tmp / "loop20.py"
    script.write_text(PY_LOOP)
    targets = [("Python 3.12 (20 frames)", [py, str(script), str(a.secs)], ("preload", "vm", "ptrace")),
               ("Rust cpu_split_rs", [str(REPO / "build" / "targets" / "cpu_split_rs"), str(a.secs)],
                ("preload", "ptrace"))]
    print(f"\n## preload vs vm vs ptrace: target slowdown ({pairs} ABBA pair(s) of {a.secs:g} s each; "
          f"load {os.getloadavg()[0]:.1f})\n")
    print("| target | mode | rate | slowdown (wall) | slowdown (per CPU s) | handler/stop median us (p90) |")
    print("|---|---|---|---|---|---|")
    for ti, (name, argv, modes) in enumerate(targets):
        for mode in modes:
            for rate in (100, 1000):
                wall, cpu, cost = [], [], []
                for k in range(pairs):
                    order = ("A", "B", "B", "A") if k % 2 == 0 else ("B", "A", "A", "B")
                    res = {"A": [], "B": []}
                    for j, which in enumerate(order):
                        out = tmp / f"t{ti}-{mode}{rate}-{k}-{j}"
                        res[which].append(run_target(argv, prs, mode if which == "B" else None, rate, out))
                    ia = statistics.mean(r[0] for r in res["A"])
                    ib = statistics.mean(r[0] for r in res["B"])
                    wall.append(100.0 * (1 - ib / ia))
                    if all(r[1] for r in res["A"] + res["B"]):
                        ca = statistics.mean(r[0] / r[1] for r in res["A"])
                        cb = statistics.mean(r[0] / r[1] for r in res["B"])
                        cpu.append(100.0 * (1 - cb / ca))
                    for r in res["B"]:
                        st = r[2]["stop_us"] if mode in ("preload", "ptrace") else r[2]["sample_cost_us"]
                        if st["n"]:
                            cost.append((st["median"], st["p90"]))
                c = (f"{statistics.median(x for x, _ in cost):.1f} ({statistics.median(y for _, y in cost):.1f})"
                     if cost else "n/a")
                print(f"| {name} | {mode} | {rate} Hz | {pct(wall)} | {pct(cpu)} | {c} |")
    print("\n(handler: the agent's time in its signal handler per sample, preload; stop: the ptrace "
          "stop window; vm: the Python read's share per thread-sample)")


if __name__ == "__main__":
    main()
