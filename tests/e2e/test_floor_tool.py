# SPDX-License-Identifier: MIT
"""tools/floor, the benchmark's measure of what the platform charges a sample (bench_python.py):
it must measure something (positive medians, in order) and leave the target as it was: the target
it stopped 300 times finishes its sleep and exits with its own output and status."""
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "targets" / "py"))
import pyrs_testlib as T  # noqa: E402

FLOOR = T.pystacks_path().parent / "floor"
PY = "/usr/bin/python3"


def parse(out):
    w = out.split()
    assert w[:3] == ["floor", w[1], "median_us"], out
    d = dict(zip(w[2::2], map(float, w[3::2])))
    assert 0 < d["p10_us"] <= d["median_us"] <= d["p90_us"], out
    return d


@pytest.mark.parametrize("mode", ["vm", "stop"])
def test_floor_measures_and_leaves_the_target_unharmed(mode):
    if not FLOOR.exists():
        pytest.skip("tools/floor not built: %s" % FLOOR)
    # recurse.py: rec(5) sleeps 3 s in the innermost call, then returns: exit status 0, "ready"
    t = T.Target(PY, "recurse.py", 5, 3)
    try:
        r = subprocess.run([str(FLOOR), mode, str(t.pid), "1000", "300"], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 0, r.stderr
        parse(r.stdout)
        assert t.proc.poll() is None, "the target died under floor %s" % mode
        t.rest(timeout=30)
        assert t.proc.returncode == 0
    finally:
        t.stop()


def test_floor_bad_input():
    if not FLOOR.exists():
        pytest.skip("tools/floor not built: %s" % FLOOR)
    for args in ([], ["vm", "x", "1000", "10"], ["fly", "1", "1000", "10"], ["vm", "1", "0", "10"]):
        r = subprocess.run([str(FLOOR)] + args, capture_output=True, text=True, timeout=10)
        assert r.returncode == 2, (args, r.returncode)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith(("floor: ", "usage: floor")), r.stderr
    r = subprocess.run([str(FLOOR), "stop", "999999999", "1000", "10"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 1 and r.stderr.startswith("floor: cannot trace pid"), r.stderr
