# SPDX-License-Identifier: MIT
"""`pyrsprof attach` and `pyrsprof dump` on live processes started by the test: the target keeps
running with its output and exit code intact after a detach, a Ctrl-C, or a kill -9 of pyrsprof;
dump prints every thread once."""

import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import (ARTIFACTS, Result, assert_clean, check_echo_output, count_where,
                      has_frame, pid_gone, proc_state, thread_tids)


class Target:
    """A target started by the test (our child), its stdout captured in a file."""

    def __init__(self, argv, out_path):
        self.out_path = out_path
        with open(out_path, "wb") as out:
            self.p = subprocess.Popen([str(a) for a in argv], stdout=out,
                                      stderr=subprocess.DEVNULL)
        self.pid = self.p.pid

    def finish(self, timeout=30):
        try:
            rc = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            state = proc_state(self.pid)
            self.p.kill()
            pytest.fail(f"target {self.pid} did not finish (state {state})")
        return rc, self.out_path.read_bytes()

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


@pytest.fixture
def echo_target(targets, outdir):
    """echo_output for 4 s at 25 lines/s (100 lines), exit code 6."""
    t = Target([targets / "echo_output", "4", "25", "6"], outdir / "target.out")
    time.sleep(0.3)
    yield t
    t.kill()


def test_attach_detach_leaves_target_running(run_prs, echo_target, outdir):
    d = outdir / "p"
    t0 = time.monotonic()
    res = run_prs(["attach", echo_target.pid, "-d", 2, "-o", d], timeout=30)
    assert_clean(res)
    assert res.rc == 0, res.describe()
    assert time.monotonic() - t0 < 3.5, "attach -d 2 took too long"
    assert echo_target.p.poll() is None, "target ended while / after being profiled"
    assert proc_state(echo_target.pid) not in ("T", "t"), "target left stopped"
    rc, out = echo_target.finish()
    assert rc == 6
    check_echo_output(out, 100)
    for a in ARTIFACTS:
        assert (d / a).is_file(), f"{a} missing\n{res.describe()}"
    st = json.loads((d / "stats.json").read_text())
    assert st["thread_samples"] > 0, st


def test_attach_profile_shows_target_function(run_prs, export_folded, echo_target, outdir):
    """The attached profile contains the target's own busy() function (its only CPU work)."""
    d = outdir / "p"
    res = run_prs(["attach", echo_target.pid, "-d", 1.5, "-r", 200, "-o", d], timeout=30)
    assert res.rc == 0, res.describe()
    recs = export_folded(d / "profile.pyrs", view="wall")
    n, busy = sum(c for _, c in recs), count_where(recs, has_frame("busy"))
    # busy() is ~5 % of the target's time: ~15 of ~300 wall samples.
    assert busy > 0, f"busy() never seen in {n} samples"
    with_main = count_where(recs, has_frame("main"))
    assert with_main >= 0.9 * n, f"main in only {with_main} of {n} samples: " + \
        "; ".join(f"{c}x {';'.join(f.name for f in fr)}" for fr, c in recs
                  if not has_frame("main")(fr))[:1500]
    rc, out = echo_target.finish()
    assert rc == 6
    check_echo_output(out, 100)


def test_attach_ctrl_c_detaches(prs, echo_target, outdir):
    """SIGINT to pyrsprof attach (no -d): it stops, writes artifacts, exits 0; the target does
    not get the signal (different process group) and finishes normally."""
    d = outdir / "p"
    p = subprocess.Popen([prs, "attach", str(echo_target.pid), "-o", d],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    time.sleep(1.2)
    os.killpg(p.pid, signal.SIGINT)
    try:
        out, err = p.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        p.kill()
        pytest.fail("pyrsprof attach did not stop within 15 s of SIGINT")
    res = Result(p.args, p.returncode, out, err)
    assert_clean(res)
    assert res.rc == 0, res.describe()
    for a in ARTIFACTS:
        assert (d / a).is_file(), f"{a} missing\n{res.describe()}"
    assert echo_target.p.poll() is None
    rc, data = echo_target.finish()
    assert rc == 6
    check_echo_output(data, 100)


def test_attach_ends_when_target_exits(run_prs, targets, outdir):
    """attach without -d to a target that exits meanwhile: pyrsprof notices and ends (exit 0)."""
    t = Target([targets / "echo_output", "1.5", "20"], outdir / "t.out")
    try:
        time.sleep(0.3)
        res = run_prs(["attach", t.pid, "-o", outdir / "p"], timeout=20)
        assert_clean(res)
        assert res.rc == 0, res.describe()
        rc, out = t.finish()
        assert rc == 0
        check_echo_output(out, 30)
    finally:
        t.kill()


def test_attach_follows_new_threads(run_prs, export_folded, targets, outdir):
    """attach before threads4 creates its workers (it waits 0.8 s first): threads created while
    attached are followed and sampled."""
    t = Target([targets / "threads4", "2", "0.8"], outdir / "t.out")
    try:
        time.sleep(0.2)
        res = run_prs(["attach", t.pid, "-d", 2, "-o", outdir / "p", "-r", 100], timeout=20)
        assert res.rc == 0, res.describe()
        rc, out = t.finish()
        assert rc == 0
        tids = thread_tids(out.decode())
        assert len(tids) == 4
        recs = export_folded(outdir / "p" / "profile.pyrs", view="cpu")
        for fn in ("work_a", "work_b", "work_c", "work_d"):
            assert count_where(recs, has_frame(fn)) > 0, f"{fn} never sampled"
    finally:
        t.kill()


def test_kill9_during_attach_target_completes(prs, echo_target, outdir):
    p = subprocess.Popen([prs, "attach", str(echo_target.pid), "-r", "1000", "-o", outdir / "p"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    time.sleep(1.2)
    assert p.poll() is None, "pyrsprof attach ended early"
    p.kill()
    p.wait()
    time.sleep(0.3)
    assert not pid_gone(echo_target.pid)
    assert proc_state(echo_target.pid) not in ("T", "t"), "target left stopped by a dead tracer"
    rc, out = echo_target.finish()
    assert rc == 6
    check_echo_output(out, 100)


def test_dump_prints_every_thread(run_prs, targets, outdir):
    """dump on threads4: every thread's tid and name, its own work function, and the process
    keeps running to a normal end."""
    t = Target([targets / "threads4", "3"], outdir / "t.out")
    try:
        time.sleep(0.5)
        res = run_prs(["dump", t.pid], timeout=20)
        assert_clean(res)
        assert res.rc == 0, res.describe()
        assert t.p.poll() is None and proc_state(t.pid) not in ("T", "t")
        rc, out = t.finish()
        assert rc == 0
        tids = thread_tids(out.decode())
        text = res.out
        for name, fn in (("worker-a", "work_a"), ("worker-b", "work_b"),
                         ("worker-c", "work_c"), ("worker-d", "work_d")):
            assert str(tids[name]) in text and name in text, f"{name} missing from dump:\n{text}"
            # The thread's block: from its tid to the next thread's tid (or the end).
            starts = sorted(m.start() for tid in [*tids.values(), t.pid]
                            for m in re.finditer(rf"\b{tid}\b", text))
            at = re.search(rf"\b{tids[name]}\b", text).start()
            nxt = [s for s in starts if s > at]
            block = text[at:nxt[0] if nxt else len(text)]
            assert fn in block, f"{fn} not in {name}'s stack:\n{block}"
        assert str(t.pid) in text and "main" in text
    finally:
        t.kill()


def test_dump_rust_innermost_first(run_prs, targets, outdir):
    """dump on the Rust target: demangled frames, innermost first (hot_X before main)."""
    t = Target([targets / "cpu_split_rs", "3"], outdir / "t.out")
    try:
        time.sleep(0.5)
        # One dump is one instant: the program also spends a few percent in its clock_gettime
        # calls, so take up to 5 dumps until one is inside hot_a/hot_b. Each must be innermost
        # first: the program's innermost own frame comes before cpu_split::main.
        for attempt in range(5):
            res = run_prs(["dump", t.pid], timeout=20)
            assert_clean(res)
            assert res.rc == 0, res.describe()
            text = res.out
            assert "cpu_split::main" in text, text
            first_own = text.index("cpu_split::")
            assert first_own <= text.index("cpu_split::main"), f"not innermost first:\n{text}"
            hot = [text.find(f) for f in ("cpu_split::hot_a", "cpu_split::hot_b") if f in text]
            if hot:
                break
        assert hot, f"no hot function in 5 dumps; the last:\n{text}"
        assert min(hot) < text.index("cpu_split::main"), f"not innermost first:\n{text}"
        rc, _ = t.finish()
        assert rc == 0
    finally:
        t.kill()


def test_attach_to_stopped_process_leaves_it_stopped(run_prs, echo_target, outdir):
    """attach to a Ctrl-Z'd (SIGSTOPped) process: no hang, no crash, and after pyrsprof ends
    the process is still stopped (not resumed behind the user's back); SIGCONT then lets it
    finish intact."""
    os.kill(echo_target.pid, signal.SIGSTOP)
    time.sleep(0.2)
    assert proc_state(echo_target.pid) == "T"
    res = run_prs(["attach", echo_target.pid, "-d", 1, "-o", outdir / "p"], timeout=20)
    assert_clean(res)
    assert res.rc == 0, res.describe()
    time.sleep(0.2)
    assert proc_state(echo_target.pid) == "T", "the stopped process was resumed or left traced"
    os.kill(echo_target.pid, signal.SIGCONT)
    rc, out = echo_target.finish()
    assert rc == 6
    check_echo_output(out, 100)
