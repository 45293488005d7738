#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Does a tick hold the program? (`make bench` runs this; tables, not timed tests.)

    PYRSPROF=$PWD/build/release/pyrsprof /usr/bin/python3 tests/bench/bench_ticks.py [--quick]
        [--rounds N] [--secs S] [--builds NAME=PATH ...] [--only PART] [--no-classify]

Every pyrsprof arm runs in the default mode (ptrace, the classifier on: its per-thread perf
events, taskstats and accounting included), the one the goals are for. --no-classify adds a
--no-classify arm per build to part 1 and runs parts 2 and 3 with --no-classify (what the
classifier's collection costs, by difference).

1. Throughput of a thread-per-request server (tests/targets/py/threadserver.py: Python's
   ThreadingHTTPServer, one new thread per request) under a loopback load generator
   (tests/targets/py/loadgen.py: 8 clients, one connection per request), untraced against
   attached by `pyrsprof attach` at 100 Hz (default ptrace mode; --mode vm for reference). One
   server serves every window; the windows alternate (each round rotates the order), and each
   traced window is compared with the untraced window of its round. Goal: >= 0.95 of the untraced
   throughput in the default mode. Also: every request answered, no thread of the server left
   stopped, and the recording's stop window (p50/p99), missed/late ticks and skipped threads.
2. Ticks under CPU pressure: build/targets/busy (16 spinning threads, or 16 processes recorded
   with --subprocesses) at 100 Hz: the share of ticks missed or late (begun more than half a period after their time),
   the tick delay p99, the stop window, and the thread-samples skipped as late. "free core": the
   target is pinned to CPU 1 and pyrsprof to CPU 0, so pyrsprof has a CPU of its own (goal: <= 1 %
   missed ticks); "no free core": nothing pinned, 16 busy threads over every CPU (the ticks may be
   late; the recording must say so). With other work on the machine, CPU 0 is not really free:
   the 1-min load and the kernel's CPU pressure (/proc/pressure/cpu) are printed; judge the
   numbers against them.

3. Slowdown of a process pool: tests/targets/py/poolwork.py (a multiprocessing Pool of 4 workers,
   fork, 4 tasks of fixed pure-Python work; it times itself from the pool's creation to its
   join) untraced against `pyrsprof run --subprocesses` at 100 Hz, in alternating pairs (ABBA);
   median and range of the per-pair slowdown. Goal: <= 3 %. The 4 workers share 2 CPUs with
   pyrsprof, so its own CPU is part of the slowdown, as it is for a user.
   Beside it, the CPU the traced run took (the pool's processes and pyrsprof's, its end included)
   over the untraced run's: on a busy machine the wall times say little (a traced pool even
   finishes first: each resume is a wake-up the scheduler favours), the CPU still does.

The floor: tools/floor (build/release/tools/floor, `make targets`). `floor stop` prints the
platform's cost of one INTERRUPT/wait/GETREGS/CONT cycle of one busy thread; `floor tick` is the
least a sampler that stops every thread can do to a whole program (each thread resumed as soon as
its registers are read, nothing held, nothing else read, new threads and processes followed by
the same ptrace events as pyrsprof): parts 1 and 3 run it as one more arm, so each number reads
"pyrsprof X over a floor of Y" (both against the same untraced runs).

--builds NAME=PATH compares several pyrsprof binaries in part 1 (e.g. before=... after=...), the
windows of every build alternating in each round.
"""
import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "targets" / "py"))
sys.path.insert(0, str(REPO / "tests" / "bench"))
from pyrs_testlib import stopped_threads  # noqa: E402
from run import table  # noqa: E402  (the benchmarks' table format)
PY = "/usr/bin/python3"
SERVER = REPO / "tests" / "targets" / "py" / "threadserver.py"
LOADGEN = REPO / "tests" / "targets" / "py" / "loadgen.py"
BUSY = REPO / "build" / "targets" / "busy"
POOLWORK = REPO / "tests" / "targets" / "py" / "poolwork.py"
FLOOR = REPO / "build" / "release" / "tools" / "floor"
GOAL_THROUGHPUT = 0.95
GOAL_MISSED = 0.01
GOAL_POOL_SLOWDOWN = 0.03


def wait_attached(p, timeout=10.0):
    """Waits for pyrsprof's 'sampling pid' line (it is attached); returns the lines read."""
    lines, end = [], time.monotonic() + timeout
    while time.monotonic() < end:
        line = p.stderr.readline()
        if not line:
            break
        lines.append(line)
        if "sampling pid" in line:
            return lines
    raise RuntimeError("pyrsprof did not attach: " + "".join(lines))


def cpu_s(pid):
    """The CPU time (user + system) of process pid so far, its exited threads included, or 0."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


class Server:
    def __init__(self):
        self.p = subprocess.Popen([PY, str(SERVER)], stdout=subprocess.PIPE, text=True)
        self.port = int(self.p.stdout.readline().split()[1])

    def load(self, secs, clients=8, prs_pid=None):
        """Loads the server for secs: loadgen's result, with "srv_cpu" and "prs_cpu", the CPU
        seconds the server and pyrsprof (prs_pid) took meanwhile."""
        c0, p0 = cpu_s(self.p.pid), cpu_s(prs_pid) if prs_pid else 0.0
        out = subprocess.run([PY, str(LOADGEN), str(self.port), str(clients), str(secs)],
                             capture_output=True, text=True, check=True).stdout
        res = json.loads(out)
        res["srv_cpu"] = cpu_s(self.p.pid) - c0
        res["prs_cpu"] = cpu_s(prs_pid) - p0 if prs_pid else 0.0
        return res

    def close(self):
        self.p.terminate()
        self.p.wait(timeout=10)


def mode_args(mode):
    """pyrsprof's options for an arm's mode: "ptrace" (the default mode: ptrace, classifier on),
    "ptrace --no-classify", "vm" (--mode vm, classifier on)."""
    return {"ptrace": [], "ptrace --no-classify": ["--no-classify"], "vm": ["--mode", "vm"]}[mode]


def traced_window(srv, prs, mode, secs, outdir):
    """Attaches prs to the server, loads it for secs, stops pyrsprof: (loadgen result, stats,
    threads left stopped, pyrsprof's lines)."""
    cmd = [str(prs), "attach", str(srv.p.pid), "-o", str(outdir)] + mode_args(mode)
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        lines = wait_attached(p)
        time.sleep(0.3)
        res = srv.load(secs, prs_pid=p.pid)
    finally:
        p.send_signal(signal.SIGINT)
    rest = p.communicate(timeout=120)[1]
    stopped = stopped_threads(srv.p.pid)
    stats = json.loads((outdir / "stats.json").read_text())
    return res, stats, stopped, "".join(lines) + rest


def floor_window(srv, secs):
    """tools/floor tick at 100 Hz attached to the server while it is loaded for secs: (loadgen
    result, floor's tick line, threads left stopped)."""
    p = subprocess.Popen([str(FLOOR), "tick", "10000", str(secs + 0.6), "-p", str(srv.p.pid)],
                         stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.3)
        res = srv.load(secs, prs_pid=p.pid)
    finally:
        err = p.communicate(timeout=60)[1]
    return res, err.strip(), stopped_threads(srv.p.pid)


def cycle_floor():
    """tools/floor stop on a busy thread pinned to CPU 1 (the prober on CPU 0), 100 Hz: the
    median us of one INTERRUPT/wait/GETREGS/CONT cycle, or None."""
    tgt = subprocess.Popen(["taskset", "-c", "1", str(BUSY), "procs", "1", "5"], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.2)
        out = subprocess.run(["taskset", "-c", "0", str(FLOOR), "stop", str(tgt.pid), "10000", "200"],
                             capture_output=True, text=True, timeout=30).stdout.split()
        return float(out[out.index("median_us") + 1])
    except (ValueError, IndexError, subprocess.TimeoutExpired):
        return None
    finally:
        tgt.kill()
        tgt.wait()


def dist(st, *path):
    d = st
    for k in path:
        d = d.get(k, {}) if isinstance(d, dict) else {}
    return d if isinstance(d, dict) else {}


def per_req(lg, key):
    """us of lg[key] (CPU seconds) per answered request."""
    return lg[key] / lg["answered"] * 1e6 if lg.get("answered") else float("nan")


def server_part(builds, rounds, secs, tmp, no_classify_arm):
    srv = Server()
    try:
        srv.load(1.0)  # warm
        arms = [("untraced", None, None), ("floor (tools/floor tick)", None, "floor")] + \
               [(n, p, "ptrace") for n, p in builds] + \
               ([(n + " --no-classify", p, "ptrace --no-classify") for n, p in builds]
                if no_classify_arm else []) + \
               [(builds[-1][0] + " --mode vm", builds[-1][1], "vm")]
        res = {a[0]: [] for a in arms}
        problems = []
        for r in range(rounds):
            order = arms[r % len(arms):] + arms[:r % len(arms)]
            if r % 2:
                order.reverse()
            base = None
            got = {}
            for name, prs, mode in order:
                if mode == "floor":
                    lg, line, stopped = floor_window(srv, secs)
                    if lg["failed"] or stopped:
                        problems.append(f"round {r} floor: {lg['failed']} failed, stopped {stopped}")
                    got[name] = (lg, {}, [])
                    continue
                if prs is None:
                    base = srv.load(secs)
                    if base["failed"]:
                        problems.append(f"round {r} untraced: {base['failed']} requests failed")
                    continue
                out = tmp / f"srv-{r}-{len(got)}"
                lg, st, stopped, text = traced_window(srv, prs, mode, secs, out)
                if lg["failed"]:
                    problems.append(f"round {r} {name}: {lg['failed']} requests failed")
                if stopped:
                    problems.append(f"round {r} {name}: threads left stopped {stopped}")
                warn = [ln for ln in text.splitlines() if "ticks were missed" in ln or
                        "of their time stopped" in ln or "did not stop within" in ln]
                got[name] = (lg, st, warn)
            for name, (lg, st, warn) in got.items():
                res[name].append((lg["rps"] / base["rps"], base["rps"], lg["rps"], st, warn,
                                  per_req(base, "srv_cpu"), per_req(lg, "srv_cpu"),
                                  per_req(lg, "prs_cpu")))
    finally:
        srv.close()
    rows = []
    for name, _, mode in arms[1:]:
        xs = res[name]
        ratios = [x[0] for x in xs]
        med = statistics.median(ratios)
        win50 = statistics.median(dist(x[3], "ticks", "stop_window_us").get("median", 0) for x in xs)
        win99 = statistics.median(dist(x[3], "ticks", "stop_window_us").get("p99", 0) for x in xs)
        missed = sum(x[3].get("ticks", {}).get("missed", 0) for x in xs)
        late = sum(x[3].get("ticks", {}).get("late", 0) for x in xs)
        taken = sum(x[3].get("ticks", {}).get("taken", 0) for x in xs)
        skl = sum(x[3].get("skipped", {}).get("late", 0) for x in xs)
        ts = sum(x[3].get("thread_samples", 0) for x in xs)
        warned = sum(1 for x in xs if x[4])
        goal = "" if mode != "ptrace" else ("met" if med >= GOAL_THROUGHPUT else "NOT met")
        more = [x[6] + x[7] - x[5] for x in xs]  # (each against the untraced window of its round)
        cpu = (f"{statistics.median(x[5] for x in xs):.0f} -> {statistics.median(x[6] for x in xs):.0f}"
               f" + {statistics.median(x[7] for x in xs):.0f}: +{statistics.median(more):.0f} "
               f"[{min(more):+.0f}..{max(more):+.0f}]")
        if mode == "floor":
            rows.append([name, len(xs), f"{statistics.median(x[1] for x in xs):.0f}",
                         f"{statistics.median(x[2] for x in xs):.0f}",
                         f"{med:.2f} [{min(ratios):.2f}-{max(ratios):.2f}]", cpu, "-", "-", "-", "-",
                         ""])
            continue
        rows.append([name, len(xs), f"{statistics.median(x[1] for x in xs):.0f}",
                     f"{statistics.median(x[2] for x in xs):.0f}",
                     f"{med:.2f} [{min(ratios):.2f}-{max(ratios):.2f}]", cpu,
                     f"{win50:.0f} / {win99:.0f}" if mode != "vm" else "-",
                     f"{missed}+{late} of {taken + missed}", f"{skl} of {ts}", f"{warned}/{len(xs)}",
                     goal])
    table(f"1. thread-per-request server, {secs:g} s windows, 100 Hz: traced / untraced throughput "
          f"(goal >= {GOAL_THROUGHPUT} in the default mode: ptrace, classifier on; the floor row: "
          f"a sampler that only stops every thread; "
          f"1-min load {os.getloadavg()[0]:.1f}; the CPU per request, untraced and traced, is of the same round, "
          f"steadier than the throughput when other work shares the CPUs)",
          ["build", "rounds", "untraced rps", "traced rps", "ratio median [range]",
           "CPU us/request: server untraced -> traced + pyrsprof: more, paired median [range]",
           "stop window p50/p99 us", "missed+late ticks", "skipped late", "warned", "goal"], rows)
    for p in problems:
        print(f"   PROBLEM: {p}")
    if not problems:
        print("   every request answered; no server thread left stopped after any recording")


def busy_run(prs, kind, n, secs, pinned, outdir, extra):
    pre_prs = ["taskset", "-c", "0"] if pinned else []
    pre_tgt = ["taskset", "-c", "1"] if pinned else []
    tree = ["--subprocesses"] if kind == "procs" else []  # (every process of the tree sampled)
    cmd = pre_prs + [str(prs), "run", "-o", str(outdir)] + extra + tree + ["--"] + \
        pre_tgt + [str(BUSY), kind, str(n), str(secs)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=secs * 10 + 60)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr[-400:]}")
    st = json.loads((outdir / "stats.json").read_text())
    warned = any("ticks were missed" in ln or "did not stop within" in ln
                 for ln in p.stderr.splitlines())
    return st, warned


def cpu_pressure():
    """The kernel's CPU pressure (PSI 'some avg10', % of time some task waited for a CPU), or None."""
    try:
        line = Path("/proc/pressure/cpu").read_text().splitlines()[0]
        return float(line.split()[1].split("=")[1])
    except (OSError, IndexError, ValueError):
        return None


def busy_part(prs, secs, tmp, extra):
    ncpu = len(os.sched_getaffinity(0))
    rows = []
    for kind in ["threads", "procs"]:
        for pinned in ([True, False] if ncpu >= 2 else [False]):
            st, warned = busy_run(prs, kind, 16, secs, pinned, tmp / f"busy-{kind}-{pinned}", extra)
            t = st.get("ticks", {})
            due = t.get("taken", 0) + t.get("missed", 0)
            ts = st.get("thread_samples", 0)
            missed = t.get("missed", 0) / due if due else float("nan")
            late = t.get("late", 0) / due if due else float("nan")
            w = t.get("stop_window_us", {})
            goal = ("met" if missed <= GOAL_MISSED else "NOT met") if pinned else \
                ("said so" if warned or missed + late <= GOAL_MISSED else "NOT said")
            rows.append([f"16 busy {kind}", "free core (CPU 0)" if pinned else "no free core",
                         due, f"{missed * 100:.1f} %", f"{late * 100:.1f} %",
                         f"{t.get('delay_us', {}).get('p99', 0) / 1000:.1f}",
                         f"{w.get('median', 0):.0f} / {w.get('p99', 0):.0f}",
                         f"{st.get('skipped', {}).get('late', 0)} of {ts}",
                         "yes" if warned else "no", goal])
    load, psi = os.getloadavg()[0], cpu_pressure()
    psi = "n/a" if psi is None else f"{psi:.0f} %"
    table(f"2. ticks under CPU pressure, {secs:g} s at 100 Hz{' '.join([''] + extra)} (1-min load: {load:.1f}, CPU pressure "
          f"some avg10: {psi}: above ~10 % CPU 0 is not free, other work shares it; goal: "
          f"<= {GOAL_MISSED * 100:.0f} % missed with a free core, else the summary says so)",
          ["target", "pyrsprof", "ticks due", "missed", "late", "delay p99 ms",
           "stop window p50/p99 us", "skipped late", "summary warns", "goal"], rows)


def pool_run(prs, iters, outdir, extra=()):
    """One run of poolwork.py, traced when prs is given ("floor": under tools/floor tick at
    100 Hz): (its wall time, stats or None, the CPU seconds of the run: the pool's processes and
    the tracer's)."""
    cmd = [PY, str(POOLWORK), str(iters)]
    if prs == "floor":
        cmd = [str(FLOOR), "tick", "10000", "0", "--"] + cmd
    elif prs:
        cmd = [str(prs), "run", "--subprocesses", "-r", "100", "-o", str(outdir), *extra,
               "--"] + cmd
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr[-400:]}")
    wall = float(next(ln for ln in p.stdout.splitlines() if ln.startswith("wall="))[5:])
    st = json.loads((outdir / "stats.json").read_text()) if prs and prs != "floor" else None
    return wall, st, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime


def pool_part(prs, pairs, iters, tmp, extra):
    pool_run(None, iters // 4, tmp)  # warm
    slow, base, traced, stats, fslow, cpu = [], [], [], [], [], []
    arms = [None, prs, "floor"]
    for r in range(pairs):
        order = arms[r % 3:] + arms[:r % 3]  # each arm first, second and last in turn
        if r % 2:
            order.reverse()
        got = {}
        for arm in order:
            out = tmp / f"pool-{r}"
            got[arm] = pool_run(arm, iters, out, extra)
        base.append(got[None][0])
        traced.append(got[prs][0])
        stats.append(got[prs][1])
        slow.append(got[prs][0] / got[None][0] - 1)
        fslow.append(got["floor"][0] / got[None][0] - 1)
        cpu.append(got[prs][2] / got[None][2] - 1)
    med = statistics.median(slow)
    # Other work on the machine confounds it: each resume after a stop is a wake-up, which the
    # scheduler favours, so a traced pool can take CPU from the rest and finish first.
    busy = os.getloadavg()[0] >= 1.0
    verdict = ("met" if med <= GOAL_POOL_SLOWDOWN else "NOT met") + (" (busy machine)" if busy else "")
    procs = statistics.median(st.get("processes", 0) for st in stats)
    share = statistics.median(st.get("ticks", {}).get("stopped_share", 0) for st in stats)
    missed = sum(st.get("ticks", {}).get("missed", 0) for st in stats)
    taken = sum(st.get("ticks", {}).get("taken", 0) for st in stats)
    load = os.getloadavg()[0]
    table(f"3. 4-process pool (poolwork.py, fork), {pairs} rounds of untraced, pyrsprof and the floor "
          f"(tools/floor tick) in rotating order, 100 Hz --subprocesses{' '.join([''] + extra)}: "
          f"slowdown of its wall time "
          f"(goal <= {GOAL_POOL_SLOWDOWN * 100:.0f} %; 1-min load {load:.1f})",
          ["untraced s (median)", "traced s (median)", "slowdown median [range]",
           "floor slowdown median [range]", "CPU more (pool + pyrsprof)", "processes",
           "stopped share", "missed ticks", "goal"],
          [[f"{statistics.median(base):.2f}", f"{statistics.median(traced):.2f}",
            f"{med * 100:+.1f} % [{min(slow) * 100:+.1f} .. {max(slow) * 100:+.1f}]",
            f"{statistics.median(fslow) * 100:+.1f} % [{min(fslow) * 100:+.1f} .. "
            f"{max(fslow) * 100:+.1f}]",
            f"{statistics.median(cpu) * 100:+.1f} % [{min(cpu) * 100:+.1f} .. {max(cpu) * 100:+.1f}]",
            f"{procs:.0f}", f"{share * 100:.2f} %", f"{missed} of {taken + missed}",
            verdict]])
    if busy:
        print("   the machine was busy (1-min load >= 1): the traced pool competes with other work "
              "on other terms than the untraced one; judge the goal on an idle machine")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="shorter runs (a smoke test)")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--secs", type=float, default=None)
    ap.add_argument("--builds", nargs="+", default=None, help="NAME=PATH of pyrsprof binaries")
    ap.add_argument("--only", choices=["server", "busy", "pool"], action="append")
    ap.add_argument("--no-classify", action="store_true",
                    help="parts 2 and 3 with --no-classify (default: the default mode, classifier "
                         "on); part 1 adds a --no-classify arm per build")
    a = ap.parse_args()
    prs = Path(os.environ.get("PYRSPROF", REPO / "bin" / "pyrsprof")).resolve()
    builds = [tuple(b.split("=", 1)) for b in a.builds] if a.builds else [("pyrsprof", str(prs))]
    rounds = a.rounds or (2 if a.quick else 6)
    secs = a.secs or (2.0 if a.quick else 5.0)
    if not BUSY.exists():
        print("bench_ticks: build/targets/busy missing: run `make targets`", file=sys.stderr)
        return 1
    if not FLOOR.exists():
        print("bench_ticks: build/release/tools/floor missing: run `make targets`", file=sys.stderr)
        return 1
    load = os.getloadavg()
    print(f"bench_ticks: {os.cpu_count()} CPUs, load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    cyc = cycle_floor()
    print(f"   floor: one INTERRUPT/wait/GETREGS/CONT cycle of one busy thread (tools/floor stop, "
          f"100 Hz, pinned): {'n/a' if cyc is None else f'{cyc:.0f} us'} median")
    tmp = Path(tempfile.mkdtemp(prefix="pyrsprof-ticks-"))
    try:
        parts = a.only or ["server", "busy", "pool"]
        if "server" in parts:
            server_part(builds, rounds, secs, tmp, a.no_classify)
        extra = ["--no-classify"] if a.no_classify else []
        if "busy" in parts:
            busy_part(Path(builds[-1][1]), max(2.0, secs), tmp, extra)
        if "pool" in parts:
            pool_part(Path(builds[-1][1]), 3 if a.quick else 6, 5_000_000 if a.quick else 15_000_000,
                      tmp, extra)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
