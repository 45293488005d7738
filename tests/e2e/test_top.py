# SPDX-License-Identifier: MIT
"""`pyrsprof top`: the live table, driven in a real terminal (tmux: send-keys, capture-pane) and
written as text when standard output is not a terminal.

Truth: split.py measures the CPU time of hot_a and hot_b itself and prints the split at its end
("truth hot_a=... hot_b=..."); its HOT: markers give their lines. The hot function (hot_b, about
two thirds) must top the table sorted by own time, with its share of the two within 5 points (or
3 standard errors) of the truth; quitting must leave the program running (not stopped) to its
correct end, and the terminal as it was (normal screen, cursor shown).
"""

import contextlib
import os
import re
import signal
import shutil
import subprocess
import time
import uuid

import pytest

from conftest import TARGET_SRC, assert_clean, markers, proc_state, wait_gone

SPLIT = TARGET_SRC / "py" / "split.py"
PY = "/usr/bin/python3"
ROW = re.compile(r"^\s*([0-9.]+)%\s+([0-9.]+)%\s+([0-9.]+)s\s+([0-9.]+)s\s+(.+?)\s*$")


def rows_of(text: str):
    """The rows of the last table in text: [(own%, total%, own s, total s, label)]."""
    tables = re.split(r"^.*%Own.*%Total.*$", text, flags=re.M)
    assert len(tables) > 1, f"no table in:\n{text}"
    rows = []
    for line in tables[-1].splitlines():
        m = ROW.match(line)
        if not m:
            if rows:
                break
            continue
        rows.append((float(m.group(1)), float(m.group(2)), float(m.group(3)), float(m.group(4)), m.group(5)))
    return rows


def hot_share(rows, suffix=" (split.py)"):
    """(hot_b's share of hot_a + hot_b by own time, tolerance, samples behind it at rate 200)."""
    own = {label: o for _, _, o, _, label in rows}
    a, b = own.get("hot_a" + suffix, 0.0), own.get("hot_b" + suffix, 0.0)
    n = (a + b) * 200
    assert n >= 100, rows
    share = b / (a + b)
    return share, max(0.05, 3 * (share * (1 - share) / n) ** 0.5)


def truth_b(text: str) -> float:
    m = re.search(r"truth hot_a=([0-9.]+) hot_b=([0-9.]+)", text)
    assert m, text
    return float(m.group(2))


class Tmux:
    """A tmux server of our own (its own socket), one session of a fixed size."""

    def __init__(self, command: str, width=120, height=40):
        if not shutil.which("tmux"):
            pytest.skip("tmux is not installed (scripts/install-deps.sh)")
        self.sock = f"prs-top-{uuid.uuid4().hex[:8]}"
        self.tmux("new-session", "-d", "-x", str(width), "-y", str(height), command)

    def tmux(self, *args):
        return subprocess.run(["tmux", "-L", self.sock, "-f", "/dev/null", *args], capture_output=True,
                              text=True, timeout=20, check=True).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p")

    def history(self) -> str:
        return self.tmux("capture-pane", "-p", "-S", "-200")

    def flags(self):
        """(alternate screen on, cursor shown)."""
        alt, cur = self.tmux("display", "-p", "#{alternate_on} #{cursor_flag}").split()
        return alt == "1", cur == "1"

    def wait(self, pred, timeout, what, history=False):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            text = self.history() if history else self.screen()
            if pred(text):
                return text
            time.sleep(0.2)
        pytest.fail(f"{what} within {timeout} s; screen:\n{self.history()}")

    def close(self):
        subprocess.run(["tmux", "-L", self.sock, "kill-server"], capture_output=True, timeout=20)


def enough_samples(text, n=0.5):
    """The table has hot_a and hot_b with n seconds of own time between them."""
    try:
        rows = rows_of(text)
    except AssertionError:
        return False
    own = {label: o for _, _, o, _, label in rows}
    return own.get("hot_a (split.py)", 0) + own.get("hot_b (split.py)", 0) >= n


def test_top_launch_in_a_terminal(prs, tmp_path):
    t = Tmux(f"{prs} top -r 200 -- {PY} {SPLIT} 6; echo TOP-EXIT=$?; sleep 90")
    try:
        screen = t.wait(enough_samples, 60, "no table with 0.5 s of hot_a + hot_b")
        assert t.flags() == (True, False), "top draws on the alternate screen, cursor hidden"
        assert "Press q to quit" in screen and "[OwnTime]" in screen, screen
        rows = rows_of(screen)
        assert rows[0][4] == "hot_b (split.py)", screen  # sorted by own time: the hot one first
        share, tol = hot_share(rows)
        # keys: 1 sorts by %Own, L shows lines (the HOT: markers' lines)
        t.tmux("send-keys", "1", "L")
        screen = t.wait(lambda s: "[%Own]" in s and "(file:line)" in s, 10, "keys 1 and L not taken")
        line_b = markers("py/split.py", "HOT:hot_b")
        t.wait(lambda s: f"hot_b (split.py:{line_b})" in s, 10, "no line row for hot_b's hot line")
        pid = int(re.search(r"\[(\d+)\] ·", screen).group(1))
        t.tmux("send-keys", "q")
        after = t.wait(lambda s: "runs on: waiting" in s, 10, "q did not stop top", history=True)
        assert proc_state(pid) not in ("T", "t"), "the program was left stopped"
        assert t.flags() == (False, True), "terminal not restored (alternate screen, cursor)"
        after = t.wait(lambda s: "TOP-EXIT=" in s, 60, "the program did not end", history=True)
        assert "TOP-EXIT=0" in after, after  # its own exit status, through top
        truth = truth_b(after)  # the program ran to its end and printed its truth
        assert abs(share - truth) <= tol, (share, truth, tol, screen)
        assert "Traceback" not in after and "Sanitizer" not in after, after
    finally:
        t.close()


@contextlib.contextmanager
def split_under_top(prs, secs, *opts):
    """split.py SECS running, and `top [opts] PID` on it in a tmux session: yields (target, tmux)."""
    target = subprocess.Popen([PY, str(SPLIT), str(secs)], stdout=subprocess.PIPE, text=True)
    t = None
    try:
        assert target.stdout.readline() == "ready\n"
        t = Tmux(f"{prs} top {' '.join(opts)} {target.pid}; echo TOP-EXIT=$?; sleep 90")
        yield target, t
    finally:
        if t:
            t.close()
        if target.poll() is None:
            target.kill()
            target.wait()


def assert_left_running(target, t, after):
    """top ended with 0, the terminal is back, the process was not left stopped and ends well."""
    assert "TOP-EXIT=0" in after, after
    assert t.flags() == (False, True), "terminal not restored (alternate screen, cursor)"
    assert proc_state(target.pid) not in ("T", "t"), "the process was left stopped"
    out, _ = target.communicate(timeout=60)  # it runs on to its end
    assert target.returncode == 0
    return out


def test_top_attach_then_quit_leaves_it_running(prs):
    with split_under_top(prs, 5, "-r", "200") as (target, t):
        screen = t.wait(enough_samples, 60, "no table with 0.5 s of hot_a + hot_b")
        assert rows_of(screen)[0][4] == "hot_b (split.py)", screen
        share, tol = hot_share(rows_of(screen))
        t.tmux("send-keys", "q")
        after = t.wait(lambda s: "TOP-EXIT=" in s, 10, "q did not end top", history=True)
        out = assert_left_running(target, t, after)
        assert abs(share - truth_b(out)) <= tol, (share, out, tol)


def test_top_sigterm_restores_the_terminal(prs):
    with split_under_top(prs, 5) as (target, t):
        t.wait(lambda s: "%Own" in s, 30, "no table")
        shell = int(t.tmux("display", "-p", "#{pane_pid}"))
        kids = [int(x) for x in open(f"/proc/{shell}/task/{shell}/children").read().split()]
        assert len(kids) == 1, kids
        os.kill(kids[0], signal.SIGTERM)
        after = t.wait(lambda s: "TOP-EXIT=" in s, 10, "SIGTERM did not end top", history=True)
        assert wait_gone(kids[0], 5)
        assert_left_running(target, t, after)


@pytest.mark.parametrize("mode", ["ptrace", "vm", "preload"])
def test_top_plain_tables(run_prs, mode):
    res = run_prs(["top", "-r", 200, "--mode", mode, "--", PY, SPLIT, 4], timeout=60)
    assert_clean(res)
    assert res.rc == 0, res.describe()
    tables = re.findall(r"^pyrsprof top: .*$", res.out, re.M)
    assert 3 <= len(tables) <= 8, res.out  # one a second, and the whole run's
    assert "\033" not in res.out  # no terminal codes in a pipe
    assert "the whole run:" in res.out
    rows = rows_of(res.out)  # the whole run's table
    assert rows[0][4] == "hot_b (split.py)", res.out
    share, tol = hot_share(rows)
    assert abs(share - truth_b(res.out)) <= tol, (share, res.out)
    # %Own of the whole run: hot_b's own samples among all, as its own time says
    own_b = rows[0][0] / 100
    total_own = sum(r[2] for r in rows)
    assert abs(own_b - rows[0][2] / total_own) <= 0.02, rows


def test_top_lines_and_filters(run_prs):
    res = run_prs(["top", "-r", 200, "--lines", "--gil", "--", PY, SPLIT, 3], timeout=60)
    assert res.rc == 0, res.describe()
    labels = [r[4] for r in rows_of(res.out)]
    assert f"hot_b (split.py:{markers('py/split.py', 'HOT:hot_b')})" in labels, res.out
    res = run_prs(["top", "--tid", 1, "-d", 1.5, "--", PY, SPLIT, 2], timeout=60)
    assert res.rc == 0, res.describe()
    assert rows_of(res.out) == [], res.out  # no thread 1: nothing counted


def test_top_bad_input(run_prs):
    for args, words in ((["top"], ["PID"]), (["top", "0"], []), (["top", "--pid", "x", "1"], ["--pid"]),
                        (["top", "--mode", "nope", "1"], ["--mode"]), (["top", "1", "2"], ["unexpected"]),
                        (["top", "--mode", "preload", "1"], ["preload", "-- CMD"])):
        res = run_prs(args)
        assert_clean(res)
        assert res.rc == 2, res.describe()
        lines = [l for l in res.err.splitlines() if l.strip()]
        assert len(lines) >= 1 and all(w in res.err for w in words), res.describe()
    res = run_prs(["top", "--", "/nonexistent/prog"])
    assert res.rc == 127, res.describe()
