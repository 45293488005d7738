# SPDX-License-Identifier: MIT
"""A/B of the Python sample cost between builds, interleaved (the dev VM drifts by 2x over minutes).

    /usr/bin/python3 tests/bench/ab_python.py [--rounds N] [--version 3.12] [--kinds sleeping,running]
        [--rates 100,1000] NAME=PATH/TO/pyrsprof NAME=...

Each round starts one fresh 50-frame target per kind (as tests/bench/bench_python.py: asleep in
recurse.py, or running cpuwork.py), then measures every build on it, the builds' order alternating
from round to round (A B, B A, ...): warm (tools/pystacks --bench next to the pyrsprof binary),
and pyrsprof attach --mode vm / ptrace at each rate (sample_cost_us, and for ptrace its stop and
python parts). Prints, per build and kind, the median of the rounds' medians and their range.
Profiler on CPU 0, target on CPU 1 (2+ CPUs; --no-pin to disable). Check `uptime` first.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "targets" / "py"))
import pyrs_testlib as T  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--version", default="3.12")
    ap.add_argument("--kinds", default="sleeping,running")
    ap.add_argument("--rates", default="100,1000")
    ap.add_argument("--secs", default="2")
    ap.add_argument("--no-pin", action="store_true")
    ap.add_argument("builds", nargs="+")
    a = ap.parse_args()
    pin = not a.no_pin and len(os.sched_getaffinity(0)) >= 2
    prof = ["taskset", "-c", "0"] if pin else []
    builds = [b.split("=", 1) for b in a.builds]
    py = T.pyenv_python(a.version)
    rates = [int(r) for r in a.rates.split(",")]
    res = {}

    def attach(prs, pid, mode, hz):
        with tempfile.TemporaryDirectory() as d:
            subprocess.run(prof + [prs, "attach", str(pid), "--mode", mode, "-r", str(hz), "-d", a.secs, "-o", d,
                                   "--stats"], capture_output=True, timeout=120)
            try:
                st = json.load(open(os.path.join(d, "stats.json")))
            except (OSError, ValueError):
                return {}
        return {k: v["median"] for k, v in st.items() if k.endswith("_us") and isinstance(v, dict) and v.get("n")}

    for r in range(a.rounds):
        for kind in a.kinds.split(","):
            t = T.Target(py, "recurse.py", 49, 3600) if kind == "sleeping" else T.Target(py, "cpuwork.py", 10 ** 10, 49)
            if pin:
                os.sched_setaffinity(t.pid, {1})
            try:
                for name, prs in builds if r % 2 == 0 else builds[::-1]:
                    got = res.setdefault((name, kind), {})
                    ps = str(Path(prs).resolve().parent / "tools" / "pystacks")
                    out = subprocess.run(prof + [ps, "--bench", "2000", str(t.pid)], capture_output=True, text=True,
                                         timeout=60).stdout.split()
                    got.setdefault("warm", []).append(float(dict(zip(out[1::2], out[2::2]))["median_us"]))
                    for hz in rates:
                        got.setdefault("vm %d" % hz, []).append(attach(prs, t.pid, "vm", hz).get("sample_cost_us"))
                        m = attach(prs, t.pid, "ptrace", hz)
                        for k, col in (("sample_cost_us", "merged"), ("stop_us", "stop"), ("python_us", "python")):
                            got.setdefault("%s %d" % (col, hz), []).append(m.get(k))
            finally:
                t.stop()
        print("round %d done, load %.2f" % (r + 1, os.getloadavg()[0]), file=sys.stderr, flush=True)
    for (name, kind), got in res.items():
        cells = []
        for col, v in got.items():
            v = [x for x in v if x is not None]
            if v:
                cells.append("%s %.1f [%.1f-%.1f]" % (col, statistics.median(v), min(v), max(v)))
        print("%s %s: %s" % (name, kind, "  ".join(cells)))


main()
