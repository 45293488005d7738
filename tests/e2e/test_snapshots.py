# SPDX-License-Identifier: MIT
"""Snapshots of a recording while it runs (`kill -USR1 <pyrsprof>`, `--snapshot-every SEC`).

Truth: split.py measures its own CPU split between hot_a and hot_b and prints it. A snapshot is
the profile so far: its graphs and profile parse and hold fewer samples than the final ones, and
more than the snapshot before (wall samples: on-CPU ones grow only when the program gets a CPU); the final recording is that of a run without snapshots (the same
split within 5 points of the truth); the ticks a snapshot delays are counted as missed.
"""

import json
import os
import re
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from conftest import TARGET_SRC, assert_bad_input, assert_clean

SPLIT = TARGET_SRC / "py" / "split.py"
PY = "/usr/bin/python3"
NS = {"s": "http://www.w3.org/2000/svg"}
SNAP_LINE = re.compile(r"^pyrsprof: snapshot (\d+) at ([0-9.]+) s: (\S+) \(sampling paused (\d+) ms", re.M)


def svg_total(path: Path) -> int:
    """The sample count of a flame graph (it must be well-formed XML)."""
    g = ET.parse(path).getroot().find(".//s:g[@id='frames']", NS)
    assert g is not None, f"{path}: no frames"
    return int(g.get("data-total"))


def split_of(recs):
    """(hot_a's share of hot_a + hot_b, the tolerance: 5 points or 3 standard errors of it)."""
    a = sum(c for fr, c in recs if any(f.name == "hot_a" for f in fr))
    b = sum(c for fr, c in recs if any(f.name == "hot_b" for f in fr))
    assert a + b >= 100, (a, b)
    share = a / (a + b)
    return share, max(0.05, 3 * (share * (1 - share) / (a + b)) ** 0.5)


def truth_a(stdout: str) -> float:
    m = re.search(r"^truth hot_a=([0-9.]+) hot_b=", stdout, re.M)
    assert m, stdout
    return float(m.group(1))


RATE = 500


def run_with_usr1(prs, out: Path, at=(1.3, 2.6), secs=4.0, rate=RATE):
    """`pyrsprof run split.py` with SIGUSR1 sent to pyrsprof at the given seconds after "ready"
    (or once the snapshot before has appeared)."""
    p = subprocess.Popen([str(prs), "run", "-r", str(rate), "-o", str(out), "--", PY, str(SPLIT), str(secs)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        first = p.stdout.readline()
        assert first == b"ready\n", first
        t0 = time.monotonic()
        for n, t in enumerate(at, 1):
            time.sleep(max(0.0, t0 + t - time.monotonic()))
            os.kill(p.pid, signal.SIGUSR1)
            # a signal that comes during a snapshot is taken by it: wait for this one first
            while not list(out.glob(f"snapshots/{n:03d}-*")) and time.monotonic() < t0 + 30:
                time.sleep(0.02)
        rest, err = p.communicate(timeout=60)
    except BaseException:
        os.killpg(p.pid, signal.SIGKILL)
        raise
    return p.returncode, (first + rest).decode(), err.decode()


def test_usr1_snapshots_while_recording(prs, run_prs, export_folded, tmp_path):
    rc, out, err = run_with_usr1(prs, tmp_path / "snap")
    assert rc == 0, err  # the program was not signalled: SIGUSR1 is pyrsprof's own
    assert "Traceback" not in err and "Sanitizer" not in err, err
    truth = truth_a(out)
    lines = SNAP_LINE.findall(err)
    assert [int(n) for n, *_ in lines] == [1, 2], err
    snaps = sorted((tmp_path / "snap" / "snapshots").iterdir())
    assert [s.name for s in snaps] == [Path(p).name for _, _, p, _ in lines], (snaps, err)
    # no hidden half-built folder left behind
    assert all(re.fullmatch(r"\d{3}-\d+\.\ds", s.name) for s in snaps), snaps
    final = tmp_path / "snap"
    final_cpu, final_folded = svg_total(final / "cpu.svg"), export_folded(final, view="cpu", lines=False)
    prev, prev_wall = 0, 0
    for s in snaps:
        for f in ("profile.pyrs", "cpu.svg", "wall.svg", "stats.json", "phase1.json", "phase4.json"):
            assert (s / f).is_file(), (s, f)
        json.loads((s / "stats.json").read_text())
        cpu = svg_total(s / "cpu.svg")
        folded = sum(c for _, c in export_folded(s, view="cpu", lines=False))
        assert folded == cpu, (s, folded, cpu)
        wall = svg_total(s / "wall.svg")
        # wall samples grow with time whatever the load; on-CPU ones only when it gets a CPU
        assert prev <= cpu <= final_cpu, (s, prev, cpu, final_cpu)
        assert prev_wall < wall < svg_total(final / "wall.svg"), (s, prev_wall, wall)
        prev, prev_wall = cpu, wall
    assert sum(c for _, c in final_folded) == final_cpu
    # the ticks each snapshot delayed are counted as missed (a tick a period late is not missed)
    rate = RATE
    delayed = sum(max(0, int(int(ms) / 1000 * rate) - 2) for *_, ms in lines)
    missed = json.loads((final / "stats.json").read_text())["missed_ticks"]
    assert missed >= delayed, (missed, delayed, err)
    # the final profile is as exact as a run without snapshots: the split the program measured,
    # within 5 points (runs without snapshots are held to the same in test_python_cli.py)
    with_snaps, tol1 = split_of(final_folded)
    assert abs(with_snaps - truth) <= tol1, (with_snaps, truth, tol1)


def test_snapshot_every_second(run_prs, export_folded, tmp_path):
    d = tmp_path / "every"
    res = run_prs(["run", "--snapshot-every", 1, "-o", d, "--", PY, SPLIT, 3.5])
    assert_clean(res)
    assert res.rc == 0, res.describe()
    snaps = sorted((d / "snapshots").iterdir())
    assert [s.name[:4] for s in snaps] == ["001-", "002-", "003-"], (snaps, res.err)
    # wall samples grow with time whatever the load; on-CPU ones only when the program gets a CPU
    wall = [svg_total(s / "wall.svg") for s in snaps] + [svg_total(d / "wall.svg")]
    cpu = [svg_total(s / "cpu.svg") for s in snaps] + [svg_total(d / "cpu.svg")]
    assert wall == sorted(wall) and len(set(wall)) == 4, wall
    assert cpu == sorted(cpu), cpu
    assert "3 snapshots paused sampling" in res.err, res.err


def test_snapshot_every_refuses_bad_values(run_prs, tmp_path):
    for bad in ("0", "-1", "x", "0.5"):
        res = run_prs(["run", "--snapshot-every", bad, "-o", tmp_path / "bad", "--", "true"])
        assert_bad_input(res, 2, "--snapshot-every")
        assert not (tmp_path / "bad").exists()


def test_force_replaces_the_snapshots_too(run_prs, tmp_path):
    d = tmp_path / "rec"
    res = run_prs(["run", "--snapshot-every", 1, "-o", d, "--", PY, SPLIT, 1.5])
    assert res.rc == 0 and len(list((d / "snapshots").iterdir())) == 1, res.describe()
    (d / "profile.pyrs").unlink()  # only the snapshots are left: still a recording's folder
    for f in ("cpu.svg", "wall.svg", "stats.json", "phase1.md", "phase1.json", "phase4.md", "phase4.json"):
        (d / f).unlink()
    res = run_prs(["run", "-o", d, "--", "true"])
    assert_bad_input(res, 2, "--force")
    res = run_prs(["run", "--force", "-o", d, "--", "true"])
    assert res.rc == 0, res.describe()
    assert not (d / "snapshots").exists()


def test_attach_snapshots_and_the_process_runs_on(run_prs, tmp_path):
    target = subprocess.Popen([PY, str(SPLIT), "4.5"], stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout.readline() == "ready\n"
        d = tmp_path / "att"
        res = run_prs(["attach", "--snapshot-every", 1, "-d", 2.5, "-o", d, target.pid])
        assert_clean(res)
        assert res.rc == 0, res.describe()
        snaps = sorted((d / "snapshots").iterdir())
        assert [s.name[:4] for s in snaps] == ["001-", "002-"], (snaps, res.err)
        totals = [svg_total(s / "wall.svg") for s in snaps] + [svg_total(d / "wall.svg")]
        assert totals[0] < totals[1] < totals[2], totals
        out, _ = target.communicate(timeout=60)
        assert target.returncode == 0 and "truth hot_a=" in out, out
    finally:
        if target.poll() is None:
            target.kill()
            target.wait()
