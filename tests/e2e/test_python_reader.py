# SPDX-License-Identifier: MIT
"""End-to-end tests of the CPython reader through tools/pystacks (memory reads only, no ptrace
stop), parametrized over every installed CPython, Debian's python3 and a venv. The truth comes from
the targets: marker comments give the lines, the targets print their own thread ids and measure
their own time split. Every target is started before the reader attaches to it."""
import collections
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "targets" / "py"))
import pyrs_testlib as T  # noqa: E402
from pyrs_testlib import python_or_skip  # noqa: E402
from conftest import steady_run  # noqa: E402

PARAMS = [pytest.param(py, id=name, marks=() if py else pytest.mark.skip(reason=why))
          for name, py, why in T.interpreters()]


@pytest.fixture(scope="module")
def pystacks():
    p = T.pystacks_path()
    if not p or not p.exists():
        pytest.skip("tools/pystacks is not built (make BUILD=... $BUILD/tools/pystacks)")
    return p


@pytest.mark.parametrize("py", PARAMS)
def test_chain_exact_frames_and_lines(py, pystacks):
    exe = python_or_skip(py)
    t = T.Target(exe, "chain.py", 30)
    try:
        rc, threads, err = T.pystacks_dump(t.pid)
        assert rc == 0, err
        assert len(threads) == 1, threads
        th = threads[0]
        assert th["tid"] == t.pid  # the main thread's tid is the pid
        names = [f[0] for f in th["frames"]]
        assert names == ["c", "b", "a", "main", "<module>"], th
        assert all(f[1] == "chain.py" for f in th["frames"])
        lines = [f[2] for f in th["frames"]]
        assert lines[1:] == [T.marker_line("chain.py", m) for m in ("CALL-C", "CALL-B", "CALL-A", "CALL-MAIN")]
        work = T.marker_line("chain.py", "WORK")
        assert lines[0] in (work - 1, work), lines  # the inner loop: its "for" line or its body
        # sampled: the body line is where most of the time goes
        rc, samples, err = T.pystacks_sample(t.pid, 200, 1.0)
        assert rc == 0, err
        leaves = collections.Counter(s[2][-1][2] for s in samples if s[2])
        assert len(samples) >= 100
        assert leaves.most_common(1)[0][0] == work, leaves
        assert all([f[0] for f in s[2]] == ["<module>", "main", "a", "b", "c"] for s in samples if s[2])
    finally:
        t.stop()


@pytest.mark.parametrize("py", PARAMS)
def test_recursion_300(py, pystacks):
    exe = python_or_skip(py)
    t = T.Target(exe, "recurse.py", 300, 30)
    try:
        rc, threads, err = T.pystacks_dump(t.pid)
        assert rc == 0, err
        fr = threads[0]["frames"]
        assert [f[0] for f in fr] == ["rec"] * 300 + ["<module>"], [f[0] for f in fr][:5]
        assert fr[0][2] == T.marker_line("recurse.py", "SLEEP")
        assert all(f[2] == T.marker_line("recurse.py", "RECURSE") for f in fr[1:300])
        assert not threads[0]["truncated"]
    finally:
        t.stop()


@pytest.mark.parametrize("py", PARAMS)
def test_four_threads_tids_and_stacks(py, pystacks):
    exe = python_or_skip(py)
    t = T.Target(exe, "threads4.py", "sleep", 30)
    try:
        tids = t.tids()
        rc, threads, err = T.pystacks_dump(t.pid)
        assert rc == 0, err
        by_tid = {th["tid"]: th for th in threads}
        assert set(by_tid) == set(tids.values()), (by_tid.keys(), tids)
        for name in ("alpha", "beta", "gamma", "delta"):
            fr = by_tid[tids[name]]["frames"]
            assert fr[0] == ("beta_inner" if name == "beta" else name, "threads4.py",
                             T.marker_line("threads4.py", "SLEEP-" + name)), fr
            if name == "beta":
                assert fr[1][0] == "beta"
            # the thread's outermost frame: threading's Thread._bootstrap (a qualname from 3.11)
            assert fr[-1][0] in ("_bootstrap", "Thread._bootstrap"), fr
        main = by_tid[tids["main"]]["frames"]
        assert main[-1][0] == "<module>" and main[-2][0] == "main"
        assert main[-2][2] == T.marker_line("threads4.py", "JOIN")
        # everybody sleeps or joins: nobody holds the GIL
        assert sum(th["gil"] for th in threads) == 0, threads
    finally:
        t.stop()


@pytest.mark.parametrize("py", PARAMS)
def test_gil_one_holder(py, pystacks):
    exe = python_or_skip(py)
    t = T.Target(exe, "threads4.py", "cpu", 30)
    try:
        tids = t.tids()
        workers = {tids[n] for n in ("alpha", "beta", "gamma", "delta")}
        rc, samples, err = T.pystacks_sample(t.pid, 200, 1.5)
        assert rc == 0, err
        # one line per thread-sample; 5 threads per sample
        assert len(samples) % 5 == 0 and len(samples) >= 5 * 100
        ticks = [samples[i:i + 5] for i in range(0, len(samples), 5)]
        holders = [sum(s[1] for s in tick) for tick in ticks]
        assert max(holders) <= 1, "two GIL holders in one sample"
        exact = sum(h == 1 for h in holders) / len(ticks)
        assert exact >= 0.9, "only %.0f%% of samples have exactly one holder" % (100 * exact)
        held_by = collections.Counter(s[0] for tick in ticks for s in tick if s[1])
        assert set(held_by) <= workers, (held_by, workers)
        assert len(held_by) >= 2, held_by  # the GIL moves between the spinning threads
        for tick in ticks:
            for tid, gil, fr in tick:
                if gil:
                    assert fr and fr[-1][0] == "spin", fr
    finally:
        t.stop()


@pytest.mark.parametrize("py", PARAMS)
def test_unicode_names(py, pystacks):
    exe = python_or_skip(py)
    script = "ünïcödé_名前.py"
    t = T.Target(exe, script, 30)
    try:
        rc, threads, err = T.pystacks_dump(t.pid)
        assert rc == 0, err
        fr = threads[0]["frames"]
        assert [f[0] for f in fr] == ["𠀀_astral", "日本語", "héllo_wörld", "<module>"], fr
        assert all(f[1] == script for f in fr)
        assert fr[0][2] == T.marker_line(script, "SLEEP")
        assert fr[1][2] == T.marker_line(script, "CALL-ASTRAL")
        assert fr[2][2] == T.marker_line(script, "CALL-JP")
    finally:
        t.stop()


@pytest.mark.parametrize("py", [p for p in PARAMS if p.id in T.LAYOUT_IDS])  # statistics: a version each layout
def test_split_within_5_points(py, pystacks):
    exe = python_or_skip(py)
    # ~2000 samples: the binomial spread is then about 1 point (at 500 samples it is 2)
    def once():
        t = T.Target(exe, "split.py", 3)
        try:
            rc, samples, err = T.pystacks_sample(t.pid, 800, 2.5)
            assert rc == 0, err
            return samples, t.rest()
        finally:
            t.stop()
    samples, truth = steady_run(once)  # again if the host stole CPU meanwhile
    line = [l for l in truth.splitlines() if l.startswith("truth ")][0]
    want = dict(kv.split("=") for kv in line.split()[1:])
    got = collections.Counter()
    for _, _, fr in samples:
        names = [f[0] for f in fr]
        for fn in ("hot_a", "hot_b"):
            if fn in names:
                got[fn] += 1
    n = got["hot_a"] + got["hot_b"]
    assert n >= 1000, got
    share_a = got["hot_a"] / n
    assert abs(share_a - float(want["hot_a"])) <= 0.05, (share_a, want)


def test_not_python_and_python2(pystacks):
    import subprocess
    p = subprocess.Popen(["sleep", "30"])
    try:
        rc, threads, err = T.pystacks_dump(p.pid)
        assert rc == 1 and "no CPython found" in err and "Traceback" not in err, err
    finally:
        p.kill()
        p.wait()
    py2 = T.pyenv_root() / "versions"
    cands = sorted(py2.glob("2.7.*/bin/python2.7")) if py2.is_dir() else []
    if not cands:
        pytest.skip("no pyenv CPython 2.7")
    p = subprocess.Popen([str(cands[-1]), "-c", "import time; time.sleep(30)"])
    try:
        import time
        time.sleep(0.3)
        rc, threads, err = T.pystacks_dump(p.pid)
        assert rc == 1 and "not supported" in err and "2." in err, err
    finally:
        p.kill()
        p.wait()


def test_generic_debug_offsets_path_3_13(pystacks):
    """3.13 through _Py_DebugOffsets only (the generated 3.13 row is not used for what the debug
    offsets carry), then through the table only: the same frames."""
    exe = T.pyenv_python("3.13")
    if not exe:
        pytest.skip("pyenv CPython 3.13 is not installed")
    t = T.Target(exe, "threads4.py", "sleep", 30)
    try:
        rc1, th1, err1 = T.pystacks_dump(t.pid, env={"PYRSPROF_PY_DEBUG_OFFSETS_ONLY": "1"})
        rc2, th2, err2 = T.pystacks_dump(t.pid, env={"PYRSPROF_PY_NO_DEBUG_OFFSETS": "1"})
        assert rc1 == 0 and "layout debug-offsets" in err1, err1
        assert rc2 == 0 and "layout table" in err2, err2
        key = lambda th: th["tid"]
        assert sorted(th1, key=key) == sorted(th2, key=key)
        assert len(th1) == 5
    finally:
        t.stop()


@pytest.mark.parametrize("py", PARAMS)
def test_stripped_binary_fallbacks(py, pystacks):
    """With the anchor symbols and the .PyRuntime section ignored (as on a fully stripped binary),
    the runtime is found by scanning .data/.bss (3.7+) or by decoding PyInterpreterState_Head
    (3.6), and the stacks are the same as through the symbols."""
    exe = python_or_skip(py)
    t = T.Target(exe, "threads4.py", "sleep", 30)
    try:
        rc1, th1, err1 = T.pystacks_dump(t.pid)
        minor = int(err1.split(" python ")[1].split(".")[1])
        env = {"PYRSPROF_PY_IGNORE_ANCHORS": "1+" if minor == 6 else "1"}
        rc2, th2, err2 = T.pystacks_dump(t.pid, env=env)
        assert rc1 == 0 and rc2 == 0, (err1, err2)
        assert ("PyInterpreterState_Head code" if minor == 6 else "scan of .data/.bss") in err2, err2
        key = lambda th: th["tid"]
        assert sorted(th1, key=key) == sorted(th2, key=key)
        assert len(th2) == 5
    finally:
        t.stop()


@pytest.mark.parametrize("py", PARAMS)
def test_reused_code_addresses_never_mislabel(py, pystacks):
    """churn.py runs f_0, f_1, ... each in a fresh code object that is freed after ~10 ms; freed
    code objects' addresses get reused. The sampled N must never go back in time (a stale cache
    entry would name an older function), and the cache must have seen reused addresses."""
    exe = python_or_skip(py)
    t = T.Target(exe, "churn.py", 3)
    try:
        exe_ps = T.pystacks_path()
        import subprocess
        r = subprocess.run([str(exe_ps), "-r", "500", "-d", "2", "--stats", str(t.pid)],
                           capture_output=True, text=True, timeout=60)
    finally:
        t.stop()
    assert r.returncode == 0, r.stderr
    seq = [int(m) for m in __import__("re").findall(r"\bf_(\d{6}) \(", r.stdout)]
    assert len(set(seq)) >= 50, len(set(seq))
    back = [(a, b) for a, b in zip(seq, seq[1:]) if b < a]
    assert not back, back[:5]
    stale = int(r.stderr.split("code_stale ")[1].split()[0])
    assert stale >= 10, r.stderr  # the test did exercise address reuse
