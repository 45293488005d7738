# SPDX-License-Identifier: MIT
"""GIL waits, told apart from lock waits, on every installed CPython 3.6-3.13 and Debian's python3.

The truth is the kernel's and the debugger's, never pyrsprof's: the futex word each thread of the
target sleeps on (/proc/TID/syscall: "202 UADDR OP ..."), and where gdb says the GIL's condition
variable is (the pyenv builds carry debug info; a static `p &...cond` in the interpreter's file,
plus its load address from /proc/PID/maps). Targets: tests/targets/py/gil.py."""
import collections
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "targets" / "py"))
import pyrs_testlib as T  # noqa: E402

INTERPRETERS = [(name, py, why) for name, py, why in T.interpreters() if name != "venv"]
PARAMS = [pytest.param(py, id=name, marks=() if py else pytest.mark.skip(reason=why))
          for name, py, why in INTERPRETERS]
FUTEX = 202


def python_or_skip(py):
    exe = T.resolve(py)
    if not exe:
        pytest.skip("interpreter not available: %s" % py)
    return exe


def minor_of(exe):
    out = subprocess.check_output([str(exe), "-c", "import sys; print(sys.version_info[1])"], text=True)
    return int(out)


def futex_words(pid, rounds=60, pause=0.005):
    """{tid: Counter(uaddr)} of the threads found blocked in futex, over rounds reads of every
    thread's /proc/PID/task/TID/syscall."""
    seen = collections.defaultdict(collections.Counter)
    for _ in range(rounds):
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                w = Path("/proc/%d/task/%s/syscall" % (pid, tid)).read_text().split()
            except OSError:
                continue
            if w and w[0] == str(FUTEX):
                seen[int(tid)][int(w[1], 16)] += 1
        time.sleep(pause)
    return seen


def gil_words(pid):
    """The ranges `pystacks PID` prints on its "gil words" line: [(lo, hi)]."""
    r = subprocess.run([str(T.pystacks_path()), str(pid)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    line = next(l for l in r.stdout.splitlines() if l.startswith("gil words"))
    return [tuple(int(x, 16) for x in m.groups()) for m in re.finditer(r"0x([0-9a-f]+)-0x([0-9a-f]+)", line)]


def in_ranges(a, ranges):
    return any(lo <= a < hi for lo, hi in ranges)


def gdb_cond(pid, minor):
    """Where gdb says the GIL's condition variable is in process pid (None when gdb cannot tell:
    no gdb, or no debug info, as for Debian's stripped python3)."""
    gdb = shutil.which("gdb")
    if not gdb:
        return None
    expr = {6: "&gil_cond"}.get(minor, "&_PyRuntime.ceval.gil.cond" if minor <= 11
                                else "&_PyRuntime._main_interpreter._gil.cond")
    # the pyenv builds keep the interpreter in libpython (linked at 0: the load address of its
    # first mapping is the bias); Debian's python3 has it in the stripped executable
    for line in Path("/proc/%d/maps" % pid).read_text().splitlines():
        w = line.split()
        path = w[5] if len(w) > 5 else ""
        if os.path.basename(path).startswith("libpython") and int(w[2], 16) == 0:
            r = subprocess.run([gdb, "-batch", "-nx", path, "-ex", "p " + expr], capture_output=True,
                               text=True, timeout=60)
            m = re.search(r"\) (0x[0-9a-f]+) <", r.stdout)
            return int(w[0].split("-")[0], 16) + int(m.group(1), 16) if m else None
    return None


@pytest.mark.parametrize("py", PARAMS)
def test_gil_words_are_where_waiters_sleep(py):
    """4 pure-Python threads: the words their futex waits sleep on are the reader's GIL words, and
    its range starts at the condition variable gdb names."""
    exe = python_or_skip(py)
    if not T.pystacks_path():
        pytest.skip("tools/pystacks is not built")
    minor = minor_of(exe)
    t = T.Target(exe, "gil.py", "gil", 4, 30)
    try:
        ranges = gil_words(t.pid)
        seen = futex_words(t.pid)
        cond = gdb_cond(t.pid, minor)
    finally:
        t.stop()
    assert ranges, "the reader found no GIL on 3.%d" % minor
    workers = {tid: c for tid, c in seen.items() if tid != t.pid}
    waits = sum(sum(c.values()) for c in workers.values())
    assert waits >= 30, "the workers were seen waiting %d times only: %s" % (waits, dict(seen))
    on_gil = sum(n for c in workers.values() for a, n in c.items() if in_ranges(a, ranges))
    assert on_gil >= 0.9 * waits, (["0x%x-0x%x" % r for r in ranges],
                                   {tid: {hex(a): n for a, n in c.items()} for tid, c in workers.items()})
    # the word waiters sleep on most: the condvar's __g_signals, cond + 40 or + 44 (glibc 2.36)
    top = collections.Counter()
    for c in workers.values():
        top.update(c)
    word = top.most_common(1)[0][0]
    lo = next(lo for lo, hi in ranges if lo <= word < hi)
    assert word - lo in (40, 44), "top word 0x%x is range start + %d" % (word, word - lo)
    if cond is not None:
        assert lo == cond, "the range starts at 0x%x, gdb's cond is at 0x%x" % (lo, cond)
    # the main thread joins: a futex wait on a lock, never a GIL word
    assert not any(in_ranges(a, ranges) for a in seen.get(t.pid, {})), seen.get(t.pid)
