# SPDX-License-Identifier: MIT
"""Sleeping threads are not read again while they have not moved (src/sample/reuse-internal.h):
their last sample is recorded again, or in ptrace mode its native frames with
Python frames read now. These tests check that this never shows a thread where it is not:

- waits (C) and waits.py: a thread blocks in wait_a then wait_b in turn (the same syscall, the
  same stack pointer and PC: only the stack bytes, or the Python frames, tell them apart) and
  measures the wall time in each itself; the sampled split must match that truth, in ptrace and
  vm mode, with the reuse shown at work in stats.json;
- threads that sleep all along are recorded with their exact stacks while (nearly) never being
  stopped or read again;
- PYRSPROF_READ_IDLE=1 turns it off.
"""
import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "targets" / "py"))
import pyrs_testlib as T  # noqa: E402
from conftest import assert_clean, steady_run, thread_root, thread_tids  # noqa: E402

# sampled share within this many points of the measured one: at 200 Hz for 4 s the waiter has
# ~800 wall samples, binomial sigma ~1.5 points
TOLERANCE = 0.05


def truth(stdout):
    m = re.search(r"^truth wait_a=([0-9.]+) wait_b=([0-9.]+)$", stdout, re.M)
    assert m, f"the target printed no truth:\n{stdout}"
    return float(m.group(1))


def waiter_split(export_folded, pyrs, waiter_tid):
    """(share of wait_a among the waiter's wall samples in wait_a or wait_b, their count)."""
    a = b = 0
    other = {}
    for frames, c in export_folded(pyrs, view="wall", per_thread=True):
        root = thread_root(frames)
        if not root or root[0] != waiter_tid:
            continue
        names = {f.name for f in frames[1:]}
        if "wait_a" in names:
            a += c
        elif "wait_b" in names:
            b += c
        else:
            key = ";".join(f.name for f in frames[-4:])
            other[key] = other.get(key, 0) + c
    assert a + b >= 300, f"only {a + b} samples of the waiter ({waiter_tid}) in wait_a/wait_b; " \
        f"elsewhere: {sorted(other.items(), key=lambda kv: -kv[1])[:6]}; in {pyrs}"
    return a / (a + b), a + b


def run_waits(run_prs, outdir, argv, mode="ptrace", env=None):
    """Records argv at 200 Hz (again if the host stole CPU meanwhile: conftest.steady_run)."""
    def once():
        d = outdir / ("prof%d" % time.monotonic_ns())
        res = run_prs(["run", "-r", 200, "--mode", mode, "-o", d, "--", *map(str, argv)], timeout=120,
                      env=env)
        assert_clean(res)
        assert res.rc == 0, res.describe()
        return res, d
    return steady_run(once)


def stats(d):
    return json.loads((d / "stats.json").read_text())


def test_native_waits_split(run_prs, targets, outdir, export_folded):
    """waits (C): wait_a and wait_b block at the same SP and PC in read(); the sampled split
    follows the target's measured one, while most samples of the sleeping threads were reused."""
    res, d = run_waits(run_prs, outdir, [targets / "waits", 4])
    want = truth(res.out)
    tid = thread_tids(res.out)["waiter"]
    got, n = waiter_split(export_folded, d / "profile.pyrs", tid)
    assert abs(got - want) <= TOLERANCE, f"wait_a {got:.3f} sampled ({n} samples), {want:.3f} measured"
    st = stats(d)
    # 3 threads x ~800 ticks; main (in pthread_join) and the feeder (in nanosleep most of the
    # time) sleep through most ticks: without reuse every one of them is a stop
    assert st["reused"]["samples"] >= 0.4 * st["thread_samples"], st["reused"]
    # the waiter, woken and asleep again, is read without a stop: from its kept native frames
    # where it sleeps at the same SP, PC and stack bytes, else from /proc and its stack copy
    assert st["reused"]["native"] + st["read_asleep"] > 0, (st["reused"], st["read_asleep"])


def test_native_waits_split_read_idle(run_prs, targets, outdir, export_folded):
    """The same with reuse turned off: every thread stopped at every tick, nothing reused."""
    env = dict(os.environ, PYRSPROF_READ_IDLE="1")
    res, d = run_waits(run_prs, outdir, [targets / "waits", 3], env=env)
    want = truth(res.out)
    got, n = waiter_split(export_folded, d / "profile.pyrs", thread_tids(res.out)["waiter"])
    assert abs(got - want) <= TOLERANCE, f"wait_a {got:.3f} sampled ({n} samples), {want:.3f} measured"
    assert stats(d)["reused"] == {"samples": 0, "native": 0, "lost": 0}
    assert stats(d)["read_asleep"] == 0


PY_VERSIONS = ["3.9", "3.12", "3.13"]


# ptrace on each, vm (the same frames read without stopping) on 3.12
@pytest.mark.parametrize("ver,mode", [(v, "ptrace") for v in PY_VERSIONS] + [("3.12", "vm")])
def test_python_waits_split(ver, mode, run_prs, outdir, export_folded):
    """waits.py: from 3.11 both waits block under the very same C frames; the Python frames tell
    them apart. The sampled split follows the measured one in both modes."""
    py = T.pyenv_python(ver)
    if not py:
        pytest.skip(f"CPython {ver} is not installed")
    res, d = run_waits(run_prs, outdir, [py, T.HERE / "waits.py", 4], mode=mode)
    want = truth(res.out)
    tids = {l.split()[2]: int(l.split()[1]) for l in res.out.splitlines() if l.startswith("tid ")}
    got, n = waiter_split(export_folded, d / "profile.pyrs", tids["waiter"])
    assert abs(got - want) <= TOLERANCE, f"wait_a {got:.3f} sampled ({n} samples), {want:.3f} measured"
    st = stats(d)
    assert st["reused"]["samples"] >= 0.3 * st["thread_samples"], st["reused"]


def test_idle_threads_not_stopped(run_prs, targets, outdir, export_folded):
    """blocked: a thread in nanosleep and one in read on a silent pipe, main in pthread_join.
    After the first ticks none of them is stopped again, and their samples keep the exact
    stacks (test_native_threads checks the same target's stacks in detail)."""
    d = outdir / "prof"
    res = run_prs(["run", "-r", 100, "-o", d, "--", targets / "blocked", 3], timeout=60)
    assert_clean(res)
    assert res.rc == 0, res.describe()
    st = stats(d)
    # 3 threads, ~300 ticks: read while the program starts (measured: ~30 samples, the same for
    # 3 s and 6 s), then each thread stopped once, checked once, and only reused
    read = st["thread_samples"] - st["reused"]["samples"] - st["reused"]["native"]
    assert st["thread_samples"] >= 800 and read <= 60, \
        f"{read} of {st['thread_samples']} samples read; reused {st['reused']}, errors {st['errors']}, " \
        f"missed ticks {st['missed_ticks']}"
    tids = thread_tids(res.out)
    leaves = {}
    for frames, c in export_folded(d / "profile.pyrs", view="wall", per_thread=True):
        root = thread_root(frames)
        if root and root[0] in (tids["sleeper"], tids["reader"]):
            leaves.setdefault(root[0], {}).setdefault(frames[-1].name, 0)
            leaves[root[0]][frames[-1].name] += c
    # (its first sample may catch a thread just created, still in clone3)
    for name, want in (("reader", {"[read]"}), ("sleeper", {"[clock_nanosleep]", "[nanosleep]"})):
        got = leaves[tids[name]]
        assert sum(c for k, c in got.items() if k in want) >= sum(got.values()) - 2, (name, got)


def test_vm_sleeping_python_reads_nothing(run_prs, outdir, export_folded):
    """vm mode, a 50-frame Python stack asleep: nearly every sample is the kept one (the stack is
    read again at least every 250 ms, in case a thread pyrsprof does not know started one), and
    the stack is exact: 49 frames of rec on its sleep line under <module>."""
    py = T.pyenv_python("3.12")
    if not py:
        pytest.skip("CPython 3.12 is not installed")
    t = T.Target(py, "recurse.py", 49, 3600)
    try:
        d = outdir / "prof"
        res = run_prs(["attach", t.pid, "--mode", "vm", "-r", 200, "-d", 2, "-o", d], timeout=60)
        assert_clean(res)
        assert res.rc == 0, res.describe()
    finally:
        t.stop()
    st = stats(d)
    n = st["thread_samples"]
    assert n >= 300 and st["reused"]["samples"] >= 0.9 * n, st
    recs = export_folded(d / "profile.pyrs", view="wall")
    assert sum(c for _, c in recs) == n
    sleep_line = T.marker_line("recurse.py", "SLEEP")
    for frames, c in recs:
        names = [(f.name, f.line) for f in frames if f.base == "recurse.py"]
        assert names[0][0] == "<module>" and len(names) == 50, names
        assert names[-1] == ("rec", sleep_line), names[-3:]
        assert frames[-1].name == "[clock_nanosleep]", frames[-1]
