# SPDX-License-Identifier: MIT
"""`pyrsprof sweep`: the exponents it measures on targets of known cost (tests/targets/scale.c:
exactly N or N² xorshift steps) are within 0.1 of the truth, the files it writes (sweep.md,
sweep.json valid against docs/sweep.schema.json with ajv, sweep.svg readable in headless
Chromium), one recording per run with the program's output in its log, substitution of {NAME}
(1e3 becomes 1000, {{ stays a literal brace), a failing value named and the exit status 1, and
one-line errors for bad input.

Wall time is only comparable across runs when the runs got a CPU: scale is single-threaded and
CPU-bound, so a run's CPU/wall below MIN_ONCPU means it waited for a CPU (other work on the
machine). The wall exponent is then measured again (up to WALL_TRIES sweeps) and skipped with the
measured share when the machine never left the target alone; the CPU exponent is always checked.
"""

import json
import math
import os
import re
import shutil
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import REPO, assert_bad_input, assert_clean

SCHEMA = REPO / "docs" / "sweep.schema.json"
VALIDATOR = REPO / "tests" / "schema" / "validate-schema.js"
BROWSER = REPO / "tests" / "browser"
ARTIFACTS = REPO / "tests" / "e2e" / "artifacts"
TOLERANCE = 0.1      # the goal: exponents within 0.1 of the truth
MIN_ONCPU = 0.85     # CPU/wall of a run that had a CPU to itself (a single-threaded spinner)
WALL_TRIES = 2

# Values sized so that runs take 0.15, 0.45 and 1.35 s here (1.7 ns a step): N steps, N² steps. A
# 9x range within a ~1.5 s budget: a 10 % slower run moves the slope by about ln(1.1) / ln(range),
# so the range of N matters more than the count of values or their length.
LINEAR = "9e7,2.7e8,8.1e8"
QUADRATIC = "9500,16500,28500"


def sweep_cmd(outdir, dim, *cmd, repeat=None, rate=None):
    args = ["sweep", "--dim", dim, "-o", outdir]
    if repeat:
        args += ["--repeat", repeat]
    if rate:
        args += ["-r", rate]
    return [*args, "--", *map(str, cmd)]


def load(outdir):
    return json.loads((Path(outdir) / "sweep.json").read_text())


def oncpu(doc):
    """The smallest CPU/wall of the runs fitted (the fastest of each value)."""
    fastest = [min((r for r in p["runs"] if r["ok"]), key=lambda r: r["wall_s"])
               for p in doc["points"]]
    return min(r["cpu_s"] / r["wall_s"] for r in fastest)


@pytest.fixture(scope="module")
def scaled(run_prs, targets, tmp_path_factory):
    """scaled(kind) -> (Result, sweep.json, outdir) of a sweep of scale KIND, 3 runs a value;
    taken again (up to WALL_TRIES) while a run waited for a CPU. Cached per kind."""
    cache = {}

    def get(kind):
        if kind not in cache:
            values = LINEAR if kind == "linear" else QUADRATIC
            for _ in range(WALL_TRIES):
                out = tmp_path_factory.mktemp(f"sweep-{kind}")
                res = run_prs(sweep_cmd(out, f"n={values}", targets / "scale", kind, "{n}",
                                        "<script>alert(1)</script>", repeat=3), timeout=180)
                assert_clean(res)
                assert res.rc == 0, res.describe()
                doc = load(out)
                if oncpu(doc) >= MIN_ONCPU:
                    break
            cache[kind] = (res, doc, out)
        return cache[kind]
    return get


@pytest.mark.parametrize("kind,truth,order", [("linear", 1, "O(n)"), ("quadratic", 2, "O(n²)")])
def test_cpu_exponent(scaled, kind, truth, order):
    res, doc, _ = scaled(kind)
    fit = doc["fits"]["cpu"]
    print(f"{kind}: {fit['text']}")
    assert abs(fit["exponent"] - truth) <= TOLERANCE, fit
    assert fit["r2"] >= 0.98, fit
    assert fit["order"] == order and fit["order_exponent"] == truth
    assert f"CPU ∝ n^{fit['exponent']:.2f} (R² " in res.err and f"{order} along n" in res.err
    # the fit, worked again here from the runs: least squares over each value's fastest run
    xs = [math.log(p["value"]) for p in doc["points"]]
    ys = [math.log(min(r["cpu_s"] for r in p["runs"] if r["ok"])) for p in doc["points"]]
    mx, my = sum(xs) / 3, sum(ys) / 3
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    assert fit["statistic"] == "min" and fit["exponent"] == pytest.approx(slope, abs=1e-6)


@pytest.mark.parametrize("kind,truth,order", [("linear", 1, "O(n)"), ("quadratic", 2, "O(n²)")])
def test_wall_exponent(scaled, kind, truth, order):
    res, doc, _ = scaled(kind)
    fit = doc["fits"]["wall"]
    print(f"{kind}: {fit['text']} (smallest CPU/wall of a run {oncpu(doc):.2f})")
    if oncpu(doc) < MIN_ONCPU:
        pytest.skip(f"the machine never left the target a CPU in {WALL_TRIES} sweeps (a run's "
                    f"CPU/wall {oncpu(doc):.2f} < {MIN_ONCPU}): wall times are not comparable")
    assert abs(fit["exponent"] - truth) <= TOLERANCE, fit
    assert fit["r2"] >= 0.98, fit
    assert fit["order"] == order
    assert fit["text"] in res.err


def test_points_and_recordings(scaled):
    """Every value has 3 runs, each its own recording, medians and spreads consistent with the
    runs, the program's output in the run's output.log and not on the terminal."""
    res, doc, out = scaled("linear")
    assert doc["format"] == "pyrsprof-sweep" and doc["version"] == 1
    assert doc["dimension"] == "n" and doc["repeat"] == 3
    assert [p["value"] for p in doc["points"]] == [90000000, 270000000, 810000000]
    assert [p["text"] for p in doc["points"]] == ["90000000", "270000000", "810000000"]
    assert "scale: steps=" not in res.out + res.err, "the program's output reached the terminal"
    for p in doc["points"]:
        assert p["runs_ok"] == 3 and len(p["runs"]) == 3
        walls = sorted(r["wall_s"] for r in p["runs"])
        assert p["wall_s"] == pytest.approx({"median": walls[1], "min": walls[0], "max": walls[2]},
                                            rel=1e-6)
        for r in p["runs"]:
            d = out / r["dir"]
            for f in ("profile.pyrs", "cpu.svg", "wall.svg", "stats.json", "output.log"):
                assert (d / f).is_file(), f"{f} missing from {d}"
            log = (d / "output.log").read_text()
            assert f"scale: steps={p['text']} " in log, log
            stats = json.loads((d / "stats.json").read_text())
            assert r["wall_s"] == pytest.approx(stats["duration_s"], rel=1e-6)
            assert r["cpu_s"] == pytest.approx(r["user_s"] + r["sys_s"], abs=1e-6)
            assert 0 < r["cpu_s"] <= r["wall_s"] * 1.05 + 0.01, r
            assert 100 < r["peak_rss_kb"] < 64 * 1024, r
            phase1 = d / "phase1.json"
            assert (r["verdict"] is not None) == phase1.is_file()
    if not doc["verdict_available"]:
        assert "verdict: not available" in res.err
        assert "verdict: not available" in (out / "sweep.md").read_text()


def test_markdown(scaled):
    res, doc, out = scaled("quadratic")
    md = (out / "sweep.md").read_text()
    assert md.startswith("# pyrsprof sweep along n\n")
    assert f"- {doc['fits']['wall']['text']}\n" in md and f"- {doc['fits']['cpu']['text']}\n" in md
    assert "| n | 9500 – 28500 (3 values) |" in md, md
    assert "\\<script>alert(1)\\</script>" in md and re.search(r"(?<!\\)<", md) is None, md
    rows = [l for l in md.splitlines() if re.match(r"^\| (9500|16500|28500) \| 3/3 \|", l)]
    assert len(rows) == 3, md
    assert f"wrote {out}/{{sweep.md,sweep.json,sweep.svg}}" in res.err
    assert "Short runs" not in md and "the fastest run took" not in res.err


@pytest.fixture(scope="module")
def node():
    n = shutil.which("node")
    if not n:
        pytest.skip("node is not installed (scripts/install-deps.sh)")
    return n


def test_schema(scaled, node, tmp_path):
    if not (REPO / "tests" / "schema" / "node_modules" / "ajv").is_dir():
        pytest.skip("ajv missing: run scripts/install-deps.sh (npm ci in tests/schema)")
    files = [scaled(k)[2] / "sweep.json" for k in ("linear", "quadratic")]
    r = subprocess.run([node, VALIDATOR, SCHEMA, *files], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # the schema can fail: a file with a field of the wrong type and one missing is refused
    doc = json.loads(files[0].read_text())
    doc["points"][0]["runs"][0]["wall_s"] = "slow"
    del doc["fits"]["cpu"]["r2"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    r = subprocess.run([node, VALIDATOR, SCHEMA, bad], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "/points/0/runs/0/wall_s" in r.stderr and "r2" in r.stderr, r.stderr


def test_svg(scaled, node):
    """sweep.svg is well-formed, holds no markup from the command, and in Chromium shows 3 wall
    and 3 CPU markers (and the medians that differ), two fitted lines, axis labels and the fits,
    no text overlapping or cut."""
    if not (BROWSER / "node_modules" / "playwright-core").is_dir() or not Path("/usr/bin/chromium").exists():
        pytest.skip("chromium or playwright-core missing (scripts/install-deps.sh)")
    _, doc, out = scaled("quadratic")
    svg = out / "sweep.svg"
    root = ET.parse(svg).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    assert not list(root.iter(f"{ns}script")), "no script element"
    assert "<script>alert(1)</script>" in "".join(root.itertext()), "the command is shown, escaped"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "sweep-quadratic.png"
    shutil.copy(svg, ARTIFACTS / "sweep-quadratic.svg")
    r = subprocess.run([node, BROWSER / "check_plot.mjs", svg, shot], capture_output=True,
                       text=True, timeout=120, cwd=BROWSER)
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.returncode == 0 and "error" not in res, res.get("error") or r.stderr
    assert not res["console_errors"] and not res["page_errors"] and not res["requests"]
    assert not res["injected"]
    texts = [t["text"] for t in res["texts"]]
    assert res["overlaps"] == [], [(texts[i], texts[j]) for i, j in res["overlaps"]]
    assert res["outside"] == [], [texts[i] for i in res["outside"]]
    for metric in ("wall", "cpu"):
        g = res["groups"][metric]
        assert g["best"] == 3 and g["lines"] == 1, (metric, g)
        # a hollow median where it differs from the fastest run
        differs = sum(p[f"{metric}_s"]["median"] > p[f"{metric}_s"]["min"] for p in doc["points"])
        assert g["median"] == differs, (metric, g)
    for label in ("n (log scale)", "time, seconds (log scale)", doc["fits"]["wall"]["text"],
                  doc["fits"]["cpu"]["text"], "9500", "16500", "28500"):
        assert label in texts, (label, texts)
    assert shot.is_file() and shot.stat().st_size > 5000


def test_verdict_change_along_the_sweep(run_prs, tmp_path):
    """A program that computes ~30 ms then sleeps T: CPU-bound at T=0.005, sleep-dominated at
    T=0.8 (on a busy machine a point between may be CPU-saturated by other processes: rule 5
    comes before the sleep rule). Each point carries its own recording's verdict, and the sweep
    names every change between neighbours, in sweep.json, sweep.md, the terminal and sweep.svg."""
    code = "import time\nx = 0\nfor i in range(300000): x += i\ntime.sleep({t})"
    res = run_prs(sweep_cmd(tmp_path, "t=0.005,0.4,0.8", "/usr/bin/python3", "-c", code), timeout=60)
    assert res.rc == 0, res.describe()
    doc = load(tmp_path)
    verdicts = [p["verdict"] for p in doc["points"]]
    assert doc["verdict_available"], doc
    for p, v in zip(doc["points"], verdicts):
        p1 = json.loads((tmp_path / p["runs"][0]["dir"] / "phase1.json").read_text())
        assert v == p1["verdict"]["label"], (v, p1["verdict"])
    # CPU-bound, or CPU-saturated by other processes: it wants a CPU all its time
    assert verdicts[0].startswith(("CPU-bound", "CPU-saturated")), verdicts
    assert verdicts[-1] == "sleep-dominated", verdicts
    values = [p["value"] for p in doc["points"]]
    want = [{"from_value": values[i], "to_value": values[i + 1], "from": verdicts[i],
             "to": verdicts[i + 1]} for i in range(2) if verdicts[i] != verdicts[i + 1]]
    assert doc["verdict_changes"] == want, (doc["verdict_changes"], verdicts)
    md, svg = (tmp_path / "sweep.md").read_text(), (tmp_path / "sweep.svg").read_text()
    for c in want:
        a, b = ("%g" % c["from_value"], "%g" % c["to_value"])
        assert f"the verdict changes between t={a} and t={b}: {c['from']} -> {c['to']}" in res.err, res.describe()
        assert f"- changes between t={a} and t={b}: {c['from']} → {c['to']}" in md, md
        assert f"verdict changes between t={a} and {b}" in svg



def test_subprocesses(run_prs, tmp_path):
    """A command that starts the program (sh -c 'python3 ...'): without --subprocesses each run
    records the shell waiting for its child; with it, both processes are sampled and each point is
    judged on the Python loop (CPU-bound, or CPU-saturated by other processes on a busy machine)."""
    code = "x = 0\nfor i in range({n}): x += i"
    cmd = ["sh", "-c", f"/usr/bin/python3 -c '{code}'"]
    verdicts = {}
    for flag in ([], ["--subprocesses"]):
        out = tmp_path / ("with" if flag else "without")
        res = run_prs(["sweep", *flag, "--dim", "n=1e6,2e6", "-o", out, "--", *cmd], timeout=60)
        assert res.rc == 0, res.describe()
        doc = load(out)
        verdicts[bool(flag)] = [p["verdict"] for p in doc["points"]]
        for p in doc["points"]:
            stats = json.loads((out / p["runs"][0]["dir"] / "stats.json").read_text())
            assert stats["processes"] == (2 if flag else 1), (flag, stats["processes"])
    assert all(v.startswith("waiting") and "child process" in v for v in verdicts[False]), verdicts
    assert all(v.startswith(("CPU-bound", "CPU-saturated")) for v in verdicts[True]), verdicts

# ---- substitution, failures, bad input --------------------------------------------------------

def test_substitution(run_prs, tmp_path):
    """1e3 is passed as 1000 and 0.5 as 0.5, inside a larger argument too; {{ is a literal {."""
    echo = shutil.which("echo") or "/bin/echo"
    res = run_prs(sweep_cmd(tmp_path, "n=1e3,0.5,2.5e3", echo, "{{m}", "--size={n}", "{n}"),
                  timeout=60)
    assert_clean(res)
    assert res.rc == 0, res.describe()
    doc = load(tmp_path)
    assert [p["text"] for p in doc["points"]] == ["0.5", "1000", "2500"]
    for text in ("0.5", "1000", "2500"):
        log = (tmp_path / f"n={text}" / "run1" / "output.log").read_text()
        assert log.splitlines()[0] == f"{{m}} --size={text} {text}", log


def test_failing_value(run_prs, targets, tmp_path):
    """scale fail N 3000000 exits 3 above 3e6: that value is named, the others are fitted, the
    files are written, and the exit status is 1."""
    res = run_prs(sweep_cmd(tmp_path, "n=1e6,2e6,4e6", targets / "scale", "fail", "{n}", 3000000),
                  timeout=60)
    assert_clean(res)
    assert res.rc == 1, res.describe()
    assert re.search(r"^pyrsprof: failed: n=4000000 run 1: exit 3$", res.err, re.M), res.err
    assert "n=4000000 (1/1): failed: exit 3" in res.err
    doc = load(tmp_path)
    bad = doc["points"][2]
    assert bad["runs_ok"] == 0 and bad["wall_s"] is None
    assert bad["runs"][0]["problem"] == "exit 3" and bad["runs"][0]["exit_status"] == 3
    assert doc["fits"]["wall"]["values"] == 2 and doc["fits"]["wall"]["r2"] is None
    assert "2 values, no R²" in doc["fits"]["wall"]["text"]
    assert "warning: the fastest run took" in res.err, "runs of a few ms are flagged"
    assert "- n=4000000 run 1: exit 3" in (tmp_path / "sweep.md").read_text()
    assert (tmp_path / "sweep.svg").is_file()


@pytest.mark.parametrize("args,rc,words", [
    (["--dim", "n=1,2,3", "--", "scale", "linear", "100"], 2, ["has no {n}"]),
    (["--dim", "n=1,-2,3", "--", "scale", "linear", "{n}"], 2, ["'-2'", "positive number"]),
    (["--dim", "n=1,abc", "--", "scale", "linear", "{n}"], 2, ["'abc'", "positive number"]),
    (["--dim", "n=0,1", "--", "scale", "linear", "{n}"], 2, ["'0'", "positive number"]),
    (["--dim", "n=1,,2", "--", "scale", "linear", "{n}"], 2, ["positive number"]),
    (["--dim", "n=1,nan", "--", "scale", "linear", "{n}"], 2, ["'nan'"]),
    (["--dim", "n=1,2", "scale", "linear", "{n}"], 2, ["put -- before the command"]),
    (["--dim", "n=1,2", "--", "scale", "{m}", "{n}"], 2, ["{m}", "not a dimension"]),
    (["--dim", "n=1,2", "--"], 2, ["no command"]),
    (["--", "scale", "linear", "{n}"], 2, ["--dim"]),
    (["--dim", "1x=1,2", "--", "scale", "{1x}"], 2, ["not a dimension name"]),
    (["--dim", "n", "--", "scale", "{n}"], 2, ["NAME=V1,V2"]),
    (["--dim", "n=1,1e0", "--", "scale", "{n}"], 2, ["given twice"]),
    (["--dim", "n=1", "--dim", "m=2", "--", "scale", "{n}"], 2, ["one dimension"]),
    (["--dim", "n=1,2", "--repeat", "0", "--", "scale", "{n}"], 2, ["--repeat"]),
    (["--dim", "n=1,2", "--repeat", "1.5", "--", "scale", "{n}"], 2, ["--repeat"]),
    (["--dim", "n=1,2", "-r", "0", "--", "scale", "{n}"], 2, ["-r"]),
    (["--dim", "n=1,2", "--", "/nonexistent/prog", "{n}"], 127, ["/nonexistent/prog"]),
    (["--dim", "n=1,2", "--", "no-such-program-xyz", "{n}"], 127, ["no-such-program-xyz", "PATH"]),
])
def test_bad_input(run_prs, targets, tmp_path, args, rc, words):
    args = [str(targets / "scale") if a == "scale" else a for a in args]
    out = tmp_path / "out"
    res = run_prs(["sweep", "-o", out, *args], timeout=20)
    assert_bad_input(res, rc, *words)
    assert not out.exists(), "nothing is run or written on bad input"


def test_help(run_prs):
    res = run_prs(["sweep", "--help"], timeout=20)
    assert res.rc == 0 and "--dim NAME=V1,V2" in res.out


def test_interrupted(prs, tmp_path):
    """SIGTERM to sweep reaches the running command (through its recorder), stops the sweep, and
    the files still say what was measured; the exit status is 128 + 15."""
    p = subprocess.Popen([prs, "sweep", "--dim", "n=20,21,22", "-o", tmp_path, "--", "sleep", "{n}"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    try:
        _, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        pytest.fail("sweep did not stop on SIGTERM")
    err = err.decode()
    assert p.returncode == 128 + signal.SIGTERM, err
    assert "interrupted after 1 of 3 runs" in err, err
    doc = load(tmp_path)
    assert doc["interrupted"] is True
    assert [len(pt["runs"]) for pt in doc["points"]] == [1, 0, 0]
    assert doc["points"][0]["runs"][0]["exit_status"] == 128 + signal.SIGTERM
    assert (tmp_path / "sweep.md").is_file() and (tmp_path / "sweep.svg").is_file()
