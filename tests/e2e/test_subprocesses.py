# SPDX-License-Identifier: MIT
"""`--subprocesses`: a process tree recorded as one profile (run, attach) or dumped (dump).

Truths: the pids and CPU times the targets print about themselves (tests/targets/py/pool.py,
orphans.py, chain_rs.py, prefork.py), their output and exit codes, what /proc says of every
process of the tree after pyrsprof is gone (no process left stopped), the requests a load
generator got answered. Each process of a profile is a root frame "<command> [<pid>]" of the
folded export (the view gives one per process as soon as the profile holds more than one)."""
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import (TARGET_BIN, TARGET_SRC, assert_clean, parse_raw, pid_gone, proc_state,
                      read_pprof, steady_run, wait_gone)

PY = "/usr/bin/python3"
PYT = TARGET_SRC / "py"
_ROOT = re.compile(r"^(?P<cmd>.*) \[(?P<pid>\d+)\]$")


def by_process(recs):
    """{pid: (command, [(frames below the process root, count)])} of a folded export. A process
    that exec'ed has a root per command (a forked Python child sampled once before its exec of
    the Rust program): its command is the one with the most samples."""
    out, per_cmd = {}, Counter()
    for frames, n in recs:
        m = _ROOT.match(frames[0].name)
        assert m, f"no process root frame: {frames[0].name!r}"
        pid = int(m.group("pid"))
        per_cmd[pid, m.group("cmd")] += n
        out.setdefault(pid, [])
        out[pid].append((frames[1:], n))
    cmd = {}
    for (pid, c), n in per_cmd.items():
        if pid not in cmd or n > per_cmd[pid, cmd[pid]]:
            cmd[pid] = c
    return {pid: (cmd[pid], r) for pid, r in out.items()}


def count(recs, name):
    return sum(n for frames, n in recs if any(f.name == name for f in frames))


def record(run_prs, outdir, argv, extra=(), rate=100, timeout=120, expect_rc=0):
    d = outdir / str(time.monotonic_ns())
    res = run_prs(["run", "-r", rate, "-o", d, *extra, "--", *map(str, argv)], timeout=timeout)
    assert_clean(res)
    assert res.rc == expect_rc, res.describe()
    res.dir = d
    return res


def stats(d):
    return json.loads((d / "stats.json").read_text())


# ---- pools: every worker, each with its own split ------------------------------------------

def pool_truth(stdout):
    """{pid: (part_a s, part_b s)} summed over the tasks each worker ran."""
    truth = {}
    for m in re.finditer(r"^worker (\d+) part_a=([0-9.]+) part_b=([0-9.]+)$", stdout, re.M):
        a, b = truth.get(int(m.group(1)), (0.0, 0.0))
        truth[int(m.group(1))] = (a + float(m.group(2)), b + float(m.group(3)))
    return truth


def check_pprof_processes(run_prs, request, pyrs, workers, out):
    """The pprof export of a tree, decoded (read_pprof): every sample's `pid` label names its
    process and its locations refer only to mappings of that process. profile.proto's Mapping has
    no pid: the samples that use a mapping say whose it is, so no mapping may be used by two
    processes (the kernel's, one in the profile, is one per process in pprof). Each worker the
    target printed has a mapping of the main binary (pprof's mapping 1, python3.11) of its own.
    `go tool pprof` reads the file (it merges the mappings of one binary when it loads it) and its
    -tagfocus=pid=W keeps worker W's samples. (Before each process had its kernel mapping, the
    check failed whenever kernel frames of two processes were sampled: every run here, at 400 Hz;
    without kernel stacks, perf_event_open refused, it has nothing shared to find.)"""
    res = run_prs(["export", pyrs, "--format", "pprof", "--view", "wall", "-o", out], timeout=120)
    assert_clean(res)
    assert res.rc == 0, res.describe()
    doc = read_pprof(out)
    maps, owners, per_pid = doc["mappings"], {}, Counter()
    for ids, vals, labels in doc["samples"]:
        per_pid[labels["pid"]] += vals[0]
        for loc in ids:
            m = doc["locations"][loc][0]
            if m:
                owners.setdefault(m, set()).add(labels["pid"])
    shared = {maps[m]["file"]: sorted(p) for m, p in owners.items() if len(p) > 1}
    assert not shared, f"mappings used by the samples of several processes: {shared}"
    main = maps[1]["file"]
    for w in workers:
        assert per_pid[w] > 0, (w, per_pid)
        assert [m for m, p in owners.items() if p == {w} and maps[m]["file"] == main], \
            f"worker {w} has no {main} mapping of its own"
    if shutil.which("go"):
        pprof = request.getfixturevalue("pprof")
        _, samples, _ = parse_raw(pprof("-raw", out))
        assert sum(v[0] for v, _, _ in samples) == sum(per_pid.values())
        w = min(workers)
        _, mine, _ = parse_raw(pprof("-raw", f"-tagfocus=pid={w}", out))
        assert sum(v[0] for v, _, _ in mine) == per_pid[w]


@pytest.mark.parametrize("how", ["fork", "spawn", "executor"])
def test_pool_every_worker_with_its_split(how, run_prs, export_folded, outdir, request):
    """multiprocessing.Pool (fork, spawn) and concurrent.futures.ProcessPoolExecutor, 4 workers
    with 4 different splits between part_a and part_b: every worker is a process of the profile,
    its CPU samples split between the two within 5 points of the CPU times it measured.

    At 400 Hz: the CPU view's split is unbiased but not exact (which ticks find a worker on its
    CPU, with 4 workers on 2 CPUs, is the scheduler's draw). Measured over 16 workers each
    (fork, 4 s, load 7-11): at 200 Hz, ~100 CPU samples a worker, the deviation from the truth
    had mean +0.2 and sd 2.3 points (up to 6: the 5-point check failed 1 worker in 16, an xfail
    before); at 400 Hz sd 1.1 points, at most 3. The spread also follows the target's phases: with
    40 ms slices the (2, 3) worker (10 cycles of 200 ms) strayed 6-9 points in CI runs, both
    ways; pool.py's slices are 10 ms since (tests/targets/py/pool.py has the numbers)."""
    for attempt in range(2):
        res = steady_run(lambda: record(run_prs, outdir, [PY, PYT / "pool.py", how, 4],
                                        extra=["--subprocesses"], rate=400))
        assert res.out.rstrip().endswith("done"), res.describe()
        truth = pool_truth(res.out)
        assert len(truth) >= 3, res.describe()  # (a worker may run two of the 4 tasks)
        procs = by_process(export_folded(res.dir / "profile.pyrs", view="cpu", lines=False))
        for pid in truth:
            assert pid in procs, f"worker {pid} missing: processes {sorted(procs)}"
        split = {pid: (count(procs[pid][1], "part_a"), count(procs[pid][1], "part_b"))
                 for pid in truth}
        # A worker the machine starved (others' load: 4 workers want 2 CPUs already) has too few
        # samples to judge a split by to 5 points (at load 10, 0.4 s of CPU each in 4 s: ~150
        # samples, sd ~2 points, 1 worker of 48 off by 5.6): take the recording again once.
        if min(a + b for a, b in split.values()) >= 200:
            break
    assert stats(res.dir)["processes"] >= 1 + len(truth)
    for pid, (ta, tb) in truth.items():
        a, b = split[pid]
        assert a + b >= 60, (pid, a, b, ta, tb)
        assert abs(a / (a + b) - ta / (ta + tb)) <= 0.05, (pid, a, b, ta, tb, split, truth)
    # the verdict: 4 busy workers on 2 CPUs saturate them; the parent waiting for their results
    # (a futex on the result's event, the pipe) is an idle waiter, not lock contention
    # (src/classify/facts.c waits_for_children; it was "lock-contended" first)
    p1 = json.loads((res.dir / "phase1.json").read_text())
    rules = [p1["verdict"]["id"], *(a["id"] for a in p1["verdict"].get("also", []))]
    assert rules[0] in ("saturated", "cpu") and "lock" not in rules, (rules, p1["verdict"])
    # one pprof of the tree: each process's samples in its own mappings
    check_pprof_processes(run_prs, request, res.dir / "profile.pyrs", truth, res.dir / "w.pb.gz")


# ---- a chain of programs -------------------------------------------------------------------

def test_chain_shell_python_rust(run_prs, export_folded, outdir):
    """sh -c → Python → a Rust binary: all three are processes of the profile with their own
    frames: the shell waiting for Python, Python's py_part, Rust's hot_a and hot_b."""
    rust = TARGET_BIN / "cpu_split_rs"
    res = record(run_prs, outdir, ["sh", "-c", f"{PY} {PYT / 'chain_rs.py'} {rust} 1; echo sh-done"],
                 extra=["--subprocesses"], rate=200)
    assert "rust exited 0" in res.out and res.out.rstrip().endswith("sh-done"), res.describe()
    py_pid = int(re.search(r"^py (\d+)$", res.out, re.M).group(1))
    wall = by_process(export_folded(res.dir / "profile.pyrs", view="wall", lines=False))
    sh = [p for p, (cmd, _) in wall.items() if cmd.startswith("sh -c")]
    rs = [p for p, (cmd, _) in wall.items() if cmd.startswith(str(rust))]
    assert sh and rs, sorted((p, c) for p, (c, _) in wall.items())
    assert py_pid in wall and "chain_rs.py" in wall[py_pid][0]
    assert count(wall[py_pid][1], "py_part") >= 50, wall[py_pid][1][:5]
    rs_recs = wall[rs[0]][1]
    assert count(rs_recs, "cpu_split::hot_a") + count(rs_recs, "cpu_split::hot_b") >= 50, rs_recs[:5]
    # the shell only waits for its child
    assert count(wall[sh[0]][1], "[wait4]") >= 0.5 * sum(n for _, n in wall[sh[0]][1])


def test_parent_exits_while_children_work(run_prs, export_folded, outdir):
    """The root exits at once (7); its two children work 2 s on: the recording goes on until they
    exit, with their samples, and pyrsprof exits with the root's status."""
    res = record(run_prs, outdir, [PY, PYT / "orphans.py", 2], extra=["--subprocesses"],
                 expect_rc=7)
    kids = [int(p) for p in re.findall(r"^child (\d+)$", res.out, re.M)]
    cpu = {int(p): float(c) for p, c in re.findall(r"^child (\d+) done cpu=([0-9.]+)$", res.out, re.M)}
    assert len(kids) == 2 and sorted(cpu) == sorted(kids), res.describe()
    procs = by_process(export_folded(res.dir / "profile.pyrs", view="cpu", lines=False))
    for k in kids:
        # at 100 Hz, about 100 CPU samples per CPU second it used (a loose half of that)
        assert k in procs and count(procs[k][1], "child_work") >= 50 * cpu[k], (k, cpu, sorted(procs))
    assert stats(res.dir)["duration_s"] >= 1.8


# ---- never hurt the tree -------------------------------------------------------------------

PR_SET_CHILD_SUBREAPER = 36


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for t in (Path(f"/proc/{p}/task").iterdir() if Path(f"/proc/{p}/task").is_dir() else []):
            try:
                kids = [int(x) for x in (t / "children").read_text().split()]
            except OSError:
                kids = []
            out += kids
            todo += kids
    return out


def kill9_during_pool(prs, outdir, mode, seconds, settle):
    """kill -9 of pyrsprof (`run MODE --subprocesses`) SETTLE s after a fork pool of SECONDS is
    ready: no process of the tree is left stopped, and the pool runs to completion with all its
    output and exit code 0 (its parent reaped by us, as subreaper)."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    try:
        out_path = outdir / "pool.out"
        with open(out_path, "wb") as out:
            p = subprocess.Popen([prs, "run", *mode, "--subprocesses", "-r", "500", "-o", outdir / "p",
                                  "--", PY, PYT / "pool.py", "fork", str(seconds)],
                                 stdout=out, stderr=subprocess.DEVNULL, start_new_session=True)
        end = time.monotonic() + 30
        while b"ready" not in out_path.read_bytes() and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(settle)
        root = [int(x) for x in Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()][0]
        tree = [root] + descendants(root)
        assert len(tree) >= 5, tree  # the parent, its 4 workers (and a helper or two)
        p.kill()
        p.wait()
        time.sleep(0.3)
        for pid in tree:
            if not pid_gone(pid):
                assert proc_state(pid) not in ("T", "t"), f"{pid} left stopped"
        _, status = os.waitpid(root, 0)  # ours now, as subreaper
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"status {status:#x}"
        text = out_path.read_text()
        assert len(pool_truth(text)) >= 3 and text.rstrip().endswith("done"), text
        for pid in tree:
            assert wait_gone(pid, 10), f"{pid} still there"
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def test_kill9_while_tracing_a_tree(prs, outdir):
    """kill -9 of pyrsprof while it traces a pool (kill9_during_pool)."""
    kill9_during_pool(prs, outdir, [], 3, 0.8)


def test_duration_ends_with_every_process_detached(run_prs, outdir):
    """-d 1 on a 3 s pool: sampling stops after a second with every process of the tree
    detached (none stopped), and the pool runs on to its end with all its output."""
    t0 = time.monotonic()
    res = record(run_prs, outdir, [PY, PYT / "pool.py", "fork", 3], extra=["--subprocesses", "-d", 1])
    assert time.monotonic() - t0 >= 3, res.describe()  # run waits for its command
    assert len(pool_truth(res.out)) >= 3 and res.out.rstrip().endswith("done"), res.describe()
    st = stats(res.dir)
    assert 0.9 <= st["duration_s"] <= 2.0 and st["processes"] >= 5, st


def test_burst_of_short_children(run_prs, outdir):
    """500 short-lived children in a row: no hang, the shell completes, each one was followed."""
    res = record(run_prs, outdir,
                 ["sh", "-c", "for i in $(seq 500); do /bin/true; done; echo burst-done"],
                 extra=["--subprocesses"], timeout=120)
    assert res.out.strip() == "burst-done", res.describe()
    assert stats(res.dir)["processes"] >= 501  # the shell, its 500 /bin/true (and seq's subshell)


def test_children_cpu_without_the_flag(run_prs, outdir):
    """Without --subprocesses a child's CPU is not sampled: the summary says how much, and
    suggests the flag; with it, no such line; a program without children gets none either."""
    child = (f"import resource, runpy, sys; sys.argv = ['split.py', '1']; "
             f"runpy.run_path('{PYT / 'split.py'}', run_name='__main__'); "
             f"r = resource.getrusage(resource.RUSAGE_SELF); print('cpu', r.ru_utime + r.ru_stime)")
    cmd = ["sh", "-c", f'{PY} -c "{child}"; true']
    res = record(run_prs, outdir, cmd)
    used = float(re.search(r"^cpu ([0-9.]+)$", res.out, re.M).group(1))
    # (clock ticks of 10 ms, and the shell's own children: none but Python)
    assert abs(stats(res.dir)["children_cpu_s"] - used) <= 0.05 + 0.05 * used, (stats(res.dir), used)
    hint = [l for l in res.own_lines() if "child processes used" in l]
    assert hint and "--subprocesses" in hint[0], res.describe()
    res = record(run_prs, outdir, cmd, extra=["--subprocesses"])
    assert not [l for l in res.own_lines() if "child processes used" in l], res.describe()
    res = record(run_prs, outdir, [PY, PYT / "split.py", 1])
    assert not [l for l in res.own_lines() if "child processes used" in l], res.describe()


# ---- a pre-fork server: attach and dump ----------------------------------------------------

class Server:
    """tests/targets/py/prefork.py with its port and worker pids."""

    def __init__(self, workers=3):
        self.p = subprocess.Popen([PY, PYT / "prefork.py", str(workers)], stdout=subprocess.PIPE,
                                  text=True, start_new_session=True)
        self.port = int(self.p.stdout.readline().split()[1])
        self.workers = [int(self.p.stdout.readline().split()[1]) for _ in range(workers)]
        # The parent prints a worker's pid as its fork returns; the worker may not have run yet
        # (a dump then found it in arch_fork, under ASan on a loaded machine). Its first sleep is
        # in accept.
        end = time.monotonic() + 20
        while any(proc_state(w) != "S" for w in self.workers) and time.monotonic() < end:
            time.sleep(0.01)

    def request(self):
        with socket.create_connection(("127.0.0.1", self.port), timeout=20) as s:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            data = b""
            while chunk := s.recv(4096):
                data += chunk
        m = re.search(rb"pid (\d+) n \d+", data)
        assert data.startswith(b"HTTP/1.0 200 OK") and m, data
        return int(m.group(1))

    def stop(self):
        self.p.terminate()
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()


def test_attach_prefork_server_under_load(run_prs, export_folded, outdir):
    """attach --subprocesses to a pre-fork server while 4 clients load it: every request is
    answered, every worker is in the profile handling requests, and after the detach no process
    is left stopped and the server still answers."""
    srv = Server(3)
    try:
        answered, errors, sent = Counter(), [], [0]
        stop = time.monotonic() + 4

        def client():
            while time.monotonic() < stop:
                sent[0] += 1
                try:
                    answered[srv.request()] += 1
                except Exception as e:  # noqa: BLE001 (every failure is reported)
                    errors.append(repr(e))
        clients = [threading.Thread(target=client) for _ in range(4)]
        for c in clients:
            c.start()
        time.sleep(0.5)
        res = run_prs(["attach", srv.p.pid, "--subprocesses", "-d", "2", "-o", outdir / "a"],
                      timeout=60)
        for c in clients:
            c.join()
        assert_clean(res)
        assert res.rc == 0, res.describe()
        assert not errors and sum(answered.values()) == sent[0], (errors[:3], answered, sent)
        procs = by_process(export_folded(outdir / "a" / "profile.pyrs", view="wall", lines=False))
        for w in srv.workers:
            assert w in procs and count(procs[w][1], "handle") >= 1, (w, sorted(procs))
        for pid in [srv.p.pid] + srv.workers:
            assert proc_state(pid) not in ("T", "t"), f"{pid} left stopped"
        assert srv.request() in srv.workers
    finally:
        srv.stop()


_PROC = re.compile(r"^Process (\d+): (.*)$", re.M)


def test_dump_of_a_tree(run_prs):
    """dump --subprocesses prints the server and each of its workers, each waiting in accept in
    serve(); without the flag, only the server."""
    srv = Server(3)
    try:
        res = run_prs(["dump", "--subprocesses", srv.p.pid], timeout=60)
        assert_clean(res)
        assert res.rc == 0, res.describe()
        sections = re.split(r"^(?=Process \d+: )", res.out, flags=re.M)[1:]
        pids = [int(_PROC.match(s).group(1)) for s in sections]
        assert sorted(pids) == sorted([srv.p.pid] + srv.workers), res.out
        for s in sections:
            pid = int(_PROC.match(s).group(1))
            assert "prefork.py" in _PROC.match(s).group(2)
            if pid in srv.workers:
                assert "serve (" in s and "accept" in s, s
            else:
                assert "main (" in s and "serve (" not in s, s
        res = run_prs(["dump", srv.p.pid], timeout=60)
        assert res.rc == 0 and [int(p) for p, _ in _PROC.findall(res.out)] == [srv.p.pid], res.out
        for pid in [srv.p.pid] + srv.workers:
            assert proc_state(pid) not in ("T", "t"), f"{pid} left stopped"
        assert srv.request() in srv.workers
    finally:
        srv.stop()
