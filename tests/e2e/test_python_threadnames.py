# SPDX-License-Identifier: MIT
"""Thread names from `threading` (issue 3, item 3), on every installed CPython, Debian's python3
and a venv: `pyrsprof dump` shows each thread's threading name, the profile's thread table holds
it (folded --per-thread roots, in both sampling modes), a rename while profiling is picked up,
and a thread threading does not know keeps the kernel's name. Truth: the names the target gave
its threads, printed by the target itself (tests/targets/py/threadnames.py) — one for each place
a Thread's attributes can live (shared-key values, a dict of its own, a subclass with 40
attributes) and each kind of str (ASCII, UCS-2, UCS-4, 300 characters, control characters)."""
import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "targets" / "py"))
import pyrs_testlib as T  # noqa: E402
from conftest import assert_clean, folded_text  # noqa: E402
from test_python_cli import PARAMS, parse_dump, python_cli, python_or_skip  # noqa: E402,F401

RENAMED = {"before": "after"}  # renamed by the target right after start


def start(exe, *args):
    t = T.Target(exe, "threadnames.py", *args)
    names = {}
    for line in t.lines:
        if line.startswith("tid "):
            _, tid, js = line.split(" ", 2)
            name = json.loads(js)
            names[int(tid)] = RENAMED.get(name, name)
    assert len(names) == 11, t.lines
    return t, names


def comm(pid, tid):
    return Path("/proc/%d/task/%d/comm" % (pid, tid)).read_text().rstrip("\n")


def dump_text(name):
    """How dump prints a name: control characters as \\xNN."""
    return "".join("\\x%02x" % ord(c) if ord(c) < 0x20 or ord(c) == 0x7f else c for c in name)


DEBUG_OFFSETS_ONLY = [pytest.param(p.values[0], "1", id=p.id + "-debug-offsets-only", marks=p.marks)
                      for p in PARAMS if p.id == "pyenv-3.13"]


@pytest.mark.parametrize("py,dbg_only", [pytest.param(p.values[0], "", id=p.id, marks=p.marks) for p in PARAMS]
                         + DEBUG_OFFSETS_ONLY)
def test_dump_shows_threading_names(py, dbg_only, python_cli, run_prs):
    """dbg_only: 3.13 read through its _Py_DebugOffsets alone (the path of 3.14+)."""
    exe = python_or_skip(py)
    t, names = start(exe, 30)
    try:
        env = dict(os.environ, PYRSPROF_PY_DEBUG_OFFSETS_ONLY=dbg_only) if dbg_only else None
        res = run_prs(["dump", t.pid], timeout=60, env=env)
        assert_clean(res)
        assert res.rc == 0, res.describe()
        got = {th["tid"]: th["name"] for th in parse_dump(res.out)}
        assert set(got) == set(names), res.out
        for tid, name in names.items():
            want = dump_text(name) if name is not None else comm(t.pid, tid)
            assert got[tid] == want, "thread %d: want %r, got %r" % (tid, want, got[tid])
        assert "\x1b" not in res.out  # the control characters of a name never reach the terminal
    finally:
        t.stop()


def folded_roots(export_folded, pyrs):
    """{tid: name} from the "thread <tid> (<name>)" roots of the per-thread wall-clock export."""
    roots = {}
    for frames, _ in export_folded(pyrs, view="wall", lines=False, per_thread=True):
        head = frames[0].name
        assert head.startswith("thread "), head
        tid, _, rest = head[len("thread "):].partition(" ")
        roots[int(tid)] = rest[1:-1] if rest.startswith("(") and rest.endswith(")") else None
    return roots


# ptrace mode on every interpreter, vm mode (the same name reader) on one per frame layout
@pytest.mark.parametrize("mode,py", [pytest.param(m, *p.values, id=f"{p.id}-{m}", marks=p.marks)
                                     for m in ("ptrace", "vm") for p in PARAMS
                                     if m == "ptrace" or p.id in T.LAYOUT_IDS])
def test_profile_thread_table_has_threading_names(mode, py, python_cli, run_prs, export_folded, outdir):
    exe = python_or_skip(py)
    t, names = start(exe, 30)
    try:
        d = outdir / "prof"
        res = run_prs(["attach", t.pid, "-d", "1", "-r", "50", "-o", d, "--mode", mode], timeout=60)
        assert_clean(res)
        assert res.rc == 0, res.describe()
        roots = folded_roots(export_folded, d / "profile.pyrs")
        assert set(roots) == set(names), roots
        for tid, name in names.items():
            want = folded_text(name) if name is not None else comm(t.pid, tid)
            assert roots[tid] == want, "thread %d: want %r, got %r" % (tid, want, roots[tid])
    finally:
        t.stop()


@pytest.mark.parametrize("py", [p for p in PARAMS if p.id in ("pyenv-3.12", "debian-python3")])
def test_rename_while_profiling(py, python_cli, run_prs, export_folded, outdir):
    """The target renames "early" to "renamed-late" 1 s after it is ready; names are re-read every
    2 s, so a 4 s recording ends with the new name (the exports take a thread's newest name)."""
    exe = python_or_skip(py)
    t, names = start(exe, 30, 1.0)
    try:
        tid = next(k for k, v in names.items() if v == "early")
        d = outdir / "prof"
        res = run_prs(["attach", t.pid, "-d", "4", "-r", "50", "-o", d, "--stats"], timeout=60)
        assert_clean(res)
        assert res.rc == 0, res.describe()
        assert folded_roots(export_folded, d / "profile.pyrs")[tid] == "renamed-late"
        # read on the first tick, every 2 s, and every 250 ms while the raw _thread thread has no
        # name: in 4 s at least 3 and at most 4 / 0.25 + 2
        st = json.loads((d / "stats.json").read_text())
        assert 3 <= st["py_name_reads"] <= 18, st["py_name_reads"]
        assert st["py_names_us"]["n"] == st["py_name_reads"], st["py_names_us"]
        res = run_prs(["export", d / "profile.pyrs", "--format", "speedscope", "--view", "wall"], timeout=60)
        assert res.rc == 0, res.describe()
        titles = [p["name"] for p in json.loads(res.out)["profiles"]]
        assert "thread %d (renamed-late)" % tid in titles, titles
    finally:
        t.stop()


BRIEF = """
import threading, time
def spin(s):
    end = time.perf_counter() + s
    while time.perf_counter() < end:
        pass
spin(0.2)
t = threading.Thread(target=spin, args=(0.15,), name="brief")
t.start()
t.join()
spin(0.3)
"""


@pytest.mark.parametrize("py", [p for p in PARAMS if p.id == "pyenv-3.12"])
def test_a_thread_that_lives_150_ms_is_named(py, python_cli, run_prs, export_folded, outdir):
    """A new thread asks for the names again 20 ms after the last read (while the reads take
    under 1/400 of the time), not 250 ms: one that lives 150 ms, then ends, gets its name (it
    read as a bare thread id before: the 250 ms refresh came after it had left threading)."""
    exe = python_or_skip(py)
    d = outdir / "prof"
    res = run_prs(["run", "-r", "100", "-o", d, "--", exe, "-c", BRIEF], timeout=60)
    assert res.rc == 0, res.describe()
    roots = folded_roots(export_folded, d / "profile.pyrs")
    assert sorted(n for n in roots.values() if n) == ["MainThread", "brief"], roots
