# SPDX-License-Identifier: MIT
"""`pyrsprof diff BEFORE AFTER`: the Phase-4 re-measure report, on constructed recordings whose
truth is their construction (tests/e2e/pyrs_writer.py writes profile.pyrs files: one thread, one
sample per tick at a chosen rate, Python frames with files). A function made 2x faster gives the
measured speedup in seconds; one program recorded at 100 Hz and at 1000 Hz shows no change; a
renamed script matches by function; removed code is drawn in the differential flame graph; a
change within noise is not headlined; a flat after-profile gives the stop hint. diff.json is
checked against docs/diff.schema.json every time."""

import json
import re
import xml.etree.ElementTree as ET

import pytest

from conftest import assert_bad_input, assert_clean
from pyrs_writer import BLOCKED, Profile

NS = {"s": "http://www.w3.org/2000/svg"}


@pytest.fixture
def diff(run_prs, validate_schema, tmp_path):
    """diff(before, after, *opts) -> (diff.json, diff.md, the terminal lines, DIR), written to
    a new DIR; diff.json is valid against its schema."""
    n = [0]

    def run(before, after, *opts):
        n[0] += 1
        out = tmp_path / f"out{n[0]}"
        b = before.write(tmp_path / f"b{n[0]}.pyrs")
        a = after.write(tmp_path / f"a{n[0]}.pyrs")
        res = run_prs(["diff", b, a, "-o", out, *opts], timeout=120)
        assert_clean(res)
        assert res.rc == 0, res.describe()
        v = validate_schema("diff.schema.json", out / "diff.json")
        assert v.returncode == 0, v.stderr
        lines = [l.removeprefix("pyrsprof: ") for l in res.err.splitlines()]
        return json.loads((out / "diff.json").read_text()), (out / "diff.md").read_text(), lines, out
    return run


def rows(doc):
    return {(f["name"], f["file"]): f for f in doc["changes"] + doc["noise"]}


def row(doc, name):
    found = [f for f in doc["changes"] + doc["noise"] if f["name"] == name]
    assert len(found) == 1, (name, found)
    return found[0]


def svg_frames(path):
    """[(name, data-a, data-b, data-s, rect width)] of a differential flame graph."""
    g = ET.parse(path).getroot().find(".//s:g[@id='frames']", NS)
    out = []
    for e in g.findall("s:g", NS):
        title = e.find("s:title", NS).text
        out.append((title.split("\n")[0], int(e.get("data-a")), int(e.get("data-b")),
                    e.get("data-s"), float(e.find("s:rect", NS).get("width")), title))
    return out


def test_a_function_made_2x_faster_gives_the_measured_speedup(diff):
    # before: slow 3 s + rest 1 s = 4 s; after: slow 1.5 s + rest 1 s = 2.5 s (1.6x)
    before = Profile(100).add(["main (app.py:1)", "slow (app.py:10)"], 300) \
                         .add(["main (app.py:1)", "rest (app.py:20)"], 100)
    after = Profile(100).add(["main (app.py:1)", "slow (app.py:10)"], 150) \
                        .add(["main (app.py:1)", "rest (app.py:20)"], 100)
    doc, md, lines, _ = diff(before, after)
    assert doc["timed"] and doc["unit"] == "seconds"
    for t in ("wall", "cpu"):
        s = doc["speedup"][t]
        assert s["before_s"] == pytest.approx(4.0) and s["after_s"] == pytest.approx(2.5)
        assert s["delta_s"] == pytest.approx(-1.5) and s["speedup"] == pytest.approx(1.6)
        assert s["beyond_noise"]
    slow = row(doc, "slow")
    assert slow["status"] == "faster" and slow["speedup"] == pytest.approx(2.0)
    assert slow["self"]["before_s"] == pytest.approx(3.0) and slow["self"]["after_s"] == pytest.approx(1.5)
    assert slow["self"]["before_share"] == pytest.approx(0.75)
    assert row(doc, "rest")["status"] == "unchanged" and row(doc, "rest") in doc["noise"]
    assert lines[0].startswith("wall 4.00 s -> 2.50 s: 1.60x faster (-1.50 s)"), lines
    assert any(re.match(r"\s+faster\s+slow \(app\.py\)\s+3\.00 s -> 1\.50 s \(2\.00x\)", l)
               for l in lines), lines
    assert "| wall | 4.00 s | 2.50 s | -1.50 s ± " in md and "**1.60x faster**" in md
    # what next: slow is still 60 % of the CPU time, ceiling 2.5x
    assert doc["next"]["hot_spot"]["name"] == "slow"
    assert doc["next"]["hot_spot"]["self_share"] == pytest.approx(0.6)
    assert doc["next"]["hot_spot"]["ceiling"] == pytest.approx(2.5)
    assert doc["next"]["stop_hint"] is None
    assert any(l.startswith("hot now (CPU, self): slow (app.py) 60% (ceiling 2.50x)") for l in lines)


def test_one_program_at_100_and_1000_hz_shows_no_change(diff):
    # the same 2 s program: f 1.5 s, g 0.5 s, sampled at two rates
    before = Profile(100).add(["main (app.py:1)", "f (app.py:10)"], 150) \
                         .add(["main (app.py:1)", "g (app.py:20)"], 50)
    after = Profile(1000).add(["main (app.py:1)", "f (app.py:10)"], 1500) \
                         .add(["main (app.py:1)", "g (app.py:20)"], 500)
    doc, md, lines, _ = diff(before, after)
    assert doc["before"]["period_s"] == pytest.approx(0.01)
    assert doc["after"]["period_s"] == pytest.approx(0.001)
    assert doc["summary"]["changed"] == 0 and doc["changes"] == []
    f = row(doc, "f")
    assert f["self"]["before_s"] == pytest.approx(1.5) and f["self"]["after_s"] == pytest.approx(1.5)
    assert f["self"]["samples_before"] == 150 and f["self"]["samples_after"] == 1500
    assert doc["speedup"]["wall"]["speedup"] == pytest.approx(1.0)
    assert not doc["speedup"]["wall"]["beyond_noise"]
    assert "no function changed beyond noise" in lines[1]


def test_a_renamed_script_matches_by_function(diff):
    # app.py -> app_v2.py, every line moved by 2, and work made 2x faster
    before = Profile(100, "python3 app.py").add(["<module> (app.py:1)", "main (app.py:5)", "work (app.py:10)"], 200) \
                                           .add(["<module> (app.py:1)", "main (app.py:5)", "load (app.py:20)"], 100)
    after = Profile(100, "python3 app_v2.py").add(["<module> (app_v2.py:3)", "main (app_v2.py:7)", "work (app_v2.py:12)"], 100) \
                                             .add(["<module> (app_v2.py:3)", "main (app_v2.py:7)", "load (app_v2.py:22)"], 100)
    doc, md, lines, out = diff(before, after)
    r = rows(doc)
    assert set(r) == {(n, "app_v2.py") for n in ("<module>", "main", "work", "load")}, set(r)
    assert doc["summary"]["added"] == 0 and doc["summary"]["removed"] == 0
    assert r[("work", "app_v2.py")]["status"] == "faster"
    assert r[("work", "app_v2.py")]["speedup"] == pytest.approx(2.0)
    assert r[("load", "app_v2.py")]["status"] == "unchanged"
    assert doc["matching"]["pairs"] == [{"before": "app.py", "after": "app_v2.py", "how": "renamed",
                                         "common": 4, "functions": 4}]
    assert "matched: `app.py` → `app\\_v2.py` (renamed" in md
    # the graph has one tree: no frame of one side only
    assert {f[3] for f in svg_frames(out / "diff.svg")} <= {"same", "less", "more"}


def test_a_function_moved_to_another_file_matches_by_name(diff):
    # helper leaves app.py for a new utils.py; nothing else moves
    before = Profile(100).add(["main (app.py:1)", "work (app.py:10)"], 100) \
                         .add(["main (app.py:1)", "helper (app.py:30)"], 100)
    after = Profile(100).add(["main (app.py:1)", "work (app.py:10)"], 100) \
                        .add(["main (app.py:1)", "helper (utils.py:3)"], 100)
    doc, md, lines, out = diff(before, after)
    assert set(rows(doc)) == {("main", "app.py"), ("work", "app.py"), ("helper", "utils.py")}
    assert doc["summary"]["changed"] == 0
    assert doc["matching"]["functions"] == [{"name": "helper", "before": "app.py", "after": "utils.py"}]
    assert "matched on its own: `helper` from `app.py` → `utils.py`" in md
    assert {f[3] for f in svg_frames(out / "diff.svg")} == {"same"}


def test_removed_code_is_drawn_in_the_differential_graph(diff):
    # legacy (0.5 s) and its callee are gone after; fresh (0.3 s) is new; other is unchanged
    before = Profile(100).add(["main (app.py:1)", "legacy (app.py:40)", "parse (app.py:45)"], 50) \
                         .add(["main (app.py:1)", "other (app.py:20)"], 100)
    after = Profile(100).add(["main (app.py:1)", "fresh (app.py:50)"], 30) \
                        .add(["main (app.py:1)", "other (app.py:20)"], 100)
    doc, md, lines, out = diff(before, after)
    assert row(doc, "legacy")["status"] == "removed" and row(doc, "fresh")["status"] == "added"
    assert any(l.strip().startswith("removed  legacy (app.py)  500 ms before, gone after") for l in lines), lines
    frames = {f[0]: f for f in svg_frames(out / "diff.svg")}
    for name in ("legacy", "parse"):
        _, a, b, state, width, title = frames[name]
        assert (a, b, state) == (0, 50, "removed"), frames[name]
        assert width > 0 and "removed: only before" in title
        assert "before: 500 ms (33.33%), after: 0 s (0.00%)" in title, title
    _, a, b, state, width, title = frames["fresh"]
    assert (a, b, state) == (30, 0, "added") and "added: only after" in title
    # widths are before + after time: legacy 0.5 s, other 2 s, main 2.8 s in all
    assert frames["legacy"][4] / frames["main"][4] == pytest.approx(0.5 / 2.8, rel=1e-3)
    assert frames["other"][4] / frames["main"][4] == pytest.approx(2.0 / 2.8, rel=1e-3)
    assert frames["other"][3] == "same" and "within noise" in frames["other"][5]


def test_a_change_within_noise_is_not_headlined(diff):
    # f: 1.00 s -> 1.03 s (3 samples more of 200): within the noise; then 1.00 s -> 1.50 s
    base = [("main (app.py:1)", "g (app.py:20)", 100)]

    def prof(f_ticks):
        p = Profile(100).add(["main (app.py:1)", "f (app.py:10)"], f_ticks)
        for *fr, n in base:
            p.add(fr, n)
        return p
    doc, md, lines, _ = diff(prof(100), prof(103))
    f = row(doc, "f")
    assert f["total"]["delta_s"] == pytest.approx(0.03)
    assert not f["significant"] and f["status"] == "unchanged" and f in doc["noise"]
    # the sigma stated is the rule's: sampling and the 5 % run noise, and |delta| < 3 sigma
    assert abs(f["total"]["delta_s"]) < doc["threshold"]["sigmas"] * f["total"]["sigma_s"]
    assert not any(l.startswith("  ") and " f (app.py)" in l for l in lines), lines  # no change row
    assert "no function changed beyond noise" in lines[1]
    assert md.index("| f |") > md.index("## Within noise")
    # the same rule headlines a real change
    doc, md, lines, _ = diff(prof(100), prof(150))
    assert row(doc, "f")["status"] == "slower"
    assert any(re.match(r"\s+slower\s+f \(app\.py\)", l) for l in lines), lines


def test_a_flat_profile_after_gives_the_stop_hint(diff):
    # after: 20 functions of 5 % each: even a free one gives at most 1/(1-0.05) = 1.05x
    before = Profile(100).add(["main (app.py:1)", "big (app.py:2)"], 400)
    after = Profile(100)
    for i in range(20):
        after.add(["main (app.py:1)", f"f{i:02d} (app.py:{10 + i})"], 10)
    doc, md, lines, _ = diff(before, after)
    stop = doc["next"]["stop_hint"]
    assert stop["reason"] == "flat profile" and stop["top_share"] == pytest.approx(0.05)
    assert stop["ceiling"] == pytest.approx(1 / 0.95)
    assert any(l.startswith("stop hint: the biggest hot spot") for l in lines), lines
    assert "**Stop hint:**" in md
    assert doc["speedup"]["wall"]["speedup"] == pytest.approx(2.0)


def test_without_a_folder_the_terminal_only(run_prs, tmp_path):
    b = Profile(100).add(["main (app.py:1)", "slow (app.py:10)"], 200).write(tmp_path / "b.pyrs")
    a = Profile(100).add(["main (app.py:1)", "slow (app.py:10)"], 100).write(tmp_path / "a.pyrs")
    res = run_prs(["diff", b, a], cwd=tmp_path, timeout=60)
    assert_clean(res)
    assert res.rc == 0, res.describe()
    assert "wall 2.00 s -> 1.00 s: 2.00x faster" in res.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.pyrs", "b.pyrs"]


@pytest.mark.parametrize("args,rc,words", [
    (["--run-noise", "abc"], 2, ["--run-noise", "not a number"]),
    (["--run-noise", "150"], 2, ["--run-noise", "0 to 100"]),
    (["--view", "disk"], 2, ["view"]),
])
def test_bad_options_are_one_line(run_prs, tmp_path, args, rc, words):
    b = Profile(100).add(["main (app.py:1)"], 10).write(tmp_path / "b.pyrs")
    res = run_prs(["diff", b, b, *args], timeout=60)
    assert_bad_input(res, rc, *words)


def test_a_profile_without_samples_in_the_view_is_an_error(run_prs, tmp_path):
    b = Profile(100).add(["main (app.py:1)"], 10).write(tmp_path / "b.pyrs")
    a = Profile(100).add(["main (app.py:1)"], 10, state=BLOCKED, syscall=0).write(tmp_path / "a.pyrs")
    res = run_prs(["diff", b, a, "-o", tmp_path / "out"], timeout=60)
    assert_bad_input(res, 1, "after", "no samples", "cpu")
    assert not (tmp_path / "out" / "diff.md").exists()
